import Foundation
import GroupModel
@testable import GroupStore
@testable import GroupStorePostgres
@testable import GroupStoreSQL
@testable import GroupStoreSQLite
import GroupTestSupport
import Logging
import NIOPosix
import Synchronization
import Testing

/// One app's writes in parallel on several nodes: batches lock the groups and users they write,
/// not the app; an app's positions are taken by each batch's last statement. Run when
/// `GROUPD_TEST_POSTGRES_URL` names a server (`make test-postgres`).
@Suite(
    "Parallel writes: batches of different groups of one app on two nodes hold no lock in common",
    .enabled(if: PostgresTestServer.settings != nil), .timeLimit(.minutes(2)))
struct StoreParallelWriteTests {
    /// A connection of the test's own, used by one task at a time (a transaction can stay open
    /// across awaits).
    final class Connection: Sendable {
        private let session: PostgresSession

        init(_ settings: PostgresStoreSettings) {
            session = PostgresSession(
                settings: settings, eventLoop: MultiThreadedEventLoopGroup.singleton.next(), logger: Logger(label: "test"),
                id: 950)
        }

        func run<T: Sendable>(_ body: (PostgresSession) async throws -> T) async throws -> T {
            try await session.run(body)
        }

        func close() async {
            await session.disconnect()
        }

        // A test that throws before `close()` must not leave the driver's connection unclosed
        // (a debug build of the driver stops the process then).
        deinit {
            session.disconnectBlocking()
        }
    }

    /// A lock wait of another backend of the database, as `pg_stat_activity` and `pg_locks` show it.
    struct LockWait: Sendable, Hashable {
        /// `pg_locks.locktype` of the lock waited for (`advisory`, `transactionid`, `tuple`…).
        var lockType: String
        /// The start of the waiting statement.
        var statement: String

        /// Whether the statement waiting is a batch's tail (the app's ticket row).
        var inTail: Bool { statement.hasPrefix("WITH t AS (") }
    }

    /// The lock waits of the database's other backends now, for locks held to the end of a
    /// transaction. A wait for a relation's extension lock (`extend`) is left out: PostgreSQL
    /// holds that one only while it adds a page to a table or index file, whoever inserts; two
    /// batches inserting rows at once meet there however the groups' keys are taken.
    static func lockWaits(_ session: PostgresSession) async throws -> [LockWait] {
        var waits: [LockWait] = []
        try await session.rows(
            """
            SELECT coalesce(l.locktype, a.wait_event), left(a.query, 40) FROM pg_stat_activity a
            LEFT JOIN pg_locks l ON l.pid = a.pid AND NOT l.granted
            WHERE a.datname = current_database() AND a.wait_event_type = 'Lock' AND a.wait_event <> 'extend'
              AND a.pid <> pg_backend_pid()
            """
        ) { row in waits.append(LockWait(lockType: try row.text(0), statement: try row.text(1))) }
        return waits
    }

    /// Samples ``lockWaits(_:)`` on a connection of its own until stopped.
    final class Sampler: Sendable {
        private final class Samples: Sendable {
            let state = Mutex<(stopped: Bool, count: Int, waits: [LockWait])>((false, 0, []))
        }

        private let connection: Connection
        private let samples = Samples()
        private let done: Task<Void, any Error>

        init(_ settings: PostgresStoreSettings) {
            let connection = Connection(settings)
            let samples = self.samples
            self.connection = connection
            done = Task {
                while !samples.state.withLock({ $0.stopped }) {
                    let waits = try await connection.run { try await StoreParallelWriteTests.lockWaits($0) }
                    samples.state.withLock { $0.count += 1; $0.waits += waits }
                }
            }
        }

        /// Stops sampling; returns how many samples were taken and every wait seen.
        func stop() async throws -> (samples: Int, waits: [LockWait]) {
            samples.state.withLock { $0.stopped = true }
            try await done.value
            await connection.close()
            return samples.state.withLock { ($0.count, $0.waits) }
        }
    }

    /// The key a batch writing `group` locks.
    static func key(_ group: String) -> Int64 {
        WriteScope.lockKey(kind: "group", app: Fixture.app, id: group)
    }

