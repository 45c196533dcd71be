import GroupAPI
import GroupModel
import GroupStore

/// MemberService methods that read members or change a member's record: ListMembers,
/// GetMembersInfo, GetSelfMemberInfo, SetMemberRole, MuteMembers, UpdateMemberInfo,
/// SetReceiveMessageOption, SetGroupRemark.
extension MemberServiceHandler {
    static func memberFilter(_ filter: Groupd_V1_MemberFilter) throws -> MemberListFilter {
        switch filter {
        case .unspecified, .all: .all
        case .owner: .owner
        case .admins: .admins
        case .ordinary: .ordinary
        case .UNRECOGNIZED(let value): throw GroupError.invalidArgument(field: "filter", "unknown filter \(value)")
        }
    }

    /// ListMembers. An AVChatRoom answers one page: the owner and the most recent members this
    /// node holds who are online, newest first, with the online count.
    func listMembers(_ request: Groupd_V1_ListMembersRequest, _ call: CallContext) async throws -> Groupd_V1_ListMembersResponse {
        let filter = try Self.memberFilter(request.filter)
        let (group, membership) = try await service.loadGroup(call, groupID: request.groupID)
        let op = GroupdService.groupOperator(call.caller, membership: membership)
        let size = try GroupRules.checkMemberList(of: group, by: op, pageSize: Int(request.pageSize), limits: call.limits)
        let app = call.caller.appID
        let keys = Set(request.customKeys)
        var members: [Member]
        var next: String?
        if group.type.preset.behaviour.membershipStored {
            let page = try await store.listMembers(
                app: app, groupID: group.id, filter: filter, after: request.pageToken.isEmpty ? nil : request.pageToken,
                limit: size)
            members = page.items
            next = page.next
        } else {
            members = []
            if filter.includes(.owner), let owner = group.ownerID,
               let stored = try await store.members(app: app, groupID: group.id, userIDs: [owner])[owner] {
                members.append(stored)
            }
            if filter.includes(.member) {
                members += try await rooms.recentMembers(app: app, groupID: group.id, limit: size)
                    .filter { filter.includes($0.role) }
            }
            members = Array(members.prefix(size))
        }
        var views = members.map { GroupdService.memberView($0, actor: op.role, call: call, keys: keys) }
        await service.filterMemberViews(&views, role: op.role, group: group, call)
        let page = views
        return .with {
            $0.members = page
            $0.nextPageToken = next ?? ""
            $0.memberCount = UInt32(clamping: group.memberCount)
        }
    }

    func getMembersInfo(_ request: Groupd_V1_GetMembersInfoRequest, _ call: CallContext) async throws -> Groupd_V1_GetMembersInfoResponse {
        let users = request.userIds
        if users.isEmpty {
            throw GroupError.invalidArgument(field: "user_ids", "user_ids must name at least one user", limit: call.limits.maxUsersPerBatch)
        }
        if users.count > call.limits.maxUsersPerBatch {
            throw GroupError.invalidArgument(
                field: "user_ids", "\(users.count) users exceed the limit of \(call.limits.maxUsersPerBatch) per call",
                limit: call.limits.maxUsersPerBatch)
        }
        let (group, membership) = try await service.loadGroup(call, groupID: request.groupID)
        let op = GroupdService.groupOperator(call.caller, membership: membership)
        try GroupRules.authorize(.viewMemberInfo, in: group, by: op).get()
        let app = call.caller.appID
        let wanted = GroupdService.distinctTargets(users, limits: call.limits)
        var found = try await store.members(app: app, groupID: group.id, userIDs: wanted)
        if !group.type.preset.behaviour.membershipStored {
            let listeners = try await rooms.presentMembers(app: app, groupID: group.id, users: wanted)
            found.merge(listeners) { stored, _ in stored }
        }
        var seen: Set<String> = []
        var results: [MemberResult] = []
        for (index, user) in users.enumerated() {
            if user.isEmpty || user.utf8.count > call.limits.userIDBytes {
                results.append(MemberResult(userID: user, outcome: .invalid(
                    GroupError.invalidArgument(field: "user_ids[\(index)]", "invalid user id"))))
            } else if !seen.insert(user).inserted {
                results.append(MemberResult(userID: user, outcome: .invalid(
                    GroupError.invalidArgument(field: "user_ids[\(index)]", "\(user) is listed twice"))))
            } else if let member = found[user] {
                results.append(MemberResult(userID: user, outcome: .success(member)))
            } else {
                results.append(MemberResult(userID: user, outcome: .notMember))
            }
        }
        var views = results.map { GroupdService.memberResult($0, actor: op.role, call: call) }
        for index in views.indices {
            guard var member = views[index].member else { continue }
            var one = [member]
            await service.filterMemberViews(&one, role: op.role, group: group, call)
            member = one[0]
            views[index].member = member
        }
        let answered = views
        return .with { $0.results = answered }
    }

