import Foundation
import GroupModel
import GroupStore
import GroupStoreSQL
import Logging
import NIOCore
import PostgresNIO
import Synchronization

/// A value bound to a PostgreSQL statement parameter (`$1`, `$2`…).
enum PGValue: Sendable {
    case integer(Int64)
    case text(String)
    case bytes([UInt8])
    case null
    /// A `text[]` (for `= ANY($n)`).
    case texts([String])
    /// A `bigint[]` (for `= ANY($n)`).
    case integers([Int64])
    /// A `text[]` whose elements may be null (a column of rows inserted from arrays).
    case optionalTexts([String?])
    /// A `bytea[]` (a column of rows inserted from arrays).
    case byteArrays([[UInt8]])
    /// A `bigint[]` whose elements may be null (a column of rows inserted from arrays).
    case optionalIntegers([Int64?])

    static func int(_ value: Int) -> PGValue { .integer(Int64(value)) }
    /// A boolean stored as 0 or 1 (the schema keeps flags as integers, as on SQLite).
    static func bool(_ value: Bool) -> PGValue { .integer(value ? 1 : 0) }
    static func text(_ value: String?) -> PGValue { value.map { .text($0) } ?? .null }
    static func integer(_ value: Int64?) -> PGValue { value.map { .integer($0) } ?? .null }

    /// The parameter type PostgreSQL gets for this value: the type postgres-nio sends with it
    /// (`unknown` for a null, whose type PostgreSQL infers from the statement).
    var typeName: String {
        switch self {
        case .integer: "int8"
        case .text: "text"
        case .bytes: "bytea"
        case .null: "unknown"
        case .texts, .optionalTexts: "text[]"
        case .byteArrays: "bytea[]"
        case .integers, .optionalIntegers: "int8[]"
        }
    }

    /// ``typeName`` as one byte (the prepared-statement cache's key, ``PostgresStatementCache``).
    var typeCode: UInt8 {
        switch self {
        case .integer: 0
        case .text: 1
        case .bytes: 2
        case .null: 3
        case .texts, .optionalTexts: 4
        case .byteArrays: 5
        case .integers, .optionalIntegers: 6
        }
    }

    /// The value as the driver's `PostgresData` (binary; a null has no type, as with
    /// ``bind(into:)``), for postgres-nio's `PreparedQuery.execute(_:)`.
    func postgresData() throws -> PostgresData {
        switch self {
        case .integer(let value):
            var buffer = ByteBuffer()
            buffer.writeInteger(value)
            return PostgresData(type: .int8, formatCode: .binary, value: buffer)
        case .text(let value): return PostgresData(type: .text, formatCode: .binary, value: ByteBuffer(string: value))
        case .bytes(let value): return PostgresData(type: .bytea, formatCode: .binary, value: ByteBuffer(bytes: value))
        case .null: return PostgresData(type: .null, formatCode: .binary, value: nil)
        case .texts(let values):
            var buffer = ByteBuffer()
            try values.encode(into: &buffer, context: .default)
            return PostgresData(type: [String].psqlType, formatCode: .binary, value: buffer)
        case .integers(let values):
            var buffer = ByteBuffer()
            try values.encode(into: &buffer, context: .default)
            return PostgresData(type: [Int64].psqlType, formatCode: .binary, value: buffer)
        case .optionalTexts(let values):
            return Self.textArray(values)
        case .byteArrays(let values):
            return Self.byteaArray(values)
        case .optionalIntegers(let values):
            return Self.int8Array(values)
        }
    }

    /// A one-dimensional `text[]` in PostgreSQL's binary array format, null elements included
    /// (the driver encodes arrays of non-optional elements only): dimensions, a has-nulls flag,
    /// the element type, then per dimension its length and lower bound (none for an empty
    /// array), then each element as its length (-1: null) and bytes.
    static func textArray(_ values: [String?]) -> PostgresData {
        var buffer = arrayHeader(of: .text, count: values.count, hasNulls: values.contains(nil))
        for value in values {
            if let value {
                buffer.writeInteger(Int32(value.utf8.count))
                buffer.writeString(value)
            } else {
                buffer.writeInteger(Int32(-1))
            }
        }
        return PostgresData(type: .textArray, formatCode: .binary, value: buffer)
    }

