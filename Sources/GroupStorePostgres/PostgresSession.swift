import Foundation
import GroupModel
import GroupStore
import GroupStoreSQL
import Logging
import NIOCore
import PostgresNIO
import Synchronization

/// One PostgreSQL connection used by one caller at a time, through async statements that run on
/// the connection's event loop (``executor``): a statement is written from the loop, and the
/// caller resumes there when the server answered, so a call's statements cost no thread switch
/// and no thread blocks while PostgreSQL works. The store's writer and each reader own one; it
/// connects on first use and again after the connection was lost. Two background parts that keep
/// their own serial queue (the event follower and the availability probe) use the `blocking`
/// forms, which run the same statements on the loop and wait for them on that queue.
///
/// Queries (``rows(_:_:_:)``, ``first(_:_:_:)``, ``command(_:_:)``) run twice or more become
/// named prepared statements of the connection (``PostgresStatementCache``): Parse (and Describe)
/// once per connection through `PostgresDatabase.prepare(query:)`, then Bind/Execute per call
/// through `PreparedQuery.execute(_:)` with binary binds, so PostgreSQL neither parses nor
/// analyses the statement per call, and plans it once when its generic plan wins
/// (`plan_cache_mode = auto`; statements whose plan depends on their values stay unnamed, see
/// ``PostgresStatementCache/keepsCustomPlan(_:)``). Why this driver API (postgres-nio 1.33):
/// - `PostgresPreparedStatement` + `PostgresConnection.execute(_:logger:)` takes the text, name
///   and parameter types as *static* members of one Swift type per statement (ours are ~130
///   texts built at run time), keeps its per-connection cache forever (no eviction, no
///   deallocation), and remembers a failed preparation for the connection's life (one made
///   inside a failed transaction would break that text until a reconnect).
/// - SQL `PREPARE`/`EXECUTE` cannot take the binds: PostgreSQL does not give `EXECUTE`'s
///   arguments the extended protocol's parameters ("there is no parameter $1").
/// `PreparedQuery` has its own limits, handled here: its Parse sends no parameter types, so the
///   text is prepared with each parameter cast to its bind's type (`($1::int8)`, see
///   ``PGSQL/numbered(_:types:)``; a null stays bare, inferred as before), as typed as the
///   unnamed statement's; its rows keep the Describe's `text` format although the Bind asks for
///   binary (``PGRow`` reads every cell as binary); its errors come as `PostgresError`
///   (``PGState`` reads both); and it reports no command tag, so ``execute(_:_:)`` (which returns
///   the changed-row count) and `COMMIT` (answered `ROLLBACK` in a failed transaction) stay
///   unnamed.
/// Prepared statements are not transactional: one prepared inside a transaction that then fails
/// and rolls back stays usable. The cache is dropped with the connection.
final class PostgresSession: @unchecked Sendable {
    // @unchecked Sendable: used by one caller at a time (the writer's batch, a reader that
    // checked it out of the pool, a background part on its queue); each hands it on only after
    // its statement's answer.
    private let settings: PostgresStoreSettings
    private let eventLoop: any EventLoop
    /// Where a task that prefers it runs: the session's event loop. ``run(_:)`` runs its body
    /// there, so the statements are written and answered without a thread switch.
    let executor: EventLoopTaskExecutor
    private let logger: Logger
    private let id: Int
    private var connection: PostgresConnection?
    /// Statements run that may have changed rows, since the session opened: every statement
    /// that begins with `INSERT`, `UPDATE`, `DELETE` or `WITH` (a data-modifying CTE; a read
    /// written as a CTE counts too, which only errs on the safe side: a batch aborted for nothing).
    private(set) var writeCount = 0
    /// Statements run on this session so far (``PostgresBackend/readStatement(_:)`` checks that
    /// its body runs exactly one).
    private(set) var statementCount = 0
    /// Set when a statement failed inside the open transaction (PostgreSQL then refuses every
    /// statement until `ROLLBACK`).
    private(set) var transactionFailed = false
    /// Whether a transaction is open.
    private(set) var inTransaction = false
    /// The server process of the current connection (`pg_backend_pid()`), once connected.
    private(set) var backendPID: Int32?
    /// Called with ``backendPID`` after each connect.
    var onConnect: (@Sendable (Int32) -> Void)?
    /// Fails the statement being waited for (``perform(_:)``), if any, and the connection it was
    /// written to: set while one waits, called when that connection closes (the close of an
    /// earlier connection, reported late, fails nothing).
    private let waiting = Mutex<(connection: ObjectIdentifier, fail: @Sendable (any Error) -> Void)?>(nil)

