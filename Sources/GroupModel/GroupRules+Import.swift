/// A member record of an `ImportGroup` call, already decoded from the wire.
public struct ImportedMember: Sendable, Hashable {
    /// The member's user id.
    public var userID: String
    /// The role; `owner` only for the group's owner.
    public var role: MemberRole
    /// When the member joined in the other system (`nil`: the import time).
    public var joinedAt: Timestamp?
    /// The name card.
    public var nameCard: String
    /// When the member's mute ends (`nil`: not muted).
    public var mutedUntil: Timestamp?
    /// Member custom fields.
    public var custom: [String: [UInt8]]

    /// Create an imported member.
    public init(
        userID: String, role: MemberRole = .member, joinedAt: Timestamp? = nil, nameCard: String = "",
        mutedUntil: Timestamp? = nil, custom: [String: [UInt8]] = [:]
    ) {
        self.userID = userID
        self.role = role
        self.joinedAt = joinedAt
        self.nameCard = nameCard
        self.mutedUntil = mutedUntil
        self.custom = custom
    }
}

/// What an `ImportGroup` call asks for: a group from another system (Tencent `import_group`,
/// RongCloud's import) with its members, roles, join times and name cards.
public struct GroupImportRequest: Sendable, Hashable {
    /// The group as a creation would describe it (`groupID` required, `ownerID` the owner).
    public var group: GroupCreationRequest
    /// The original creation time (`nil`: the import time).
    public var createdAt: Timestamp?
    /// The members; the owner may be listed (role `owner`) or is added.
    public var members: [ImportedMember]

    /// Create an import request.
    public init(group: GroupCreationRequest, createdAt: Timestamp? = nil, members: [ImportedMember] = []) {
        self.group = group
        self.createdAt = createdAt
        self.members = members
    }
}

extension GroupRules {
    /// Check a `RevokeGroup` call (the app's backend only) and plan its event.
    /// - Returns: One `GROUP_REVOKED` draft (recipient: the group; changes `reason` when given).
    /// - Throws: `ADMIN_TOKEN_REQUIRED` unless `actor` is the backend; `INVALID_ARGUMENT` naming
    ///   `reason` when it is over ``AppLimits/applicationMessageBytes``.
    public static func planRevocation(
        of group: Group, by actor: ActingRole, reason: String, limits: AppLimits
    ) throws -> [GroupEvent.Draft] {
        try authorize(.revoke, in: group, actor: actor).get()
        try FieldValidation.checkBytes(reason, field: "reason", limit: limits.applicationMessageBytes)
        return [GroupEvent.Draft(
            kind: .groupRevoked, operatorID: nil, targets: [], changes: reason.isEmpty ? [:] : ["reason": reason])]
    }

    /// The app's limit of joined groups applied to a creation (or import) plan, with the counts
    /// read in the transaction that will write it.
    ///
    /// The owner over the limit refuses the whole request (`TOO_MANY_GROUPS`, metadata
    /// `user_id`); other members over it are left out of the group and reported back, as
    /// `InviteMembers` reports them (a `FAILED` member result with `TOO_MANY_GROUPS`). Join
    /// orders, the member count and the `GROUP_CREATED` targets are renumbered to match.
    /// Types that do not count toward the limit (AVChatRoom) pass unchanged.
    /// - Parameters:
    ///   - plan: From ``planCreation(_:appID:creatorID:limits:now:generateID:)`` or ``planImport(_:appID:limits:now:)``.
    ///   - joinedGroupCounts: Per member of the plan, how many counted groups of the app they are in.
    ///   - limits: The app's limits.
    /// - Returns: The plan without the refused members, and the refused user ids in plan order.
    public static func applyGroupLimit(
        to plan: GroupCreationPlan, joinedGroupCounts: [String: Int], limits: AppLimits
    ) throws -> (plan: GroupCreationPlan, refused: [String]) {
        guard countsTowardGroupLimit(plan.group.type) else { return (plan, []) }
        let limit = limits.maxGroupsPerUser
        var refused: [String] = []
        var kept: [Member] = []
        for member in plan.members {
            guard (joinedGroupCounts[member.userID] ?? 0) >= limit else {
                kept.append(member)
                continue
            }
            if member.role == .owner { throw GroupError.tooManyGroups(member.userID, limit: limit) }
            refused.append(member.userID)
        }
        if refused.isEmpty { return (plan, []) }
        var revised = plan
        let gone = Set(refused)
        revised.members = kept.enumerated().map { offset, member in
            var member = member
            member.joinOrder = Int64(offset + 1)
            return member
        }
        revised.group.memberCount = kept.count
        revised.events = plan.events.map { draft in
            var draft = draft
            draft.targets.removeAll { gone.contains($0) }
            return draft
        }
        return (revised, refused)
    }

