import GroupModel
import Testing

/// Every operation planned by `GroupRules`, run by one actor against a fixture group.
enum Operation: String, Sendable, CaseIterable {
    case updateProfile, updateSettings, grantSettings, ownerQuitSetting, fixedSetting, setMaxMembers, join, quit, invite
    case kickMember, kickAdmin, kickOwner, transfer, promote, demoteAdmin, setOwnRole
    case muteMember, muteAdmin, muteOwner, muteGroup, editOwnInfo, editMemberInfo, editAdminInfo
    case receiveOption, remark, listMembers, dismiss

    /// Plan the operation for `actor`; on success apply it to `memory` and report ok / pending.
    func run(_ memory: inout MemoryGroup, as actor: ActingRole) throws -> CellOutcome {
        let g = memory.group
        let o = memory.op(Cast.user(actor))
        let limits = fixtureLimits
        let members = memory.members
        func applied(_ change: GroupChange) -> CellOutcome {
            #expect(!change.isEmpty, "\(self) by \(actor) on \(g.type) changed nothing")
            memory.apply(change)
            return .ok
        }
        func batch(_ plan: MemberBatchPlan) -> CellOutcome {
            memory.apply(plan.change)
            return batchOutcome(plan)
        }
        switch self {
        case .updateProfile:
            return applied(try GroupRules.planProfileUpdate(ProfileUpdate(name: "renamed"), of: g, by: o, limits: limits, now: now))
        case .updateSettings:
            return applied(try GroupRules.planSettingsUpdate(
                .init(editMemberInfoPermission: .ownerAndSelf), of: g, by: o, limits: limits, now: now))
        case .grantSettings:
            let other: OperationPermission = g.settings.editSettingsPermission == .everyone ? .owner : .everyone
            return applied(try GroupRules.planSettingsUpdate(
                .init(editSettingsPermission: other), of: g, by: o, limits: limits, now: now))
        case .ownerQuitSetting:
            let other: OwnerQuitRule = g.settings.ownerQuit == .refused ? .longestStandingMember : .refused
            return applied(try GroupRules.planSettingsUpdate(.init(ownerQuit: other), of: g, by: o, limits: limits, now: now))
        case .fixedSetting:
            let other: JoinOption = g.settings.joinOption == .any ? .approval : .any
            return applied(try GroupRules.planSettingsUpdate(.init(joinOption: other), of: g, by: o, limits: limits, now: now))
        case .setMaxMembers:
            return applied(try GroupRules.planSettingsUpdate(.init(), maxMembers: 100, of: g, by: o, limits: limits, now: now))
        case .join:
            let plan = try GroupRules.planJoin(g, by: o, joinedGroupCount: 0, limits: limits, now: now)
            memory.apply(plan.change)
            if case .joined = plan.outcome { return .ok }
            return .pending
        case .quit:
            let plan = try GroupRules.planQuit(
                g, by: o, successor: memory.successor(excluding: o.userID ?? ""),
                longestStandingAdmin: memory.successorAdmin(excluding: o.userID ?? ""), now: now)
            return applied(plan.change)
        case .invite:
            return batch(try GroupRules.planInvitation(
                of: [Cast.newbie], to: g, by: o, memberships: members, joinedGroupCounts: [:], limits: limits, now: now))
        case .kickMember, .kickAdmin, .kickOwner:
            let target = self == .kickMember ? Cast.member2 : self == .kickAdmin ? Cast.admin2 : Cast.owner
            return batch(try GroupRules.planKick(
                of: [target], from: g, by: o, memberships: members, reason: "rules", limits: limits, now: now))
        case .transfer:
            return applied(try GroupRules.planOwnershipTransfer(
                of: g, to: Cast.member2, by: o, newOwner: members[Cast.member2], currentOwner: memory.owner,
                limits: limits, now: now))
        case .promote:
            return applied(try GroupRules.planRoleChange(
                of: Cast.member2, to: .admin, in: g, by: o, target: members[Cast.member2], limits: limits))
        case .demoteAdmin:
            return applied(try GroupRules.planRoleChange(
                of: Cast.admin2, to: .member, in: g, by: o, target: members[Cast.admin2], limits: limits))
        case .setOwnRole:
            let me = o.userID ?? ""
            let role: MemberRole = actor == .member || actor == .nonMember ? .admin : .member
            return applied(try GroupRules.planRoleChange(of: me, to: role, in: g, by: o, target: members[me], limits: limits))
        case .muteMember, .muteAdmin, .muteOwner:
            let target = self == .muteMember ? Cast.member2 : self == .muteAdmin ? Cast.admin2 : Cast.owner
            return batch(try GroupRules.planMemberMute(
                of: [target], for: 120, in: g, by: o, memberships: members, limits: limits, now: now))
        case .muteGroup:
            return applied(try GroupRules.planGroupMute(.all, of: g, by: o, now: now))
        case .editOwnInfo:
            return applied(try GroupRules.planMemberInfoUpdate(
                MemberInfoUpdate(nameCard: "card"), of: nil, in: g, by: o, target: nil, limits: limits, now: now))
        case .editMemberInfo, .editAdminInfo:
            let target = self == .editMemberInfo ? Cast.member2 : Cast.admin2
            return applied(try GroupRules.planMemberInfoUpdate(
                MemberInfoUpdate(nameCard: "card"), of: target, in: g, by: o, target: members[target], limits: limits,
                now: now))
        case .receiveOption:
            return applied(try GroupRules.planReceiveOption(.notReceive, in: g, by: o))
        case .remark:
            let plan = try GroupRules.planRemark("alias", in: g, by: o)
            #expect(plan.events.count == 1)
            return .ok
        case .listMembers:
            _ = try GroupRules.checkMemberList(of: g, by: o, pageSize: 0, limits: limits)
            return .ok
        case .dismiss:
            let events = try GroupRules.planDismissal(of: g, by: o.role, operatorID: o.userID)
            #expect(events.map(\.kind) == [.groupDismissed])
            return .ok
        }
    }
}