    /// Session settings run after each connect (besides `statement_timeout`).
    private let setup: [String]
    /// The statements prepared on the current connection.
    private var statements: PostgresStatementCache
    /// The driver's handle of each prepared statement, by the cache's name.
    private var preparedQueries: [String: PreparedQuery] = [:]
    /// Statement texts remembered per connection, so prepared statements held, at most (see
    /// ``PostgresStatementCache``).
    static let statementCapacity = 200

    init(
        settings: PostgresStoreSettings, eventLoop: any EventLoop, logger: Logger, id: Int, setup: [String] = [],
        statementCapacity: Int = PostgresSession.statementCapacity
    ) {
        self.settings = settings
        self.eventLoop = eventLoop
        self.executor = EventLoopTaskExecutor(eventLoop)
        self.logger = logger
        self.id = id
        self.setup = setup
        self.statements = PostgresStatementCache(capacity: statementCapacity)
    }

    /// The open connection, if any (tests).
    var currentConnection: PostgresConnection? { connection }

    /// How many statements this session prepared on its current connection (evicted ones too).
    var preparedStatementCount: Int { statements.preparedCount }
    /// The names of the statements prepared on the current connection now.
    var preparedStatementNames: [String] { statements.preparedNames }

    /// Runs `body` with this session on its event loop (a task executor preference): the
    /// statements it awaits are written from the loop and resume there.
    func run<T: Sendable>(_ body: (PostgresSession) async throws -> T) async throws -> T {
        try await withTaskExecutorPreference(executor) { try await body(self) }
    }

    /// Runs `body` on the session's event loop and waits for it, blocking the calling thread:
    /// for the parts that keep a serial dispatch queue of their own (the event follower, the
    /// availability probe). Never call it from an event loop or from a task.
    func blocking<T: Sendable>(_ body: @escaping @Sendable (PostgresSession) async throws -> T) throws -> T {
        try waitBlocking(on: executor) { try await body(self) }
    }

    /// The connection, opened (with the session settings) if there is none.
    private func open() async throws -> PostgresConnection {
        if let connection, !connection.isClosed { return connection }
        connection = nil
        do {
            let connection = try await PostgresConnection.connect(
                on: eventLoop, configuration: try settings.connectionConfiguration(), id: id, logger: logger
            ).get()
            do {
                try await prepareSession(connection)
            } catch {
                // The server may go away between the connect and the session settings: a
                // connection dropped unclosed leaks its channel (and trips postgres-nio's
                // assertion in a debug build).
                try? await connection.close().get()
                throw error
            }
            // A statement waiting when the connection closes fails at once (``perform(_:)``).
            // The callback holds the connection, so its identity is not reused before it runs.
            connection.closeFuture.whenComplete { [weak self, connection] _ in
                let waiter = self?.waiting.withLock { $0 }
                if let waiter, waiter.connection == ObjectIdentifier(connection) { waiter.fail(ChannelError.ioOnClosedChannel) }
            }
            // A new server session holds no prepared statement.
            statements = PostgresStatementCache(capacity: statements.capacity)
            preparedQueries = [:]
            self.connection = connection
            return connection
        } catch {
            throw PostgresStoreError.unavailable("cannot connect to PostgreSQL: \(String(reflecting: error))", cause: error)
        }
    }