    func getSelfMemberInfo(_ request: Groupd_V1_GetSelfMemberInfoRequest, _ call: CallContext) async throws -> Groupd_V1_GetSelfMemberInfoResponse {
        let (group, membership) = try await service.loadGroup(call, groupID: request.groupID)
        let op = GroupdService.groupOperator(call.caller, membership: membership)
        // The same gate as the member's own preferences: a member, acting as themselves.
        try GroupRules.authorize(.setOwnPreferences, in: group, by: op).get()
        guard let user = call.caller.operatorID, let membership else {
            throw GroupError(code: .permissionDenied, reason: .notAMember, message: "not a member of the group")
        }
        let remark = try await store.remark(app: call.caller.appID, groupID: group.id, userID: user)
        var views = [GroupdService.memberView(membership, actor: op.role, call: call)]
        await service.filterMemberViews(&views, role: op.role, group: group, call)
        let own = views[0]
        return .with {
            $0.member = own
            $0.remark = remark
        }
    }

    func setMemberRole(_ request: Groupd_V1_SetMemberRoleRequest, _ call: CallContext) async throws -> Groupd_V1_SetMemberRoleResponse {
        guard let role = try APIMapping.role(request.role, field: "role") else {
            throw GroupError.invalidArgument(field: "role", "role must be ADMIN or MEMBER")
        }
        let user = request.userID
        let limits = call.limits
        let result = try await service.mutate(call, groupID: request.groupID, targets: user.isEmpty ? [] : [user]) { snapshot, op in
            let change = try GroupRules.planRoleChange(
                of: user, to: role, in: snapshot.group, by: op, target: snapshot.targets[user], limits: limits)
            return (change, change.updatedMembers.first { $0.userID == user } ?? snapshot.targets[user])
        }
        let actor = call.caller.actingRole(membership: result.membership?.role)
        return .with { $0.member = result.value.map { GroupdService.memberView($0, actor: actor, call: call) } }
    }

    func muteMembers(_ request: Groupd_V1_MuteMembersRequest, _ call: CallContext) async throws -> Groupd_V1_MuteMembersResponse {
        let users = request.userIds
        let seconds = Int64(request.durationSeconds)
        let limits = call.limits
        let now = clock.now()
        let result = try await service.mutate(call, groupID: request.groupID, targets: GroupdService.distinctTargets(users, limits: limits)) { snapshot, op in
            let plan = try GroupRules.planMemberMute(
                of: users, for: seconds, in: snapshot.group, by: op, memberships: snapshot.targets, limits: limits, now: now)
            return (plan.change, plan.results)
        }
        let actor = call.caller.actingRole(membership: result.membership?.role)
        return .with { $0.results = result.value.map { GroupdService.memberResult($0, actor: actor, call: call) } }
    }