/// One row of the table: an operation on a type (with settings changed at creation), and the
/// expected outcome for owner, admin, member, non-member and backend.
struct OperationRow: Sendable, CustomStringConvertible {
    var operation: Operation
    var type: GroupType
    var cells: [Cell]
    var settings: GroupSettings.Changes = .init()

    var description: String {
        let changed = self.type.preset.defaultSettings.applying(self.settings)
            .differences(from: self.type.preset.defaultSettings)
            .sorted().map { "\($0.rawValue)=\(self.type.preset.defaultSettings.applying(self.settings).value(of: $0))" }
        return "\(self.operation) on \(self.type)" + (changed.isEmpty ? "" : " with \(changed.joined(separator: ","))")
    }
}

let actingRoles: [ActingRole] = [.owner, .admin, .member, .nonMember, .backend]

/// Run every actor of `row` on a fresh fixture and compare with the expected cells; on success,
/// the plan applied must keep the invariants.
func check(_ row: OperationRow) throws {
    #expect(row.cells.count == actingRoles.count, "\(row)")
    for (actor, cell) in zip(actingRoles, row.cells) {
        var memory = try fixture(row.type, settings: row.settings)
        let hasActor = actor != .admin || memory.members[Cast.admin] != nil
        guard case .expect(let expected) = cell else {
            #expect(!hasActor || actor == .backend, "\(row): \(actor) exists but the cell says n/a")
            continue
        }
        #expect(hasActor, "\(row): no \(actor) in the fixture")
        let got = outcome { try row.operation.run(&memory, as: actor) }
        #expect(got == expected, "\(row) by \(actor)")
        checkInvariants(memory, "\(row) by \(actor)")
    }
}

