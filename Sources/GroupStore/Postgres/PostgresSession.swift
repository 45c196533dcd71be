import Foundation
import GroupModel
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

    static func int(_ value: Int) -> PGValue { .integer(Int64(value)) }
    /// A boolean stored as 0 or 1 (the schema keeps flags as integers, as on SQLite).
    static func bool(_ value: Bool) -> PGValue { .integer(value ? 1 : 0) }
    static func text(_ value: String?) -> PGValue { value.map { .text($0) } ?? .null }
    static func integer(_ value: Int64?) -> PGValue { value.map { .integer($0) } ?? .null }

    func bind(into bindings: inout PostgresBindings) {
        switch self {
        case .integer(let value): bindings.append(value)
        case .text(let value): bindings.append(value)
        case .bytes(let value): bindings.append(ByteBuffer(bytes: value))
        case .null: bindings.appendNull()
        case .texts(let values): bindings.append(values)
        case .integers(let values): bindings.append(values)
        }
    }
}

/// One row of a result, read by column index (the shared row decoders take it).
struct PGRow: ColumnReader {
    let cells: [PostgresCell]

    init(_ row: PostgresRow) {
        var cells: [PostgresCell] = []
        cells.reserveCapacity(row.count)
        for cell in row { cells.append(cell) }
        self.cells = cells
    }