    @Test("a batch of group g waits for another transaction holding g's key; a batch of group h on the other node does not")
    func groupKeysAreTheOnlyLocks() async throws {
        let (a, b) = try await StoreSharedDatabaseTests.twoNodes()
        try await Fixture.create(a.store, "g", members: ["bob"])
        try await Fixture.create(a.store, "h", members: ["bob"])
        let other = Connection(try #require(a.postgres))
        // Another node's batch writing g, as far as the locks go.
        try await other.run { session in
            try await session.begin()
            try await session.command("SELECT groupd_lock_batch('{}', ?, ?)", [.texts([Fixture.app]), .integers([Self.key("g")])])
        }
        // h is free on either node, at once.
        #expect(try await Fixture.send(b.store, "h", from: "bob").stored.message.sequence == 2)
        #expect(try await Fixture.send(a.store, "h", from: "bob").stored.message.sequence == 3)
        // g waits: the sampler's query sees the wait for the advisory lock.
        let blocked = Task { try await Fixture.send(b.store, "g", from: "bob") }
        var waits: [LockWait] = []
        while waits.isEmpty {
            waits = try await other.run { session in try await Self.lockWaits(session) }
            await Task.yield()
        }
        #expect(waits.map(\.lockType) == ["advisory"])
        try await other.run { session in try await session.commit() }
        #expect(try await blocked.value.stored.message.sequence == 2)
        await other.close()
        let events = try await a.store.appEvents(app: Fixture.app, after: 0, limit: 100).events
        #expect(events.map(\.eventID) == Array(1...Int64(events.count)))
    }

    @Test("two nodes loading different groups of one app: no batch waits on another's lock but the app's ticket in its last statement; positions dense, every group gap-free, both feeds in one order")
    func differentGroupsInParallel() async throws {
        let (a, b) = try await StoreSharedDatabaseTests.twoNodes()
        let feedA = StoreSharedDatabaseTests.Feed(a.store)
        let feedB = StoreSharedDatabaseTests.Feed(b.store)
        let groups = (a: (0..<4).map { "a\($0)" }, b: (0..<4).map { "b\($0)" })
        for group in groups.a + groups.b { try await Fixture.create(a.store, group, members: ["bob", "carol"]) }
        let sampler = Sampler(try #require(a.postgres))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            for n in 0..<400 {
                let (store, group) = n.isMultiple(of: 2) ? (a.store, groups.a[n / 2 % 4]) : (b.store, groups.b[n / 2 % 4])
                tasks.addTask {
                    if n % 40 == 1 {
                        try await Fixture.join(store, group, "u\(n)")
                    } else {
                        _ = try await Fixture.send(store, group, from: n % 3 == 0 ? "carol" : "bob")
                    }
                }
            }
            try await tasks.waitForAll()
        }
        let (samples, waits) = try await sampler.stop()
        #expect(samples > 0)
        #expect(waits.filter { $0.lockType == "advisory" } == [])
        #expect(waits.filter { !$0.inTail } == [])

        let total = 8 + 400
        await feedA.wait(for: total)
        await feedB.wait(for: total)
        let events = try await a.store.appEvents(app: Fixture.app, after: 0, limit: 1000).events
        #expect(events.map(\.eventID) == Array(1...Int64(total)))
        #expect(feedA.events.map(\.eventID) == events.map(\.eventID))
        #expect(feedB.events.map(\.eventID) == events.map(\.eventID))
        for group in groups.a + groups.b {
            let sequences = events.filter { $0.event.groupID == group }.map(\.event.sequence)
            #expect(sequences == (1...Int64(sequences.count)).map { $0 }, "\(group)")
        }
        #expect(events.filter { $0.event.kind == .groupMessage }.allSatisfy { $0.message?.eventID == $0.eventID })
    }

