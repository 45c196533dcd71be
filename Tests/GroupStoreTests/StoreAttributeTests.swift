import GroupModel
@testable import GroupStore
import GroupTestSupport
import Testing

private let t0 = Timestamp(millisecondsSince1970: 1_700_000_000_000)

@discardableResult
private func create(_ store: Store, _ id: String) async throws -> Group {
    let request = GroupCreationRequest(type: .public, groupID: id, name: "team", members: [InitialMember(userID: "bob")])
    let plan = try GroupRules.planCreation(request, appID: "app", creatorID: "alice", limits: .defaults, now: t0)
    return try await store.createGroup(plan).value
}

private func set(_ store: Store, _ id: String, by user: String?, _ writes: [AttributeWrite]) async throws -> [GroupAttribute] {
    try await store.mutateAttributes(app: "app", groupID: id, operatorID: user, at: t0) { snapshot, stored in
        let op = GroupOperator(userID: user, membership: snapshot.operatorMembership)
        let change = try GroupRules.planSetAttributes(
            snapshot.group, by: op, current: stored.attributes, writes: writes, limits: .defaults, now: t0)
        return (change, change.upserts)
    }.value
}

private func increment(_ store: Store, _ id: String, _ deltas: [String: Int64]) async throws -> [String: Int64] {
    try await store.mutateAttributes(app: "app", groupID: id, operatorID: "bob", at: t0) { snapshot, stored in
        let change = try GroupRules.planIncrementCounters(
            snapshot.group, by: GroupOperator(userID: "bob", membership: snapshot.operatorMembership),
            current: stored.counters, deltas: deltas, limits: .defaults)
        return (change, change.counters)
    }.value
}

@Suite("Store conformance: group attributes and counters")
struct StoreAttributeTests {
    @Test("attributes are written with their event, read back, replaced and deleted", arguments: StoreKind.allCases)
    func roundTrip(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        let group = try await create(store, "g1")
        let written = try await set(store, "g1", by: "bob", [
            AttributeWrite(key: "a", value: [0, 1, 255]), AttributeWrite(key: "b", value: [], condition: .absent),
        ])
        #expect(written.map(\.version) == [group.latestSequence + 1, group.latestSequence + 1])
        let read = try await store.attributes(app: "app", groupID: "g1")
        #expect(read.attributes == Dictionary(uniqueKeysWithValues: written.map { ($0.key, $0) }))
        #expect(read.counters.isEmpty)
        let events = try await store.events(app: "app", groupID: "g1", after: group.latestSequence, limit: 10)
        #expect(events.map(\.kind) == [.groupAttributesChanged])
        #expect(events.first?.changes == ["set:a": String(group.latestSequence + 1), "set:b": String(group.latestSequence + 1)])
        #expect(try await store.groups(app: "app", ids: ["g1"])["g1"]?.latestSequence == group.latestSequence + 1)

        let replaced = try await set(store, "g1", by: nil, [AttributeWrite(key: "a", value: [7], condition: .version(written[0].version))])
        #expect(replaced[0].version == group.latestSequence + 2 && replaced[0].updatedBy == nil)
        _ = try await store.mutateAttributes(app: "app", groupID: "g1", operatorID: "bob", at: t0) { snapshot, stored in
            let change = try GroupRules.planDeleteAttributes(
                snapshot.group, by: GroupOperator(userID: "bob", membership: snapshot.operatorMembership),
                current: stored.attributes, deletions: [AttributeDeletion(key: "b")], limits: .defaults)
            return (change, ())
        }
        let after = try await store.attributes(app: "app", groupID: "g1")
        #expect(after.attributes == ["a": replaced[0]])
    }

    @Test("a refused plan writes nothing", arguments: StoreKind.allCases)
    func refused(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        let group = try await create(store, "g1")
        _ = try await set(store, "g1", by: "bob", [AttributeWrite(key: "a", value: [1])])
        await #expect(throws: GroupError.self) {
            _ = try await set(store, "g1", by: "bob", [AttributeWrite(key: "c", value: [3]), AttributeWrite(key: "a", value: [2], condition: .absent)])
        }
        #expect(try await store.attributes(app: "app", groupID: "g1").attributes.keys.sorted() == ["a"])
        #expect(try await store.events(app: "app", groupID: "g1", after: group.latestSequence, limit: 10).count == 1)
    }

    @Test("concurrent increments are exact; counters emit no event", arguments: StoreKind.allCases)
    func counters(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        let group = try await create(store, "g1")
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            for _ in 0..<50 { tasks.addTask { _ = try await increment(store, "g1", ["n": 1, "m": -2]) } }
            try await tasks.waitForAll()
        }
        #expect(try await store.attributes(app: "app", groupID: "g1").counters == ["n": 50, "m": -100])
        #expect(try await store.events(app: "app", groupID: "g1", after: group.latestSequence, limit: 10).isEmpty)
    }

    @Test("a missing group is GROUP_NOT_FOUND", arguments: StoreKind.allCases)
    func missing(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        await #expect(throws: GroupError.groupNotFound("nope")) { _ = try await temporary.store.attributes(app: "app", groupID: "nope") }
        await #expect(throws: GroupError.groupNotFound("nope")) { _ = try await increment(temporary.store, "nope", ["n": 1]) }
    }
}