/// The rows of `operation` in each type given; a Community row, unless given, has Public's cells
/// (the two types differ in joining and inviting only, whose rows give `community`).
private func rows(_ operation: Operation, work: [Cell]? = nil, public: [Cell]? = nil, meeting: [Cell]? = nil,
                  av: [Cell]? = nil, community: [Cell]? = nil) -> [OperationRow] {
    var result: [OperationRow] = []
    if let work { result.append(OperationRow(operation: operation, type: .work, cells: work)) }
    if let `public` { result.append(OperationRow(operation: operation, type: .public, cells: `public`)) }
    if let meeting { result.append(OperationRow(operation: operation, type: .meeting, cells: meeting)) }
    if let av { result.append(OperationRow(operation: operation, type: .avChatRoom, cells: av)) }
    if let cells = community ?? `public` { result.append(OperationRow(operation: operation, type: .community, cells: cells)) }
    return result
}

private let oq = Cell.no(.ownerCannotQuit)
private let ins = Cell.no(.inviteNotSupported)
private let kns = Cell.no(.kickNotSupported)
private let tns = Cell.no(.transferNotSupported)
private let rns = Cell.no(.roleNotSupported)

@Suite("Operation plans: the type table, type × operation × actor")
struct OperationCellTests {
    //                                   owner, admin, member, non-member, backend
    static let table: [OperationRow] =
        rows(.updateProfile,
             work: [.ok, .na, .ok, .nf, .ok],
             public: [.ok, .ok, .den, .nm, .ok],
             meeting: [.ok, .ok, .den, .nm, .ok],
             av: [.ok, .na, .den, .nm, .ok])
        + rows(.updateSettings,
               work: [.ok, .na, .den, .nf, .ok],
               public: [.ok, .ok, .den, .nm, .ok],
               meeting: [.ok, .ok, .den, .nm, .ok],
               av: [.ok, .na, .den, .nm, .ok])
        + rows(.grantSettings,
               work: [.ok, .na, .den, .nf, .ok],
               public: [.ok, .den, .den, .nm, .ok],
               meeting: [.ok, .den, .den, .nm, .ok],
               av: [.ok, .na, .den, .nm, .ok])
        + rows(.ownerQuitSetting,
               work: [.ok, .na, .den, .nf, .ok],
               public: [.ok, .den, .den, .nm, .ok],
               meeting: [.ok, .den, .den, .nm, .ok],
               av: [.fixed, .na, .fixed, .fixed, .fixed])
        + rows(.fixedSetting,
               work: [.fixed, .na, .fixed, .nf, .fixed],
               public: [.ok, .ok, .den, .nm, .ok],
               meeting: [.ok, .ok, .den, .nm, .ok],
               av: [.fixed, .na, .fixed, .fixed, .fixed])
        + rows(.setMaxMembers,
               work: [.atr, .na, .atr, .nf, .ok],
               public: [.atr, .atr, .atr, .atr, .ok],
               meeting: [.atr, .atr, .atr, .atr, .ok],
               av: [.atr, .na, .atr, .atr, .ok])
        + rows(.join,
               work: [.already, .na, .already, .nf, .opReq],
               public: [.already, .already, .already, .pend, .opReq],
               meeting: [.already, .already, .already, .ok, .opReq],
               av: [.already, .na, .already, .ok, .opReq],
               community: [.already, .already, .already, .ok, .opReq])
        + rows(.quit,
               work: [.ok, .na, .ok, .nf, .opReq],
               public: [oq, .ok, .ok, .nm, .opReq],
               meeting: [oq, .ok, .ok, .nm, .opReq],
               av: [oq, .na, .ok, .nm, .opReq])
        + rows(.invite,
               work: [.ok, .na, .ok, .nf, .ok],
               public: [.pend, .pend, .den, .nm, .ok],
               meeting: [.den, .den, .den, .nm, .ok],
               av: [ins, .na, ins, ins, ins],
               community: [.ok, .ok, .ok, .nm, .ok])
        + rows(.kickMember,
               work: [.ok, .na, .den, .nf, .ok],
               public: [.ok, .ok, .den, .nm, .ok],
               meeting: [.ok, .ok, .den, .nm, .ok],
               av: [kns, .na, kns, kns, kns])
        + rows(.kickAdmin,
               public: [.ok, .den, .den, .nm, .ok],
               meeting: [.ok, .den, .den, .nm, .ok])
        + rows(.kickOwner,
               work: [.tio, .na, .den, .nf, .tio],
               public: [.tio, .tio, .den, .nm, .tio],
               meeting: [.tio, .tio, .den, .nm, .tio],
               av: [kns, .na, kns, kns, kns])
        + rows(.transfer,
               work: [.ok, .na, .den, .nf, .ok],
               public: [.ok, .den, .den, .nm, .ok],
               meeting: [.ok, .den, .den, .nm, .ok],
               av: [tns, .na, tns, tns, tns])
        + rows(.promote,
               work: [rns, .na, rns, .nf, rns],
               public: [.ok, .den, .den, .nm, .ok],
               meeting: [.ok, .den, .den, .nm, .ok],
               av: [rns, .na, rns, rns, rns])
        + rows(.demoteAdmin,
               public: [.ok, .den, .den, .nm, .ok],
               meeting: [.ok, .den, .den, .nm, .ok])
        + rows(.setOwnRole,
               work: [rns, .na, rns, .nf, .na],
               public: [.tio, .den, .den, .nm, .na],
               meeting: [.tio, .den, .den, .nm, .na],
               av: [rns, .na, rns, rns, .na])
        + rows(.muteMember,
               work: [.ok, .na, .den, .nf, .ok],
               public: [.ok, .ok, .den, .nm, .ok],
               meeting: [.ok, .ok, .den, .nm, .ok],
               av: [.ok, .na, .den, .nm, .ok])
        + rows(.muteAdmin,
               public: [.ok, .den, .den, .nm, .ok],
               meeting: [.ok, .den, .den, .nm, .ok])
        + rows(.muteOwner,
               work: [.tio, .na, .den, .nf, .tio],
               public: [.tio, .tio, .den, .nm, .tio],
               meeting: [.tio, .tio, .den, .nm, .tio],
               av: [.tio, .na, .den, .nm, .tio])
        + rows(.muteGroup,
               work: [.ok, .na, .den, .nf, .ok],
               public: [.ok, .ok, .den, .nm, .ok],
               meeting: [.ok, .ok, .den, .nm, .ok],
               av: [.ok, .na, .den, .nm, .ok])
        + rows(.editOwnInfo,
               work: [.ok, .na, .ok, .nf, .inv],
               public: [.ok, .ok, .ok, .nm, .inv],
               meeting: [.ok, .ok, .ok, .nm, .inv],
               av: [.ok, .na, .ok, .nm, .inv])
        + rows(.editMemberInfo,
               work: [.ok, .na, .den, .nf, .ok],
               public: [.ok, .ok, .den, .nm, .ok],
               meeting: [.ok, .ok, .den, .nm, .ok],
               av: [.ok, .na, .den, .nm, .ok])
        + rows(.editAdminInfo,
               public: [.ok, .den, .den, .nm, .ok],
               meeting: [.ok, .den, .den, .nm, .ok])
        + rows(.receiveOption,
               work: [.ok, .na, .ok, .nf, .opReq],
               public: [.ok, .ok, .ok, .nm, .opReq],
               meeting: [.ok, .ok, .ok, .nm, .opReq],
               av: [.ok, .na, .ok, .nm, .opReq])
        + rows(.remark,
               work: [.ok, .na, .ok, .nf, .opReq],
               public: [.ok, .ok, .ok, .nm, .opReq],
               meeting: [.ok, .ok, .ok, .nm, .opReq],
               av: [.ok, .na, .ok, .nm, .opReq])
        + rows(.listMembers,
               work: [.ok, .na, .ok, .nf, .ok],
               public: [.ok, .ok, .ok, .nm, .ok],
               meeting: [.ok, .ok, .ok, .nm, .ok],
               av: [.ok, .na, .ok, .nm, .ok])
        + rows(.dismiss,
               work: [.atr, .na, .atr, .nf, .ok],
               public: [.ok, .den, .den, .nm, .ok],
               meeting: [.ok, .den, .den, .nm, .ok],
               av: [.ok, .na, .den, .nm, .ok])

