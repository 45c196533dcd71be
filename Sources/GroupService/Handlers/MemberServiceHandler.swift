import GroupAPI
import GroupModel
import GroupStore

/// The handler of `groupd.v1.MemberService` (member.proto): who is in a group and their records.
/// This file holds JoinGroup, QuitGroup, InviteMembers and KickMembers; the others are in the
/// extensions named after this type (`+Members`, `+Bans`, `+InviteLinks`, `+Sync`).
struct MemberServiceHandler: GroupdHandler {
    let service: GroupdService

    /// Registers every MemberService method, in the order of member.proto.
    func register(in routes: inout Routes) {
        routes.unary(Groupd_V1_MemberService.Method.joinGroup, joinGroup)
        routes.unary(Groupd_V1_MemberService.Method.quitGroup, quitGroup)
        routes.unary(Groupd_V1_MemberService.Method.inviteMembers, inviteMembers)
        routes.unary(Groupd_V1_MemberService.Method.kickMembers, kickMembers)
        routes.unary(Groupd_V1_MemberService.Method.banMembers, banMembers)
        routes.unary(Groupd_V1_MemberService.Method.unbanMembers, unbanMembers)
        routes.unary(Groupd_V1_MemberService.Method.listBannedMembers, listBannedMembers)
        routes.unary(Groupd_V1_MemberService.Method.listMembers, listMembers)
        routes.unary(Groupd_V1_MemberService.Method.getMembersInfo, getMembersInfo)
        routes.unary(Groupd_V1_MemberService.Method.getSelfMemberInfo, getSelfMemberInfo)
        routes.unary(Groupd_V1_MemberService.Method.setMemberRole, setMemberRole)
        routes.unary(Groupd_V1_MemberService.Method.muteMembers, muteMembers)
        routes.unary(Groupd_V1_MemberService.Method.updateMemberInfo, updateMemberInfo)
        routes.unary(Groupd_V1_MemberService.Method.setReceiveMessageOption, setReceiveMessageOption)
        routes.unary(Groupd_V1_MemberService.Method.setGroupRemark, setGroupRemark)
        routes.unary(Groupd_V1_MemberService.Method.createInviteLink, createInviteLink)
        routes.unary(Groupd_V1_MemberService.Method.revokeInviteLink, revokeInviteLink)
        routes.unary(Groupd_V1_MemberService.Method.listInviteLinks, listInviteLinks)
        routes.unary(Groupd_V1_MemberService.Method.joinByInviteLink, joinByInviteLink)
        routes.unary(Groupd_V1_MemberService.Method.syncMembers, syncMembers)
        routes.unary(Groupd_V1_MemberService.Method.searchMembers, searchMembers)
    }

    /// JoinGroup. Join option ANY: the user joins now. APPROVAL: an application is stored (or the
    /// user's pending one refreshed) with `JOIN_APPLICATION_RECEIVED` to the approvers, in the same
    /// transaction, and returned. AVChatRoom audiences (kept in memory) join through
    /// ``GroupdService/mutate(_:groupID:targets:parts:_:)``.
    func joinGroup(_ request: Groupd_V1_JoinGroupRequest, _ call: CallContext) async throws -> Groupd_V1_JoinGroupResponse {
        let limits = call.limits
        let now = clock.now()
        let user = call.caller.operatorID
        try GroupdService.requireGroupID(request.groupID)
        guard let type = try await store.groupType(app: call.caller.appID, id: request.groupID) else {
            throw GroupError.groupNotFound(request.groupID)
        }
        // Policy plugins: before_apply_to_join may refuse the join or rewrite (mask) the message.
        let message = try await checkJoinPolicy(message: request.message, groupID: request.groupID, groupType: type, call)
        if !type.preset.behaviour.membershipStored {
            let result = try await service.mutate(call, groupID: request.groupID) { snapshot, op in
                let plan = try GroupRules.planJoin(
                    snapshot.group, by: op, joinedGroupCount: user.flatMap { snapshot.joinedGroupCounts[$0] } ?? 0,
                    message: message, limits: limits, now: now, retainedMute: user.flatMap { snapshot.retainedMutes[$0] },
                    ban: user.flatMap { snapshot.bans[$0] })
                return (plan.change, plan.outcome)
            }
            return .with {
                $0.outcome = .joined
                if case .joined(let member) = result.value {
                    $0.member = GroupdService.memberView(
                        member, actor: call.caller.actingRole(membership: member.role), call: call)
                }
            }
        }
        return try await storedJoin(call, groupID: request.groupID, message: message, now: now)
    }

