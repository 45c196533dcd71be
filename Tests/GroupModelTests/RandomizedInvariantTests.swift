import GroupModel
import Testing

/// One randomized run: a group type (ownerless: an AVChatRoom the backend made without owner) and
/// a seed.
struct RandomRun: Sendable, CustomStringConvertible {
    var type: GroupType
    var ownerless: Bool
    var seed: UInt64
    var steps: Int

    var description: String { "\(self.type)\(self.ownerless ? " (ownerless)" : "") seed \(self.seed)" }
}

/// The operations a random step may try.
private enum Step: Int, CaseIterable {
    case join, quit, invite, kick, transfer, setRole, muteMember, muteGroup, profile, settings, memberInfo
    case receiveOption, dismiss
}

@Suite("Randomized operation sequences keep the guard rails")
struct RandomizedInvariantTests {
    static let runs: [RandomRun] =
        GroupType.allCases.flatMap { type in
            [0x5EED_0001, 0xC0FF_EE42].map { RandomRun(type: type, ownerless: false, seed: $0 ^ UInt64(type.name.utf8.count), steps: 3000) }
        }
        + [RandomRun(type: .avChatRoom, ownerless: true, seed: 0xA11C_E5ED, steps: 3000)]

    static let users = (0..<10).map { "u\($0)" }

    static func limits(_ type: GroupType) -> AppLimits {
        var limits = AppLimits.defaults
        limits.maxMembers[type] = 6
        limits.maxUsersPerBatch = 4
        limits.maxGroupsPerUser = 3
        return limits
    }

    /// A fresh group for a run: owner `u0` (or none), settings drawn at random.
    static func freshGroup(_ run: RandomRun, index: Int, rng: inout SplitMix64, at time: Timestamp) throws -> MemoryGroup {
        let preset = run.type.preset
        var settings = GroupSettings.Changes()
        if !preset.fixedSettings.contains(.joinOption) { settings.joinOption = JoinOption.allCases.randomElement(using: &rng) }
        if !preset.fixedSettings.contains(.removeMembersPermission) {
            settings.removeMembersPermission = OperationPermission.allCases.randomElement(using: &rng)
        }
        if !preset.fixedSettings.contains(.invitePermission) {
            settings.invitePermission = OperationPermission.allCases.randomElement(using: &rng)
        }
        if !preset.fixedSettings.contains(.inviteeMustAccept) { settings.inviteeMustAccept = Bool.random(using: &rng) }
        settings.editMemberInfoPermission = MemberInfoEditPermission.allCases.randomElement(using: &rng)
        let initial = run.type.preset.behaviour.membershipStored
            ? Array(users[1...Int.random(in: 1...4, using: &rng)]).map { InitialMember(userID: $0) }
            : []
        let plan = try GroupRules.planCreation(
            GroupCreationRequest(type: run.type, groupID: "r\(index)", name: "random", settings: settings,
                                 ownerID: run.ownerless ? nil : "u0", members: initial),
            appID: "app", creatorID: run.ownerless ? nil : "u0", limits: limits(run.type), now: time)
        return MemoryGroup(plan)
    }