    @Test("each cell: allowed, or refused with the exact reason", arguments: table)
    func cell(_ row: OperationRow) throws {
        try check(row)
    }

    @Test("the table covers every operation on every type where it applies")
    func coverage() {
        let covered = Set(Self.table.map { "\($0.operation)" })
        #expect(covered == Set(Operation.allCases.map(\.rawValue)))
        for type in GroupType.allCases {
            #expect(Self.table.filter { $0.type == type }.count >= 19, "\(type)")
        }
    }

    // MARK: Settings that flip outcomes

    static let flips: [OperationRow] = [
        // Join option (Public: approval by default; Meeting: any).
        OperationRow(operation: .join, type: .public, cells: [.already, .already, .already, .ok, .opReq],
                     settings: .init(joinOption: .any)),
        OperationRow(operation: .join, type: .public,
                     cells: [.already, .already, .already, .no(.joinForbidden), .opReq],
                     settings: .init(joinOption: .forbidden)),
        OperationRow(operation: .join, type: .meeting, cells: [.already, .already, .already, .pend, .opReq],
                     settings: .init(joinOption: .approval)),
        OperationRow(operation: .join, type: .meeting,
                     cells: [.already, .already, .already, .no(.joinForbidden), .opReq],
                     settings: .init(joinOption: .forbidden)),
        OperationRow(operation: .join, type: .community, cells: [.already, .already, .already, .pend, .opReq],
                     settings: .init(joinOption: .approval)),
        OperationRow(operation: .join, type: .community,
                     cells: [.already, .already, .already, .no(.joinForbidden), .opReq],
                     settings: .init(joinOption: .forbidden)),
        OperationRow(operation: .invite, type: .community, cells: [.ok, .ok, .den, .nm, .ok],
                     settings: .init(invitePermission: .ownerAndAdmins)),
        OperationRow(operation: .invite, type: .community, cells: [.pend, .pend, .pend, .nm, .ok],
                     settings: .init(inviteeMustAccept: true)),
        // Who invites, whether the invitee accepts, whether an ordinary inviter needs approval.
        OperationRow(operation: .invite, type: .work, cells: [.pend, .na, .pend, .nf, .ok],
                     settings: .init(inviteeMustAccept: true)),
        OperationRow(operation: .invite, type: .work, cells: [.ok, .na, .den, .nf, .ok],
                     settings: .init(invitePermission: .owner)),
        OperationRow(operation: .invite, type: .work, cells: [.ok, .na, .pend, .nf, .ok],
                     settings: .init(invitationNeedsApproval: true)),
        OperationRow(operation: .invite, type: .public, cells: [.ok, .ok, .den, .nm, .ok],
                     settings: .init(inviteeMustAccept: false)),
        OperationRow(operation: .invite, type: .public, cells: [.pend, .pend, .pend, .nm, .ok],
                     settings: .init(invitePermission: .everyone)),
        OperationRow(operation: .invite, type: .public, cells: [.ok, .ok, .pend, .nm, .ok],
                     settings: .init(invitePermission: .everyone, inviteeMustAccept: false)),
        OperationRow(operation: .invite, type: .public, cells: [.ok, .ok, .ok, .nm, .ok],
                     settings: .init(invitePermission: .everyone, inviteeMustAccept: false,
                                     invitationNeedsApproval: false)),
        OperationRow(operation: .invite, type: .public, cells: [.ok, .pend, .den, .nm, .ok],
                     settings: .init(joinApprovers: .owner, inviteeMustAccept: false)),
        OperationRow(operation: .invite, type: .public, cells: [.den, .den, .den, .nm, .ok],
                     settings: .init(invitePermission: .nobody)),
        // Who removes members.
        OperationRow(operation: .kickMember, type: .public, cells: [.ok, .ok, .ok, .nm, .ok],
                     settings: .init(removeMembersPermission: .everyone)),
        OperationRow(operation: .kickAdmin, type: .public, cells: [.ok, .den, .den, .nm, .ok],
                     settings: .init(removeMembersPermission: .everyone)),
        OperationRow(operation: .kickMember, type: .public, cells: [.ok, .den, .den, .nm, .ok],
                     settings: .init(removeMembersPermission: .owner)),
        OperationRow(operation: .kickMember, type: .work, cells: [.ok, .na, .ok, .nf, .ok],
                     settings: .init(removeMembersPermission: .everyone)),
        OperationRow(operation: .kickMember, type: .meeting, cells: [.den, .den, .den, .nm, .ok],
                     settings: .init(removeMembersPermission: .nobody)),
        // Who edits the profile.
        OperationRow(operation: .updateProfile, type: .public, cells: [.ok, .ok, .ok, .nm, .ok],
                     settings: .init(editProfilePermission: .everyone)),
        OperationRow(operation: .updateProfile, type: .work, cells: [.ok, .na, .den, .nf, .ok],
                     settings: .init(editProfilePermission: .owner)),
        OperationRow(operation: .updateProfile, type: .avChatRoom, cells: [.ok, .na, .ok, .nm, .ok],
                     settings: .init(editProfilePermission: .everyone)),
        OperationRow(operation: .updateProfile, type: .meeting, cells: [.den, .den, .den, .nm, .ok],
                     settings: .init(editProfilePermission: .nobody)),
        // Who edits member profiles (RongCloud: self; owner + self; owner + admins + self).
        OperationRow(operation: .editMemberInfo, type: .public, cells: [.den, .den, .den, .nm, .ok],
                     settings: .init(editMemberInfoPermission: .selfOnly)),
        OperationRow(operation: .editOwnInfo, type: .public, cells: [.ok, .ok, .ok, .nm, .inv],
                     settings: .init(editMemberInfoPermission: .selfOnly)),
        OperationRow(operation: .editMemberInfo, type: .public, cells: [.ok, .den, .den, .nm, .ok],
                     settings: .init(editMemberInfoPermission: .ownerAndSelf)),
        OperationRow(operation: .editMemberInfo, type: .work, cells: [.den, .na, .den, .nf, .ok],
                     settings: .init(editMemberInfoPermission: .selfOnly)),
        OperationRow(operation: .editMemberInfo, type: .avChatRoom, cells: [.ok, .na, .den, .nm, .ok],
                     settings: .init(editMemberInfoPermission: .ownerAndSelf)),
    ]