    /// A one-dimensional `bytea[]` in the same format (``textArray(_:)``).
    static func byteaArray(_ values: [[UInt8]]) -> PostgresData {
        var buffer = arrayHeader(of: .bytea, count: values.count, hasNulls: false)
        for value in values {
            buffer.writeInteger(Int32(value.count))
            buffer.writeBytes(value)
        }
        return PostgresData(type: .byteaArray, formatCode: .binary, value: buffer)
    }

    /// A one-dimensional `bigint[]` in the same format, null elements included (``textArray(_:)``).
    static func int8Array(_ values: [Int64?]) -> PostgresData {
        var buffer = arrayHeader(of: .int8, count: values.count, hasNulls: values.contains(nil))
        for value in values {
            if let value {
                buffer.writeInteger(Int32(8))
                buffer.writeInteger(value)
            } else {
                buffer.writeInteger(Int32(-1))
            }
        }
        return PostgresData(type: .int8Array, formatCode: .binary, value: buffer)
    }

    /// A binary array's header (``textArray(_:)``).
    private static func arrayHeader(of element: PostgresDataType, count: Int, hasNulls: Bool) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeInteger(Int32(count == 0 ? 0 : 1))
        buffer.writeInteger(Int32(hasNulls ? 1 : 0))
        buffer.writeInteger(element.rawValue)
        if count > 0 {
            buffer.writeInteger(Int32(count))
            buffer.writeInteger(Int32(1))
        }
        return buffer
    }

    var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    func bind(into bindings: inout PostgresBindings) {
        switch self {
        case .integer(let value): bindings.append(value)
        case .text(let value): bindings.append(value)
        case .bytes(let value): bindings.append(ByteBuffer(bytes: value))
        case .null: bindings.appendNull()
        case .texts(let values): bindings.append(values)
        case .integers(let values): bindings.append(values)
        case .optionalTexts(let values): bindings.append(Self.textArray(values))
        case .byteArrays(let values): bindings.append(Self.byteaArray(values))
        case .optionalIntegers(let values): bindings.append(Self.int8Array(values))
        }
    }
}

/// One row of a result, read by column index (the shared row decoders take it). It keeps the
/// driver's random-access row (the row's byte buffer sliced once per column); a cell is made
/// when a column is read.
struct PGRow: ColumnReader {
    let row: PostgresRandomAccessRow

    init(_ row: PostgresRow) {
        self.row = row.makeRandomAccess()
    }

    /// Column `index`, read as binary: every statement asks for binary results (postgres-nio's
    /// Bind), but the rows of a ``PreparedQuery`` keep the `text` format of its Describe answer.
    private func cell(_ index: Int) -> PostgresCell {
        let cell = row[index]
        return PostgresCell(bytes: cell.bytes, dataType: cell.dataType, format: .binary, columnName: cell.columnName, columnIndex: index)
    }

    func isNull(_ index: Int) -> Bool { row[index].bytes == nil }
    func int64(_ index: Int) throws -> Int64 {
        let cell = cell(index)
        if cell.dataType == .bool { return try cell.decode(Bool.self) ? 1 : 0 }
        return try cell.decode(Int64.self)
    }
    func int(_ index: Int) throws -> Int { Int(try int64(index)) }
    func optionalInt64(_ index: Int) throws -> Int64? { isNull(index) ? nil : try int64(index) }
    func text(_ index: Int) throws -> String {
        let cell = cell(index)
        return cell.bytes == nil ? "" : try cell.decode(String.self)
    }
    func optionalText(_ index: Int) throws -> String? {
        let cell = cell(index)
        return cell.bytes == nil ? nil : try cell.decode(String.self)
    }
    func bool(_ index: Int) throws -> Bool { try int64(index) != 0 }
    func blob(_ index: Int) throws -> [UInt8] {
        guard var buffer = row[index].bytes else { return [] }
        return buffer.readBytes(length: buffer.readableBytes) ?? []
    }
}