    @Test("a deadlock between a batch and another transaction: PostgreSQL breaks it in the batch, which runs again; nothing is lost")
    func deadlockRerunsTheBatch() async throws {
        let a = try await temporaryStore(.postgres)
        let backend = try #require(a.backend as? PostgresBackend)
        let settings = try #require(a.postgres)
        try await Fixture.create(a.store, "g", members: ["bob"])
        try await Fixture.create(a.store, "h", members: ["bob"])
        let other = Connection(settings)
        let watcher = Connection(settings)
        // The other transaction holds g's row.
        try await other.run { session in
            try await session.command("SET deadlock_timeout = '60s'")  // it never looks for the cycle itself
            try await session.begin()
            try await session.command("SELECT 1 FROM groups WHERE app_id = ? AND group_id = 'g' FOR UPDATE", [.text(Fixture.app)])
        }
        // One batch: a send to h, then one to g. It holds both groups' keys from its start; the
        // first send stops (once) until the other transaction waits for g's key.
        let (reached, reachedGate) = AsyncStream<Void>.makeStream()
        let release = DispatchSemaphore(value: 0)
        let stopped = Atomic(false)
        a.store.injectFault { method in
            guard method == "appendMessage", !stopped.exchange(true, ordering: .relaxed) else { return }
            reachedGate.yield()
            release.wait()
        }
        a.store.holdCommits()
        let first = Task { try await Fixture.send(a.store, "h", from: "bob") }
        await a.store.waitUntilQueued(1)
        let second = Task { try await Fixture.send(a.store, "g", from: "bob") }
        await a.store.waitUntilQueued(2)
        a.store.releaseCommits()
        var iterator = reached.makeAsyncIterator()
        _ = await iterator.next()
        // The other transaction asks for g's key and waits for the batch ...
        let locked = Task { try await other.run { session in try await session.command("SELECT pg_advisory_xact_lock(?)", [.integer(Self.key("g"))]) } }
        while try await watcher.run({ try await Self.lockWaits($0) }).isEmpty { await Task.yield() }
        // ... then the batch's send to g waits for g's row: a cycle, which the batch (the last to
        // wait) finds after its deadlock_timeout and breaks by failing.
        release.signal()
        try await locked.value
        try await other.run { session in try await session.commit() }
        #expect(try await first.value.stored.message.sequence == 2)
        let message = try await second.value
        #expect(message.stored.message.sequence == 2)
        #expect(backend.retriedBatches.load(ordering: .relaxed) == 1)
        await other.close()
        await watcher.close()
        #expect(try await Fixture.events(a.store, "g").map(\.sequence) == [1, 2])
        let events = try await a.store.appEvents(app: Fixture.app, after: 0, limit: 10).events
        #expect(events.map(\.eventID) == [1, 2, 3, 4])
        #expect(message.stored.eventID == 4)
    }
}

/// How many statements (round trips) a mutation alone in its batch costs on PostgreSQL, the
/// batch's own four included (`BEGIN`, the locks, the tail, `COMMIT`): a guard against a change
/// that adds round trips to the hot paths.
@Suite("PostgreSQL round trips per mutation", .enabled(if: PostgresTestServer.settings != nil))
struct StoreRoundTripTests {
    @Test("a send, a creation and a join each take the statements counted here")
    func statementsPerMutation() async throws {
        let a = try await temporaryStore(.postgres)
        let backend = try #require(a.backend as? PostgresBackend)
        func counted(_ body: () async throws -> Void) async throws -> Int {
            let before = backend.writer.statementCount
            try await body()
            return backend.writer.statementCount - before
        }
        let create = try await counted { try await Fixture.create(a.store, "g", members: ["bob", "carol"]) }
        let send = try await counted { try await Fixture.send(a.store, "g", from: "bob") }
        let join = try await counted { try await Fixture.join(a.store, "g", "dave") }
        // JoinGroup's own path: the snapshot also reads the joiner's pending item and the group's
        // due items.
        let store = a.store
        let applied = try await counted {
            _ = try await store.mutateApplications(
                app: Fixture.app, groupID: "g", operatorID: "erin", targets: ["erin"], kind: .join, at: Fixture.t0,
                parts: Fixture.joinParts
            ) { snapshot in
                let plan = try GroupRules.planJoinApplication(
                    snapshot.group.group, by: .user("erin", membership: snapshot.group.operatorMembership),
                    joinedGroupCount: snapshot.group.joinedGroupCounts["erin"] ?? 0, message: "", limits: .defaults,
                    now: Fixture.t0, retainedMute: nil, pending: snapshot.pending["erin"], newID: ApplicationID.make())
                return (ApplicationChange(group: plan.join.change, applications: plan.application.map { [$0] } ?? []), plan)
            }
        }
        // BEGIN, locks; the users' counts with a key for the group and whether the id is taken;
        // the tail (with the group row, its custom fields and the three member rows); COMMIT.
        #expect(create == 5)
        // BEGIN, locks; the group with the sender's membership; the tail (with the body and
        // latest_seq); COMMIT.
        #expect(send == 5)
        // BEGIN, locks; the group with the joiner's membership, bans, retained mutes
        // and counts; the tail (with the member row, its tombstone and mute gone, the group row);
        // COMMIT.
        #expect(join == 5)
        // JoinGroup's path into a group that asks for approval: BEGIN, locks; the snapshot with the
        // joiner's pending item and the group's due items (a statement of their own before); the
        // filed item's insert; the held group row, written first by the approvers' load; that load
        // and the approvers; the tail; COMMIT.
        #expect(applied == 9)
    }