    @Test("every changeable setting flips the outcome it should", arguments: flips)
    func flip(_ row: OperationRow) throws {
        try check(row)
    }

    // MARK: Who edits settings, what an owner's quit does: type × setting value × actor

    /// `updateSettings` (any changeable setting), `grantSettings` and `ownerQuitSetting` under
    /// each value of `edit_settings_permission`, in every type.
    static let settingsGrantCells: [OperationRow] = {
        //                                   owner, admin, member, non-member, backend
        let byValue: [OperationPermission: (work: [Cell], public: [Cell], meeting: [Cell], av: [Cell])] = [
            .nobody: ([.den, .na, .den, .nf, .ok], [.den, .den, .den, .nm, .ok],
                      [.den, .den, .den, .nm, .ok], [.den, .na, .den, .nm, .ok]),
            .owner: ([.ok, .na, .den, .nf, .ok], [.ok, .den, .den, .nm, .ok],
                     [.ok, .den, .den, .nm, .ok], [.ok, .na, .den, .nm, .ok]),
            .ownerAndAdmins: ([.ok, .na, .den, .nf, .ok], [.ok, .ok, .den, .nm, .ok],
                              [.ok, .ok, .den, .nm, .ok], [.ok, .na, .den, .nm, .ok]),
            .everyone: ([.ok, .na, .ok, .nf, .ok], [.ok, .ok, .ok, .nm, .ok],
                        [.ok, .ok, .ok, .nm, .ok], [.ok, .na, .ok, .nm, .ok]),
        ]
        // The two owner-only settings: the owner (and the backend) whatever the grant.
        let ownerOnly: (work: [Cell], public: [Cell], meeting: [Cell], av: [Cell]) = (
            [.ok, .na, .den, .nf, .ok], [.ok, .den, .den, .nm, .ok],
            [.ok, .den, .den, .nm, .ok], [.ok, .na, .den, .nm, .ok])
        let avOwnerQuitFixed: [Cell] = [.fixed, .na, .fixed, .fixed, .fixed]
        var result: [OperationRow] = []
        for value in OperationPermission.allCases {
            let cells = byValue[value]!
            let settings = GroupSettings.Changes(editSettingsPermission: value)
            for (type, update, owner) in [
                (GroupType.work, cells.work, ownerOnly.work), (.public, cells.public, ownerOnly.public),
                (.meeting, cells.meeting, ownerOnly.meeting), (.avChatRoom, cells.av, ownerOnly.av),
                (.community, cells.public, ownerOnly.public),
            ] {
                result.append(OperationRow(operation: .updateSettings, type: type, cells: update, settings: settings))
                result.append(OperationRow(operation: .grantSettings, type: type, cells: owner, settings: settings))
                result.append(OperationRow(
                    operation: .ownerQuitSetting, type: type, cells: type == .avChatRoom ? avOwnerQuitFixed : owner,
                    settings: settings))
            }
        }
        return result
    }()

