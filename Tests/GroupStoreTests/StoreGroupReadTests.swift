import GroupModel
@testable import GroupStore
import GroupTestSupport
import Logging
import NIOPosix
import Testing

/// Reads of groups by id on PostgreSQL: the reads that wait behind running ones are answered
/// together, one statement per app. Run when `GROUPD_TEST_POSTGRES_URL` names a server
/// (`make test-postgres`).
@Suite(
    "Group reads on PostgreSQL: reads that queue are answered together",
    .enabled(if: PostgresTestServer.settings != nil), .timeLimit(.minutes(1)))
struct StoreGroupReadTests {
    static let otherApp = "app2"

    /// Creates group `id` of `app` (Public, owned by alice) with `custom` fields.
    static func create(_ store: Store, app: String, _ id: String, custom: [String: [UInt8]] = [:]) async throws {
        let request = GroupCreationRequest(type: .public, groupID: id, name: "\(app) \(id)", custom: custom)
        let plan = try GroupRules.planCreation(request, appID: app, creatorID: "alice", limits: .defaults, now: Fixture.t0)
        _ = try await store.createGroup(plan)
    }

    /// A second store on `seed`'s database with `settings` changed by `change`, without a group
    /// cache (every read goes to the database).
    static func store(on seed: TemporaryStore, _ change: (inout PostgresStoreSettings) -> Void = { _ in }) async throws
        -> (Store, PostgresBackend)
    {
        var settings = try #require(seed.postgres)
        change(&settings)
        let backend = try await PostgresBackend.open(settings: settings)
        return (Store(backend: backend, cacheCapacity: 0), backend)
    }

    @Test("reads that queue behind a running one are answered by one batch, each with exactly the groups it asked for")
    func coalesced() async throws {
        let seed = try await temporaryStore(.postgres)
        for n in 0..<6 { try await Self.create(seed.store, app: Fixture.app, "g\(n)") }
        try await Self.create(seed.store, app: Fixture.app, "c", custom: ["tier": Array("gold".utf8)])
        for n in 0..<3 { try await Self.create(seed.store, app: Self.otherApp, "g\(n)") }
        _ = try await seed.store.dismissGroup(app: Fixture.app, groupID: "g5", operatorID: nil, at: Fixture.t0) { group, _ in
            try GroupRules.planDismissal(of: group, by: .backend, operatorID: nil)
        }
        let (store, backend) = try await Self.store(on: seed)
        defer { backend.closeNow() }

        // Each read: an app and ids, some missing ("x"), one dismissed (g5), one with custom
        // fields (c, read in a snapshot), ids other reads ask too; the same id in two apps.
        let reads: [(app: String, ids: [String])] = (0..<30).map { n in
            n % 3 == 0
                ? (Self.otherApp, ["g\(n % 4)", "x\(n)"])
                : (Fixture.app, ["g\(n % 7)", "g\((n + 1) % 7)"] + (n % 5 == 0 ? ["c"] : []))
        }
        let before = backend.groupReads.batchCount
        backend.groupReads.hold()
        let answers = try await withThrowingTaskGroup(of: (Int, [String: Group]).self) { tasks in
            for (index, read) in reads.enumerated() {
                tasks.addTask { (index, try await store.groups(app: read.app, ids: read.ids)) }
            }
            await backend.groupReads.waitUntilWaiting(reads.count)
            backend.groupReads.release()
            var answers: [Int: [String: Group]] = [:]
            for try await (index, groups) in tasks { answers[index] = groups }
            return answers
        }
        #expect(backend.groupReads.batchCount == before + 1)
        for (index, read) in reads.enumerated() {
            let answer = try #require(answers[index])
            let live: Set<String> = read.app == Self.otherApp ? ["g0", "g1", "g2"] : ["g0", "g1", "g2", "g3", "g4", "c"]
            #expect(Set(answer.keys) == Set(read.ids).intersection(live), "read \(index): \(read)")
            for (id, group) in answer {
                #expect(group.id == id && group.appID == read.app && group.name == "\(read.app) \(id)")
            }
            if let custom = answer["c"] { #expect(custom.custom["tier"] == Array("gold".utf8)) }
        }

        // Alone, a read starts a batch of its own at once.
        #expect(try await store.groups(app: Fixture.app, ids: ["g1"])["g1"]?.name == "app g1")
        #expect(backend.groupReads.batchCount == before + 2)
    }

    @Test("past max_waiting a read is refused at once with RESOURCE_EXHAUSTED; the waiting ones are answered")
    func refusedPastMaxWaiting() async throws {
        let seed = try await temporaryStore(.postgres)
        try await Fixture.create(seed.store, "g")
        let (store, backend) = try await Self.store(on: seed) { $0.maxWaiting = 3 }
        defer { backend.closeNow() }
        backend.groupReads.hold()
        try await withThrowingTaskGroup(of: Group?.self) { tasks in
            for _ in 0..<3 { tasks.addTask { try await store.groups(app: Fixture.app, ids: ["g"])["g"] } }
            await backend.groupReads.waitUntilWaiting(3)
            let refused = await Fixture.groupError { _ = try await store.groups(app: Fixture.app, ids: ["g"]) }
            #expect(refused?.code == .resourceExhausted)
            #expect(refused?.reason == .storeBusy)
            backend.groupReads.release()
            for try await group in tasks { #expect(group?.id == "g") }
        }
    }

    @Test("a batch that fails fails each of its reads; the next reads are answered")
    func failedBatch() async throws {
        let seed = try await temporaryStore(.postgres)
        try await Fixture.create(seed.store, "g")
        let (store, backend) = try await Self.store(on: seed) { $0.statementTimeoutMilliseconds = 200 }
        defer { backend.closeNow() }
        // A lock another connection holds makes the batch's statement time out.
        let holder = PostgresSession(
            settings: try #require(seed.postgres), eventLoop: MultiThreadedEventLoopGroup.singleton.next(),
            logger: Logger(label: "test"), id: 98)
        defer { holder.disconnect() }
        try holder.begin()
        try holder.command("LOCK TABLE groups IN ACCESS EXCLUSIVE MODE")
        backend.groupReads.hold()
        let failures = await withTaskGroup(of: GroupError?.self) { tasks in
            for _ in 0..<4 {
                tasks.addTask { await Fixture.groupError { _ = try await store.groups(app: Fixture.app, ids: ["g"]) } }
            }
            await backend.groupReads.waitUntilWaiting(4)
            backend.groupReads.release()
            var failures: [GroupError?] = []
            for await failure in tasks { failures.append(failure) }
            return failures
        }
        holder.rollback()
        #expect(failures.count == 4)
        #expect(failures.allSatisfy { $0?.code == .unavailable }, "\(failures)")
        // The store reports itself unavailable after a timeout only while a probe fails; the
        // next read is answered once it is available again.
        while !backend.isAvailable { await Task.yield() }
        #expect(try await store.groups(app: Fixture.app, ids: ["g"])["g"] != nil)
    }
}