    @Test("exactly one owner, nobody promotes themselves, counts and limits hold, after every step",
          arguments: runs)
    func randomSequence(_ run: RandomRun) throws {
        var rng = SplitMix64(seed: run.seed)
        let limits = Self.limits(run.type)
        var time = now
        var groups = 0
        var m = try Self.freshGroup(run, index: groups, rng: &rng, at: time)
        let joinedElsewhere = ["u9": limits.maxGroupsPerUser, "u8": limits.maxGroupsPerUser - 1]
        var successes: [Step: Int] = [:]
        var refusals: [String: Int] = [:]

        for stepIndex in 0..<run.steps {
            if m.dismissed {
                groups += 1
                m = try Self.freshGroup(run, index: groups, rng: &rng, at: time)
            }
            if Int.random(in: 0..<4, using: &rng) == 0 { time = time.adding(seconds: Int64.random(in: 1...400, using: &rng)) }
            // Mostly current members (so that most steps get past the permission check), some
            // outsiders, some backend calls.
            let roll = Int.random(in: 0..<8, using: &rng)
            let actorID: String? = roll == 0 ? nil
                : roll < 5 ? (m.members.keys.sorted().randomElement(using: &rng) ?? "u1")
                : Self.users.randomElement(using: &rng)!
            let op = m.op(actorID)
            let step = Step.allCases.randomElement(using: &rng)!
            let someUsers = (0..<Int.random(in: 1...3, using: &rng)).map { _ in Self.users.randomElement(using: &rng)! }
            let target = Self.users.randomElement(using: &rng)!
            let before = m
            let context = "\(run) step \(stepIndex): \(step) by \(op)"

            do {
                let change: GroupChange
                switch step {
                case .join:
                    change = try GroupRules.planJoin(
                        m.group, by: op, joinedGroupCount: actorID.flatMap { joinedElsewhere[$0] } ?? 0, limits: limits,
                        now: time, retainedMute: actorID.flatMap { m.retainedMutes[$0] }).change
                case .quit:
                    change = try GroupRules.planQuit(
                        m.group, by: op, options: QuitOptions(keepMuteStatus: Bool.random(using: &rng)),
                        successor: m.successor(excluding: actorID ?? ""), now: time).change
                case .invite:
                    change = try GroupRules.planInvitation(
                        of: someUsers, to: m.group, by: op, memberships: m.members, joinedGroupCounts: joinedElsewhere,
                        limits: limits, now: time, retainedMutes: m.retainedMutes).change
                case .kick:
                    change = try GroupRules.planKick(
                        of: someUsers, from: m.group, by: op, memberships: m.members,
                        options: QuitOptions(keepMuteStatus: Bool.random(using: &rng)), limits: limits, now: time).change
                case .transfer:
                    change = try GroupRules.planOwnershipTransfer(
                        of: m.group, to: target, by: op, newOwner: m.members[target], currentOwner: m.owner,
                        quit: actorID != nil && Bool.random(using: &rng), limits: limits, now: time)
                case .setRole:
                    change = try GroupRules.planRoleChange(
                        of: target, to: MemberRole.allCases.randomElement(using: &rng)!, in: m.group, by: op,
                        target: m.members[target], limits: limits)
                case .muteMember:
                    change = try GroupRules.planMemberMute(
                        of: someUsers, for: [0, 30, 600].randomElement(using: &rng)!, in: m.group, by: op,
                        memberships: m.members, limits: limits, now: time).change
                case .muteGroup:
                    let modes: [GroupMuteMode] = [.none, .all, .ordinaryMembers, .roles([.member]), .roles([.owner, .member])]
                    change = try GroupRules.planGroupMute(
                        modes.randomElement(using: &rng)!, for: [0, 60].randomElement(using: &rng)!, of: m.group, by: op,
                        now: time)
                case .profile:
                    change = try GroupRules.planProfileUpdate(
                        ProfileUpdate(name: "n\(Int.random(in: 0..<3, using: &rng))"), of: m.group, by: op,
                        limits: limits, now: time)
                case .settings:
                    var changes = GroupSettings.Changes()
                    switch Int.random(in: 0..<4, using: &rng) {
                    case 0: changes.joinOption = JoinOption.allCases.randomElement(using: &rng)
                    case 1: changes.removeMembersPermission = OperationPermission.allCases.randomElement(using: &rng)
                    case 2: changes.invitePermission = OperationPermission.allCases.randomElement(using: &rng)
                    default: changes.editMemberInfoPermission = MemberInfoEditPermission.allCases.randomElement(using: &rng)
                    }
                    change = try GroupRules.planSettingsUpdate(changes, of: m.group, by: op, limits: limits, now: time)
                case .memberInfo:
                    let who: String? = Bool.random(using: &rng) ? nil : target
                    change = try GroupRules.planMemberInfoUpdate(
                        MemberInfoUpdate(nameCard: "c\(Int.random(in: 0..<3, using: &rng))"), of: who, in: m.group,
                        by: op, target: who.flatMap { m.members[$0] }, limits: limits, now: time)
                case .receiveOption:
                    change = try GroupRules.planReceiveOption(
                        ReceiveOption.allCases.randomElement(using: &rng)!, in: m.group, by: op)
                case .dismiss:
                    guard Int.random(in: 0..<10, using: &rng) == 0 else { continue }
                    let events = try GroupRules.planDismissal(of: m.group, by: op.role, operatorID: actorID)
                    #expect(events.map(\.kind) == [.groupDismissed], "\(context)")
                    successes[step, default: 0] += 1
                    m.dismissed = true
                    m.members = [:]
                    continue
                }
                successes[step, default: 0] += 1
                m.apply(change)
            } catch let error as GroupError {
                #expect(error.code != .internal, "\(context): \(error)")
                #expect(!error.message.isEmpty, "\(context)")
                refusals[error.reason.rawValue, default: 0] += 1
                #expect(m == before, "\(context): a refusal changed state")
                continue
            }

            checkInvariants(m, context, at: time)
            // Nobody promotes themselves.
            if let actorID, let was = before.members[actorID], let after = m.members[actorID] {
                #expect(after.role.rank <= was.role.rank, "\(context): \(actorID) went from \(was.role) to \(after.role)")
            }
            // Every state change comes with its events.
            let stateChanged = m.group != before.group.withSequence(m.group.latestSequence)
                || m.members != before.members || m.dismissed != before.dismissed
            if stateChanged {
                #expect(m.events.count > before.events.count, "\(context): a change without events")
            }
        }

        // The run exercised the operations the type allows.
        var expected: [Step] = [.quit, .muteMember, .muteGroup, .profile, .settings, .memberInfo, .receiveOption]
        if run.type != .work { expected.append(.join) }  // Work: invitation only
        if run.type != .avChatRoom { expected += [.invite, .kick, .transfer] }
        if run.type == .public || run.type == .meeting { expected.append(.setRole) }
        for step in expected {
            #expect(successes[step, default: 0] > 0, "\(run): \(step) never succeeded; refusals \(refusals)")
        }
        #expect(refusals.count >= 4, "\(run): too few kinds of refusal \(refusals)")
    }
}

extension MemoryGroup: Equatable {
    static func == (lhs: MemoryGroup, rhs: MemoryGroup) -> Bool {
        lhs.group == rhs.group && lhs.members == rhs.members && lhs.nextJoinOrder == rhs.nextJoinOrder
            && lhs.retainedMutes == rhs.retainedMutes && lhs.dismissed == rhs.dismissed && lhs.events == rhs.events
    }
}

extension Group {
    /// The group with `latestSequence` replaced (to compare states regardless of the event count).
    func withSequence(_ sequence: Int64) -> Group {
        var copy = self
        copy.latestSequence = sequence
        return copy
    }
}