    /// The join of a group whose members are stored, for JoinGroup and JoinByInviteLink: the
    /// join (or the application it files) planned and written in one transaction. Through an
    /// invite link (`inviteLinkTokenHash`) the link is checked again there and its use counted.
    func storedJoin(
        _ call: CallContext, groupID: String, message: String, now: Timestamp, inviteLinkTokenHash: String? = nil
    ) async throws -> Groupd_V1_JoinGroupResponse {
        let caller = call.caller
        let limits = call.limits
        let user = caller.operatorID
        let newID = ApplicationID.make()
        let committed = try await store.mutateApplications(
            app: caller.appID, groupID: groupID, operatorID: user, targets: user.map { [$0] } ?? [], kind: .join,
            at: now, parts: [.joinedGroupCounts, .retainedMutes, .bans], inviteLinkTokenHash: inviteLinkTokenHash
        ) { snapshot in
            let link = try inviteLinkTokenHash.map { _ in try GroupRules.checkInviteLink(snapshot.inviteLink, now: now) }
            let op = GroupdService.groupOperator(caller, membership: snapshot.group.operatorMembership)
            let plan = try GroupRules.planJoinApplication(
                snapshot.group.group, by: op,
                joinedGroupCount: user.flatMap { snapshot.group.joinedGroupCounts[$0] } ?? 0, message: message,
                limits: limits, now: now, retainedMute: user.flatMap { snapshot.group.retainedMutes[$0] },
                pending: user.flatMap { snapshot.pending[$0] }, newID: newID, ban: user.flatMap { snapshot.group.bans[$0] },
                link: link)
            var used = link
            used?.useCount += 1
            return (ApplicationChange(
                group: plan.join.change, applications: plan.application.map { [$0] } ?? [],
                inviteLinks: used.map { [$0] } ?? []), plan)
        }
        return Self.joinResponse(committed.value.value, groupName: committed.group.name, call: call, now: now)
    }

    /// A JoinGroup (or JoinByInviteLink) answer: the member who joined, or the join application
    /// filed for the approvers.
    static func joinResponse(
        _ plan: JoinApplicationPlan, groupName: String, call: CallContext, now: Timestamp
    ) -> Groupd_V1_JoinGroupResponse {
        let caller = call.caller
        return .with {
            switch plan.join.outcome {
            case .joined(let member):
                $0.outcome = .joined
                $0.member = GroupdService.memberView(member, actor: caller.actingRole(membership: member.role), call: call)
            case .pendingApproval:
                $0.outcome = .pendingApproval
                if let application = plan.application {
                    $0.application = GroupdService.applicationView(
                        application, groupName: groupName, roles: [.sender], caller: caller, now: now)
                }
            }
        }
    }

    func quitGroup(_ request: Groupd_V1_QuitGroupRequest, _ call: CallContext) async throws -> Groupd_V1_QuitGroupResponse {
        let options = GroupdService.quitOptions(request.options)
        let now = clock.now()
        let result = try await service.mutate(call, groupID: request.groupID) { snapshot, op in
            let plan = try GroupRules.planQuit(
                snapshot.group, by: op, options: options, successor: snapshot.successor,
                longestStandingAdmin: snapshot.successorAdmin, now: now)
            return (plan.change, plan)
        }
        if result.value.groupDismissed { try await rooms.forget(app: call.caller.appID, groupID: request.groupID) }
        return .with {
            $0.newOwnerUserID = result.value.newOwnerID ?? ""
            $0.groupDismissed = result.value.groupDismissed
        }
    }