    @Test(
        "held rows PostgreSQL refuses fail their whole batch, whether the tail or an earlier flush writes them; nothing of it is stored")
    func refusedHeldRowsFailTheBatch() async throws {
        let a = try await temporaryStore(.postgres)
        let settings = try #require(a.postgres)
        try await Fixture.create(a.store, "g", members: ["bob"])
        try await Fixture.create(a.store, "h", members: ["bob"])
        // A trigger of the test's own refuses the member row of "poison".
        let other = StoreParallelWriteTests.Connection(settings)
        try await other.run { session in
            try await session.command("""
                CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN RAISE EXCEPTION 'poison refused'; END $$
                """)
            try await session.command("""
                CREATE TRIGGER refuse_poison BEFORE INSERT ON members FOR EACH ROW
                WHEN (NEW.user_id = 'poison') EXECUTE FUNCTION refuse_poison()
                """)
        }
        await other.close()
        let failed = a.store.commitStatistics.failedBatches
        // Alone: the tail writes the held row and fails.
        #expect(await Fixture.groupError { try await Fixture.join(a.store, "g", "poison") }?.code == .internal)
        // Held, then written first because a rename of the same group follows in the batch: the
        // batch fails as a whole, the join of h with it.
        a.store.holdCommits()
        let poisoned = Task { await Fixture.groupError { try await Fixture.join(a.store, "g", "poison") } }
        await a.store.waitUntilQueued(1)
        let joined = Task { await Fixture.groupError { try await Fixture.join(a.store, "h", "carol") } }
        await a.store.waitUntilQueued(2)
        let renamed = Task { await Fixture.groupError { _ = try await Fixture.rename(a.store, "g", to: "later") } }
        await a.store.waitUntilQueued(3)
        a.store.releaseCommits()
        #expect(await poisoned.value?.code == .internal)
        #expect(await joined.value?.code == .internal)
        let refusal = await renamed.value
        #expect(refusal?.code == .internal)
        #expect(refusal?.message.contains("held for its last statements") == true)
        #expect(a.store.commitStatistics.failedBatches == failed + 2)
        for id in ["g", "h"] {
            #expect(try await Fixture.events(a.store, id).map(\.kind) == [.groupCreated])
            #expect(try await a.store.groups(app: Fixture.app, ids: [id])[id]?.name == "team \(id)")
        }
        #expect(try await a.store.members(app: Fixture.app, groupID: "h", userIDs: ["carol"]).isEmpty)
        // The store goes on.
        try await Fixture.join(a.store, "g", "carol")
    }

    /// The joins (group, user) queued while commits are held, then committed together.
    static func joinInOneBatch(_ store: Store, _ joins: [(group: String, user: String)]) async throws {
        try await Fixture.inOneBatch(store, joins.map { join in { try await Fixture.join(store, join.group, join.user) } })
    }

    @Test("the snapshots and the held rows keep their generic plans: PostgreSQL does not plan them again on every call")
    func heldStatementsStayPlanned() async throws {
        let a = try await temporaryStore(.postgres)
        let backend = try #require(a.backend as? PostgresBackend)
        try await Fixture.create(a.store, "g", members: ["bob"])
        // Per batch: six joins of one group (the first loads the group, the others take it from
        // memory), then the first joiner's quit, which writes the held rows first.
        for round in 0..<8 {
            let store = a.store
            var steps: [@Sendable () async throws -> Void] = (0..<6).map { n in { try await Fixture.join(store, "g", "user\(round)-\(n)") } }
            steps.append { try await Fixture.quit(store, "g", "user\(round)-0") }
            try await Fixture.inOneBatch(store, steps)
        }
        let plans = try await backend.writer.run { _ throws -> [(generic: Int64, custom: Int64, text: String)] in
            var plans: [(generic: Int64, custom: Int64, text: String)] = []
            try await backend.writer.rows("SELECT generic_plans, custom_plans, statement FROM pg_prepared_statements") { row in
                plans.append((try row.int64(0), try row.int64(1), try row.text(2)))
            }
            return plans
        }
        let loaded = try #require(plans.first { $0.text.hasPrefix("SELECT * FROM (WITH now AS") && $0.text.contains("FROM groups WHERE") })
        let known = try #require(plans.first { $0.text.hasPrefix("SELECT * FROM (WITH now AS") && $0.text.contains("::int8 AS group_key") })
        let held = try #require(plans.first { $0.text.hasPrefix("WITH hu0 AS") })
        // PostgreSQL plans a prepared statement with its values five times, then keeps the
        // generic plan unless the custom ones looked cheaper.
        for statement in [loaded, known, held] {
            #expect(statement.custom == 5 && statement.generic > 0, "\(statement.text.prefix(200))")
        }
    }

