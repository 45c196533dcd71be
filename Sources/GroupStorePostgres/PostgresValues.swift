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
            values.encode(into: &buffer, context: .default)
            return PostgresData(type: [String].psqlType, formatCode: .binary, value: buffer)
        case .integers(let values):
            var buffer = ByteBuffer()
            values.encode(into: &buffer, context: .default)
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

/// One row of a result, read by column index (the shared row decoders take it). It keeps each
/// column's bytes (a slice of the row's buffer) and type, taken in one pass over the row.
///
/// Every statement asks for binary results (postgres-nio's Bind; the rows of a
/// `PreparedQuery` keep the `text` format of its Describe answer, but their bytes are binary),
/// so the columns the stores read most are decoded here from their binary form: text types as
/// their UTF-8 bytes, `int2`/`int4`/`int8` as big-endian integers, `bool` as one byte. Any other
/// type goes through the driver's decoding (a read used to make a driver cell twice per column,
/// with its column name, and decode it generically).
struct PGRow: ColumnReader {
    private let cells: [(bytes: ByteBuffer?, type: PostgresDataType)]

    init(_ row: PostgresRow) {
        var cells: [(bytes: ByteBuffer?, type: PostgresDataType)] = []
        cells.reserveCapacity(row.count)
        for cell in row { cells.append((cell.bytes, cell.dataType)) }
        self.cells = cells
    }

    /// Column `index` as the driver's cell, read as binary.
    private func cell(_ index: Int) -> PostgresCell {
        let (bytes, type) = cells[index]
        return PostgresCell(bytes: bytes, dataType: type, format: .binary, columnName: "", columnIndex: index)
    }

    func isNull(_ index: Int) -> Bool { cells[index].bytes == nil }

    func int64(_ index: Int) throws -> Int64 {
        let (bytes, type) = cells[index]
        if var bytes {
            switch type {
            case .int8 where bytes.readableBytes == 8: return bytes.readInteger(as: Int64.self)!
            case .int4 where bytes.readableBytes == 4: return Int64(bytes.readInteger(as: Int32.self)!)
            case .int2 where bytes.readableBytes == 2: return Int64(bytes.readInteger(as: Int16.self)!)
            case .bool where bytes.readableBytes == 1: return bytes.readInteger(as: UInt8.self)! == 0 ? 0 : 1
            default: break
            }
        }
        let cell = cell(index)
        if type == .bool { return try cell.decode(Bool.self) ? 1 : 0 }
        return try cell.decode(Int64.self)
    }

    func int(_ index: Int) throws -> Int { Int(try int64(index)) }
    func optionalInt64(_ index: Int) throws -> Int64? { isNull(index) ? nil : try int64(index) }
    func text(_ index: Int) throws -> String { try optionalText(index) ?? "" }

    func optionalText(_ index: Int) throws -> String? {
        let (bytes, type) = cells[index]
        guard let bytes else { return nil }
        switch type {
        case .text, .varchar, .name, .bpchar: return String(buffer: bytes)
        default: return try cell(index).decode(String.self)
        }
    }

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
