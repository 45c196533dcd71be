import Foundation
import GroupModel
@testable import GroupStore
@testable import GroupStorePostgres
@testable import GroupStoreSQL
@testable import GroupStoreSQLite
import GroupTestSupport
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import Testing

/// Which statements a PostgreSQL session prepares, and when (no server needed).
@Suite("PostgreSQL statement cache: what is prepared, when, and how many")
struct PostgresStatementCacheTests {
    @Test("queries and data changes are preparable; transaction control, session commands and range or LIMIT parameters are not")
    func preparable() {
        for sql in [
            "SELECT group_id FROM groups WHERE app_id = ? AND group_key = ?",
            "  INSERT INTO t (a) VALUES (?) ON CONFLICT DO NOTHING",
            "UPDATE members SET role = ? WHERE app_id = ? AND user_id <> ?",
            "DELETE FROM members WHERE app_id = ? AND user_id = ANY(?)",
            "WITH e AS (INSERT INTO x VALUES (?) RETURNING id) SELECT id FROM e",
            "SELECT ?::bigint + 1",
            "SELECT event_id FROM group_events WHERE app_id = ? ORDER BY event_id LIMIT 1000",
            "SELECT 1",
        ] {
            #expect(PostgresStatementCache.isPreparable(sql), "\(sql)")
        }
        for sql in [
            "BEGIN", "COMMIT", "ROLLBACK", "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
            "SET statement_timeout = 5", "LOCK TABLE groups IN ACCESS EXCLUSIVE MODE", "CREATE TABLE t (a bigint)",
            "SELECT * FROM group_events e WHERE e.app_id = ? AND e.event_id > ? ORDER BY e.event_id LIMIT 1000",
            "SELECT 1 FROM t WHERE a >= ?", "SELECT 1 FROM t WHERE a<?", "SELECT 1 FROM t WHERE a <= ?",
            "SELECT 1 FROM t WHERE ? < a", "SELECT 1 FROM t WHERE ?::bigint > a", "SELECT 1 FROM t WHERE (a, b) > (?, ?)",
            "SELECT a FROM t WHERE b = ? ORDER BY a LIMIT ?", "SELECT a FROM t ORDER BY a LIMIT 10 OFFSET\n ?",
        ] {
            #expect(!PostgresStatementCache.isPreparable(sql), "\(sql)")
        }
    }

    @Test("a text runs unnamed on its first use, is prepared on its second, executed after; another type list is another statement")
    func lifecycle() {
        var cache = PostgresStatementCache(capacity: 10)
        let sql = "SELECT a FROM t WHERE b = ?"
        #expect(cache.lookup(sql, types: [PGValue.integer(0).typeCode]) == .unnamed)
        #expect(cache.lookup(sql, types: [PGValue.integer(0).typeCode]) == .prepare(name: "g1"))
        // Not prepared yet (the preparation failed): the next use tries again, under a new name.
        #expect(cache.lookup(sql, types: [PGValue.integer(0).typeCode]) == .prepare(name: "g2"))
        cache.prepared(sql, types: [PGValue.integer(0).typeCode], name: "g2")
        #expect(cache.lookup(sql, types: [PGValue.integer(0).typeCode]) == .execute(name: "g2"))
        #expect(cache.lookup(sql, types: [PGValue.null.typeCode]) == .unnamed)
        #expect(cache.lookup("COMMIT", types: []) == .unnamed)
        #expect(cache.lookup("COMMIT", types: []) == .unnamed)
        #expect(cache.preparedCount == 1)
        #expect(cache.preparedNames == ["g2"])
        cache.forget(name: "g2", deallocate: true)
        #expect(cache.takePendingDeallocations() == ["g2"])
        #expect(cache.lookup(sql, types: [PGValue.integer(0).typeCode]) == .prepare(name: "g3"))
        cache.reset()
        #expect(cache.preparedNames.isEmpty)
        #expect(cache.lookup(sql, types: [PGValue.integer(0).typeCode]) == .unnamed)
        #expect(cache.lookup(sql, types: [PGValue.integer(0).typeCode]) == .prepare(name: "g1"))
    }

