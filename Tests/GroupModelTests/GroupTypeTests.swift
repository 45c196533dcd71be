import GroupModel
import Testing

@Suite("Group types and their presets")
struct GroupTypeTests {
    @Test("type names, legacy names and case", arguments: [
        ("Work", GroupType.work), ("Private", .work), ("private", .work), ("WORK", .work),
        ("Public", .public), ("Meeting", .meeting), ("ChatRoom", .meeting), ("chatroom", .meeting),
        ("AVChatRoom", .avChatRoom), ("avchatroom", .avChatRoom), ("Community", .community), ("COMMUNITY", .community),
    ])
    func parse(name: String, type: GroupType) {
        #expect(GroupType(name: name) == type)
    }

    @Test("unknown names are refused", arguments: ["", "BChatRoom", "Group", "Work ", "AV"])
    func unknown(name: String) {
        #expect(GroupType(name: name) == nil)
    }

    @Test("canonical names are the V2 ones")
    func canonical() {
        #expect(GroupType.allCases.map(\.name) == ["Work", "Public", "Meeting", "AVChatRoom", "Community"])
    }

    /// The type table, written out independently of the presets.
    struct Row: Sendable, CustomStringConvertible {
        var type: GroupType
        var settings: GroupSettings
        var fixed: Set<GroupSettingKey>
        var roles: Set<MemberRole>
        var dismissal: DismissalRule
        var transfer: Bool
        var mute: OperationPermission
        var kick: Bool
        var history: Bool
        var historyBeforeJoin: Bool
        var unread: Bool
        var memberEvents: MemberChangeEvents
        var listed: Bool
        var stored: Bool
        var maxMembers: Int?
        var description: String { self.type.name }
    }

