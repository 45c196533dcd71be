import GroupModel
import Testing

/// Outcomes per actor, in the order owner, admin, member, non-member, backend; `nil` = allowed.
typealias Outcomes = [GroupError.Reason?]

private let ok: GroupError.Reason? = nil
private let denied: GroupError.Reason? = .permissionDenied
private let notMember: GroupError.Reason? = .notAMember
private let notFound: GroupError.Reason? = .groupNotFound
private let actors: [ActingRole] = [.owner, .admin, .member, .nonMember, .backend]

/// One row of a permission table: an action on a type and the outcome for each actor.
struct PermissionRow: Sendable, CustomStringConvertible {
    var action: GroupAction
    var type: GroupType
    var outcomes: Outcomes
    var settings: GroupSettings.Changes = .init()
    var description: String { "\(self.action) on \(self.type)" }
}

private func rows(_ action: GroupAction, _ table: [(GroupType, Outcomes)]) -> [PermissionRow] {
    table.map { PermissionRow(action: action, type: $0.0, outcomes: $0.1) }
}

private func check(_ row: PermissionRow) {
    let settings = row.type.preset.defaultSettings.applying(row.settings)
    for (actor, expected) in zip(actors, row.outcomes) {
        let decision = GroupRules.authorize(row.action, type: row.type, settings: settings, actor: actor)
        #expect(decision.error?.reason == expected, "\(row) by \(actor)")
        if let error = decision.error {
            #expect(!error.message.isEmpty)
        }
    }
}

@Suite("Permissions: create, dismiss, read for every type × actor")
struct CoreOperationPermissionTests {
    @Test("any caller may create a group of any type", arguments: GroupType.allCases)
    func create(type: GroupType) {
        check(PermissionRow(action: .createGroup, type: type, outcomes: [ok, ok, ok, ok, ok]))
    }

    static let dismissRows = rows(.dismiss, [
        (.work, [.adminTokenRequired, .adminTokenRequired, .adminTokenRequired, notFound, ok]),
        (.public, [ok, denied, denied, notMember, ok]),
        (.meeting, [ok, denied, denied, notMember, ok]),
        (.avChatRoom, [ok, denied, denied, notMember, ok]),
    ])

    @Test("dismiss: Work only by the admin token; others by owner or admin token", arguments: dismissRows)
    func dismiss(_ row: PermissionRow) {
        check(row)
    }

    @Test("dismiss refusals carry the right codes")
    func dismissCodes() throws {
        let work = GroupTypePreset.work.defaultSettings
        let byOwner = try #require(GroupRules.authorize(.dismiss, type: .work, settings: work, actor: .owner).error)
        #expect(byOwner.code == .permissionDenied)
        let hidden = try #require(GroupRules.authorize(.dismiss, type: .work, settings: work, actor: .nonMember).error)
        #expect(hidden.code == .notFound)
    }

    static let readRows = rows(.viewProfile, [
        (.work, [ok, ok, ok, notFound, ok]),
        (.public, [ok, ok, ok, ok, ok]),
        (.meeting, [ok, ok, ok, ok, ok]),
        (.avChatRoom, [ok, ok, ok, ok, ok]),
    ])

    @Test("read: members and backend see a group; non-members all but Work", arguments: readRows)
    func read(_ row: PermissionRow) {
        check(row)
    }

    @Test("visibility: members and backend everything, non-members the public subset or nothing",
          arguments: GroupType.allCases)
    func visibility(type: GroupType) {
        for actor in [ActingRole.owner, .admin, .member, .backend] {
            #expect(GroupRules.visibility(of: type, for: actor) == .full)
        }
        let nonMember = GroupRules.visibility(of: type, for: .nonMember)
        #expect(nonMember == (type == .work ? .hidden : .publicProfile))
    }

    @Test("the public subset is Tencent's TIMGroupManager list")
    func publicSubset() {
        let v = GroupVisibility.publicProfile
        for field in [GroupInfoField.id, .name, .ownerID, .type, .createdAt, .maxMembers, .memberCount,
                      .introduction, .faceURL, .joinOption, .custom] {
            #expect(v.includes(field), "\(field)")
        }
        for field in [GroupInfoField.notification, .settings, .updatedAt, .latestSequence, .mute] {
            #expect(!v.includes(field), "\(field)")
        }
        #expect(GroupInfoField.allCases.allSatisfy { GroupVisibility.full.includes($0) })
        #expect(GroupInfoField.allCases.allSatisfy { !GroupVisibility.hidden.includes($0) })
    }
}

