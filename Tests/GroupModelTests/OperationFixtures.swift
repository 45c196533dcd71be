import GroupModel
import Testing

/// A group and its members held in memory, with plans applied the way a store applies them.
struct MemoryGroup {
    var group: Group
    var members: [String: Member]
    var nextJoinOrder: Int64
    var retainedMutes: [String: Timestamp] = [:]
    var dismissed = false
    var events: [GroupEvent.Draft] = []

    /// From a creation plan.
    init(_ plan: GroupCreationPlan) {
        self.group = plan.group
        self.members = Dictionary(uniqueKeysWithValues: plan.members.map { ($0.userID, $0) })
        self.nextJoinOrder = Int64(plan.members.count + 1)
        self.events = plan.events
        self.group.latestSequence = Int64(plan.events.count)
    }

    /// Apply a change as the store would, in one step.
    mutating func apply(_ change: GroupChange) {
        self.group = change.group
        for var member in change.insertedMembers {
            precondition(self.members[member.userID] == nil, "inserted an existing member \(member.userID)")
            member.joinOrder = self.nextJoinOrder
            self.nextJoinOrder += 1
            self.members[member.userID] = member
            self.retainedMutes[member.userID] = nil
        }
        for member in change.updatedMembers {
            precondition(self.members[member.userID] != nil, "updated a missing member \(member.userID)")
            self.members[member.userID] = member
        }
        for userID in change.removedMembers {
            precondition(self.members[userID] != nil, "removed a missing member \(userID)")
            self.members[userID] = nil
        }
        self.retainedMutes.merge(change.retainedMutes) { _, new in new }
        self.events += change.events
        self.group.latestSequence += Int64(change.events.count)
        if change.dismissesGroup { self.dismissed = true }
    }

    /// The operator for `userID` (`nil`: the backend) with their current membership.
    func op(_ userID: String?) -> GroupOperator {
        guard let userID else { return .backend }
        return .user(userID, membership: self.members[userID])
    }

    /// The longest-standing member other than `userID`.
    func successor(excluding userID: String) -> Member? {
        self.members.values.filter { $0.userID != userID }.min { $0.joinOrder < $1.joinOrder }
    }

    /// The longest-standing admin other than `userID`.
    func successorAdmin(excluding userID: String) -> Member? {
        self.members.values.filter { $0.userID != userID && $0.role == .admin }.min { $0.joinOrder < $1.joinOrder }
    }

    /// The owner's membership.
    var owner: Member? { self.group.ownerID.flatMap { self.members[$0] } }
}

/// Fixed user ids per acting role in the fixtures.
enum Cast {
    static let owner = "owner"
    static let admin = "admin"
    static let admin2 = "admin2"
    static let member = "member"
    static let member2 = "member2"
    static let outsider = "outsider"
    static let newbie = "newbie"

    /// The user id acting with `role` (`nil`: the backend).
    static func user(_ role: ActingRole) -> String? {
        switch role {
        case .owner: owner
        case .admin: admin
        case .member: member
        case .nonMember: outsider
        case .backend: nil
        }
    }
}

let fixtureLimits = AppLimits.defaults

/// A group of `type` owned by `owner`, with `admin`/`admin2` where the type has admins and
/// ordinary `member`/`member2`; `settings` applied at creation.
func fixture(_ type: GroupType, settings: GroupSettings.Changes = .init()) throws -> MemoryGroup {
    let hasAdmins = type.preset.behaviour.allowedRoles.contains(.admin)
    var initial: [InitialMember] = []
    if type.preset.behaviour.membershipStored {
        if hasAdmins {
            initial += [InitialMember(userID: Cast.admin, role: .admin), InitialMember(userID: Cast.admin2, role: .admin)]
        }
        initial += [InitialMember(userID: Cast.member), InitialMember(userID: Cast.member2)]
    }
    let creation = try GroupRules.planCreation(
        GroupCreationRequest(type: type, groupID: "g-\(type.name)", name: "fixture", settings: settings, members: initial),
        appID: "app", creatorID: Cast.owner, limits: fixtureLimits, now: now)
    var memory = MemoryGroup(creation)
    if !type.preset.behaviour.membershipStored {
        // AVChatRoom: the audience joins by itself.
        for user in [Cast.member, Cast.member2] {
            let join = try GroupRules.planJoin(memory.group, by: memory.op(user), joinedGroupCount: 0,
                                               limits: fixtureLimits, now: now)
            memory.apply(join.change)
        }
    }
    return memory
}

