import Foundation
import GRDB
import GRDBSQLite
import GroupStore
import GroupStoreSQL

/// A statement GRDB prepared and cached, driven with the SQLite C API on hot paths: arguments
/// bound, rows stepped, columns read in place. GRDB's `Row` builds a column-name index for every
/// query and copies values; reading a 26-column group that way cost several microseconds.
///
/// Used only on the connection that owns the statement, inside that connection's access.
struct RawStatement {
    let handle: OpaquePointer
    let database: Database

    /// The statement of `sql`, prepared once per connection (GRDB's statement cache).
    init(_ db: Database, _ sql: String) throws {
        self.database = db
        self.handle = try db.cachedStatement(sql: sql).sqliteStatement
    }

    /// Binds `arguments` (1-based, in order) after a reset.
    private func bind(_ arguments: [SQLArgument]) throws {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
        for (offset, argument) in arguments.enumerated() {
            let index = Int32(offset + 1)
            let code: Int32
            switch argument {
            case .integer(let value): code = sqlite3_bind_int64(handle, index, value)
            case .text(var value):
                // With its byte count: a text holding NUL is bound whole. An empty text is bound
                // as "" (a nil pointer would bind NULL).
                code = value.withUTF8 { bytes in
                    bytes.withMemoryRebound(to: CChar.self) { chars in
                        sqlite3_bind_text(handle, index, chars.baseAddress ?? SQLArgument.emptyText, Int32(chars.count), SQLArgument.transient)
                    }
                }
            case .blob(let value):
                code = value.withUnsafeBytes { bytes in
                    sqlite3_bind_blob(handle, index, bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(bytes.count), SQLArgument.transient)
                }
            case .null: code = sqlite3_bind_null(handle, index)
            }
            if code != SQLITE_OK { throw error(code) }
        }
    }

    /// Runs the statement, calling `body` with each row.
    func rows(_ arguments: [SQLArgument], _ body: (RawRow) throws -> Void) throws {
        try bind(arguments)
        defer { sqlite3_reset(handle) }
        while true {
            let code = sqlite3_step(handle)
            if code == SQLITE_DONE { return }
            guard code == SQLITE_ROW else { throw error(code) }
            try body(RawRow(handle: handle))
        }
    }

    /// The first row's value decoded by `decode`, or `nil` when there is no row.
    func first<T>(_ arguments: [SQLArgument], _ decode: (RawRow) throws -> T) throws -> T? {
        try bind(arguments)
        defer { sqlite3_reset(handle) }
        let code = sqlite3_step(handle)
        if code == SQLITE_DONE { return nil }
        guard code == SQLITE_ROW else { throw error(code) }
        return try decode(RawRow(handle: handle))
    }

    /// Runs a statement that returns no rows (an insert, update or delete).
    func execute(_ arguments: [SQLArgument]) throws {
        try bind(arguments)
        defer { sqlite3_reset(handle) }
        var code = sqlite3_step(handle)
        while code == SQLITE_ROW { code = sqlite3_step(handle) }
        guard code == SQLITE_DONE else { throw error(code) }
    }

    private func error(_ code: Int32) -> DatabaseError {
        let connection = sqlite3_db_handle(handle)
        let extended = connection.map { sqlite3_extended_errcode($0) } ?? code
        let message = connection.flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) }
        let sql = sqlite3_sql(handle).map { String(cString: $0) }
        return DatabaseError(resultCode: ResultCode(rawValue: extended), message: message, sql: sql)
    }
}

/// The current row of a stepping statement (valid inside the `rows`/`first` call only).
struct RawRow {
    let handle: OpaquePointer

    func int64(_ index: Int) -> Int64 { sqlite3_column_int64(handle, Int32(index)) }
    func int(_ index: Int) -> Int { Int(sqlite3_column_int64(handle, Int32(index))) }
    func bool(_ index: Int) -> Bool { sqlite3_column_int64(handle, Int32(index)) != 0 }
    func isNull(_ index: Int) -> Bool { sqlite3_column_type(handle, Int32(index)) == SQLITE_NULL }
    func optionalInt64(_ index: Int) -> Int64? { isNull(index) ? nil : int64(index) }

    func text(_ index: Int) -> String {
        guard let text = sqlite3_column_text(handle, Int32(index)) else { return "" }
        let count = Int(sqlite3_column_bytes(handle, Int32(index)))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }

    func optionalText(_ index: Int) -> String? { isNull(index) ? nil : text(index) }

    func blob(_ index: Int) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(handle, Int32(index)))
        guard count > 0, let bytes = sqlite3_column_blob(handle, Int32(index)) else { return [] }
        return Array(UnsafeRawBufferPointer(start: bytes, count: count))
    }
}

extension RawRow: ColumnReader {}

extension Row: ColumnReader {
    public func int64(_ index: Int) throws -> Int64 { try decode(Int64.self, atIndex: index) }
    public func optionalInt64(_ index: Int) throws -> Int64? { try decode(Int64?.self, atIndex: index) }
    public func text(_ index: Int) throws -> String { try decode(String.self, atIndex: index) }
    public func optionalText(_ index: Int) throws -> String? { try decode(String?.self, atIndex: index) }
    public func bool(_ index: Int) throws -> Bool { try decode(Bool.self, atIndex: index) }
    public func blob(_ index: Int) throws -> [UInt8] { [UInt8](try decode(Data.self, atIndex: index)) }
}

extension SQLArgument {
    /// A C string "" for binding empty texts.
    nonisolated(unsafe) static let emptyText: UnsafePointer<CChar> = {
        let pointer = UnsafeMutablePointer<CChar>.allocate(capacity: 1)
        pointer.initialize(to: 0)
        return UnsafePointer(pointer)
    }()

    /// SQLite copies the bound value (`SQLITE_TRANSIENT`, a macro Swift does not import).
    static let transient = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)
}
