import GroupAPI
import GroupModel
import GroupStore

/// MemberService's versioned sync and member search: SyncMembers, SearchMembers.
extension MemberServiceHandler {
    /// The longest SearchMembers keyword, in bytes (a user id's limit).
    static let memberSearchKeywordBytes = 48

    /// The group of a member sync or search, for a caller who may list its members; refuses a
    /// type whose members are not stored (AVChatRoom).
    private func memberListGroup(_ call: CallContext, groupID: String) async throws -> (Group, GroupOperator) {
        let (group, membership) = try await service.loadGroup(call, groupID: groupID)
        let op = GroupdService.groupOperator(call.caller, membership: membership)
        try GroupRules.authorize(.listMembers, in: group, by: op).get()
        guard group.type.preset.behaviour.membershipStored else {
            throw GroupError(
                code: .failedPrecondition, reason: .membersNotStored,
                message: "\(group.type) groups do not store their audience: there is no member list to sync or search",
                metadata: ["field": "group_id"])
        }
        return (group, op)
    }

    /// SyncMembers: the changes of a group's member list after the client's version.
    func syncMembers(_ request: Groupd_V1_SyncMembersRequest, _ call: CallContext) async throws -> Groupd_V1_SyncMembersResponse {
        let size = try GroupdService.pageSize(request.pageSize, fallback: call.limits.maxPageSize, max: call.limits.maxPageSize)
        guard request.version <= UInt64(Int64.max) else {
            throw GroupError.invalidArgument(field: "version", "version is out of range")
        }
        let (group, op) = try await memberListGroup(call, groupID: request.groupID)
        let page = try await store.memberChanges(
            app: call.caller.appID, groupID: group.id, since: Int64(request.version),
            after: request.pageToken.isEmpty ? nil : request.pageToken, limit: size)
        var views = page.changed.map { GroupdService.memberView($0, actor: op.role, call: call) }
        await service.filterMemberViews(&views, role: op.role, group: group, call)
        let changed = views
        return .with {
            $0.changedMembers = changed
            $0.removedUserIds = page.removed
            $0.nextPageToken = page.next ?? ""
            $0.version = GroupdService.syncVersion(page)
            $0.fullReloadRequired = page.fullReloadRequired
        }
    }

    /// SearchMembers: one group's members by user id prefix or name card substring.
    func searchMembers(_ request: Groupd_V1_SearchMembersRequest, _ call: CallContext) async throws -> Groupd_V1_SearchMembersResponse {
        let keyword = request.keyword
        if keyword.isEmpty || keyword.utf8.count > Self.memberSearchKeywordBytes {
            throw GroupError.invalidArgument(
                field: "keyword", "keyword must be 1 to \(Self.memberSearchKeywordBytes) bytes", limit: Self.memberSearchKeywordBytes)
        }
        let field: MemberSearchField
        switch request.by {
        case .userIDPrefix: field = .userIDPrefix
        case .nameCard: field = .nameCard
        case .unspecified, .UNRECOGNIZED:
            throw GroupError.invalidArgument(field: "by", "by must be USER_ID_PREFIX or NAME_CARD")
        }
        let size = try GroupdService.pageSize(request.pageSize, fallback: call.limits.maxPageSize, max: call.limits.maxPageSize)
        let (group, op) = try await memberListGroup(call, groupID: request.groupID)
        let page = try await store.searchMembers(
            app: call.caller.appID, groupID: group.id, keyword: keyword, field: field,
            after: request.pageToken.isEmpty ? nil : request.pageToken, limit: size)
        var views = page.items.map { GroupdService.memberView($0, actor: op.role, call: call) }
        await service.filterMemberViews(&views, role: op.role, group: group, call)
        let members = views
        return .with {
            $0.members = members
            $0.nextPageToken = page.next ?? ""
        }
    }

}