/// What an operation did for one actor, reduced to what a cell of the table states.
enum CellOutcome: Equatable, CustomStringConvertible {
    case ok
    case pending
    case refused(GroupError.Reason)

    var description: String {
        switch self {
        case .ok: "ok"
        case .pending: "pending"
        case .refused(let reason): reason.rawValue
        }
    }
}

/// What a cell expects: an outcome, or "no such actor" (admins in Work and AVChatRoom).
enum Cell: Equatable, CustomStringConvertible {
    case expect(CellOutcome)
    case na

    var description: String {
        switch self {
        case .expect(let outcome): outcome.description
        case .na: "n/a"
        }
    }
}

extension Cell {
    static let ok = Cell.expect(.ok)
    static let pend = Cell.expect(.pending)
    static func no(_ reason: GroupError.Reason) -> Cell { .expect(.refused(reason)) }
    static let den = Cell.no(.permissionDenied)
    static let nm = Cell.no(.notAMember)
    static let nf = Cell.no(.groupNotFound)
    static let opReq = Cell.no(.operatorRequired)
    static let tio = Cell.no(.targetIsOwner)
    static let fixed = Cell.no(.settingFixedByType)
    static let already = Cell.no(.alreadyMember)
    static let atr = Cell.no(.adminTokenRequired)
    static let inv = Cell.no(.invalidArgument)
}

/// The outcome of running `body`: its refusal, or for batch plans the first per-user refusal.
func outcome(_ body: () throws -> CellOutcome) -> CellOutcome {
    do {
        return try body()
    } catch let error as GroupError {
        return .refused(error.reason)
    } catch {
        return .refused("UNEXPECTED")
    }
}

/// A batch plan as a cell outcome: the first user's result.
func batchOutcome(_ plan: MemberBatchPlan) -> CellOutcome {
    guard let first = plan.results.first else { return .refused("NO_RESULT") }
    switch first.outcome {
    case .success: return .ok
    case .pending: return .pending
    case .alreadyMember: return .refused(.alreadyMember)
    case .notMember: return .refused(.notAMember)
    case .failed(let error), .invalid(let error): return .refused(error.reason)
    }
}

/// A small deterministic generator (SplitMix64) for the randomized tests.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { self.state = seed }
    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The guard rails of the model, checked on a group held in memory: exactly one owner (or none,
/// only for a backend-made AVChatRoom), the owner's id on the group, the member count, roles the
/// type has, the member limit, the owner never muted, distinct join orders.
func checkInvariants(_ m: MemoryGroup, _ context: String, at time: Timestamp = now) {
    if m.dismissed {
        #expect(m.members.isEmpty, "\(context): a dismissed group keeps members")
        return
    }
    let behaviour = m.group.type.preset.behaviour
    let owners = m.members.values.filter { $0.role == .owner }
    if let ownerID = m.group.ownerID {
        #expect(owners.map(\.userID) == [ownerID], "\(context): owners \(owners.map(\.userID)) vs \(ownerID)")
    } else {
        #expect(owners.isEmpty, "\(context): owner rows without ownerID")
        #expect(behaviour.ownerlessCreationAllowed, "\(context): a \(m.group.type) group without owner")
    }
    #expect(m.group.memberCount == m.members.count, "\(context): memberCount \(m.group.memberCount) vs \(m.members.count)")
    for member in m.members.values {
        #expect(behaviour.allowedRoles.contains(member.role), "\(context): \(member.userID) is \(member.role)")
        if member.role == .owner {
            #expect(!member.isMuted(at: time), "\(context): the owner is muted")
        }
    }
    if let max = m.group.maxMembers {
        #expect(m.members.count <= max, "\(context): \(m.members.count) members over \(max)")
    }
    #expect(Set(m.members.values.map(\.joinOrder)).count == m.members.count, "\(context): join orders repeat")
}
