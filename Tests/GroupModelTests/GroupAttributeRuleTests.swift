import GroupModel
import Testing

/// Outcomes per actor, in the order owner, admin, member, non-member, backend; `nil` = allowed.
private let attributeActors: [ActingRole] = [.owner, .admin, .member, .nonMember, .backend]

private func attributeCheck(_ action: GroupAction, _ type: GroupType, _ expected: [GroupError.Reason?]) {
    for (actor, reason) in zip(attributeActors, expected) {
        let decision = GroupRules.authorize(action, type: type, settings: type.preset.defaultSettings, actor: actor)
        #expect(decision.error?.reason == reason, "\(action) on \(type) by \(actor)")
    }
}

/// One type's expected outcomes.
struct AttributePermissionRow: Sendable, CustomStringConvertible {
    var type: GroupType
    var outcomes: [GroupError.Reason?]
    init(_ type: GroupType, _ outcomes: [GroupError.Reason?]) {
        self.type = type
        self.outcomes = outcomes
    }
    var description: String { "\(self.type)" }
}

@Suite("Permissions: group attributes and counters, every type × actor")
struct AttributePermissionTests {
    static let readRows: [AttributePermissionRow] = [
        AttributePermissionRow(.work, [nil, nil, nil, .groupNotFound, nil]),
        AttributePermissionRow(.public, [nil, nil, nil, .notAMember, nil]),
        AttributePermissionRow(.meeting, [nil, nil, nil, .notAMember, nil]),
        AttributePermissionRow(.avChatRoom, [nil, nil, nil, .notAMember, nil]),
    ]

    static let writeRows: [AttributePermissionRow] = [
        AttributePermissionRow(.work, [nil, nil, nil, .groupNotFound, nil]),
        AttributePermissionRow(.public, [nil, nil, nil, .notAMember, nil]),
        AttributePermissionRow(.meeting, [nil, nil, nil, .notAMember, nil]),
        AttributePermissionRow(.avChatRoom, [nil, nil, .permissionDenied, .notAMember, nil]),
    ]

    @Test("read: every member and the backend; a Work group is hidden from non-members", arguments: readRows)
    func read(_ row: AttributePermissionRow) {
        attributeCheck(.readAttributes, row.type, row.outcomes)
    }

    @Test("write: every member and the backend; an AVChatRoom's owner and admins only", arguments: writeRows)
    func write(_ row: AttributePermissionRow) {
        attributeCheck(.writeAttributes, row.type, row.outcomes)
    }

    @Test("the writers of each type")
    func writers() {
        #expect(GroupRules.attributeWriters(for: .avChatRoom) == .ownerAndAdmins)
        for type in [GroupType.work, .public, .meeting] { #expect(GroupRules.attributeWriters(for: type) == .everyone) }
    }
}

@Suite("Group attribute and counter plans")
struct GroupAttributeRuleTests {
    let now = Timestamp(millisecondsSince1970: 1_000)
    let limits = AppLimits.defaults

    func group(_ type: GroupType = .public, sequence: Int64 = 7) -> Group {
        Group(appID: "app", id: "g", type: type, name: "g", settings: type.preset.defaultSettings, ownerID: "o",
              maxMembers: nil, createdAt: now, updatedAt: now, latestSequence: sequence)
    }

    let member = GroupOperator.user("m", membership: Member(userID: "m", role: .member, joinedAt: Timestamp(millisecondsSince1970: 0)))

    func attribute(_ key: String, _ version: Int64, _ value: [UInt8] = [1]) -> GroupAttribute {
        GroupAttribute(key: key, value: value, version: version, updatedAt: now, updatedBy: "o")
    }

    @Test("expected_version: 0 none, -1 absent, n a version, below -1 refused naming the field")
    func conditions() throws {
        #expect(try AttributeCondition(expectedVersion: 0, field: "f") == .none)
        #expect(try AttributeCondition(expectedVersion: -1, field: "f") == .absent)
        #expect(try AttributeCondition(expectedVersion: 9, field: "f") == .version(9))
        let error = groupError { _ = try AttributeCondition(expectedVersion: -2, field: "attributes[0].expected_version") }
        #expect(error?.metadata["field"] == "attributes[0].expected_version")
        #expect(AttributeCondition.absent.holds(for: nil) && !AttributeCondition.absent.holds(for: attribute("k", 1)))
        #expect(AttributeCondition.version(1).holds(for: attribute("k", 1)) && !AttributeCondition.version(1).holds(for: nil))
    }

