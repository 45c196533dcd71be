import GroupModel
@testable import GroupStore
@testable import GroupStorePostgres
@testable import GroupStoreSQL
@testable import GroupStoreSQLite
import GroupTestSupport
import Synchronization
import Testing

private let t0 = Timestamp(millisecondsSince1970: 1_700_000_000_000)

private struct InjectedFault: Error {}

/// A creation plan for `id` in `app-a` by `alice`, with `members` as ordinary members.
private func creation(
    _ id: String, type: GroupType = .public, owner: String? = "alice", members: [String] = [],
    name: String = "team", custom: [String: [UInt8]] = [:]
) throws -> GroupCreationPlan {
    var request = GroupCreationRequest(
        type: type, groupID: id, name: name, introduction: "intro", notification: "notice",
        faceURL: "https://x/a.png", members: members.map { InitialMember(userID: $0) })
    request.custom = custom
    return try GroupRules.planCreation(request, appID: "app-a", creatorID: owner, limits: .defaults, now: t0)
}

/// Dismissal by the backend, as the service wires it.
private func dismiss(_ store: Store, _ id: String, by user: String? = nil) async throws {
    _ = try await store.dismissGroup(app: "app-a", groupID: id, operatorID: user, at: t0.adding(seconds: 1)) {
        group, membership in
        try GroupRules.planDismissal(
            of: group, by: ActingRole(isBackend: user == nil, role: membership?.role), operatorID: user)
    }
}

/// The group as `createGroup` committed it (what every read must return).
private func created(_ store: Store, _ plan: GroupCreationPlan) async throws -> Group {
    try await store.createGroup(plan).value
}

/// What the tasks of the race test share.
private final class RaceState: Sendable {
    /// Groups whose dismissal has returned.
    let dismissed = Mutex<Set<String>>([])
    /// Groups created during the run, as committed.
    let createdLater = Mutex<[String: Group]>([:])
    let writersDone = Mutex(false)
    let violations = Mutex<[String]>([])
}

@Suite("Group cache (SQLite backend) and migration v2")
struct GroupCacheTests {
    @Test("a cache hit returns what the database returns, without reading it")
    func hitMatchesDatabase() async throws {
        let temporary = try await temporaryStore()
        let store = temporary.store
        var expected: [String: Group] = [:]
        expected["c"] = try await created(store, try creation("c", members: ["bob"], custom: ["k": [0, 1, 255], "e": []]))
        expected["p"] = try await created(store, try creation("p", type: .work, members: ["bob", "carol"]))
        expected["live"] = try await created(store, try creation("live", type: .avChatRoom, owner: nil))
        let ids = ["c", "p", "live"]

        let first = try await store.groups(app: "app-a", ids: ids)
        #expect(first == expected)
        let afterMiss = store.cacheStatistics()
        #expect(afterMiss.count == 3)

        let second = try await store.groups(app: "app-a", ids: ids + ["c"])
        let single = try await store.groups(app: "app-a", ids: ["c"])
        let afterHits = store.cacheStatistics()
        #expect(afterHits.hits == afterMiss.hits + 2)
        #expect(afterHits.misses == afterMiss.misses)
        #expect(second == expected)
        #expect(single == ["c": expected["c"]!])
        #expect(single["c"]?.custom == ["k": [0, 1, 255], "e": []])

        // The same file read by a store without cache.
        let uncached = Store(backend: try await SQLiteBackend.open(path: temporary.path), cacheCapacity: 0)
        #expect(try await uncached.groups(app: "app-a", ids: ids) == second)
        #expect(uncached.cacheStatistics().count == 0)
        try await uncached.close()

        // An id that is not there sends the batch to the database; the answer is the same.
        #expect(try await store.groups(app: "app-a", ids: ids + ["missing"]) == expected)
        // Another app never sees the records.
        #expect(try await store.groups(app: "app-b", ids: ids).isEmpty)
        try await store.close()
    }