    @Test("a membership probe finds the row by the whole key, also in a generic plan made while the groups were small")
    func membershipProbesUseTheWholeKey() async throws {
        let a = try await temporaryStore(.postgres)
        let backend = try #require(a.backend as? PostgresBackend)
        // Statistics taken while every group had one or two members; then the group grows.
        for n in 0..<20 { try await Fixture.create(a.store, "g\(n)", members: ["bob"]) }
        try await backend.writer.run { try await $0.command("ANALYZE") }
        try await Fixture.create(a.store, "big", members: (0..<99).map { "m\($0)" })
        let plans = try await backend.writer.run { _ throws -> [String] in
            try await backend.writer.command("SET plan_cache_mode = force_generic_plan")
            var plans: [String] = []
            for (n, probe) in [PostgresRows.membershipProbe, "LATERAL (\(PostgresTransaction.memberProbe("$1"))) m ON true"].enumerated() {
                try await backend.writer.command("""
                    PREPARE probe\(n)(text, text, text) AS
                    SELECT m.user_id FROM groups g LEFT JOIN \(probe.replacingOccurrences(of: "?", with: "$1"))
                    WHERE g.app_id = $2 AND g.group_id = $3
                    """)
                var lines: [String] = []
                try await backend.writer.rows("EXPLAIN EXECUTE probe\(n)('m7', '\(Fixture.app)', 'big')", []) { lines.append(try $0.text(0)) }
                try await backend.writer.command("DEALLOCATE probe\(n)")
                plans.append(lines.joined(separator: "\n"))
            }
            try await backend.writer.command("RESET plan_cache_mode")
            return plans
        }
        for plan in plans {
            // The members index condition names the user; no membership is read and filtered.
            let memberScan = plan.split(separator: "\n").first { $0.contains("Index Cond") && $0.contains("group_key = g.group_key") }
            #expect(memberScan?.contains("user_id") == true, "\(plan)")
            #expect(!plan.contains("Filter: ((user_id"), "\(plan)")
            #expect(!plan.contains("Filter: (user_id"), "\(plan)")
        }
    }

    @Test("joins of one group in one batch: one load each, the group row from memory after the first; one statement writes them all")
    func statementsPerBatchOfJoinsOfOneGroup() async throws {
        let a = try await temporaryStore(.postgres)
        let backend = try #require(a.backend as? PostgresBackend)
        let created = try await Fixture.create(a.store, "g", members: ["bob"])
        let before = backend.writer.statementCount
        let batches = a.store.commitStatistics.batches
        let users = (0..<6).map { "user\($0)" }
        try await Self.joinInOneBatch(a.store, users.map { ("g", $0) })
        #expect(a.store.commitStatistics.batches == batches + 1)
        // BEGIN, locks; one load per join; the tail; COMMIT.
        #expect(backend.writer.statementCount - before == 2 + 6 + 2)
        let members = try await a.store.members(app: Fixture.app, groupID: "g", userIDs: users)
        #expect(users.map { members[$0]?.joinOrder } == (3...8).map { Int64($0) })
        #expect(users.map { members[$0]?.joinSequence } == (2...7).map { Int64($0) })
        let group = try #require(try await a.store.groups(app: Fixture.app, ids: ["g"])["g"])
        #expect(group.memberCount == 8)
        #expect(group.latestSequence == 7)
        #expect(group.memberVersion == created.memberVersion + 6)
        #expect(try await Fixture.events(a.store, "g").map(\.kind) == [.groupCreated] + Array(repeating: .memberJoined, count: 6))
    }

