import GroupAPI
import GroupModel
import GroupStore

/// MemberService methods that change who is in a group: JoinGroup, QuitGroup, InviteMembers,
/// KickMembers.
extension GroupdService {
    func registerMembershipMethods(in routes: inout Routes) {
        routes.unary(Groupd_V1_MemberService.Method.joinGroup) { [self] request, call in
            try await joinGroup(request, call)
        }
        routes.unary(Groupd_V1_MemberService.Method.quitGroup) { [self] request, call in
            try await quitGroup(request, call)
        }
        routes.unary(Groupd_V1_MemberService.Method.inviteMembers) { [self] request, call in
            try await inviteMembers(request, call)
        }
        routes.unary(Groupd_V1_MemberService.Method.kickMembers) { [self] request, call in
            try await kickMembers(request, call)
        }
    }

    /// JoinGroup. Join option APPROVAL answers PENDING_APPROVAL and stores the
    /// `JOIN_APPLICATION_RECEIVED` event; the application record itself (and so `application`
    /// in the response) comes with the applications issue.
    func joinGroup(_ request: Groupd_V1_JoinGroupRequest, _ call: CallContext) async throws -> Groupd_V1_JoinGroupResponse {
        let message = request.message
        let limits = call.limits
        let now = clock.now()
        let user = call.caller.operatorID
        let result = try await mutate(call, groupID: request.groupID) { snapshot, op in
            let plan = try GroupRules.planJoin(
                snapshot.group, by: op, joinedGroupCount: user.flatMap { snapshot.joinedGroupCounts[$0] } ?? 0,
                message: message, limits: limits, now: now, retainedMute: user.flatMap { snapshot.retainedMutes[$0] })
            return (plan.change, plan.outcome)
        }
        let actor = call.caller.actingRole(membership: result.membership?.role)
        return .with {
            switch result.value {
            case .joined(let member):
                $0.outcome = .joined
                $0.member = Self.memberView(result.membership ?? member, actor: actor, call: call)
            case .pendingApproval:
                $0.outcome = .pendingApproval
            }
        }
    }

    func quitGroup(_ request: Groupd_V1_QuitGroupRequest, _ call: CallContext) async throws -> Groupd_V1_QuitGroupResponse {
        let options = Self.quitOptions(request.options)
        let now = clock.now()
        let result = try await mutate(call, groupID: request.groupID) { snapshot, op in
            let plan = try GroupRules.planQuit(snapshot.group, by: op, options: options, successor: snapshot.successor, now: now)
            return (plan.change, plan)
        }
        if result.value.groupDismissed { audience.removeRoom(app: call.caller.appID, group: request.groupID) }
        return .with {
            $0.newOwnerUserID = result.value.newOwnerID ?? ""
            $0.groupDismissed = result.value.groupDismissed
        }
    }

    func inviteMembers(_ request: Groupd_V1_InviteMembersRequest, _ call: CallContext) async throws -> Groupd_V1_InviteMembersResponse {
        let users = request.userIds
        let message = request.message
        let limits = call.limits
        let now = clock.now()
        let result = try await mutate(call, groupID: request.groupID, targets: Self.distinctTargets(users, limits: limits)) { snapshot, op in
            let plan = try GroupRules.planInvitation(
                of: users, to: snapshot.group, by: op, memberships: snapshot.targets,
                joinedGroupCounts: snapshot.joinedGroupCounts, message: message, limits: limits, now: now,
                retainedMutes: snapshot.retainedMutes)
            return (plan.change, plan.results)
        }
        let actor = call.caller.actingRole(membership: result.membership?.role)
        return .with { $0.results = result.value.map { Self.memberResult($0, actor: actor, call: call) } }
    }

    func kickMembers(_ request: Groupd_V1_KickMembersRequest, _ call: CallContext) async throws -> Groupd_V1_KickMembersResponse {
        let users = request.userIds
        let reason = request.reason
        let options = Self.quitOptions(request.options)
        let limits = call.limits
        let now = clock.now()
        let result = try await mutate(call, groupID: request.groupID, targets: Self.distinctTargets(users, limits: limits)) { snapshot, op in
            let plan = try GroupRules.planKick(
                of: users, from: snapshot.group, by: op, memberships: snapshot.targets, reason: reason, options: options,
                limits: limits, now: now)
            return (plan.change, plan.results)
        }
        let actor = call.caller.actingRole(membership: result.membership?.role)
        return .with { $0.results = result.value.map { Self.memberResult($0, actor: actor, call: call) } }
    }

    /// The distinct non-empty user ids of a batch, for the snapshot (the model checks the batch
    /// itself; an over-long list loads nothing, since the model refuses it).
    static func distinctTargets(_ users: [String], limits: AppLimits) -> [String] {
        guard users.count <= limits.maxUsersPerBatch else { return [] }
        var seen: Set<String> = []
        return users.filter { !$0.isEmpty && seen.insert($0).inserted }
    }
}