@Suite("Permissions: the other operations, per the type table")
struct OperationPermissionTests {
    static let table: [PermissionRow] =
        rows(.quit, [
            (.work, [ok, ok, ok, notFound, .operatorRequired]),
            (.public, [.ownerCannotQuit, ok, ok, notMember, .operatorRequired]),
            (.meeting, [.ownerCannotQuit, ok, ok, notMember, .operatorRequired]),
            (.avChatRoom, [.ownerCannotQuit, ok, ok, notMember, .operatorRequired]),
        ])
        + rows(.join, [
            (.work, [.alreadyMember, .alreadyMember, .alreadyMember, notFound, .operatorRequired]),
            (.public, [.alreadyMember, .alreadyMember, .alreadyMember, ok, .operatorRequired]),
            (.meeting, [.alreadyMember, .alreadyMember, .alreadyMember, ok, .operatorRequired]),
            (.avChatRoom, [.alreadyMember, .alreadyMember, .alreadyMember, ok, .operatorRequired]),
        ])
        + rows(.kick(target: .member), [
            (.work, [ok, denied, denied, notFound, ok]),
            (.public, [ok, ok, denied, notMember, ok]),
            (.meeting, [ok, ok, denied, notMember, ok]),
            (.avChatRoom, Array(repeating: .kickNotSupported, count: 5)),
        ])
        + rows(.kick(target: .admin), [
            (.public, [ok, denied, denied, notMember, ok]),
        ])
        + rows(.kick(target: .owner), [
            (.public, Array(repeating: .targetIsOwner, count: 5)),
        ])
        + rows(.transferOwnership, [
            (.work, [ok, denied, denied, notFound, ok]),
            (.public, [ok, denied, denied, notMember, ok]),
            (.meeting, [ok, denied, denied, notMember, ok]),
            (.avChatRoom, Array(repeating: .transferNotSupported, count: 5)),
        ])
        + rows(.setRole(target: .member, to: .admin), [
            (.work, [.roleNotSupported, .roleNotSupported, .roleNotSupported, notFound, .roleNotSupported]),
            (.public, [ok, denied, denied, notMember, ok]),
            (.meeting, [ok, denied, denied, notMember, ok]),
            (.avChatRoom, Array(repeating: .roleNotSupported, count: 5)),
        ])
        + rows(.setRole(target: .member, to: .owner), [
            (.public, Array(repeating: .invalidArgument, count: 5)),
        ])
        + rows(.invite, [
            (.work, [ok, ok, ok, notFound, ok]),
            (.public, [ok, ok, denied, notMember, ok]),
            (.meeting, [denied, denied, denied, notMember, ok]),
            (.avChatRoom, Array(repeating: .inviteNotSupported, count: 5)),
        ])
        + rows(.updateProfile([.name]), [
            (.work, [ok, ok, ok, notFound, ok]),
            (.public, [ok, ok, denied, notMember, ok]),
            (.meeting, [ok, ok, denied, notMember, ok]),
            (.avChatRoom, [ok, denied, denied, notMember, ok]),
        ])
        + rows(.muteMember(target: .member), [
            (.work, [ok, denied, denied, notFound, ok]),
            (.public, [ok, ok, denied, notMember, ok]),
            (.meeting, [ok, ok, denied, notMember, ok]),
            (.avChatRoom, [ok, denied, denied, notMember, ok]),
        ])
        + rows(.muteMember(target: .owner), [
            (.public, Array(repeating: .targetIsOwner, count: 5)),
        ])
        + rows(.muteGroup, [
            (.work, [ok, denied, denied, notFound, ok]),
            (.public, [ok, ok, denied, notMember, ok]),
            (.meeting, [ok, ok, denied, notMember, ok]),
            (.avChatRoom, [ok, denied, denied, notMember, ok]),
        ])
        + rows(.updateSettings([.joinOption]), [
            (.work, [.settingFixedByType, .settingFixedByType, .settingFixedByType, notFound, .settingFixedByType]),
            (.public, [ok, ok, denied, notMember, ok]),
            (.meeting, [ok, ok, denied, notMember, ok]),
            (.avChatRoom, Array(repeating: .settingFixedByType, count: 5)),
        ])
        + rows(.updateSettings([.editSettingsPermission]), [
            (.work, [ok, denied, denied, notFound, ok]),
            (.public, [ok, denied, denied, notMember, ok]),
            (.meeting, [ok, denied, denied, notMember, ok]),
            (.avChatRoom, [ok, denied, denied, notMember, ok]),
        ])
        + rows(.updateSettings([.ownerQuit]), [
            (.work, [ok, denied, denied, notFound, ok]),
            (.public, [ok, denied, denied, notMember, ok]),
            (.meeting, [ok, denied, denied, notMember, ok]),
            (.avChatRoom, Array(repeating: .settingFixedByType, count: 5)),
        ])
        + rows(.readHistory, [
            (.work, [ok, ok, ok, notFound, ok]),
            (.public, [ok, ok, ok, notMember, ok]),
            (.meeting, [ok, ok, ok, notMember, ok]),
            (.avChatRoom, Array(repeating: .historyNotKept, count: 5)),
        ])
        + rows(.sendCustomNotification, [
            (.work, [.adminTokenRequired, .adminTokenRequired, .adminTokenRequired, notFound, ok]),
            (.public, [.adminTokenRequired, .adminTokenRequired, .adminTokenRequired, .adminTokenRequired, ok]),
        ])
        + rows(.editMemberInfo(.own), [
            (.public, [ok, ok, ok, notMember, ok]),
        ])
        + rows(.editMemberInfo(.other(.member)), [
            (.work, [ok, ok, denied, notFound, ok]),
            (.public, [ok, ok, denied, notMember, ok]),
        ])
        + rows(.editMemberInfo(.other(.admin)), [
            (.public, [ok, denied, denied, notMember, ok]),
        ])
        + rows(.handleApplication, [
            (.public, [ok, ok, denied, notMember, ok]),
        ])
        + rows(.setOwnPreferences, [
            (.public, [ok, ok, ok, notMember, .operatorRequired]),
        ])
        + rows(.answerInvitation, [
            (.work, [ok, ok, ok, ok, ok]),
        ])