    /// InviteMembers. Each invitee who must consent, or whose invitation needs an approver, gets a
    /// stored invitation (a pending one is replaced in place) and a PENDING result with its id,
    /// written with the members added at once and the events in one transaction.
    func inviteMembers(_ request: Groupd_V1_InviteMembersRequest, _ call: CallContext) async throws -> Groupd_V1_InviteMembersResponse {
        let message = request.message
        let limits = call.limits
        let now = clock.now()
        let caller = call.caller
        try GroupdService.requireGroupID(request.groupID)
        // Policy plugins: before_invite may refuse some invitees (FAILED, POLICY_REJECTED); the others go on.
        let (users, refused) = try await checkInvitePolicy(users: request.userIds, groupID: request.groupID, call)
        if users.isEmpty, !refused.isEmpty {
            return .with { $0.results = refused.map(Self.policyRefusedResult) }
        }
        let targets = GroupdService.distinctTargets(users, limits: limits)
        let committed = try await store.mutateApplications(
            app: caller.appID, groupID: request.groupID, operatorID: caller.operatorID, targets: targets,
            kind: .invitation, at: now
        ) { snapshot in
            let op = GroupdService.groupOperator(caller, membership: snapshot.group.operatorMembership)
            let plan = try GroupRules.planInvitationApplications(
                of: users, to: snapshot.group.group, by: op, memberships: snapshot.group.targets,
                joinedGroupCounts: snapshot.group.joinedGroupCounts, message: message, limits: limits, now: now,
                retainedMutes: snapshot.group.retainedMutes, pending: snapshot.pending, newID: ApplicationID.make,
                bans: snapshot.group.bans)
            return (ApplicationChange(group: plan.batch.change, applications: Array(plan.invitations.values)),
                    (plan: plan, membership: op.membership))
        }
        let (plan, membership) = committed.value.value
        let actor = caller.actingRole(membership: membership?.role)
        return .with {
            $0.results = Self.mergingPolicyRefusals(plan.batch.results.map { result in
                var out = GroupdService.memberResult(result, actor: actor, call: call)
                if case .pending = result.outcome, let invitation = plan.invitations[result.userID] {
                    out.applicationID = invitation.id
                }
                return out
            }, refused: refused, order: request.userIds)
        }
    }

    func kickMembers(_ request: Groupd_V1_KickMembersRequest, _ call: CallContext) async throws -> Groupd_V1_KickMembersResponse {
        let users = request.userIds
        let reason = request.reason
        let options = GroupdService.quitOptions(request.options)
        let limits = call.limits
        let now = clock.now()
        let ban = request.ban
        let banSeconds = Int64(request.banDurationSeconds)
        if !ban, request.banDurationSeconds != 0 {
            throw GroupError.invalidArgument(field: "ban_duration_seconds", "ban_duration_seconds is only given with ban")
        }
        let result = try await service.mutate(
            call, groupID: request.groupID, targets: GroupdService.distinctTargets(users, limits: limits),
            parts: ban ? Self.banSnapshotParts : Store.groupSnapshotParts
        ) { snapshot, op in
            guard ban else {
                let plan = try GroupRules.planKick(
                    of: users, from: snapshot.group, by: op, memberships: snapshot.targets, reason: reason, options: options,
                    limits: limits, now: now)
                return (plan.change, plan.results)
            }
            // Kick and ban: who may kick (the type must remove members), each removed member banned.
            try GroupRules.authorize(.kick(target: .member), in: snapshot.group, by: op).get()
            let plan = try GroupRules.planBan(
                of: users, for: banSeconds, reason: reason, in: snapshot.group, by: op, memberships: snapshot.targets,
                bans: snapshot.bans, banCount: snapshot.banCount, managers: snapshot.managers, options: options,
                membersOnly: true, limits: limits, now: now)
            return (plan.change, plan.results.map(Self.kickResult))
        }
        let actor = call.caller.actingRole(membership: result.membership?.role)
        return .with { $0.results = result.value.map { GroupdService.memberResult($0, actor: actor, call: call) } }
    }

    /// A ban result as a KickMembers result (the removed member on success).
    static func kickResult(_ result: BanResult) -> MemberResult {
        switch result.outcome {
        case .banned(_, let removed?): MemberResult(userID: result.userID, outcome: .success(removed))
        case .banned, .notMember, .lifted, .notBanned: MemberResult(userID: result.userID, outcome: .notMember)
        case .failed(let error): MemberResult(userID: result.userID, outcome: .failed(error))
        case .invalid(let error): MemberResult(userID: result.userID, outcome: .invalid(error))
        }
    }
}
