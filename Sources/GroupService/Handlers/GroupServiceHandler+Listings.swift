import GroupAPI
import GroupModel
import GroupStore

/// GroupService listings: ListJoinedGroups, SearchGroups, SyncJoinedGroups.
extension GroupServiceHandler {
    /// ListJoinedGroups: the operator's groups, newest join first (the backend must act for a user),
    /// each with the user's read position and, for Work and Public groups, unread count.
    /// A type filter is applied to each page the store returns, so a filtered page may be short
    /// (follow `next_page_token` until it is empty). `total_count` counts the user's groups of
    /// the requested types (empty: Work, Public and Meeting), read after the page. Custom values
    /// go through the app's filter-on-read hook for the user's role in each group.
    func listJoinedGroups(_ request: Groupd_V1_ListJoinedGroupsRequest, _ call: CallContext) async throws -> Groupd_V1_ListJoinedGroupsResponse {
        guard let user = call.caller.operatorID else {
            throw GroupError.operatorRequired("listing joined groups")
        }
        var types: Set<GroupType> = []
        for (index, type) in request.types.enumerated() {
            types.insert(try APIMapping.groupType(type, field: "types[\(index)]"))
        }
        let size = try GroupdService.pageSize(request.pageSize, fallback: 50, max: 100)
        let page = try await store.joinedGroups(
            app: call.caller.appID, userID: user, after: request.pageToken.isEmpty ? nil : request.pageToken, limit: size)
        let listed = page.items.filter { types.isEmpty || types.contains($0.group.type) }
        // The reads after the page run together: the count, the communities' topics with the
        // caller's read states, and (once the views are built) the groups' read states.
        // AVChatRoom is never listed, so never counted (its owner's row is stored).
        let counted = (types.isEmpty ? Set(GroupType.allCases) : types).filter(GroupRules.countsTowardGroupLimit)
        async let total = counted.isEmpty ? 0 : store.joinedGroupCount(app: call.caller.appID, userID: user, types: counted)
        async let topics = joinedTopics(of: listed, call: call)
        var views: [Groupd_V1_Group] = []
        for item in listed {
            var view = GroupdService.groupView(item.group, membership: item.membership, call: call, remark: item.remark)
            // Custom values as the app's read filter leaves them for the user's role there.
            await service.filterGroupView(&view, role: call.caller.actingRole(membership: item.membership.role), call)
            views.append(view)
        }
        // Read positions and unread counts, read after the page; a community's topics with theirs.
        try await fillReadStates(&views, call: call)
        Self.fillTopics(&views, topics: try await topics, joined: listed, call: call)
        let totalCount = try await total
        return .with {
            $0.groups = views
            $0.nextPageToken = page.next ?? ""
            $0.totalCount = UInt32(clamping: totalCount)
        }
    }