    static let table: [Row] = [
        Row(type: .work,
            settings: GroupSettings(
                joinOption: .forbidden, joinApprovers: .owner, invitePermission: .everyone,
                inviteeMustAccept: false, invitationNeedsApproval: false, removeMembersPermission: .owner,
                editProfilePermission: .everyone, editMemberInfoPermission: .ownerAdminsAndSelf,
                editSettingsPermission: .owner, ownerQuit: .longestStandingMember,
                mentionAllPermission: .everyone, slowModeIntervalSeconds: 0, inviteLinkPermission: .everyone, pinPermission: .owner),
            fixed: [.joinOption], roles: [.owner, .member], dismissal: .adminTokenOnly,
            transfer: true, mute: .owner, kick: true, history: true, historyBeforeJoin: false, unread: true,
            memberEvents: .all, listed: true, stored: true, maxMembers: 200),
        Row(type: .public,
            settings: GroupSettings(
                joinOption: .approval, joinApprovers: .ownerAndAdmins, invitePermission: .ownerAndAdmins,
                inviteeMustAccept: true, invitationNeedsApproval: true, removeMembersPermission: .ownerAndAdmins,
                editProfilePermission: .ownerAndAdmins, editMemberInfoPermission: .ownerAdminsAndSelf,
                editSettingsPermission: .ownerAndAdmins, ownerQuit: .refused,
                mentionAllPermission: .ownerAndAdmins, slowModeIntervalSeconds: 0, pinPermission: .ownerAndAdmins),
            fixed: [], roles: [.owner, .admin, .member], dismissal: .ownerOrAdminToken,
            transfer: true, mute: .ownerAndAdmins, kick: true, history: true, historyBeforeJoin: false,
            unread: true, memberEvents: .all, listed: true, stored: true, maxMembers: 2000),
        Row(type: .meeting,
            settings: GroupSettings(
                joinOption: .any, joinApprovers: .ownerAndAdmins, invitePermission: .nobody,
                inviteeMustAccept: false, invitationNeedsApproval: false, removeMembersPermission: .ownerAndAdmins,
                editProfilePermission: .ownerAndAdmins, editMemberInfoPermission: .ownerAdminsAndSelf,
                editSettingsPermission: .ownerAndAdmins, ownerQuit: .refused,
                mentionAllPermission: .ownerAndAdmins, slowModeIntervalSeconds: 0, pinPermission: .ownerAndAdmins),
            fixed: [.invitePermission, .inviteeMustAccept, .invitationNeedsApproval],
            roles: [.owner, .admin, .member], dismissal: .ownerOrAdminToken,
            transfer: true, mute: .ownerAndAdmins, kick: true, history: true, historyBeforeJoin: true,
            unread: false, memberEvents: .none, listed: true, stored: true, maxMembers: 6000),
        Row(type: .avChatRoom,
            settings: GroupSettings(
                joinOption: .any, joinApprovers: .owner, invitePermission: .nobody,
                inviteeMustAccept: false, invitationNeedsApproval: false, removeMembersPermission: .nobody,
                editProfilePermission: .owner, editMemberInfoPermission: .ownerAdminsAndSelf,
                editSettingsPermission: .owner, ownerQuit: .refused,
                mentionAllPermission: .owner, slowModeIntervalSeconds: 0, inviteLinkPermission: .nobody, pinPermission: .owner),
            fixed: [.joinOption, .joinApprovers, .invitePermission, .inviteeMustAccept,
                    .invitationNeedsApproval, .removeMembersPermission, .ownerQuit, .slowModeInterval,
                    .inviteLinkPermission],
            roles: [.owner, .member], dismissal: .ownerOrAdminToken,
            transfer: false, mute: .owner, kick: false, history: false, historyBeforeJoin: false,
            unread: false, memberEvents: .rateLimited, listed: false, stored: false, maxMembers: nil),
        Row(type: .community,
            settings: GroupSettings(
                joinOption: .any, joinApprovers: .ownerAndAdmins, invitePermission: .everyone,
                inviteeMustAccept: false, invitationNeedsApproval: false, removeMembersPermission: .ownerAndAdmins,
                editProfilePermission: .ownerAndAdmins, editMemberInfoPermission: .ownerAdminsAndSelf,
                editSettingsPermission: .ownerAndAdmins, ownerQuit: .refused,
                mentionAllPermission: .ownerAndAdmins, slowModeIntervalSeconds: 0, inviteLinkPermission: .everyone,
                pinPermission: .ownerAndAdmins),
            fixed: [], roles: [.owner, .admin, .member], dismissal: .ownerOrAdminToken,
            transfer: true, mute: .ownerAndAdmins, kick: true, history: true, historyBeforeJoin: true,
            unread: true, memberEvents: .all, listed: true, stored: true, maxMembers: 100_000),
    ]

    @Test("each type's defaults, fixed settings and behaviours match the table", arguments: table)
    func preset(_ row: Row) {
        let preset = row.type.preset
        #expect(preset.type == row.type)
        #expect(preset.defaultSettings == row.settings)
        #expect(preset.fixedSettings == row.fixed)
        let b = preset.behaviour
        #expect(b.allowedRoles == row.roles)
        #expect(b.dismissal == row.dismissal)
        #expect(b.transferAllowed == row.transfer)
        #expect(b.mutePermission == row.mute)
        #expect(b.kickSupported == row.kick)
        #expect(b.historyKept == row.history)
        #expect(b.historyVisibleBeforeJoin == row.historyBeforeJoin)
        #expect(b.unreadCounting == row.unread)
        #expect(b.memberChangeEvents == row.memberEvents)
        #expect(b.listedInJoinedGroups == row.listed)
        #expect(b.membershipStored == row.stored)
        #expect(b.defaultMaxMembers == row.maxMembers)
        #expect(b.publicProfileVisibleToNonMembers == (row.type != .work))
    }

