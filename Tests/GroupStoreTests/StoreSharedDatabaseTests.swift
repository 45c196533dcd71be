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

/// Two stores on one PostgreSQL database, as two groupd nodes run: commits, events, passes,
/// pool limits and availability. Run when `GROUPD_TEST_POSTGRES_URL` names a server
/// (`make test-postgres`).
@Suite("Shared database: several nodes on one PostgreSQL", .enabled(if: PostgresTestServer.settings != nil))
struct StoreSharedDatabaseTests {
    /// Collects the events a store's feed hands over and lets a test wait for a count.
    final class Feed: Sendable {
        private let state = Mutex<(events: [LoggedEvent], waiters: [(Int, CheckedContinuation<Void, Never>)])>(([], []))

        init(_ store: Store) {
            store.observeCommittedEvents { [self] result in
                guard case .success(let events) = result else { return }
                let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
                    state.events += events
                    let count = state.events.count
                    let ready = state.waiters.filter { $0.0 <= count }.map(\.1)
                    state.waiters.removeAll { $0.0 <= count }
                    return ready
                }
                for waiter in ready { waiter.resume() }
            }
        }

        var events: [LoggedEvent] { state.withLock { $0.events } }

        /// Returns once at least `count` events arrived.
        func wait(for count: Int) async {
            await withCheckedContinuation { continuation in
                let ready = state.withLock { state in
                    if state.events.count >= count { return true }
                    state.waiters.append((count, continuation))
                    return false
                }
                if ready { continuation.resume() }
            }
        }
    }

    /// Two stores on one fresh database.
    static func twoNodes() async throws -> (TemporaryStore, TemporaryStore) {
        let a = try await temporaryStore(.postgres)
        return (a, try await a.anotherNode())
    }

    @Test("writes on one node are read on the other at once")
    func readAfterWrite() async throws {
        let (a, b) = try await Self.twoNodes()
        try await Fixture.create(a.store, "g", members: ["bob"])
        #expect(try await b.store.groups(app: Fixture.app, ids: ["g"])["g"]?.memberCount == 2)
        try await Fixture.rename(a.store, "g", to: "renamed")
        #expect(try await b.store.groups(app: Fixture.app, ids: ["g"])["g"]?.name == "renamed")
        try await Fixture.join(b.store, "g", "carol")
        #expect(try await a.store.members(app: Fixture.app, groupID: "g", userIDs: ["carol"])["carol"] != nil)
    }

    @Test("every node's feed hands over every node's events, each app's in event_id order, once")
    func eventsAcrossNodes() async throws {
        let (a, b) = try await Self.twoNodes()
        let feedA = Feed(a.store)
        let feedB = Feed(b.store)
        try await Fixture.create(a.store, "g", members: (0..<10).map { "u\($0)" })
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            for n in 0..<200 {
                let store = n.isMultiple(of: 2) ? a.store : b.store
                tasks.addTask { try await Fixture.send(store, "g", from: "u\(n % 10)") }
            }
            try await tasks.waitForAll()
        }
        await feedA.wait(for: 201)
        await feedB.wait(for: 201)
        let stored = try await Fixture.events(a.store, "g")
        #expect(stored.map(\.sequence) == Array(1...201))
        for feed in [feedA, feedB] {
            let events = feed.events
            #expect(events.map(\.event.sequence) == Array(1...201))
            #expect(events.map(\.eventID) == events.map(\.eventID).sorted())
            #expect(Set(events.map(\.eventID)).count == events.count)
            #expect(events.filter { $0.event.kind == .groupMessage }.allSatisfy { $0.message != nil })
        }
        #expect(feedA.events.map(\.eventID) == feedB.events.map(\.eventID))
    }

    @Test("concurrent writes to one group from two nodes: one sequence, no gaps, every answer stored")
    func concurrentSequences() async throws {
        let (a, b) = try await Self.twoNodes()
        try await Fixture.create(a.store, "g", members: (0..<10).map { "u\($0)" })
        let sent = try await withThrowingTaskGroup(of: Int64.self) { tasks in
            for n in 0..<300 {
                let store = n.isMultiple(of: 2) ? a.store : b.store
                tasks.addTask { try await Fixture.send(store, "g", from: "u\(n % 10)").stored.message.sequence }
            }
            return try await tasks.reduce(into: [Int64]()) { $0.append($1) }
        }
        #expect(sent.sorted() == Array(2...301))
        #expect(try await Fixture.events(b.store, "g").map(\.sequence) == Array(1...301))
        #expect(try await b.store.groups(app: Fixture.app, ids: ["g"])["g"]?.latestSequence == 301)
    }

    @Test("room messages relayed by one node reach the others in order, not the sender's own follower")
    func roomMessages() async throws {
        let (a, b) = try await Self.twoNodes()
        let (toA, intoA) = AsyncStream<GroupMessage>.makeStream()
        let (toB, intoB) = AsyncStream<GroupMessage>.makeStream()
        a.store.followRoomMessages { for message in $0 { intoA.yield(message) } }
        b.store.followRoomMessages { for message in $0 { intoB.yield(message) } }
        let sent = (0..<20).map { n in
            GroupMessage(
                appID: Fixture.app, groupID: "room", sequence: 0, messageID: "m\(n)", senderID: "host",
                content: MessageContent(type: "text", text: "hello \(n)", payload: [0, 1, 2], clientMessageID: n == 0 ? "c" : nil),
                time: Fixture.t0)
        }
        for message in sent { try await a.store.relayRoomMessage(message) }
        // A marker through B: when A's follower has it, it had every earlier notification too.
        try await b.store.relayRoomMessage(GroupMessage(
            appID: Fixture.app, groupID: "room", sequence: 0, messageID: "marker", senderID: "host",
            content: MessageContent(text: "marker"), time: Fixture.t0))
        var heardByB: [GroupMessage] = []
        for await message in toB {
            heardByB.append(message)
            if heardByB.count == sent.count { break }
        }
        #expect(heardByB == sent)
        var heardByA: [GroupMessage] = []
        for await message in toA {
            heardByA.append(message)
            break
        }
        #expect(heardByA.map(\.messageID) == ["marker"])
    }

    @Test("a periodic pass runs on one node at a time")
    func exclusivePass() async throws {
        let (a, b) = try await Self.twoNodes()
        let (entered, enter) = AsyncStream<Void>.makeStream()
        let (release, leave) = AsyncStream<Void>.makeStream()
        async let first: Int? = a.store.exclusively("retention") {
            enter.yield()
            for await _ in release { break }
            return 1
        }
        for await _ in entered { break }
        #expect(try await b.store.exclusively("retention") { 2 } == nil)
        #expect(try await b.store.exclusively("another pass") { 3 } == 3)
        leave.yield()
        #expect(try await first == 1)
        #expect(try await b.store.exclusively("retention") { 2 } == 2)
    }

    @Test("a full pool with a full wait queue refuses at once with RESOURCE_EXHAUSTED; a statement past the timeout is UNAVAILABLE")
    func poolExhaustion() async throws {
        let seed = try await temporaryStore(.postgres)
        try await Fixture.create(seed.store, "g")
        var settings = seed.postgres!
        settings.poolSize = 1
        settings.maxWaiting = 0
        settings.statementTimeoutMilliseconds = 30_000
        let backend = try await PostgresBackend.open(settings: settings)
        defer { backend.closeNow() }
        let store = Store(backend: backend, cacheCapacity: 0)
        // A lock another connection holds makes the one pooled read wait.
        let holder = PostgresSession(
            settings: settings, eventLoop: MultiThreadedEventLoopGroup.singleton.next(), logger: Logger(label: "test"), id: 98)
        defer { holder.disconnectBlocking() }
        try await holder.begin()
        try await holder.command("LOCK TABLE groups IN ACCESS EXCLUSIVE MODE")
        let blocked = Task { try await store.groups(app: Fixture.app, ids: ["g"]) }
        // Wait until the pooled read waits on the lock (pg_locks shows it not granted).
        while try await holder.first(
            """
            SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
            WHERE NOT l.granted AND d.datname = current_database()
            """, [], { try $0.int64(0) }) == 0
        {
            await Task.yield()
        }
        let refused = await Fixture.groupError { _ = try await store.groups(app: Fixture.app, ids: ["g"]) }
        #expect(refused?.code == .resourceExhausted)
        #expect(refused?.reason == .storeBusy)
        await holder.rollback()
        #expect(try await blocked.value["g"] != nil)

        settings.poolSize = 2
        settings.statementTimeoutMilliseconds = 100
        let timed = try await PostgresBackend.open(settings: settings)
        defer { timed.closeNow() }
        try await holder.begin()
        try await holder.command("LOCK TABLE groups IN ACCESS EXCLUSIVE MODE")
        let timeout = await Fixture.groupError { _ = try await Store(backend: timed, cacheCapacity: 0).groups(app: Fixture.app, ids: ["g"]) }
        await holder.rollback()
        #expect(timeout?.code == .unavailable)
        #expect(timeout?.reason == .storeTimeout)
    }

    @Test("a connection lost mid-call: the call fails with UNAVAILABLE, the store reports unavailable, then recovers")
    func availability() async throws {
        let temporary = try await temporaryStore(.postgres)
        let store = temporary.store
        try await Fixture.create(store, "g", members: ["bob"])
        let (changes, change) = AsyncStream<Bool>.makeStream()
        store.observeAvailability { change.yield($0) }
        #expect(store.isAvailable)
        // A write waits on a lock another connection holds; then the server ends every other
        // connection of the database, as a crash or a failover would, under the waiting write.
        let holder = PostgresSession(
            settings: temporary.postgres!, eventLoop: MultiThreadedEventLoopGroup.singleton.next(), logger: Logger(label: "test"), id: 98)
        defer { holder.disconnectBlocking() }
        try await holder.begin()
        try await holder.command("LOCK TABLE groups IN ACCESS EXCLUSIVE MODE")
        let write = Task { await Fixture.groupError { try await Fixture.send(store, "g", from: "bob") } }
        while try await holder.first(
            """
            SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
            WHERE NOT l.granted AND d.datname = current_database()
            """, [], { try $0.int64(0) }) == 0
        {
            await Task.yield()
        }
        try await holder.command("""
            SELECT pg_terminate_backend(pid) FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid()
            """)
        let failed = await write.value
        await holder.rollback()
        #expect(failed?.code == .unavailable)
        #expect(failed?.reason == .storeUnavailable)
        guard failed != nil else { return }
        var seen: [Bool] = []
        for await available in changes {
            seen.append(available)
            if available { break }
        }
        #expect(seen == [false, true])
        #expect(store.isAvailable)
        _ = try await Fixture.send(store, "g", from: "bob")
        #expect(try await Fixture.events(store, "g").count == 2)
    }

    @Test("a database that cannot be reached fails the open with UNAVAILABLE; a malformed URL with INVALID_ARGUMENT")
    func unreachable() async throws {
        let closed = PostgresStoreSettings(url: "postgres://groupd@127.0.0.1:1/groupd", connectTimeoutMilliseconds: 500)
        let error = await Fixture.groupError { _ = try await PostgresBackend.open(settings: closed) }
        #expect(error?.code == .unavailable)
        #expect(error?.reason == .storeUnavailable)
        for url in ["mysql://u@h/db", "postgres://h/db", "postgres://u@h/", "postgres://u@/db"] {
            let malformed = await Fixture.groupError { _ = try await PostgresBackend.open(settings: PostgresStoreSettings(url: url)) }
            #expect(malformed?.reason == .invalidArgument, "\(url)")
            #expect(malformed?.metadata["field"] == "store.url", "\(url)")
        }
    }

    @Test("TLS: require refuses a server without TLS (UNAVAILABLE); prefer falls back to plain TCP")
    func tlsModes() async throws {
        let seed = try await temporaryStore(.postgres)
        var settings = seed.postgres!
        settings.tls = .require
        let refused = await Fixture.groupError { _ = try await PostgresBackend.open(settings: settings) }
        #expect(refused?.code == .unavailable)
        #expect(refused?.reason == .storeUnavailable)
        settings.tls = .prefer
        let backend = try await PostgresBackend.open(settings: settings)
        defer { backend.closeNow() }
        #expect(backend.appliedMigrations == PostgresSchema.migrations.map(\.id))
    }

    @Test("two nodes opening a new database at once migrate it once")
    func concurrentMigrations() async throws {
        let server = PostgresTestServer.settings!
        let name = "groupd_test_migrate_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        try await PostgresBackend.createDatabase(named: name, settings: server)
        var settings = server
        settings.url = PostgresTestServer.url(server.url, database: name)
        async let first = PostgresBackend.open(settings: settings)
        async let second = PostgresBackend.open(settings: settings)
        let (a, b) = try await (first, second)
        defer { a.closeNow(); b.closeNow() }
        #expect(a.appliedMigrations == PostgresSchema.migrations.map(\.id))
        #expect(b.appliedMigrations == PostgresSchema.migrations.map(\.id))
        let rows = try await a.read { session in
            try await session.first("SELECT count(*) FROM groupd_migrations", []) { try $0.int64(0) } ?? 0
        }
        #expect(rows == Int64(PostgresSchema.migrations.count))
    }
}
