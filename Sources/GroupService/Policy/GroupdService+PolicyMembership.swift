import GroupAPI
import GroupModel
import PolicyHost

/// The policy hooks of joining and inviting. The handlers (JoinGroup, InviteMembers) call these
/// at one point each, before anything is written.
extension GroupdService {
    /// JoinGroup: `before_apply_to_join` on the request's `apply_message`. A reject refuses the
    /// join (`FAILED_PRECONDITION`, `POLICY_REJECTED`); a rewrite (masking) changes the stored message.
    /// - Returns: the message to store.
    func checkJoinPolicy(message: String, groupID: String, groupType: GroupType, _ call: CallContext) async throws -> String {
        let type = Self.hookGroupType(groupType)
        let verdict = try await checkPolicy(.beforeApplyToJoin, call, fieldPath: { $0 == "apply_message" ? "message" : $0 }) {
            HookRequest(groupID: groupID, groupType: type, fields: [HookField("apply_message", message)])
        }
        return Self.rewritten("apply_message", message, verdict.changes)
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
            throw Self.policyRejection(rejection, hook: .beforeInvite, fieldPath: { $0 })
        case .error(let failure):
            throw GroupError(
                code: .unavailable, reason: .policyUnavailable, message: "policy check unavailable: \(failure.message)",
                metadata: ["plugin": failure.plugin, "kind": failure.kind.rawValue])
        case .discard:
            throw Self.policyRejection(
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
}