    /// SearchGroups among the groups the caller may see. With MEMBER_NAME_CARD, each joined group
    /// of the page carries the members whose name card contains the keyword (at most
    /// ``matchedMembersPerGroup``, in join order, as the caller may see them). Custom values go
    /// through the app's filter-on-read hook for the caller's role in each group.
    func searchGroups(_ request: Groupd_V1_SearchGroupsRequest, _ call: CallContext) async throws -> Groupd_V1_SearchGroupsResponse {
        let keyword = request.keyword
        if keyword.isEmpty || keyword.utf8.count > 30 {
            throw GroupError.invalidArgument(field: "keyword", "keyword must be 1 to 30 bytes", limit: 30)
        }
        var fields: Set<Groupd_V1_SearchField> = []
        for (index, field) in request.fields.enumerated() {
            switch field {
            case .groupID, .name, .memberNameCard: fields.insert(field)
            case .unspecified, .UNRECOGNIZED:
                throw GroupError.invalidArgument(field: "fields[\(index)]", "fields must be GROUP_ID, NAME or MEMBER_NAME_CARD")
            }
        }
        if fields.isEmpty { fields = [.groupID, .name] }
        if request.joinedOnly, call.caller.operatorID == nil {
            throw GroupError.operatorRequired("joined_only")
        }
        let size = try GroupdService.pageSize(request.pageSize, fallback: 20, max: 100)
        let app = call.caller.appID
        let user = call.caller.operatorID
        let page = try await store.searchGroups(
            app: app, keyword: keyword, userID: user, matchNameCards: fields.contains(.memberNameCard),
            after: request.pageToken.isEmpty ? nil : request.pageToken, limit: size)
        var memberships: [String: Member] = [:]
        if let user, !page.items.isEmpty {
            memberships = try await store.memberships(app: app, userID: user, groupIDs: page.items.map(\.id))
        }
        var matchedMembers: [String: [Member]] = [:]
        if fields.contains(.memberNameCard), !memberships.isEmpty {
            matchedMembers = try await store.nameCardMatches(
                app: app, groupIDs: Array(memberships.keys), keyword: keyword, limit: Self.matchedMembersPerGroup)
        }
        var results: [Groupd_V1_GroupSearchResult] = []
        let lowered = keyword.lowercased()
        for group in page.items {
            let membership = memberships[group.id]
            if request.joinedOnly, membership == nil { continue }
            let actor = call.caller.actingRole(membership: membership?.role)
            if GroupRules.visibility(of: group.type, for: actor) == .hidden { continue }
            var matched: [Groupd_V1_SearchField] = []
            // Exact or prefix, byte for byte (as the stores' index range).
            if fields.contains(.groupID), group.id.utf8.starts(with: keyword.utf8) { matched.append(.groupID) }
            if fields.contains(.name), group.name.lowercased().contains(lowered) { matched.append(.name) }
            let cards = membership == nil ? [] : matchedMembers[group.id] ?? []
            if !cards.isEmpty { matched.append(.memberNameCard) }
            // Nothing the caller asked for matched (a name card changed since the page was read).
            if matched.isEmpty { continue }
            // Custom values as the app's read filter leaves them for the caller's role there.
            var view = GroupdService.groupView(group, membership: membership, call: call)
            await service.filterGroupView(&view, role: actor, call)
            var members = cards.map { GroupdService.memberView($0, actor: actor, call: call) }
            await service.filterMemberViews(&members, role: actor, group: group, call)
            results.append(.with {
                $0.group = view
                $0.matchedFields = matched
                $0.matchedMembers = members
            })
        }
        return .with {
            $0.results = results
            $0.nextPageToken = page.next ?? ""
        }
    }

    /// The most members one SearchGroups hit lists in `matched_members`.
    static let matchedMembersPerGroup = 20

    /// SyncJoinedGroups: the changes of the operator's joined-group list after the client's version.
    func syncJoinedGroups(_ request: Groupd_V1_SyncJoinedGroupsRequest, _ call: CallContext) async throws -> Groupd_V1_SyncJoinedGroupsResponse {
        guard let user = call.caller.operatorID else {
            throw GroupError.operatorRequired("syncing joined groups")
        }
        let size = try GroupdService.pageSize(request.pageSize, fallback: 50, max: 100)
        guard request.version <= UInt64(Int64.max) else {
            throw GroupError.invalidArgument(field: "version", "version is out of range")
        }
        let page = try await store.joinedGroupChanges(
            app: call.caller.appID, userID: user, since: Int64(request.version),
            after: request.pageToken.isEmpty ? nil : request.pageToken, limit: size)
        var views: [Groupd_V1_Group] = []
        for item in page.changed {
            var view = GroupdService.groupView(item.group, membership: item.membership, call: call, remark: item.remark)
            await service.filterGroupView(&view, role: call.caller.actingRole(membership: item.membership.role), call)
            views.append(view)
        }
        try await fillTopics(&views, joined: page.changed, call: call)
        let groups = views
        return .with {
            $0.groups = groups
            $0.removedGroupIds = page.removed
            $0.nextPageToken = page.next ?? ""
            $0.version = GroupdService.syncVersion(page)
            $0.fullReloadRequired = page.fullReloadRequired
        }
    }
}
