/// Which members a member list returns (Tencent `V2TIMGroupMemberFilter`).
public enum MemberListFilter: String, Sendable, Hashable, CaseIterable {
    /// Every member.
    case all
    /// The owner only.
    case owner
    /// Admins only.
    case admins
    /// Ordinary members only (Tencent `COMMON`; Tencent's V2 group guide says "all group members" for it,
    /// which is a slip: the filter exists to leave out the owner and admins).
    case ordinary

    /// The roles the filter keeps.
    public var roles: Set<MemberRole> {
        switch self {
        case .all: [.owner, .admin, .member]
        case .owner: [.owner]
        case .admins: [.admin]
        case .ordinary: [.member]
        }
    }

    /// Whether a member of `role` is listed.
    public func includes(_ role: MemberRole) -> Bool { self.roles.contains(role) }
}

extension GroupRules {
    /// Check a `ListMembers` call: members and the backend may list (a non-member gets
    /// `NOT_A_MEMBER`, or `GROUP_NOT_FOUND` for a Work group); the page size follows the API's
    /// rule (0 = ``AppLimits/maxPageSize``, above it = it, negative = `INVALID_ARGUMENT`).
    /// - Returns: The page size to use.
    public static func checkMemberList(
        of group: Group, by op: GroupOperator, pageSize: Int, limits: AppLimits
    ) throws -> Int {
        try authorize(.listMembers, in: group, by: op).get()
        if pageSize < 0 {
            throw GroupError.invalidArgument(field: "page_size", "page_size must not be negative",
                                             limit: limits.maxPageSize)
        }
        return pageSize == 0 ? limits.maxPageSize : min(pageSize, limits.maxPageSize)
    }
}