    @Test("at most `capacity` texts are remembered: the least recently used is evicted, and deallocated when it was prepared")
    func bound() {
        var cache = PostgresStatementCache(capacity: 2)
        for sql in ["SELECT 1", "SELECT 2"] {
            _ = cache.lookup(sql, types: [])
            guard case .prepare(let name) = cache.lookup(sql, types: []) else {
                Issue.record("\(sql) not prepared on its second use")
                return
            }
            cache.prepared(sql, types: [], name: name)
        }
        // "SELECT 1" used last: "SELECT 2" is the least recently used.
        #expect(cache.lookup("SELECT 1", types: []) == .execute(name: "g1"))
        #expect(cache.lookup("SELECT 3", types: []) == .unnamed)
        #expect(cache.pendingDeallocations == ["g2"])
        #expect(cache.preparedNames == ["g1"])
        #expect(cache.lookup("SELECT 2", types: []) == .unnamed)
        #expect(cache.takePendingDeallocations() == ["g2", "g1"])
        #expect(cache.preparedNames.isEmpty)
    }
}

/// A PostgreSQL session's prepared statements on a real server: made once, reused, dropped with
/// the connection, kept through a failed transaction, bounded. Run when
/// `GROUPD_TEST_POSTGRES_URL` names a server (`make test-postgres`).
@Suite("PostgreSQL session: prepared statements", .enabled(if: PostgresTestServer.settings != nil))
struct PostgresPreparedStatementTests {
    static func session(_ temporary: TemporaryStore, id: Int = 97, capacity: Int = PostgresSession.statementCapacity) -> PostgresSession {
        PostgresSession(
            settings: temporary.postgres!, eventLoop: MultiThreadedEventLoopGroup.singleton.next(), logger: Logger(label: "test"),
            id: id, statementCapacity: capacity)
    }

    /// The prepared statements the server holds for `session`'s connection, by name (read with
    /// `TABLE`, a statement the session never prepares, so reading changes nothing).
    static func serverStatements(_ session: PostgresSession) async throws -> [String: String] {
        #expect(!PostgresStatementCache.isPreparable("TABLE pg_prepared_statements"))
        var statements: [String: String] = [:]
        try await session.rows("TABLE pg_prepared_statements") {
            statements[try $0.text(0)] = try $0.text(1)
        }
        return statements
    }

    static let groupName = "SELECT name FROM groups WHERE app_id = ? AND group_id = ?"
    /// The name ``Fixture/create(_:_:members:)`` gives group "g".
    static let name = "team g"

    @Test("a statement is prepared on its second use, then reused; answers, row counts and null binds are as unnamed")
    func preparedOnceAndReused() async throws {
        let temporary = try await temporaryStore(.postgres)
        try await Fixture.create(temporary.store, "g")
        let session = Self.session(temporary)
        defer { session.disconnectBlocking() }
        for _ in 0..<4 {
            await #expect(try session.first(Self.groupName, [.text(Fixture.app), .text("g")]) { try $0.text(0) } == Self.name)
        }
        #expect(session.preparedStatementCount == 1)
        #expect(session.preparedStatementNames == ["g1"])
        let held = try await Self.serverStatements(session)
        #expect(held.count == 1)
        // Each parameter cast to the type of its bind: typed as the unnamed statement's are.
        #expect(held.values.first?.contains("FROM groups WHERE app_id = ($1::text) AND group_id = ($2::text)") == true)

        // `execute` stays unnamed (its count is the command tag): nothing prepared, counts right.
        for _ in 0..<3 {
            await #expect(try session.execute("UPDATE groups SET name = name WHERE app_id = ? AND group_id = ?", [.text(Fixture.app), .text("g")]) == 1)
            await #expect(try session.execute("UPDATE groups SET name = name WHERE app_id = ? AND group_id = ?", [.text(Fixture.app), .text("none")]) == 0)
        }
        // A null bind: its type is inferred from the statement, as for an unnamed statement.
        for value in [PGValue.null, .null, .null, .text("x"), .text("x"), .text("x")] {
            let answer = try await session.first("SELECT coalesce(?, 'none')", [value]) { try $0.text(0) }
            #expect(answer == (value.isNull ? "none" : "x"))
        }
        #expect(session.preparedStatementCount == 3)
        await #expect(try Self.serverStatements(session).count == 3)
    }