    /// The session settings of a new connection, and its server process id.
    private func prepareSession(_ connection: PostgresConnection) async throws {
        // A session idle inside a transaction for a statement timeout is ended by the server,
        // its locks with it: the client on the other end is gone without a close (its packets
        // dropped on the way; this node's side gives up after ``answerDeadline``).
        //
        // Every statement of the store finds its rows by key, but its prepared plan is made
        // once per connection, with the statistics of that moment: planned while a table was
        // small (a new database, a bench's), a key probe became a sequential scan, and stayed
        // one as the table grew, until an `ANALYZE` made PostgreSQL plan it again (a probe of
        // `joined_counts` read thousands of rows per join). Sequential and bitmap scans are
        // priced out: a bitmap scan of a group's memberships, filtered by user, looked as
        // cheap as the probe by the whole key while the average group had two members, and
        // read every membership of a big one. A statement with no usable index still scans;
        // the name search, whose trigram index serves bitmap scans only, turns them back on
        // for its transaction (``PostgresBackend/searchGroups``).
        //
        // JIT compilation is off: a prepared statement's generic plan prices each subquery for
        // a group of average size, and the joined-group list's statement (50 communities, 1,000
        // topics, four subqueries each) came to a cost of 21 million in a database holding two
        // groups of 100,000 members: past `jit_above_cost`, each call compiled its expressions
        // for a second (`EXPLAIN ANALYZE`: JIT 998 ms, execution 9 ms). Every statement of the store
        // reads rows by key; compiled expressions pay back only over millions of rows.
        let commands = [
            "SET statement_timeout = \(settings.statementTimeoutMilliseconds)",
            "SET idle_in_transaction_session_timeout = \(settings.statementTimeoutMilliseconds)",
            "SET enable_seqscan = off",
            "SET enable_bitmapscan = off",
            "SET jit = off",
        ]
        for command in commands + setup {
            _ = try await Self.answer(connection.query(PostgresQuery(unsafeSQL: command), logger: logger), of: connection)
        }
        let pid = try await Self.answer(
            connection.query(PostgresQuery(unsafeSQL: "SELECT pg_backend_pid()"), logger: logger), of: connection
        ).rows.first.map { try $0.makeRandomAccess()[0].decode(Int32.self) }
        backendPID = pid
        if let pid { onConnect?(pid) }
    }

    /// Waits for `future`, a statement's answer on `connection`, or fails (as a lost connection)
    /// when the connection closes first: a query written as the connection closes is never
    /// answered (``perform(_:)``). For the few statements of a connect; each adds a callback to
    /// the connection's close.
    static func answer<T: Sendable>(_ future: EventLoopFuture<T>, of connection: PostgresConnection) async throws -> T {
        try await Awaited<T>().value { awaited in
            connection.closeFuture.whenComplete { _ in awaited.finish(.failure(ChannelError.ioOnClosedChannel)) }
            future.whenComplete { awaited.finish($0) }
        }
    }

    /// Closes the connection (the next statement opens a new one).
    func disconnect() async {
        if let connection { try? await connection.close().get() }
        forgetConnection()
    }

    /// Closes the connection, blocking (see ``blocking(_:)``).
    func disconnectBlocking() {
        if let connection { try? connection.close().wait() }
        forgetConnection()
    }

    private func forgetConnection() {
        connection = nil
        statements = PostgresStatementCache(capacity: statements.capacity)
        preparedQueries = [:]
        inTransaction = false
        transactionFailed = false
    }

    /// What a statement answered.
    struct Answer: Sendable {
        var rows: [PostgresRow]
        /// The command tag (`nil` for a prepared statement: the driver does not report it).
        var metadata: PostgresQueryMetadata?
    }

    /// Runs `sql` (with `?` placeholders) and returns its rows (and, unnamed, its command tag):
    /// as a prepared statement of the connection when `mayPrepare` and ``PostgresStatementCache``
    /// says so.
    private func run(_ sql: String, _ arguments: [PGValue], mayPrepare: Bool) async throws -> Answer {
        let connection = try await open()
        statementCount += 1
        if Self.mayWrite(sql) { writeCount += 1 }
        // A failed transaction refuses every statement but ROLLBACK: nothing to prepare then.
        guard mayPrepare, !transactionFailed else { return try await unnamed(connection, sql, arguments) }
        if !inTransaction, !statements.pendingDeallocations.isEmpty {
            try await deallocateEvicted(connection)
        }
        // The parameter types as one byte each: the key is hashed on every statement, and a
        // string of type names (a batch's statements bind up to 90 parameters) cost more to
        // build and hash than the lookup saves.
        let signature = arguments.map(\.typeCode)
        switch statements.lookup(sql, types: signature) {
        case .unnamed:
            return try await unnamed(connection, sql, arguments)
        case .prepare(let name):
            let text = arguments.isEmpty ? sql : PGSQL.numbered(sql, types: arguments.map(\.typeName))
            let query = try await perform { connection.prepare(query: text) }
            preparedQueries[name] = query
            statements.prepared(sql, types: signature, name: name)
            return try await execute(query, named: name, arguments)
        case .execute(let name):
            guard let query = preparedQueries[name] else {
                statements.forget(name: name, deallocate: false)
                return try await unnamed(connection, sql, arguments)
            }
            return try await execute(query, named: name, arguments)
        }
    }