/// SQL written with `?` placeholders, as PostgreSQL's numbered ones (`$1`, `$2`…), converted
/// once per statement text. Statement texts hold no `?` inside string literals.
enum PGSQL {
    private static let converted = Mutex<[String: String]>([:])

    static func numbered(_ sql: String) -> String {
        if let known = converted.withLock({ $0[sql] }) { return known }
        var result = ""
        result.reserveCapacity(sql.utf8.count + 16)
        var number = 0
        for character in sql {
            if character == "?" {
                number += 1
                result += "$\(number)"
            } else {
                result.append(character)
            }
        }
        converted.withLock { $0[sql] = result }
        return result
    }
}

extension PGSQL {
    /// `sql` with its `?` numbered and each cast to `types[n]` (`($1::int8)`; a null's
    /// `unknown` left bare): a statement prepared without parameter types (postgres-nio's `PreparedQuery`)
    /// then types its parameters as an unnamed statement bound with these values does.
    static func numbered(_ sql: String, types: [String]) -> String {
        var result = ""
        result.reserveCapacity(sql.utf8.count + 16 * types.count)
        var number = 0
        for character in sql {
            if character == "?" {
                let type = number < types.count ? types[number] : "unknown"
                number += 1
                result += type == "unknown" ? "$\(number)" : "($\(number)::\(type))"
            } else {
                result.append(character)
            }
        }
        return result
    }
}

/// PostgreSQL error classes the store tells apart (SQLSTATE codes).
enum PGState {
    /// A statement cancelled (`statement_timeout`).
    static let queryCanceled = "57014"
    /// A prepared statement name the server does not hold (`invalid_sql_statement_name`).
    static let unknownPreparedStatement = "26000"
    /// Among others, "cached plan must not change result type" (a table a prepared statement
    /// reads with `*` changed its columns).
    static let featureNotSupported = "0A000"
    /// A deadlock PostgreSQL broke by failing this transaction.
    static let deadlockDetected = "40P01"
    /// A serialization failure.
    static let serializationFailure = "40001"

    /// Whether `error` rolled back a transaction that succeeds when run again (a deadlock, a
    /// serialization failure).
    static func isRetryable(_ error: any Error) -> Bool {
        let state = of(error)
        return state == deadlockDetected || state == serializationFailure
    }

    /// The SQLSTATE of a server error, if `error` is one (postgres-nio's `PreparedQuery` reports errors as
    /// the older `PostgresError`).
    static func of(_ error: any Error) -> String? {
        if case .server(let message)? = error as? PostgresError { return message.fields[.sqlState] }
        return (error as? PSQLError)?.serverInfo?[.sqlState]
    }