    @Test("a dismissed group is absent as soon as dismissal returns; a refused one stays cached")
    func dismissInvalidates() async throws {
        try await withTemporaryStore { store in
            let kept = try await created(store, try creation("kept", members: ["bob"]))
            _ = try await created(store, try creation("gone", members: ["bob"]))
            #expect(try await store.groups(app: "app-a", ids: ["kept", "gone"]).count == 2)
            #expect(try await store.memberships(app: "app-a", userID: "bob", groupIDs: ["gone"]).count == 1)

            try await dismiss(store, "gone")
            #expect(try await store.groups(app: "app-a", ids: ["gone"]).isEmpty)
            #expect(try await store.groups(app: "app-a", ids: ["kept", "gone"]) == ["kept": kept])
            #expect(try await store.memberships(app: "app-a", userID: "bob", groupIDs: ["gone"]).isEmpty)

            // Refused by the rule (bob is an ordinary member): the transaction rolls back, the
            // record stays cached and is served from memory.
            let before = store.cacheStatistics()
            await #expect(throws: GroupError.self) { try await dismiss(store, "kept", by: "bob") }
            #expect(try await store.groups(app: "app-a", ids: ["kept"]) == ["kept": kept])
            #expect(store.cacheStatistics().hits == before.hits + 1)
        }
    }

    @Test("a write that rolls back after changing the row leaves the cache as it was")
    func rollbackLeavesCacheUnchanged() async throws {
        try await withTemporaryStore { store in
            let group = try await created(store, try creation("g1", members: ["bob"]))
            #expect(try await store.groups(app: "app-a", ids: ["g1"]) == ["g1": group])

            // The dismissal's UPDATE and events run, then the transaction fails before COMMIT.
            store.injectFault { method in if method == "dismissGroup" { throw InjectedFault() } }
            let before = store.cacheStatistics()
            await #expect(throws: GroupError.self) { try await dismiss(store, "g1") }
            #expect(store.cacheStatistics().count == before.count)
            #expect(try await store.groups(app: "app-a", ids: ["g1"]) == ["g1": group])
            let afterRollback = store.cacheStatistics()
            #expect(afterRollback.hits == before.hits + 1)
            #expect(afterRollback.misses == before.misses)
            #expect(try await store.events(app: "app-a", groupID: "g1", after: 0, limit: 10).count == 1)

            // A create of the same id fails on the unique key and rolls back: still a hit.
            store.injectFault(nil)
            await #expect(throws: GroupError.self) { _ = try await store.createGroup(try creation("g1", name: "other")) }
            #expect(try await store.groups(app: "app-a", ids: ["g1"]) == ["g1": group])
            #expect(store.cacheStatistics().hits == afterRollback.hits + 1)

            // The fault cleared, the dismissal commits and the record goes.
            try await dismiss(store, "g1")
            #expect(try await store.groups(app: "app-a", ids: ["g1"]).isEmpty)
            #expect(store.cacheStatistics().count == 0)
        }
    }