    @Test("who edits settings: type × edit_settings_permission × actor", arguments: settingsGrantCells)
    func settingsGrant(_ row: OperationRow) throws {
        try check(row)
    }

    /// `quit` under each value of `owner_quit` (AVChatRoom fixes it to `refused`).
    static let ownerQuitCells: [OperationRow] = {
        //                                   owner, admin, member, non-member, backend
        let byValue: [OwnerQuitRule: (work: [Cell], public: [Cell], meeting: [Cell])] = [
            .refused: ([oq, .na, .ok, .nf, .opReq], [oq, .ok, .ok, .nm, .opReq], [oq, .ok, .ok, .nm, .opReq]),
            .longestStandingMember: ([.ok, .na, .ok, .nf, .opReq], [.ok, .ok, .ok, .nm, .opReq],
                                     [.ok, .ok, .ok, .nm, .opReq]),
            .longestStandingAdminElseMember: ([.ok, .na, .ok, .nf, .opReq], [.ok, .ok, .ok, .nm, .opReq],
                                              [.ok, .ok, .ok, .nm, .opReq]),
        ]
        var result: [OperationRow] = []
        for value in OwnerQuitRule.allCases {
            let cells = byValue[value]!
            let settings = GroupSettings.Changes(ownerQuit: value)
            result.append(OperationRow(operation: .quit, type: .work, cells: cells.work, settings: settings))
            result.append(OperationRow(operation: .quit, type: .public, cells: cells.public, settings: settings))
            result.append(OperationRow(operation: .quit, type: .meeting, cells: cells.meeting, settings: settings))
            result.append(OperationRow(operation: .quit, type: .community, cells: cells.public, settings: settings))
        }
        result.append(OperationRow(operation: .quit, type: .avChatRoom, cells: [oq, .na, .ok, .nm, .opReq],
                                   settings: .init(ownerQuit: .refused)))
        return result
    }()