    /// Whether `error` means the connection is gone or unusable (not an SQL error the server
    /// answered with): the session reconnects, and the store reports itself unavailable.
    static func isConnectionLoss(_ error: any Error) -> Bool {
        if let error = error as? PSQLError {
            switch error.code {
            case .server:
                // Administrator commands (57P01–57P03) and "cannot connect now" end sessions too.
                guard let state = error.serverInfo?[.sqlState] else { return false }
                return state.hasPrefix("57P") || state.hasPrefix("08")
            case .queryCancelled, .tooManyParameters, .invalidCommandTag:
                return false
            default:
                return true
            }
        }
        if let error = error as? PostgresError {
            switch error {
            case .server:
                guard let state = of(error) else { return false }
                return state.hasPrefix("57P") || state.hasPrefix("08")
            case .connectionClosed, .protocol:
                return true
            }
        }
        return error is ChannelError || error is IOError
    }
}

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
        let commands = [
            "SET statement_timeout = \(settings.statementTimeoutMilliseconds)",
            "SET idle_in_transaction_session_timeout = \(settings.statementTimeoutMilliseconds)",
            "SET enable_seqscan = off",
            "SET enable_bitmapscan = off",
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

/// Runs `body` in a task on `executor` (an event loop's: never the cooperative pool, whose few
/// threads may all be blocked) and waits for it, blocking the calling thread: for the parts of the
/// PostgreSQL store that keep a serial dispatch queue of their own. Never call it from an event
/// loop or from a task.
func waitBlocking<T: Sendable>(on executor: EventLoopTaskExecutor, _ body: @escaping @Sendable () async throws -> T) throws -> T {
    let done = DispatchSemaphore(value: 0)
    let outcome = Mutex<Result<T, any Error>?>(nil)
    Task(executorPreference: executor) {
        let result: Result<T, any Error>
        do { result = .success(try await body()) } catch { result = .failure(error) }
        outcome.withLock { $0 = result }
        done.signal()
    }
    done.wait()
    return try outcome.withLock { $0! }.get()
}

/// What a session waits for (``PostgresSession/perform(_:)``, ``PostgresSession/answer(_:of:)``):
/// the first of the driver's answer, the connection's close and the watchdog settles it and
/// resumes the waiting task.
private final class Awaited<T: Sendable>: Sendable {
    private struct State {
        var settled = false
        var continuation: UnsafeContinuation<T, any Error>?
    }

    private let state = Mutex(State())

    /// Suspends until the first ``finish(_:)``; `start` (which arranges the calls of
    /// ``finish(_:)``) runs once the continuation is in place, so an answer that comes at once
    /// is not lost.
    func value(_ start: (Awaited<T>) -> Void) async throws -> T {
        try await withUnsafeThrowingContinuation { continuation in
            state.withLock { $0.continuation = continuation }
            start(self)
        }
    }

    func finish(_ outcome: Result<T, any Error>) {
        let continuation = state.withLock { state -> UnsafeContinuation<T, any Error>? in
            guard !state.settled else { return nil }
            state.settled = true
            defer { state.continuation = nil }
            return state.continuation
        }
        continuation?.resume(with: outcome)
    }
}

/// A task executor that runs jobs on a NIO event loop: a task that prefers it runs its
/// nonisolated code there, so the PostgreSQL statements it awaits are written from the loop
/// and it resumes on the loop when they are answered (one `execute` per resumption, no
/// wake-up of another thread).
final class EventLoopTaskExecutor: TaskExecutor {
    let eventLoop: any EventLoop

    init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}

enum PostgresStoreError: StoreFailure, CustomStringConvertible {
    /// The database cannot be reached (connect failed, connection lost, in back-off).
    case unavailable(String, cause: (any Error)?)
    /// A statement ran past `statement_timeout`.
    case timedOut(any Error)
    /// Every connection of the pool is busy and too many calls wait already.
    case poolExhausted(Int)
    /// COMMIT found the transaction failed and rolled it back.
    case rolledBack
    /// Rows the batch held in memory until one statement writes them all (its sends' bodies, the
    /// rows of its creations, joins and group updates) were refused: the batch fails as a whole
    /// (they belong to earlier mutations of it).
    case heldRowsRefused(any Error)

    var description: String {
        switch self {
        case .unavailable(let message, _): message
        case .timedOut(let error): "a PostgreSQL statement ran past statement_timeout: \(String(reflecting: error))"
        case .poolExhausted(let waiting): "every PostgreSQL connection is busy and \(waiting) calls wait already"
        case .rolledBack: "PostgreSQL rolled the transaction back"
        case .heldRowsRefused(let error): "PostgreSQL refused rows the batch held for its last statements: \(String(reflecting: error))"
        }
    }

    /// The error `Store` hands to callers.
    var groupError: GroupError {
        switch self {
        case .unavailable(let message, _):
            GroupError(code: .unavailable, reason: .storeUnavailable, message: message)
        case .timedOut:
            GroupError(code: .unavailable, reason: .storeTimeout, message: description)
        case .poolExhausted:
            GroupError(code: .resourceExhausted, reason: .storeBusy, message: description)
        case .rolledBack:
            GroupError(code: .aborted, reason: .internal, message: description)
        case .heldRowsRefused:
            GroupError(code: .internal, reason: .internal, message: description)
        }
    }
}

extension GroupError.Reason {
    /// The database cannot be reached; retry later or on another node.
    public static let storeUnavailable: Self = "STORE_UNAVAILABLE"
    /// A database statement ran past the configured statement timeout.
    public static let storeTimeout: Self = "STORE_TIMEOUT"
    /// Every database connection is busy and the wait queue is full.
    public static let storeBusy: Self = "STORE_BUSY"
}
