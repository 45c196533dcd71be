import GroupAPI
import GroupModel
import GroupStore

/// MemberService methods of invite links: CreateInviteLink, RevokeInviteLink, ListInviteLinks,
/// JoinByInviteLink.
extension MemberServiceHandler {
    /// CreateInviteLink: a new token (returned once, stored as its SHA-256) and the link, with
    /// `INVITE_LINK_CREATED` to the approvers, in one transaction that also counts the live links.
    func createInviteLink(
        _ request: Groupd_V1_CreateInviteLinkRequest, _ call: CallContext
    ) async throws -> Groupd_V1_CreateInviteLinkResponse {
        try GroupdService.requireGroupID(request.groupID)
        let token = InviteLinkToken.make()
        let hash = InviteLinkToken.hash(token)
        let id = InviteLinkToken.makeID()
        let spec = InviteLinkRequest(
            expirySeconds: Int64(request.expireSeconds), maxUses: Int(request.maxUses),
            requiresApproval: request.requireApproval)
        let caller = call.caller
        let limits = call.limits
        let now = clock.now()
        let committed = try await store.mutateInviteLinks(
            app: caller.appID, groupID: request.groupID, operatorID: caller.operatorID, at: now
        ) { snapshot, live, _ in
            let op = GroupdService.groupOperator(caller, membership: snapshot.operatorMembership)
            let (link, events) = try GroupRules.planCreateInviteLink(
                spec, in: snapshot.group, by: op, liveLinks: live.count, limits: limits, now: now, id: id, tokenHash: hash)
            return ([link], events, link)
        }
        return .with { $0.link = Self.inviteLinkView(committed.value, token: token) }
    }

    func revokeInviteLink(
        _ request: Groupd_V1_RevokeInviteLinkRequest, _ call: CallContext
    ) async throws -> Groupd_V1_RevokeInviteLinkResponse {
        try GroupdService.requireGroupID(request.groupID)
        if request.linkID.isEmpty { throw GroupError.invalidArgument(field: "link_id", "link_id must not be empty") }
        let caller = call.caller
        let now = clock.now()
        let linkID = request.linkID
        let committed = try await store.mutateInviteLinks(
            app: caller.appID, groupID: request.groupID, operatorID: caller.operatorID, linkID: linkID, at: now
        ) { snapshot, _, named in
            let op = GroupdService.groupOperator(caller, membership: snapshot.operatorMembership)
            let (link, events) = try GroupRules.planRevokeInviteLink(named, linkID: linkID, in: snapshot.group, by: op, now: now)
            return ([link], events, link)
        }
        return .with { $0.link = Self.inviteLinkView(committed.value, token: nil) }
    }

    func listInviteLinks(
        _ request: Groupd_V1_ListInviteLinksRequest, _ call: CallContext
    ) async throws -> Groupd_V1_ListInviteLinksResponse {
        let (group, membership) = try await service.loadGroup(call, groupID: request.groupID)
        let op = GroupdService.groupOperator(call.caller, membership: membership)
        try GroupRules.authorize(.manageInviteLinks, in: group, by: op).get()
        let links = try await store.inviteLinks(app: call.caller.appID, groupID: request.groupID, now: clock.now())
        return .with { $0.links = links.map { Self.inviteLinkView($0, token: nil) } }
    }

    /// JoinByInviteLink: JoinGroup's plan and transaction (policy check, group full, joined-group
    /// limit, pending application refreshed), with the link standing in for the join option and
    /// counting one use, checked and counted in the same transaction.
    func joinByInviteLink(
        _ request: Groupd_V1_JoinByInviteLinkRequest, _ call: CallContext
    ) async throws -> Groupd_V1_JoinGroupResponse {
        if request.token.isEmpty { throw GroupError.invalidArgument(field: "token", "token must not be empty") }
        let caller = call.caller
        let now = clock.now()
        let hash = InviteLinkToken.hash(request.token)
        let found = try GroupRules.checkInviteLink(try await store.inviteLink(app: caller.appID, tokenHash: hash), now: now)
        guard let type = try await store.groupType(app: caller.appID, id: found.groupID) else {
            throw GroupError(code: .notFound, reason: .inviteLinkNotFound, message: "no such invite link",
                             metadata: ["field": "token"])
        }
        let message = try await checkJoinPolicy(message: request.message, groupID: found.groupID, groupType: type, call)
        return try await storedJoin(call, groupID: found.groupID, message: message, now: now, inviteLinkTokenHash: hash)
    }

    static func inviteLinkView(_ link: InviteLink, token: String?) -> Groupd_V1_InviteLink {
        .with {
            $0.linkID = link.id
            $0.token = token ?? ""
            $0.groupID = link.groupID
            $0.creatorUserID = link.createdBy ?? ""
            $0.createTime = APIMapping.timestamp(link.createdAt)
            if let expiresAt = link.expiresAt { $0.expireTime = APIMapping.timestamp(expiresAt) }
            $0.maxUses = UInt32(clamping: link.maxUses)
            $0.useCount = UInt32(clamping: link.useCount)
            $0.requireApproval = link.requiresApproval
        }
    }
}