    @Test("what an owner's quit does: type × owner_quit × actor", arguments: ownerQuitCells)
    func ownerQuit(_ row: OperationRow) throws {
        try check(row)
    }

    @Test("who inherits: the longest-standing member, or the longest-standing admin first", arguments: [
        (OwnerQuitRule.longestStandingMember, true, Cast.admin),
        (.longestStandingAdminElseMember, true, Cast.member2),
        (.longestStandingMember, false, Cast.admin),
        (.longestStandingAdminElseMember, false, Cast.admin),
    ])
    func heir(rule: OwnerQuitRule, withAdmin: Bool, expected: String) throws {
        // Public, join order: owner, admin, admin2, member, member2. Both admins step down, so
        // the longest-standing member is `admin`; then `member2` (joined last) becomes the one admin.
        var m = try fixture(.public, settings: .init(ownerQuit: rule))
        for user in [Cast.admin, Cast.admin2] {
            m.apply(try GroupRules.planRoleChange(
                of: user, to: .member, in: m.group, by: m.op(Cast.owner), target: m.members[user], limits: fixtureLimits))
        }
        if withAdmin {
            m.apply(try GroupRules.planRoleChange(
                of: Cast.member2, to: .admin, in: m.group, by: m.op(Cast.owner), target: m.members[Cast.member2],
                limits: fixtureLimits))
        }
        let plan = try GroupRules.planQuit(
            m.group, by: m.op(Cast.owner), successor: m.successor(excluding: Cast.owner),
            longestStandingAdmin: m.successorAdmin(excluding: Cast.owner), now: now)
        #expect(plan.newOwnerID == expected)
        m.apply(plan.change)
        #expect(m.group.ownerID == expected && m.members[expected]?.role == .owner)
        checkInvariants(m, "\(rule) heir")
    }

