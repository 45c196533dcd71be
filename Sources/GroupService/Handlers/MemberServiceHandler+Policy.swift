import GroupAPI
import GroupModel
import PolicyHost

/// The policy hooks of joining, inviting and changing a member's record. The handlers (JoinGroup,
/// JoinByInviteLink, InviteMembers, UpdateMemberInfo) call these at one point each, before
/// anything is written.
extension MemberServiceHandler {
    /// JoinGroup: `before_apply_to_join` on the request's `apply_message`. A reject refuses the
    /// join (`FAILED_PRECONDITION`, `POLICY_REJECTED`); a rewrite (masking) changes the stored message.
    /// - Returns: the message to store.
    func checkJoinPolicy(message: String, groupID: String, groupType: GroupType, _ call: CallContext) async throws -> String {
        let type = GroupdService.hookGroupType(groupType)
        let verdict = try await service.checkPolicy(.beforeApplyToJoin, call, fieldPath: { $0 == "apply_message" ? "message" : $0 }) {
            HookRequest(groupID: groupID, groupType: type, fields: [HookField("apply_message", message)])
        }
        return GroupdService.rewritten("apply_message", message, verdict.changes)
    }

    /// InviteMembers: `before_invite` with the invitees as `users`. A plugin that refuses some
    /// invitees (`reject_member`) leaves the others to go on; a reject naming no user refuses the
    /// whole call.
    /// - Returns: the invitees still invited (request order) and the refused ones.
    func checkInvitePolicy(users: [String], groupID: String, _ call: CallContext) async throws -> (invited: [String], refused: [String]) {
        guard let host = policy.host, host.hasPlugins(for: .beforeInvite, app: call.caller.appID) else { return (users, []) }
        let request = HookRequest(operatorID: call.caller.operatorID ?? "", groupID: groupID, users: users)
        switch await host.run(.beforeInvite, app: call.caller.appID, request: request) {
        case .reject(let rejection) where !rejection.rejectedMembers.isEmpty:
            let refused = Set(rejection.rejectedMembers)
            return (users.filter { !refused.contains($0) }, users.filter { refused.contains($0) })
        case .reject(let rejection):
            throw GroupdService.policyRejection(rejection, hook: .beforeInvite, fieldPath: { $0 })
        case .error(let failure):
            throw GroupError(
                code: .unavailable, reason: .policyUnavailable, message: "policy check unavailable: \(failure.message)",
                metadata: ["plugin": failure.plugin, "kind": failure.kind.rawValue])
        case .discard:
            throw GroupdService.policyRejection(
                PolicyRejection(plugin: "", errorKeys: [], message: "the invitation was discarded by policy"),
                hook: .beforeInvite, fieldPath: { $0 })
        case .allow, .rewrite:
            return (users, [])
        }
    }

    /// The FAILED result of an invitee the policy refused (reason `POLICY_REJECTED`).
    static func policyRefusedResult(_ user: String) -> Groupd_V1_MemberResult {
        .with {
            $0.userID = user
            $0.result = .failed
            $0.reason = GroupError.Reason.policyRejected.rawValue
        }
    }

    /// `results` with a FAILED / `POLICY_REJECTED` result for each refused invitee, all in the
    /// order the request listed the users.
    static func mergingPolicyRefusals(_ results: [Groupd_V1_MemberResult], refused: [String], order: [String]) -> [Groupd_V1_MemberResult] {
        guard !refused.isEmpty else { return results }
        let refusedSet = Set(refused)
        var remaining = results[...]
        var merged: [Groupd_V1_MemberResult] = []
        var answered: Set<String> = []
        for user in order {
            if refusedSet.contains(user) {
                if answered.insert(user).inserted { merged.append(policyRefusedResult(user)) }
            } else if let next = remaining.first {
                merged.append(next)
                remaining = remaining.dropFirst()
            }
        }
        return merged + remaining
    }

    /// UpdateMemberInfo: `validate_member_custom` on the custom values written, then
    /// `before_set_member_info` on the name card and custom values (`users[0]`: the member).
    func checkMemberInfoPolicy(_ update: inout MemberInfoUpdate, user: String?, groupID: String, _ call: CallContext) async throws {
        let target = user ?? call.caller.operatorID ?? ""
        let written = update.custom.filter { !$0.value.isEmpty }
        if !written.isEmpty {
            let fields = GroupdService.hookFields(custom: written, prefix: "custom.member.")
            let verdict = try await service.checkPolicy(.validateMemberCustom, call, fieldPath: GroupdService.requestPath) {
                HookRequest(groupID: groupID, fields: fields, users: [target])
            }
            GroupdService.applyCustom(verdict.changes, prefix: "custom.member.", to: &update.custom)
        }
        var named: [HookField] = []
        if let nameCard = update.nameCard { named.append(HookField("name_card", nameCard)) }
        named += GroupdService.hookFields(custom: update.custom, prefix: "custom.member.")
        let fields = named
        let verdict = try await service.checkPolicy(.beforeSetMemberInfo, call, fieldPath: GroupdService.requestPath) {
            HookRequest(groupID: groupID, fields: fields, users: [target])
        }
        if let nameCard = update.nameCard { update.nameCard = GroupdService.rewritten("name_card", nameCard, verdict.changes) }
        GroupdService.applyCustom(verdict.changes, prefix: "custom.member.", to: &update.custom)
    }
}