    func isNull(_ index: Int) -> Bool { cells[index].bytes == nil }
    func int64(_ index: Int) throws -> Int64 {
        let cell = cells[index]
        if cell.dataType == .bool { return try cell.decode(Bool.self) ? 1 : 0 }
        return try cell.decode(Int64.self)
    }
    func int(_ index: Int) throws -> Int { Int(try int64(index)) }
    func optionalInt64(_ index: Int) throws -> Int64? { isNull(index) ? nil : try int64(index) }
    func text(_ index: Int) throws -> String { isNull(index) ? "" : try cells[index].decode(String.self) }
    func optionalText(_ index: Int) throws -> String? { isNull(index) ? nil : try cells[index].decode(String.self) }
    func bool(_ index: Int) throws -> Bool { try int64(index) != 0 }
    func blob(_ index: Int) throws -> [UInt8] {
        guard var buffer = cells[index].bytes else { return [] }
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

/// PostgreSQL error classes the store tells apart (SQLSTATE codes).
enum PGState {
    /// A statement cancelled (`statement_timeout`).
    static let queryCanceled = "57014"

    /// The SQLSTATE of a server error, if `error` is one.
    static func of(_ error: any Error) -> String? {
        (error as? PSQLError)?.serverInfo?[.sqlState]
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
        return error is ChannelError || error is IOError
    }
}

/// One PostgreSQL connection used synchronously, from one thread at a time (never an event
/// loop: every call blocks until the server answered). The store's writer and each reader own
/// one; it connects on first use and again after the connection was lost.
final class PostgresSession: @unchecked Sendable {
    // @unchecked Sendable: used by one thread at a time (the writer's queue, or a reader that
    // checked it out of the pool).
    private let settings: PostgresStoreSettings
    private let eventLoop: any EventLoop
    private let logger: Logger
    private let id: Int
    private var connection: PostgresConnection?
    /// Statements run that may have changed rows, since the session opened: every statement
    /// that begins with `INSERT`, `UPDATE`, `DELETE` or `WITH` (a data-modifying CTE; a read
    /// written as a CTE counts too, which only errs on the safe side: a batch aborted for nothing).
    private(set) var writeCount = 0
    /// Set when a statement failed inside the open transaction (PostgreSQL then refuses every
    /// statement until `ROLLBACK`).
    private(set) var transactionFailed = false
    /// Whether a transaction is open.
    private(set) var inTransaction = false
    /// The server process of the current connection (`pg_backend_pid()`), once connected.
    private(set) var backendPID: Int32?
    /// Called with ``backendPID`` after each connect.
    var onConnect: (@Sendable (Int32) -> Void)?

    /// Session settings run after each connect (besides `statement_timeout`).
    private let setup: [String]

    init(settings: PostgresStoreSettings, eventLoop: any EventLoop, logger: Logger, id: Int, setup: [String] = []) {
        self.settings = settings
        self.eventLoop = eventLoop
        self.logger = logger
        self.id = id
        self.setup = setup
    }

    /// The connection, opened (with the session settings) if there is none.
    private func open() throws -> PostgresConnection {
        if let connection, !connection.isClosed { return connection }
        connection = nil
        do {
            let connection = try PostgresConnection.connect(
                on: eventLoop, configuration: try settings.connectionConfiguration(), id: id, logger: logger
            ).wait()
            for command in ["SET statement_timeout = \(settings.statementTimeoutMilliseconds)"] + setup {
                _ = try connection.query(PostgresQuery(unsafeSQL: command), logger: logger).wait()
            }
            let pid = try connection.query(PostgresQuery(unsafeSQL: "SELECT pg_backend_pid()"), logger: logger).wait()
                .rows.first.map { try $0.makeRandomAccess()[0].decode(Int32.self) }
            backendPID = pid
            if let pid { onConnect?(pid) }
            self.connection = connection
            return connection
        } catch {
            throw PostgresStoreError.unavailable("cannot connect to PostgreSQL: \(String(reflecting: error))", cause: error)
        }
    }

    /// Closes the connection (the next statement opens a new one).
    func disconnect() {
        if let connection { try? connection.close().wait() }
        connection = nil
        inTransaction = false
        transactionFailed = false
    }

    /// Runs `sql` (with `?` placeholders) and returns its rows and the count the server reported.
    private func run(_ sql: String, _ arguments: [PGValue]) throws -> PostgresQueryResult {
        let connection = try open()
        if Self.mayWrite(sql) { writeCount += 1 }
        var bindings = PostgresBindings(capacity: arguments.count)
        for argument in arguments { argument.bind(into: &bindings) }
        do {
            return try connection.query(
                PostgresQuery(unsafeSQL: arguments.isEmpty ? sql : PGSQL.numbered(sql), binds: bindings), logger: logger
            ).wait()
        } catch {
            if inTransaction { transactionFailed = true }
            if PGState.isConnectionLoss(error) {
                disconnect()
                throw PostgresStoreError.unavailable("the PostgreSQL connection was lost: \(String(reflecting: error))", cause: error)
            }
            if PGState.of(error) == PGState.queryCanceled {
                throw PostgresStoreError.timedOut(error)
            }
            throw error
        }
    }

    /// Runs a query, calling `body` with each row.
    func rows(_ sql: String, _ arguments: [PGValue] = [], _ body: (PGRow) throws -> Void) throws {
        for row in try run(sql, arguments).rows { try body(PGRow(row)) }
    }

    /// The first row decoded by `decode`, or `nil` when there is none.
    func first<T>(_ sql: String, _ arguments: [PGValue] = [], _ decode: (PGRow) throws -> T) throws -> T? {
        guard let row = try run(sql, arguments).rows.first else { return nil }
        return try decode(PGRow(row))
    }

    /// Runs a statement that changes rows; returns how many it changed.
    @discardableResult
    func execute(_ sql: String, _ arguments: [PGValue] = []) throws -> Int {
        try run(sql, arguments).metadata.rows ?? 0
    }

    /// Whether `sql` may change rows (see ``writeCount``).
    private static func mayWrite(_ sql: String) -> Bool {
        for keyword in ["INSERT", "UPDATE", "DELETE", "WITH"] where sql.hasPrefix(keyword) { return true }
        return false
    }

    /// Runs a statement that returns nothing of interest (session commands, locks).
    func command(_ sql: String, _ arguments: [PGValue] = []) throws {
        _ = try run(sql, arguments)
    }

    // MARK: Transactions

    func begin(_ mode: String = "BEGIN") throws {
        try command(mode)
        inTransaction = true
        transactionFailed = false
    }

    func commit() throws {
        defer {
            inTransaction = false
            transactionFailed = false
        }
        let result = try run("COMMIT", [])
        // A transaction in the failed state answers COMMIT with ROLLBACK.
        if result.metadata.command == "ROLLBACK" {
            throw PostgresStoreError.rolledBack
        }
    }

    func rollback() {
        guard inTransaction else { return }
        inTransaction = false
        transactionFailed = false
        if connection != nil { _ = try? run("ROLLBACK", []) }
    }

    /// Runs `body` in a read-only transaction that sees one snapshot (`REPEATABLE READ`).
    func readTransaction<T>(_ body: () throws -> T) throws -> T {
        try begin("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        do {
            let value = try body()
            try commit()
            return value
        } catch {
            rollback()
            throw error
        }
    }
}

/// Failures of the PostgreSQL store that are not the caller's mistake.
enum PostgresStoreError: StoreFailure, CustomStringConvertible {
    /// The database cannot be reached (connect failed, connection lost, in back-off).
    case unavailable(String, cause: (any Error)?)
    /// A statement ran past `statement_timeout`.
    case timedOut(any Error)
    /// Every connection of the pool is busy and too many calls wait already.
    case poolExhausted(Int)
    /// COMMIT found the transaction failed and rolled it back.
    case rolledBack

    var description: String {
        switch self {
        case .unavailable(let message, _): message
        case .timedOut(let error): "a PostgreSQL statement ran past statement_timeout: \(String(reflecting: error))"
        case .poolExhausted(let waiting): "every PostgreSQL connection is busy and \(waiting) calls wait already"
        case .rolledBack: "PostgreSQL rolled the transaction back"
        }
    }

    /// The error ``Store`` hands to callers.
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