    @Test("each cell", arguments: table)
    func cell(_ row: PermissionRow) {
        check(row)
    }

    static let settingFlips: [PermissionRow] = [
        PermissionRow(action: .invite, type: .public, outcomes: [ok, ok, ok, notMember, ok],
                      settings: .init(invitePermission: .everyone)),
        PermissionRow(action: .invite, type: .work, outcomes: [ok, denied, denied, notFound, ok],
                      settings: .init(invitePermission: .owner)),
        PermissionRow(action: .kick(target: .member), type: .public, outcomes: [ok, ok, ok, notMember, ok],
                      settings: .init(removeMembersPermission: .everyone)),
        PermissionRow(action: .kick(target: .member), type: .public, outcomes: [ok, denied, denied, notMember, ok],
                      settings: .init(removeMembersPermission: .owner)),
        PermissionRow(action: .updateProfile([.introduction]), type: .public,
                      outcomes: [ok, ok, ok, notMember, ok], settings: .init(editProfilePermission: .everyone)),
        PermissionRow(action: .updateProfile([.introduction]), type: .work,
                      outcomes: [ok, denied, denied, notFound, ok], settings: .init(editProfilePermission: .owner)),
        PermissionRow(action: .join, type: .public,
                      outcomes: [.alreadyMember, .alreadyMember, .alreadyMember, .joinForbidden, .operatorRequired],
                      settings: .init(joinOption: .forbidden)),
        PermissionRow(action: .handleApplication, type: .public, outcomes: [ok, denied, denied, notMember, ok],
                      settings: .init(joinApprovers: .owner)),
        PermissionRow(action: .editMemberInfo(.other(.member)), type: .public,
                      outcomes: [denied, denied, denied, notMember, ok], settings: .init(editMemberInfoPermission: .selfOnly)),
        PermissionRow(action: .editMemberInfo(.other(.member)), type: .public,
                      outcomes: [ok, denied, denied, notMember, ok], settings: .init(editMemberInfoPermission: .ownerAndSelf)),
        PermissionRow(action: .updateSettings([.removeMembersPermission]), type: .public,
                      outcomes: [ok, denied, denied, notMember, ok], settings: .init(editSettingsPermission: .owner)),
        PermissionRow(action: .updateSettings([.removeMembersPermission]), type: .work,
                      outcomes: [ok, ok, ok, notFound, ok], settings: .init(editSettingsPermission: .everyone)),
        PermissionRow(action: .updateSettings([.removeMembersPermission]), type: .meeting,
                      outcomes: [denied, denied, denied, notMember, ok], settings: .init(editSettingsPermission: .nobody)),
        PermissionRow(action: .updateSettings([.removeMembersPermission, .ownerQuit]), type: .public,
                      outcomes: [ok, denied, denied, notMember, ok], settings: .init(editSettingsPermission: .everyone)),
        PermissionRow(action: .updateSettings([.ownerQuit]), type: .public,
                      outcomes: [ok, denied, denied, notMember, ok], settings: .init(editSettingsPermission: .nobody)),
        PermissionRow(action: .updateSettings([.editSettingsPermission, .joinOption]), type: .public,
                      outcomes: [denied, denied, denied, notMember, ok], settings: .init(editSettingsPermission: .nobody)),
        PermissionRow(action: .quit, type: .public, outcomes: [ok, ok, ok, notMember, .operatorRequired],
                      settings: .init(ownerQuit: .longestStandingAdminElseMember)),
        PermissionRow(action: .quit, type: .work, outcomes: [.ownerCannotQuit, ok, ok, notFound, .operatorRequired],
                      settings: .init(ownerQuit: .refused)),
    ]