    @Test("reads racing many writes never return a group after its dismissal returned")
    func concurrentReadsAreNeverStale() async throws {
        try await withTemporaryStore(durability: .normal) { store in
            let count = 120
            var expected: [String: Group] = [:]
            for i in 0..<count {
                let id = "g\(i)"
                expected[id] = try await created(
                    store, try creation(id, members: ["bob"], custom: i % 3 == 0 ? ["n": [UInt8(i % 256)]] : [:]))
            }
            let ids = expected.keys.sorted()
            let expectedGroups = expected
            let shared = RaceState()

            try await withThrowingTaskGroup(of: Void.self) { readers in
                // 12 readers, single ids and batches, until the writers are done.
                for reader in 0..<12 {
                    readers.addTask {
                        var round = 0
                        while (!shared.writersDone.withLock({ $0 }) || round < 20) && !Task.isCancelled {
                            round += 1
                            // A read answered from the cache never suspends: let the writers run.
                            await Task.yield()
                            let gone = shared.dismissed.withLock { $0 }
                            let born = shared.createdLater.withLock { $0 }
                            let asked = reader % 2 == 0
                                ? [ids[(reader * 7 + round) % ids.count]]
                                : Array(ids.shuffled().prefix(1 + round % 8)) + Array(born.keys.prefix(2))
                            let result = try await store.groups(app: "app-a", ids: asked)
                            for id in asked {
                                let wanted = expectedGroups[id] ?? born[id]
                                if gone.contains(id) {
                                    if result[id] != nil { shared.violations.withLock { $0.append("stale \(id)") } }
                                } else if born[id] != nil {
                                    if result[id] != wanted { shared.violations.withLock { $0.append("created \(id)") } }
                                } else if let got = result[id], got != wanted {
                                    shared.violations.withLock { $0.append("wrong \(id)") }
                                }
                            }
                        }
                    }
                }
                // 4 writers, each dismissing its share of the groups and creating new ones.
                try await withThrowingTaskGroup(of: Void.self) { writers in
                    for writer in 0..<4 {
                        let mine = ids.enumerated().filter { $0.offset % 4 == writer }.map(\.element).shuffled()
                        writers.addTask {
                            for (n, id) in mine.enumerated() {
                                try await dismiss(store, id)
                                shared.dismissed.withLock { _ = $0.insert(id) }
                                let newID = "new-\(writer)-\(n)"
                                let group = try await store.createGroup(try creation(newID)).value
                                shared.createdLater.withLock { $0[newID] = group }
                            }
                        }
                    }
                    try await writers.waitForAll()
                }
                shared.writersDone.withLock { $0 = true }
                try await readers.waitForAll()
            }

            #expect(shared.violations.withLock { $0 }.isEmpty)
            // Afterwards: every original group absent, every new one present, twice (the second
            // time from the cache).
            #expect(try await store.groups(app: "app-a", ids: ids).isEmpty)
            let born = shared.createdLater.withLock { $0 }
            for _ in 0..<2 {
                for (id, group) in born {
                    #expect(try await store.groups(app: "app-a", ids: [id]) == [id: group])
                }
            }
            let hitsBefore = store.cacheStatistics().hits
            #expect(try await store.groups(app: "app-a", ids: Array(born.keys)) == born)
            #expect(store.cacheStatistics().hits == hitsBefore + 1)
        }
    }

    @Test("the cache holds at most its capacity and keeps the records it serves")
    func capacityBound() async throws {
        let directory = try TemporaryDirectory()
        let store = Store(backend: try await SQLiteBackend.open(path: directory.file("db.sqlite")), cacheCapacity: 3)
        var expected: [String: Group] = [:]
        for i in 0..<10 { expected["g\(i)"] = try await created(store, try creation("g\(i)")) }

        for i in 0..<10 {
            #expect(try await store.groups(app: "app-a", ids: ["g\(i)"]) == ["g\(i)": expected["g\(i)"]!])
            // g0 is read between every other insertion: the eviction skips it.
            #expect(try await store.groups(app: "app-a", ids: ["g0"]) == ["g0": expected["g0"]!])
            #expect(store.cacheStatistics().count <= 3)
        }
        let before = store.cacheStatistics()
        #expect(try await store.groups(app: "app-a", ids: ["g0"]) == ["g0": expected["g0"]!])
        #expect(store.cacheStatistics().hits == before.hits + 1)
        #expect(before.count == 3)

        // A batch larger than the capacity is answered in full, from the database.
        #expect(try await store.groups(app: "app-a", ids: Array(expected.keys)) == expected)
        #expect(store.cacheStatistics().count == 3)
        try await store.close()

        // Capacity 0: no cache, same answers.
        let uncached = Store(backend: try await SQLiteBackend.open(path: directory.file("db.sqlite")), cacheCapacity: 0)
        #expect(try await uncached.groups(app: "app-a", ids: Array(expected.keys)) == expected)
        #expect(try await uncached.groups(app: "app-a", ids: Array(expected.keys)) == expected)
        #expect(uncached.cacheStatistics().count == 0)
        #expect(uncached.cacheStatistics().hits == 0)
        try await uncached.close()
    }

    @Test("after close, reads fail instead of answering from the cache")
    func closedStoreDoesNotServeCache() async throws {
        let temporary = try await temporaryStore()
        _ = try await temporary.store.createGroup(try creation("g1"))
        #expect(try await temporary.store.groups(app: "app-a", ids: ["g1"]).count == 1)
        try await temporary.store.close()
        await #expect(throws: GroupError.self) { _ = try await temporary.store.groups(app: "app-a", ids: ["g1"]) }
    }