    @Test("joins of distinct groups in one batch: their loads, then one statement writes them all")
    func statementsPerBatchOfJoins() async throws {
        let a = try await temporaryStore(.postgres)
        let backend = try #require(a.backend as? PostgresBackend)
        for n in 0..<5 { try await Fixture.create(a.store, "g\(n)", members: ["bob"]) }
        let before = backend.writer.statementCount
        let batches = a.store.commitStatistics.batches
        try await Self.joinInOneBatch(a.store, (0..<5).map { ("g\($0)", "user\($0)") })
        #expect(a.store.commitStatistics.batches == batches + 1)
        // BEGIN, locks; one load per join; the tail; COMMIT.
        #expect(backend.writer.statementCount - before == 2 + 5 + 2)
        for n in 0..<5 {
            let members = try await a.store.members(app: Fixture.app, groupID: "g\(n)", userIDs: ["user\(n)"])
            #expect(members["user\(n)"]?.joinOrder == 3)
            #expect(try await Fixture.events(a.store, "g\(n)").map(\.kind) == [.groupCreated, .memberJoined])
            #expect(try await a.store.joinedGroupCount(app: Fixture.app, userID: "user\(n)", types: [.public]) == 1)
        }
    }

    @Test("creations by one owner in one batch: one load each, whose counts include the batch's earlier creations; one statement writes them all")
    func statementsPerBatchOfCreations() async throws {
        let a = try await temporaryStore(.postgres)
        let backend = try #require(a.backend as? PostgresBackend)
        try await Fixture.create(a.store, "first", members: ["bob"])
        let before = backend.writer.statementCount
        let batches = a.store.commitStatistics.batches
        let counts = Mutex<[String: [String: Int]]>([:])
        let store = a.store
        let steps: [@Sendable () async throws -> Void] = (0..<4).map { n in
            {
                let request = GroupCreationRequest(
                    type: .public, groupID: "g\(n)", name: "g", members: ["bob", "u\(n)"].map { InitialMember(userID: $0) })
                let plan = try GroupRules.planCreation(request, appID: Fixture.app, creatorID: "alice", limits: .defaults, now: Fixture.t0)
                let read = try await store.createGroup(plan) { counts in (plan, counts) }.value
                counts.withLock { $0["g\(n)"] = read }
            }
        }
        try await Fixture.inOneBatch(store, steps)
        #expect(a.store.commitStatistics.batches == batches + 1)
        // BEGIN, locks; one load per creation (no held rows written first); the tail; COMMIT.
        #expect(backend.writer.statementCount - before == 2 + 4 + 2)
        for n in 0..<4 {
            #expect(counts.withLock { $0["g\(n)"] } == ["alice": 1 + n, "bob": 1 + n, "u\(n)": 0])
        }
        for (user, count) in ["alice": 5, "bob": 5, "u0": 1, "u3": 1] {
            #expect(try await store.joinedGroupCount(app: Fixture.app, userID: user, types: Set(GroupType.allCases)) == count)
        }
    }

    @Test("a batch of sends to several groups takes about the statements of one send")
    func statementsPerBatchOfSends() async throws {
        let a = try await temporaryStore(.postgres)
        let backend = try #require(a.backend as? PostgresBackend)
        for n in 0..<5 { try await Fixture.create(a.store, "g\(n)", members: ["bob", "carol"]) }
        let before = backend.writer.statementCount
        let batches = a.store.commitStatistics.batches
        a.store.holdCommits()
        async let sent = withThrowingTaskGroup(of: AppendedMessage.self) { tasks in
            for n in 0..<20 {
                tasks.addTask {
                    try await Fixture.send(
                        a.store, "g\(n % 5)", from: n % 2 == 0 ? "bob" : "carol", clientID: n < 5 ? "c-\(n)" : nil)
                }
            }
            return try await tasks.reduce(into: [AppendedMessage]()) { $0.append($1) }
        }
        await a.store.waitUntilQueued(20)
        a.store.releaseCommits()
        #expect(try await sent.count == 20)
        #expect(a.store.commitStatistics.batches == batches + 1)
        // BEGIN, locks; the groups with the senders' memberships; the earlier messages by client id;
        // the tail (with every body and the groups' latest_seq); COMMIT.
        #expect(backend.writer.statementCount - before == 6)
        for n in 0..<5 {
            #expect(try await Fixture.events(a.store, "g\(n)").filter { $0.kind == .groupMessage }.map(\.sequence) == [2, 3, 4, 5])
        }
    }
}
