import GroupAPI
import GroupModel
import PolicyHost

/// The policy hooks of UpdateMemberInfo: each runs the app's chain, throws its refusal, and
/// applies its rewrites to what is then stored.
extension GroupdService {
    /// UpdateMemberInfo: `validate_member_custom` on the custom values written, then
    /// `before_set_member_info` on the name card and custom values (`users[0]`: the member).
    func checkMemberInfoPolicy(_ update: inout MemberInfoUpdate, user: String?, groupID: String, _ call: CallContext) async throws {
        let target = user ?? call.caller.operatorID ?? ""
        let written = update.custom.filter { !$0.value.isEmpty }
        if !written.isEmpty {
            let fields = Self.hookFields(custom: written, prefix: "custom.member.")
            let verdict = try await checkPolicy(.validateMemberCustom, call, fieldPath: Self.requestPath) {
                HookRequest(groupID: groupID, fields: fields, users: [target])
            }
            Self.applyCustom(verdict.changes, prefix: "custom.member.", to: &update.custom)
        }
        var named: [HookField] = []
        if let nameCard = update.nameCard { named.append(HookField("name_card", nameCard)) }
        named += Self.hookFields(custom: update.custom, prefix: "custom.member.")
        let fields = named
        let verdict = try await checkPolicy(.beforeSetMemberInfo, call, fieldPath: Self.requestPath) {
            HookRequest(groupID: groupID, fields: fields, users: [target])
        }
        if let nameCard = update.nameCard { update.nameCard = Self.rewritten("name_card", nameCard, verdict.changes) }
        Self.applyCustom(verdict.changes, prefix: "custom.member.", to: &update.custom)
    }
}