    @Test("a setting fixed by the type cannot move; the same value is a no-op", arguments: GroupType.allCases)
    func fixedSettings(type: GroupType) throws {
        let preset = type.preset
        for key in GroupSettingKey.allCases {
            let changes = Self.changeToOtherValue(key, from: preset.defaultSettings)
            if preset.fixedSettings.contains(key) {
                let error = try #require(groupError { _ = try preset.apply(changes, to: preset.defaultSettings) })
                #expect(error.code == .failedPrecondition)
                #expect(error.reason == .settingFixedByType)
                #expect(error.metadata["setting"] == key.rawValue)
                let same = Self.changeToSameValue(key, from: preset.defaultSettings)
                let result = try preset.apply(same, to: preset.defaultSettings)
                #expect(result.changed.isEmpty)
            } else {
                let result = try preset.apply(changes, to: preset.defaultSettings)
                #expect(result.changed == [key], "\(type) \(key)")
            }
        }
    }

    /// A change of `key` to a value different from the current one.
    static func changeToOtherValue(_ key: GroupSettingKey, from s: GroupSettings) -> GroupSettings.Changes {
        var c = GroupSettings.Changes()
        switch key {
        case .joinOption: c.joinOption = s.joinOption == .any ? .approval : .any
        case .joinApprovers: c.joinApprovers = s.joinApprovers == .owner ? .ownerAndAdmins : .owner
        case .invitePermission: c.invitePermission = s.invitePermission == .owner ? .everyone : .owner
        case .inviteeMustAccept: c.inviteeMustAccept = !s.inviteeMustAccept
        case .invitationNeedsApproval: c.invitationNeedsApproval = !s.invitationNeedsApproval
        case .removeMembersPermission:
            c.removeMembersPermission = s.removeMembersPermission == .owner ? .ownerAndAdmins : .owner
        case .editProfilePermission: c.editProfilePermission = s.editProfilePermission == .owner ? .everyone : .owner
        case .editMemberInfoPermission:
            c.editMemberInfoPermission = s.editMemberInfoPermission == .selfOnly ? .ownerAndSelf : .selfOnly
        case .editSettingsPermission:
            c.editSettingsPermission = s.editSettingsPermission == .owner ? .ownerAndAdmins : .owner
        case .ownerQuit: c.ownerQuit = s.ownerQuit == .refused ? .longestStandingMember : .refused
        case .mentionAllPermission:
            c.mentionAllPermission = s.mentionAllPermission == .owner ? .everyone : .owner
        case .slowModeInterval: c.slowModeIntervalSeconds = s.slowModeIntervalSeconds == 0 ? 30 : 0
        case .inviteLinkPermission:
            c.inviteLinkPermission = s.inviteLinkPermission == .owner ? .ownerAndAdmins : .owner
        case .pinPermission: c.pinPermission = s.pinPermission == .owner ? .everyone : .owner
        }
        return c
    }

    /// A change of `key` to its current value.
    static func changeToSameValue(_ key: GroupSettingKey, from s: GroupSettings) -> GroupSettings.Changes {
        var c = GroupSettings.Changes()
        switch key {
        case .joinOption: c.joinOption = s.joinOption
        case .joinApprovers: c.joinApprovers = s.joinApprovers
        case .invitePermission: c.invitePermission = s.invitePermission
        case .inviteeMustAccept: c.inviteeMustAccept = s.inviteeMustAccept
        case .invitationNeedsApproval: c.invitationNeedsApproval = s.invitationNeedsApproval
        case .removeMembersPermission: c.removeMembersPermission = s.removeMembersPermission
        case .editProfilePermission: c.editProfilePermission = s.editProfilePermission
        case .editMemberInfoPermission: c.editMemberInfoPermission = s.editMemberInfoPermission
        case .editSettingsPermission: c.editSettingsPermission = s.editSettingsPermission
        case .ownerQuit: c.ownerQuit = s.ownerQuit
        case .mentionAllPermission: c.mentionAllPermission = s.mentionAllPermission
        case .slowModeInterval: c.slowModeIntervalSeconds = s.slowModeIntervalSeconds
        case .inviteLinkPermission: c.inviteLinkPermission = s.inviteLinkPermission
        case .pinPermission: c.pinPermission = s.pinPermission
        }
        return c
    }
}