    @Test("a reconnect empties the cache: after the backend is terminated the statement runs again and is prepared anew")
    func reconnect() async throws {
        let temporary = try await temporaryStore(.postgres)
        try await Fixture.create(temporary.store, "g")
        let session = Self.session(temporary)
        defer { session.disconnectBlocking() }
        let other = Self.session(temporary, id: 96)
        defer { other.disconnectBlocking() }
        for _ in 0..<3 {
            await #expect(try session.first(Self.groupName, [.text(Fixture.app), .text("g")]) { try $0.text(0) } == Self.name)
        }
        #expect(session.preparedStatementNames == ["g1"])
        let first = try #require(session.backendPID)
        await #expect(try other.first("SELECT pg_terminate_backend(?::int4)", [.int(Int(first))]) { try $0.bool(0) } == true)
        // Wait until the server ended it.
        while try await other.first("SELECT count(*) FROM pg_stat_activity WHERE pid = ?::int4", [.int(Int(first))], { try $0.int(0) }) != 0 {
            await Task.yield()
        }
        // The session learns of the loss on its next statement (UNAVAILABLE) or before it (the
        // server's notice closed the channel); either way the statement works on the new connection.
        var answer: String?
        do {
            answer = try await session.first(Self.groupName, [.text(Fixture.app), .text("g")]) { try $0.text(0) }
        } catch let error as PostgresStoreError {
            guard case .unavailable = error else { throw error }
            answer = try await session.first(Self.groupName, [.text(Fixture.app), .text("g")]) { try $0.text(0) }
        }
        #expect(answer == Self.name)
        #expect(session.backendPID != first)
        // The first use on the new connection ran unnamed: nothing prepared; the second prepares it.
        #expect(session.preparedStatementNames.isEmpty)
        await #expect(try session.first(Self.groupName, [.text(Fixture.app), .text("g")]) { try $0.text(0) } == Self.name)
        #expect(session.preparedStatementNames == ["g1"])
        #expect(session.preparedStatementCount == 1)
        await #expect(try Self.serverStatements(session).count == 1)
    }

    @Test("a statement failing inside a transaction, then ROLLBACK: the prepared statements keep working, none is prepared again")
    func failedTransaction() async throws {
        let temporary = try await temporaryStore(.postgres)
        try await Fixture.create(temporary.store, "g")
        let session = Self.session(temporary)
        defer { session.disconnectBlocking() }
        let divide = "SELECT 10 / ?::int8"
        for _ in 0..<2 { await #expect(try session.first(divide, [.int(2)]) { try $0.int(0) } == 5) }
        #expect(session.preparedStatementNames == ["g1"])

        try await session.begin()
        // Used for the first time, then prepared inside the transaction that fails.
        for _ in 0..<2 {
            await #expect(try session.first(Self.groupName, [.text(Fixture.app), .text("g")]) { try $0.text(0) } == Self.name)
        }
        #expect(session.preparedStatementCount == 2)
        // The prepared statement fails when executed: division by zero.
        await #expect(throws: (any Error).self) { try await session.first(divide, [.int(0)]) { try $0.int(0) } }
        #expect(session.transactionFailed)
        // PostgreSQL refuses every statement of the failed transaction until ROLLBACK.
        await #expect(throws: (any Error).self) {
            try await session.first(Self.groupName, [.text(Fixture.app), .text("g")]) { try $0.text(0) }
        }
        await session.rollback()
        #expect(!session.transactionFailed)

        await #expect(try session.first(divide, [.int(5)]) { try $0.int(0) } == 2)
        await #expect(try session.first(Self.groupName, [.text(Fixture.app), .text("g")]) { try $0.text(0) } == Self.name)
        // The same transaction again: it commits.
        try await session.begin()
        await #expect(try session.first(divide, [.int(1)]) { try $0.int(0) } == 10)
        await #expect(try session.execute("UPDATE groups SET name = ? WHERE app_id = ? AND group_id = ?", [.text("renamed"), .text(Fixture.app), .text("g")]) == 1)
        try await session.commit()
        await #expect(try session.first(Self.groupName, [.text(Fixture.app), .text("g")]) { try $0.text(0) } == "renamed")
        #expect(session.preparedStatementCount == 2)
        await #expect(try Self.serverStatements(session).count == 2)
    }