    @Test("a setting the type fixes cannot be changed, by anyone", arguments: [
        (GroupType.work, GroupSettings.Changes(joinOption: .approval), "join_option"),
        (.meeting, .init(invitePermission: .everyone), "invite_permission"),
        (.meeting, .init(inviteeMustAccept: true), "invitee_must_accept"),
        (.avChatRoom, .init(removeMembersPermission: .owner), "remove_members_permission"),
        (.avChatRoom, .init(joinApprovers: .ownerAndAdmins), "join_approvers"),
        (.avChatRoom, .init(ownerQuit: .longestStandingMember), "owner_quit"),
        (.avChatRoom, .init(ownerQuit: .longestStandingAdminElseMember), "owner_quit"),
    ])
    func fixedByType(type: GroupType, changes: GroupSettings.Changes, setting: String) throws {
        let memory = try fixture(type)
        for user in [Cast.owner, nil] {
            let error = try #require(groupError {
                _ = try GroupRules.planSettingsUpdate(changes, of: memory.group, by: memory.op(user),
                                                      limits: fixtureLimits, now: now)
            })
            #expect(error.code == .failedPrecondition)
            #expect(error.reason == .settingFixedByType)
            #expect(error.metadata["setting"] == setting)
        }
        // Sending the value the type fixes is a no-op, not an error.
        let same = GroupRules.apply(type.preset.defaultSettings, keys: changes)
        let change = try GroupRules.planSettingsUpdate(same, of: memory.group, by: memory.op(Cast.owner),
                                                       limits: fixtureLimits, now: now)
        #expect(change.isEmpty)
    }
}

extension GroupRules {
    /// The type's current values for the keys `changes` names (test helper).
    static func apply(_ settings: GroupSettings, keys changes: GroupSettings.Changes) -> GroupSettings.Changes {
        GroupSettings.Changes(
            joinOption: changes.joinOption.map { _ in settings.joinOption },
            joinApprovers: changes.joinApprovers.map { _ in settings.joinApprovers },
            invitePermission: changes.invitePermission.map { _ in settings.invitePermission },
            inviteeMustAccept: changes.inviteeMustAccept.map { _ in settings.inviteeMustAccept },
            invitationNeedsApproval: changes.invitationNeedsApproval.map { _ in settings.invitationNeedsApproval },
            removeMembersPermission: changes.removeMembersPermission.map { _ in settings.removeMembersPermission },
            editProfilePermission: changes.editProfilePermission.map { _ in settings.editProfilePermission },
            editMemberInfoPermission: changes.editMemberInfoPermission.map { _ in settings.editMemberInfoPermission },
            editSettingsPermission: changes.editSettingsPermission.map { _ in settings.editSettingsPermission },
            ownerQuit: changes.ownerQuit.map { _ in settings.ownerQuit })
    }
}