    @Test("every changeable setting flips the outcome it should", arguments: settingFlips)
    func flips(_ row: PermissionRow) {
        check(row)
    }

    @Test("refusal codes: roles → permissionDenied, type limits → failedPrecondition, hidden → notFound")
    func codes() throws {
        let pub = GroupTypePreset.public.defaultSettings
        let av = GroupTypePreset.avChatRoom.defaultSettings
        #expect(GroupRules.authorize(.kick(target: .member), type: .public, settings: pub, actor: .member)
            .error?.code == .permissionDenied)
        #expect(GroupRules.authorize(.kick(target: .member), type: .avChatRoom, settings: av, actor: .backend)
            .error?.code == .failedPrecondition)
        #expect(GroupRules.authorize(.quit, type: .public, settings: pub, actor: .owner).error?.code == .failedPrecondition)
        #expect(GroupRules.authorize(.join, type: .public, settings: pub, actor: .member).error?.code == .alreadyExists)
        #expect(GroupRules.authorize(.join, type: .public, settings: pub, actor: .backend).error?.code == .invalidArgument)
        let fixed = try #require(GroupRules.authorize(
            .updateSettings([.removeMembersPermission]), type: .avChatRoom, settings: av, actor: .owner).error)
        #expect(fixed.metadata["setting"] == "remove_members_permission")
    }

    @Test("acting roles from membership")
    func actingRoles() {
        #expect(ActingRole(role: .owner) == .owner)
        #expect(ActingRole(role: nil) == .nonMember)
        #expect(ActingRole(isBackend: true, role: .member) == .backend)
        #expect(ActingRole(isBackend: false, role: .admin) == .admin)
        #expect(ActingRole.backend.role == nil)
    }
}

@Suite("Permissions: pinning messages and reading receipts, every type × actor")
struct PinAndReceiptPermissionTests {
    static let pinRows = rows(.pinMessage, [
        (.work, [ok, denied, denied, notFound, ok]),
        (.public, [ok, ok, denied, notMember, ok]),
        (.meeting, [ok, ok, denied, notMember, ok]),
        (.avChatRoom, Array(repeating: .historyNotKept, count: 5)),
    ])
    + [
        PermissionRow(action: .pinMessage, type: .public, outcomes: [ok, ok, ok, notMember, ok],
                      settings: .init(pinPermission: .everyone)),
        PermissionRow(action: .pinMessage, type: .public, outcomes: [ok, denied, denied, notMember, ok],
                      settings: .init(pinPermission: .owner)),
        PermissionRow(action: .pinMessage, type: .work, outcomes: [denied, denied, denied, notFound, ok],
                      settings: .init(pinPermission: .nobody)),
    ]

    @Test("pin: pin_scope decides (owner and admins by default, the owner in Work); no history, nothing to pin",
          arguments: pinRows)
    func pin(_ row: PermissionRow) {
        check(row)
    }

    @Test("a pin refusal names the pin_permission setting")
    func pinSetting() throws {
        let error = try #require(GroupRules.authorize(
            .pinMessage, type: .public, settings: GroupTypePreset.public.defaultSettings, actor: .member).error)
        #expect(error.code == .permissionDenied)
        #expect(error.metadata["setting"] == GroupSettingKey.pinPermission.rawValue)
        #expect(GroupSettingKey.pinPermission.apiName == "pin_scope")
    }

    static let receiptRows = rows(.readReceipts, [
        (.work, [ok, ok, ok, notFound, ok]),
        (.public, [ok, ok, ok, notMember, ok]),
        (.meeting, Array(repeating: .readReceiptsNotSupported, count: 5)),
        (.avChatRoom, Array(repeating: .historyNotKept, count: 5)),
    ])

    @Test("read receipts: members of Work and Public groups, and the backend", arguments: receiptRows)
    func receipts(_ row: PermissionRow) {
        check(row)
    }
}

@Suite("Permissions: reacting to messages, every type × actor")
struct ReactionPermissionTests {
    /// Every member reacts (owner, admin, member; a muted member too, since the check does not
    /// read mutes) and the backend; a non-member is refused (not found in a Work group); AVChatRoom
    /// keeps no messages to react to.
    static let reactRows = rows(.react, [
        (.work, [ok, ok, ok, notFound, ok]),
        (.public, [ok, ok, ok, notMember, ok]),
        (.meeting, [ok, ok, ok, notMember, ok]),
        (.avChatRoom, Array(repeating: .historyNotKept, count: 5)),
    ])

    @Test("react: every member and the backend, in types that keep history", arguments: reactRows)
    func react(_ row: PermissionRow) {
        check(row)
    }
}