    /// Check an `ImportGroup` call and plan the group, its members and its one event.
    ///
    /// - The id, profile, settings, type rules and limits are those of a creation by the app's
    ///   backend (``planCreation(_:appID:creatorID:limits:now:generateID:)``), except that the id
    ///   is required (imports keep their ids).
    /// - A member with role `owner` must be the group's owner; the owner is added when not
    ///   listed. Members keep their join times (default: `now`), name cards and mute ends; they
    ///   are stored owner first, then by join time (the longest-standing first).
    /// - Times may not lie in the future.
    /// - Events: one `GROUP_CREATED` to the owner (recipient: the owner; targets: the owner), no
    ///   member tips; changes `type`, `name`, `owner_id`, `imported`.
    /// - Throws: `INVALID_ARGUMENT` naming the field (`group_id`, `members[i].…`, `create_time`,
    ///   and the fields of a creation), `SETTING_FIXED_BY_TYPE`.
    public static func planImport(
        _ request: GroupImportRequest, appID: String, limits: AppLimits, now: Timestamp
    ) throws -> GroupCreationPlan {
        guard let id = request.group.groupID, !id.isEmpty else {
            throw GroupError.invalidArgument(field: "group_id", "imported groups keep their ids: group_id is required")
        }
        if let createdAt = request.createdAt, createdAt > now {
            throw GroupError.invalidArgument(field: "create_time", "create_time must not be in the future")
        }
        let ownerID = request.group.ownerID.flatMap { $0.isEmpty ? nil : $0 }
        var ownerRecord: ImportedMember?
        var others: [InitialMember] = []
        var indexOfOther: [Int] = []  // index in `others` → index in `request.members`
        for (index, member) in request.members.enumerated() {
            let field = "members[\(index)]"
            if let joinedAt = member.joinedAt, joinedAt > now {
                throw GroupError.invalidArgument(field: field + ".join_time", "join_time must not be in the future")
            }
            if member.role == .owner || (ownerID != nil && member.userID == ownerID) {
                guard let ownerID, member.userID == ownerID else {
                    throw GroupError.invalidArgument(field: field + ".role", "role OWNER must be owner_user_id's")
                }
                if member.role != .owner && member.role != .member {
                    throw GroupError.invalidArgument(field: field + ".role", "the owner is listed with role \(member.role)")
                }
                if ownerRecord != nil {
                    throw GroupError.invalidArgument(field: field + ".user_id", "\(member.userID) is listed twice")
                }
                try FieldValidation.checkBytes(member.nameCard, field: field + ".name_card", limit: limits.nameCardBytes)
                for key in member.custom.keys where key.isEmpty {
                    throw GroupError.invalidArgument(field: field + ".custom", "custom field keys must not be empty")
                }
                ownerRecord = member
                continue
            }
            others.append(InitialMember(userID: member.userID, role: member.role, nameCard: member.nameCard, custom: member.custom))
            indexOfOther.append(index)
        }
        var creation = request.group
        creation.members = others
        var plan: GroupCreationPlan
        do {
            plan = try planCreation(creation, appID: appID, creatorID: nil, limits: limits, now: now) { id }
        } catch var error as GroupError {
            // planCreation names `members[k]` of the members it was given; name the request's.
            if let field = error.metadata["field"], field.hasPrefix("members["),
               let close = field.firstIndex(of: "]"),
               let k = Int(field[field.index(field.startIndex, offsetBy: 8)..<close]), k < indexOfOther.count {
                error.metadata["field"] = "members[\(indexOfOther[k])]" + field[field.index(after: close)...]
            }
            throw error
        }

        // Times, name cards and mutes from the other system.
        let createdAt = request.createdAt ?? now
        plan.group.createdAt = createdAt
        plan.group.updatedAt = now
        var records: [String: ImportedMember] = [:]
        for member in request.members { records[member.userID] = member }
        var owner: [Member] = []
        var rest: [Member] = []
        for var member in plan.members {
            let record = member.role == .owner ? ownerRecord : records[member.userID]
            member.joinedAt = record?.joinedAt ?? now
            member.mutedUntil = record?.mutedUntil
            member.joinSource = .imported
            member.inviterID = nil
            if member.role == .owner, let record {
                member.nameCard = record.nameCard
                member.custom = record.custom
            }
            if member.role == .owner { owner.append(member) } else { rest.append(member) }
        }
        // Stable: equal join times keep the request's order.
        let ordered = rest.enumerated().sorted {
            ($0.element.joinedAt, $0.offset) < ($1.element.joinedAt, $1.offset)
        }.map(\.element)
        plan.members = (owner + ordered).enumerated().map { offset, member in
            var member = member
            member.joinOrder = Int64(offset + 1)
            return member
        }
        var changes = creationChanges(plan.group, memberCount: plan.members.count)
        changes["imported"] = "true"
        plan.events = [GroupEvent.Draft(
            kind: .groupCreated, operatorID: nil, targets: ownerID.map { [$0] } ?? [], changes: changes,
            recipient: ownerID.map { .user($0) } ?? .group)]
        return plan
    }
}