    /// Bind and Execute of the prepared `query`.
    private func execute(_ query: PreparedQuery, named name: String, _ arguments: [PGValue]) async throws -> Answer {
        let binds = try arguments.map { try $0.postgresData() }
        do {
            return Answer(rows: try await perform { query.execute(binds) }, metadata: nil)
        } catch {
            switch PGState.of(error) {
            case PGState.unknownPreparedStatement?:
                // The server lost it (a `DEALLOCATE ALL` or `DISCARD ALL` on this connection).
                statements.forget(name: name, deallocate: false)
                preparedQueries[name] = nil
            case PGState.featureNotSupported?:
                // "cached plan must not change result type": prepare it again on the next use.
                statements.forget(name: name, deallocate: true)
            default:
                break
            }
            throw error
        }
    }

    /// Deallocates the prepared statements evicted from the cache (outside a transaction: a
    /// failed `Close` changes nothing then).
    private func deallocateEvicted(_ connection: PostgresConnection) async throws {
        var names = statements.takePendingDeallocations()[...]
        while let name = names.popFirst() {
            guard let query = preparedQueries.removeValue(forKey: name) else { continue }
            do {
                try await perform { query.deallocate() }
            } catch let failure as PostgresStoreError {
                // Timed out: try again before a later statement. (A lost connection took every
                // prepared statement with it, and `disconnect()` emptied the cache.)
                if case .timedOut = failure {
                    preparedQueries[name] = query
                    statements.deallocateLater([name] + names)
                }
                throw failure
            } catch {
                // Refused: something unforeseen that should not fail the caller's statement.
                logger.warning(
                    "cannot deallocate a prepared statement", metadata: ["name": "\(name)", "error": "\(String(reflecting: error))"])
            }
        }
    }

    /// Runs `sql` as an unnamed statement.
    private func unnamed(_ connection: PostgresConnection, _ sql: String, _ arguments: [PGValue]) async throws -> Answer {
        var bindings = PostgresBindings(capacity: arguments.count)
        for argument in arguments { argument.bind(into: &bindings) }
        let query = PostgresQuery(unsafeSQL: arguments.isEmpty ? sql : PGSQL.numbered(sql), binds: bindings)
        let result = try await perform { connection.query(query, logger: logger) }
        return Answer(rows: result.rows, metadata: result.metadata)
    }

    /// How long a statement may go unanswered before the connection is taken for lost:
    /// `statement_timeout` (PostgreSQL answers a statement that runs longer with an error) plus as
    /// much again, at least 10 s (a `COMMIT` waits for its flush, which the timeout does not cut).
    var answerDeadline: TimeAmount {
        let timeout = Int64(settings.statementTimeoutMilliseconds)
        return .milliseconds(timeout + max(timeout, 10_000))
    }