    /// The member update a field mask names (`name_card`, `custom.<key>`).
    static func memberInfoUpdate(_ request: Groupd_V1_UpdateMemberInfoRequest) throws -> MemberInfoUpdate {
        let paths = request.updateMask?.paths ?? []
        if paths.isEmpty {
            throw GroupError.invalidArgument(field: "update_mask", "update_mask must name at least one field")
        }
        var update = MemberInfoUpdate()
        for path in paths {
            if path == "name_card" {
                update.nameCard = request.nameCard
            } else if path.hasPrefix("custom."), path.count > "custom.".count {
                let key = String(path.dropFirst("custom.".count))
                update.custom[key] = request.custom[key] ?? []
            } else {
                throw GroupError.invalidArgument(field: "update_mask", "unknown path '\(path)'; expected name_card or custom.<key>")
            }
        }
        return update
    }

    func updateMemberInfo(_ request: Groupd_V1_UpdateMemberInfoRequest, _ call: CallContext) async throws -> Groupd_V1_UpdateMemberInfoResponse {
        var requested = try Self.memberInfoUpdate(request)
        let user: String? = request.userID.isEmpty ? nil : request.userID
        try await checkMemberInfoPolicy(&requested, user: user, groupID: request.groupID, call)
        let update = requested
        let limits = call.limits
        let schema = call.customFields
        let now = clock.now()
        let result = try await service.mutate(call, groupID: request.groupID, targets: user.map { [$0] } ?? []) { snapshot, op in
            let change = try GroupRules.planMemberInfoUpdate(
                update, of: user, in: snapshot.group, by: op, target: user.flatMap { snapshot.targets[$0] }, limits: limits,
                customFields: schema, now: now)
            let target = user ?? op.userID ?? ""
            let before = user.flatMap { snapshot.targets[$0] } ?? (target == op.userID ? op.membership : nil)
            return (change, change.updatedMembers.first { $0.userID == target } ?? before)
        }
        let actor = call.caller.actingRole(membership: result.membership?.role)
        return .with { $0.member = result.value.map { GroupdService.memberView($0, actor: actor, call: call) } }
    }

    func setReceiveMessageOption(_ request: Groupd_V1_SetReceiveMessageOptionRequest, _ call: CallContext) async throws -> Groupd_V1_SetReceiveMessageOptionResponse {
        let option: ReceiveOption
        switch request.option {
        case .receive: option = .receive
        case .notReceive: option = .notReceive
        case .receiveWithoutPush: option = .receiveWithoutPush
        case .unspecified, .UNRECOGNIZED:
            throw GroupError.invalidArgument(field: "option", "option must be RECEIVE, NOT_RECEIVE or RECEIVE_WITHOUT_PUSH")
        }
        _ = try await service.mutate(call, groupID: request.groupID) { snapshot, op in
            (try GroupRules.planReceiveOption(option, in: snapshot.group, by: op), ())
        }
        return Groupd_V1_SetReceiveMessageOptionResponse()
    }

    func setGroupRemark(_ request: Groupd_V1_SetGroupRemarkRequest, _ call: CallContext) async throws -> Groupd_V1_SetGroupRemarkResponse {
        let (group, membership) = try await service.loadGroup(call, groupID: request.groupID)
        let op = GroupdService.groupOperator(call.caller, membership: membership)
        let app = call.caller.appID
        // Check the operator before reading their remark.
        try GroupRules.authorize(.setOwnPreferences, in: group, by: op).get()
        let current = try await call.caller.operatorID.asyncMap { try await store.remark(app: app, groupID: group.id, userID: $0) }
        let plan = try GroupRules.planRemark(request.remark, in: group, by: op, current: current.flatMap { $0.isEmpty ? nil : $0 })
        if !plan.events.isEmpty {
            _ = try await store.setRemark(app: app, groupID: group.id, plan: plan, at: clock.now())
        }
        return Groupd_V1_SetGroupRemarkResponse()
    }
}

extension Optional {
    /// `map` with an async transform.
    func asyncMap<T>(_ transform: (Wrapped) async throws -> T) async rethrows -> T? {
        guard let value = self else { return nil }
        return try await transform(value)
    }
}
