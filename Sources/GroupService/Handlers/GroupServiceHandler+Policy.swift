import GroupAPI
import GroupModel
import PolicyHost

/// The policy hooks of CreateGroup and UpdateGroupProfile: each runs the app's chain, throws its
/// refusal, and applies its rewrites to what is then stored.
extension GroupServiceHandler {
    /// CreateGroup: `validate_group_custom` on the group's custom values,
    /// `validate_member_custom` on each initial member's, `before_set_member_info` on each
    /// initial member's name card and custom values (`users[0]`: the member; error fields
    /// `members[i].name_card`), then `before_create_group` on the profile and custom values.
    func checkCreationPolicy(
        type: GroupType, groupID: String, profile: inout Groupd_V1_GroupProfile, custom: inout [String: [UInt8]],
        members: inout [InitialMember], _ call: CallContext
    ) async throws {
        let groupType = GroupdService.hookGroupType(type)
        if !custom.isEmpty {
            let fields = GroupdService.hookFields(custom: custom, prefix: "custom.group.")
            let verdict = try await service.checkPolicy(.validateGroupCustom, call, fieldPath: GroupdService.requestPath) {
                HookRequest(groupID: groupID, groupType: groupType, fields: fields)
            }
            GroupdService.applyCustom(verdict.changes, prefix: "custom.group.", to: &custom)
        }
        for index in members.indices where !members[index].custom.isEmpty {
            let member = members[index]
            let fields = GroupdService.hookFields(custom: member.custom, prefix: "custom.member.")
            let verdict = try await service.checkPolicy(.validateMemberCustom, call, fieldPath: { "members[\(index)]." + GroupdService.requestPath($0) }) {
                HookRequest(groupID: groupID, groupType: groupType, fields: fields, users: [member.userID])
            }
            GroupdService.applyCustom(verdict.changes, prefix: "custom.member.", to: &members[index].custom)
        }
        // Each initial member's name card and custom values, as UpdateMemberInfo would set them.
        for index in members.indices where !members[index].nameCard.isEmpty || !members[index].custom.isEmpty {
            let member = members[index]
            let fields = (member.nameCard.isEmpty ? [] : [HookField("name_card", member.nameCard)])
                + GroupdService.hookFields(custom: member.custom, prefix: "custom.member.")
            let verdict = try await service.checkPolicy(
                .beforeSetMemberInfo, call, fieldPath: { "members[\(index)]." + GroupdService.requestPath($0) }
            ) {
                HookRequest(groupID: groupID, groupType: groupType, fields: fields, users: [member.userID])
            }
            members[index].nameCard = GroupdService.rewritten("name_card", member.nameCard, verdict.changes)
            GroupdService.applyCustom(verdict.changes, prefix: "custom.member.", to: &members[index].custom)
        }
        let named: [HookField] = [
            HookField("name", profile.name), HookField("introduction", profile.introduction),
            HookField("notification", profile.notification), HookField("face_url", profile.faceURL),
        ].filter { !$0.value.isEmpty } + GroupdService.hookFields(custom: custom, prefix: "custom.group.")
        let invitees = members.map(\.userID)
        let verdict = try await service.checkPolicy(.beforeCreateGroup, call, fieldPath: Self.profilePath) {
            HookRequest(groupID: groupID, groupType: groupType, fields: named, users: invitees)
        }
        let changes = verdict.changes
        profile.name = GroupdService.rewritten("name", profile.name, changes)
        profile.introduction = GroupdService.rewritten("introduction", profile.introduction, changes)
        profile.notification = GroupdService.rewritten("notification", profile.notification, changes)
        profile.faceURL = GroupdService.rewritten("face_url", profile.faceURL, changes)
        GroupdService.applyCustom(changes, prefix: "custom.group.", to: &custom)
    }

    /// UpdateGroupProfile: `validate_group_custom` on the custom values written (not the
    /// removed ones), then `before_update_profile` on the changed fields.
    func checkProfilePolicy(_ update: inout ProfileUpdate, groupID: String, _ call: CallContext) async throws {
        let written = update.custom.filter { !$0.value.isEmpty }
        if !written.isEmpty {
            let fields = GroupdService.hookFields(custom: written, prefix: "custom.group.")
            let verdict = try await service.checkPolicy(.validateGroupCustom, call, fieldPath: GroupdService.requestPath) {
                HookRequest(groupID: groupID, fields: fields)
            }
            GroupdService.applyCustom(verdict.changes, prefix: "custom.group.", to: &update.custom)
        }
        var named: [HookField] = []
        if let name = update.name { named.append(HookField("name", name)) }
        if let introduction = update.introduction { named.append(HookField("introduction", introduction)) }
        if let notification = update.notification { named.append(HookField("notification", notification)) }
        if let faceURL = update.faceURL { named.append(HookField("face_url", faceURL)) }
        named += GroupdService.hookFields(custom: update.custom, prefix: "custom.group.")
        let fields = named
        let verdict = try await service.checkPolicy(.beforeUpdateProfile, call, fieldPath: Self.profilePath) {
            HookRequest(groupID: groupID, fields: fields)
        }
        let changes = verdict.changes
        if let name = update.name { update.name = GroupdService.rewritten("name", name, changes) }
        if let introduction = update.introduction { update.introduction = GroupdService.rewritten("introduction", introduction, changes) }
        if let notification = update.notification { update.notification = GroupdService.rewritten("notification", notification, changes) }
        if let faceURL = update.faceURL { update.faceURL = GroupdService.rewritten("face_url", faceURL, changes) }
        GroupdService.applyCustom(changes, prefix: "custom.group.", to: &update.custom)
    }

    /// The request field a profile hook key names: `name` → `profile.name`, `custom.group.k` → `custom.k`.
    static func profilePath(_ key: String) -> String {
        ["name", "introduction", "notification", "face_url"].contains(key) ? "profile." + key : GroupdService.requestPath(key)
    }
}