    /// Waits for `future`, turning a lost connection and a timeout into ``PostgresStoreError``s.
    ///
    /// A statement unanswered after ``answerDeadline`` closes the connection, which fails it: the
    /// server or the network dropped the connection without a word (packets that vanish are
    /// never refused, and TCP would retry for minutes), and the caller gets `UNAVAILABLE` instead
    /// of waiting for its deadline.
    ///
    /// The wait ends at the first of the driver's answer, the connection's close (a callback
    /// `open()` registers) and the watchdog (`Awaited`): postgres-nio writes a query to its
    /// channel without a promise, so a query written as the connection closes (the server ended
    /// the session at that moment) is dropped with the write, and its answer never comes; a
    /// writer that waited for it waited forever.
    func perform<T: Sendable>(_ future: () -> EventLoopFuture<T>) async throws -> T {
        let watched = connection
        var watchdog: Scheduled<Void>?
        defer {
            watchdog?.cancel()
            if watched != nil { waiting.withLock { $0 = nil } }
        }
        do {
            return try await Awaited<T>().value { awaited in
                guard let watched else { return future().whenComplete { awaited.finish($0) } }
                waiting.withLock { $0 = (ObjectIdentifier(watched), { awaited.finish(.failure($0)) }) }
                watchdog = eventLoop.scheduleTask(in: answerDeadline) { [logger, id, answerDeadline] in
                    logger.warning(
                        "PostgreSQL did not answer a statement in time; closing the connection",
                        metadata: ["session": "\(id)", "after_ms": "\(answerDeadline.nanoseconds / 1_000_000)"])
                    let _: EventLoopFuture<Void> = watched.close()
                    awaited.finish(.failure(ChannelError.ioOnClosedChannel))
                }
                if watched.isClosed {
                    // Closed since `open()` looked: nothing written now would be answered.
                    awaited.finish(.failure(ChannelError.ioOnClosedChannel))
                } else {
                    future().whenComplete { awaited.finish($0) }
                }
            }
        } catch {
            if inTransaction { transactionFailed = true }
            if PGState.isConnectionLoss(error) {
                await disconnect()
                throw PostgresStoreError.unavailable("the PostgreSQL connection was lost: \(String(reflecting: error))", cause: error)
            }
            if PGState.of(error) == PGState.queryCanceled {
                throw PostgresStoreError.timedOut(error)
            }
            throw error
        }
    }

    /// Runs a query, calling `body` with each row.
    func rows(_ sql: String, _ arguments: [PGValue] = [], _ body: (PGRow) throws -> Void) async throws {
        for row in try await run(sql, arguments, mayPrepare: true).rows { try body(PGRow(row)) }
    }

    /// The first row decoded by `decode`, or `nil` when there is none.
    func first<T>(_ sql: String, _ arguments: [PGValue] = [], _ decode: (PGRow) throws -> T) async throws -> T? {
        guard let row = try await run(sql, arguments, mayPrepare: true).rows.first else { return nil }
        return try decode(PGRow(row))
    }

    /// Runs a statement that changes rows; returns how many it changed. Always unnamed: the
    /// count is in the command tag, which the driver reports for unnamed statements only.
    @discardableResult
    func execute(_ sql: String, _ arguments: [PGValue] = []) async throws -> Int {
        try await run(sql, arguments, mayPrepare: false).metadata?.rows ?? 0
    }

    /// Whether `sql` may change rows (see ``writeCount``).
    private static func mayWrite(_ sql: String) -> Bool {
        for keyword in ["INSERT", "UPDATE", "DELETE", "WITH"] where sql.hasPrefix(keyword) { return true }
        return false
    }

    /// Runs a statement that returns nothing of interest (session commands, locks).
    func command(_ sql: String, _ arguments: [PGValue] = []) async throws {
        _ = try await run(sql, arguments, mayPrepare: true)
    }

    /// The rows of a query, blocking (see ``blocking(_:)``).
    func rowsBlocking(_ sql: String, _ arguments: [PGValue] = []) throws -> [PGRow] {
        try blocking { try await $0.run(sql, arguments, mayPrepare: true) }.rows.map(PGRow.init)
    }

    /// Runs a statement that returns nothing of interest, blocking (see ``blocking(_:)``).
    func commandBlocking(_ sql: String, _ arguments: [PGValue] = []) throws {
        _ = try blocking { try await $0.run(sql, arguments, mayPrepare: true) }
    }

    // MARK: Transactions

    func begin(_ mode: String = "BEGIN") async throws {
        try await command(mode)
        inTransaction = true
        transactionFailed = false
    }

    func commit() async throws {
        defer {
            inTransaction = false
            transactionFailed = false
        }
        let result = try await run("COMMIT", [], mayPrepare: false)
        // A transaction in the failed state answers COMMIT with ROLLBACK.
        if result.metadata?.command == "ROLLBACK" {
            throw PostgresStoreError.rolledBack
        }
    }

    func rollback() async {
        guard inTransaction else { return }
        inTransaction = false
        transactionFailed = false
        if let connection, !connection.isClosed { _ = try? await unnamed(connection, "ROLLBACK", []) }
    }

    /// Runs `body` in a read-only transaction that sees one snapshot (`REPEATABLE READ`).
    func readTransaction<T>(_ body: () async throws -> T) async throws -> T {
        try await begin("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        do {
            let value = try await body()
            try await commit()
            return value
        } catch {
            await rollback()
            throw error
        }
    }
}