    @Test("a set writes every key at the next sequence, with one event naming keys and versions")
    func set() throws {
        let change = try GroupRules.planSetAttributes(
            group(), by: member, current: ["a": attribute("a", 3)],
            writes: [AttributeWrite(key: "a", value: [2], condition: .version(3)), AttributeWrite(key: "b", value: [], condition: .absent)],
            limits: limits, now: now)
        #expect(change.upserts.map(\.version) == [8, 8])
        #expect(change.upserts.map(\.updatedBy) == ["m", "m"])
        #expect(change.events.count == 1)
        #expect(change.events[0].kind == .groupAttributesChanged && change.events[0].recipient == .group)
        #expect(change.events[0].changes == ["set:a": "8", "set:b": "8"])
    }

    @Test("a condition that fails aborts the whole call, naming the first failing key")
    func mismatch() {
        let error = groupError {
            _ = try GroupRules.planSetAttributes(
                group(), by: member, current: ["a": attribute("a", 3)],
                writes: [AttributeWrite(key: "b", value: [], condition: .absent),
                         AttributeWrite(key: "a", value: [], condition: .version(2))],
                limits: limits, now: now)
        }
        #expect(error?.code == .aborted && error?.reason == .attributeVersionMismatch)
        #expect(error?.metadata == ["key": "a", "expected_version": "2", "current_version": "3"])
    }

    @Test("limits: keys per call and per group, bytes per group, key length, duplicates")
    func limitsAndInput() {
        var small = limits
        small.maxGroupAttributeKeys = 2
        small.groupAttributeBytes = 4
        small.groupAttributeKeyBytes = 3
        let current = ["a": attribute("a", 1, [1])]
        func set(_ writes: [AttributeWrite]) -> GroupError? {
            groupError { _ = try GroupRules.planSetAttributes(group(), by: member, current: current, writes: writes, limits: small, now: now) }
        }
        #expect(set([AttributeWrite(key: "b", value: [1, 2, 3])])?.reason == .groupAttributesFull)
        #expect(set([AttributeWrite(key: "b", value: [1, 2, 3])])?.metadata["limit_name"] == "group_attribute_bytes")
        #expect(set([AttributeWrite(key: "b", value: []), AttributeWrite(key: "c", value: [])])?.metadata["limit_name"] == "max_group_attribute_keys")
        #expect(set([])?.metadata["field"] == "attributes")
        #expect(set([AttributeWrite(key: "long", value: [])])?.metadata["field"] == "attributes[0].key")
        #expect(set([AttributeWrite(key: "b", value: []), AttributeWrite(key: "b", value: [])])?.metadata["field"] == "attributes[1].key")
        #expect(set([AttributeWrite(key: "", value: [])])?.reason == .invalidArgument)
        #expect(set([AttributeWrite(key: "a", value: [9])]) == nil)
    }

    @Test("a deletion skips absent keys; with none present it writes nothing")
    func delete() throws {
        let current = ["a": attribute("a", 2)]
        let change = try GroupRules.planDeleteAttributes(
            group(), by: member, current: current,
            deletions: [AttributeDeletion(key: "a", condition: .version(2)), AttributeDeletion(key: "z")], limits: limits)
        #expect(change.deletions == ["a"] && change.events.first?.changes == ["deleted:a": ""])
        let none = try GroupRules.planDeleteAttributes(
            group(), by: member, current: current, deletions: [AttributeDeletion(key: "z")], limits: limits)
        #expect(none.isEmpty)
        let error = groupError {
            _ = try GroupRules.planDeleteAttributes(
                group(), by: member, current: current, deletions: [AttributeDeletion(key: "z", condition: .version(1))],
                limits: limits)
        }
        #expect(error?.reason == .attributeVersionMismatch)
    }

    @Test("counters add from 0, refuse overflow and the per-group limit, write no event")
    func counters() throws {
        let change = try GroupRules.planIncrementCounters(
            group(), by: member, current: ["a": 5], deltas: ["a": -7, "b": 3], limits: limits)
        #expect(change.counters == ["a": -2, "b": 3] && change.events.isEmpty)
        let overflow = groupError {
            _ = try GroupRules.planIncrementCounters(group(), by: member, current: ["a": .max], deltas: ["a": 1], limits: limits)
        }
        #expect(overflow?.code == .outOfRange && overflow?.reason == .counterOverflow && overflow?.metadata["key"] == "a")
        var small = limits
        small.maxGroupCounters = 1
        let full = groupError {
            _ = try GroupRules.planIncrementCounters(group(), by: member, current: ["a": 1], deltas: ["b": 1], limits: small)
        }
        #expect(full?.code == .failedPrecondition && full?.reason == .groupCountersFull)
        #expect(groupError { _ = try GroupRules.planIncrementCounters(group(), by: member, current: [:], deltas: [:], limits: limits) }?
            .metadata["field"] == "deltas")
        let viewer = groupError {
            _ = try GroupRules.planIncrementCounters(group(.avChatRoom), by: member, current: [:], deltas: ["a": 1], limits: limits)
        }
        #expect(viewer?.reason == .permissionDenied)
    }
}