    @Test("a connection whose session settings fail is closed, not dropped: the statement fails UNAVAILABLE and the next one tries again")
    func failedSetupClosesTheConnection() async throws {
        let temporary = try await temporaryStore(.postgres)
        // Connected, then refused while being set up (as when the server goes away right after
        // the connect). Dropped unclosed, postgres-nio's connection asserts in its deinit: this
        // test process would crash in a debug build.
        let session = PostgresSession(
            settings: temporary.postgres!, eventLoop: MultiThreadedEventLoopGroup.singleton.next(), logger: Logger(label: "test"),
            id: 95, setup: ["SET no_such_setting = 1"])
        defer { session.disconnectBlocking() }
        for _ in 0..<2 {
            do {
                _ = try await session.first("SELECT 1") { try $0.int(0) }
                Issue.record("a session whose setup fails ran a statement")
            } catch let error as PostgresStoreError {
                guard case .unavailable(let message, _) = error else { throw error }
                #expect(message.contains("no_such_setting"), "\(message)")
            }
            #expect(session.backendPID == nil)
        }
    }

    @Test("a statement whose answer never comes fails UNAVAILABLE when its connection closes, and the next one reconnects")
    func unansweredStatementFailsWhenTheConnectionCloses() async throws {
        let temporary = try await temporaryStore(.postgres)
        let session = Self.session(temporary)
        defer { session.disconnectBlocking() }
        await #expect(try session.first("SELECT 1") { try $0.int(0) } == 1)
        let connection = try #require(session.currentConnection)
        let first = try #require(session.backendPID)
        // What postgres-nio does with a query written as the connection closes: its promise is
        // dropped with the write, so no answer ever comes. The connection then closes.
        let never = connection.eventLoop.makePromise(of: Int.self)
        defer { never.fail(CancellationError()) }
        do {
            _ = try await session.perform { () -> EventLoopFuture<Int> in
                let _: EventLoopFuture<Void> = connection.close()
                return never.futureResult
            }
            Issue.record("a statement without an answer returned")
        } catch let error as PostgresStoreError {
            guard case .unavailable = error else { throw error }
        }
        await #expect(try session.first("SELECT 1") { try $0.int(0) } == 1)
        #expect(session.backendPID != first)
    }

    @Test("a connect's statement whose answer never comes fails when the connection closes")
    func unansweredConnectStatementFailsWhenTheConnectionCloses() async throws {
        let temporary = try await temporaryStore(.postgres)
        let connection = try await PostgresConnection.connect(
            on: MultiThreadedEventLoopGroup.singleton.next(), configuration: try temporary.postgres!.connectionConfiguration(),
            id: 94, logger: Logger(label: "test"))
        let never = connection.eventLoop.makePromise(of: Int.self)
        defer { never.fail(CancellationError()) }
        try await connection.close()
        await #expect(throws: ChannelError.self) { try await PostgresSession.answer(never.futureResult, of: connection) }
    }

    @Test("the bound: at most `capacity` statements are held on the server; evicted ones are deallocated and run again")
    func bound() async throws {
        let temporary = try await temporaryStore(.postgres)
        let session = Self.session(temporary, capacity: 3)
        defer { session.disconnectBlocking() }
        // Eight texts, each used twice (so each is prepared), as an `IN (?, ?, …)` of growing
        // length would make them.
        for count in 1...8 {
            let sql = "SELECT count(*) FROM (VALUES " + Array(repeating: "(?::int8)", count: count).joined(separator: ", ") + ") v"
            for _ in 0..<2 {
                await #expect(try session.first(sql, Array(repeating: .int(1), count: count)) { try $0.int(0) } == count)
                let held = try await Self.serverStatements(session)
                #expect(held.count <= 3)
            }
        }
        #expect(session.preparedStatementCount == 8)
        let held = try await Self.serverStatements(session)
        #expect(held.count <= 3)
        #expect(session.preparedStatementNames.count <= held.count)
        // An evicted text runs again (unnamed, then prepared anew).
        for _ in 0..<2 {
            await #expect(try session.first("SELECT count(*) FROM (VALUES (?::int8)) v", [.int(1)]) { try $0.int(0) } == 1)
        }
        #expect(session.preparedStatementCount == 9)
        await #expect(try Self.serverStatements(session).count <= 3)
    }
}