    @Test("migration v2 applies on a v1 file, backfills has_custom, and is idempotent")
    func migrationV2() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("db.sqlite")
        let v1 = Store(backend: try await SQLiteBackend.open(path: path, durability: .full, migratingUpTo: "v1"), cacheCapacity: 0)
        #expect(try await v1.sqlite.appliedMigrations() == ["v1"])
        // Written by the v1 schema (the INSERTs name no v2 column).
        var withCustom = try creation("custom", members: ["bob", "carol"], custom: ["a": [1], "b": [2, 3]])
        withCustom.members[1].custom = ["m": [9]]
        var custom = try await created(v1, withCustom)
        var plain = try await created(v1, try creation("plain", members: ["bob"]))
        try await v1.close()
        // Written before v15: no member version is stored.
        custom.memberVersion = 0
        plain.memberVersion = 0

        var expectedBob = withCustom.members[1]
        expectedBob.custom = ["m": [9]]
        // Written before v6: no origin is stored.
        expectedBob.joinSource = .unknown
        expectedBob.inviterID = nil
        for _ in 0..<2 {
            let store = Store(backend: try await SQLiteBackend.open(path: path))
            #expect(try await store.sqlite.appliedMigrations() == ["v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12", "v13", "v14", "v15", "v16", "v17", "v18", "v19", "v20", "v21", "v22", "v23"])
            let groups = try await store.groups(app: "app-a", ids: ["custom", "plain"])
            #expect(groups == ["custom": custom, "plain": plain])
            #expect(groups["custom"]?.custom == ["a": [1], "b": [2, 3]])
            let bob = try await store.memberships(app: "app-a", userID: "bob", groupIDs: ["custom", "plain"])
            #expect(bob["custom"] == expectedBob)
            #expect(bob["plain"]?.custom == [:])
            #expect(try await store.memberships(app: "app-a", userID: "carol", groupIDs: ["custom"])["custom"]?.custom == [:])
            try await store.close()
        }

        // Written with v2: the triggers set has_custom.
        let store = Store(backend: try await SQLiteBackend.open(path: path), cacheCapacity: 0)
        var later = try creation("later", members: ["bob"], custom: ["x": [7]])
        later.members[1].custom = ["y": [8]]
        let laterGroup = try await created(store, later)
        #expect(try await store.groups(app: "app-a", ids: ["later", "plain"]) == ["later": laterGroup, "plain": plain])
        #expect(try await store.memberships(app: "app-a", userID: "bob", groupIDs: ["later"])["later"]?.custom == ["y": [8]])
        try await store.close()
    }

    @Test("IN lists are padded to a few sizes", arguments: [(1, 1), (2, 2), (3, 4), (5, 8), (33, 64), (64, 64), (65, 128), (129, 192)])
    func padding(_ count: Int, _ size: Int) {
        #expect(Rows.paddedCount(count) == size)
        let values = Array(0..<count)
        let padded = Rows.padded(values)
        #expect(padded.count == size)
        #expect(Set(padded) == Set(values))
    }

    @Test("batch reads of every size return exactly the groups asked for")
    func batchSizes() async throws {
        try await withTemporaryStore { store in
            var expected: [String: Group] = [:]
            for i in 0..<70 {
                expected["g\(i)"] = try await created(store, try creation("g\(i)", custom: i % 5 == 0 ? ["i": [UInt8(i)]] : [:]))
            }
            for size in [1, 2, 3, 5, 9, 17, 33, 65, 70] {
                let ids = (0..<size).map { "g\($0)" } + ["none"]
                let uncached = Store(backend: try await SQLiteBackend.open(path: try store.sqlite.path), cacheCapacity: 0)
                let fromDatabase = try await uncached.groups(app: "app-a", ids: ids)
                try await uncached.close()
                #expect(fromDatabase == expected.filter { ids.contains($0.key) })
                let memberships = try await store.memberships(app: "app-a", userID: "alice", groupIDs: ids)
                #expect(memberships.count == size)
            }
        }
    }
}
