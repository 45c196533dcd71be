/// Reads the columns of a row by index: on SQLite a GRDB `Row` or the C API's current row
/// (`RawRow`), on PostgreSQL a driver row (`PGRow`). The shared row decoders take any of them.
public protocol ColumnReader {
    func int64(_ index: Int) throws -> Int64
    func optionalInt64(_ index: Int) throws -> Int64?
    func text(_ index: Int) throws -> String
    func optionalText(_ index: Int) throws -> String?
    func bool(_ index: Int) throws -> Bool
    func blob(_ index: Int) throws -> [UInt8]
}

/// A row's columns read from `offset` on (a decoder of one table's columns over a joined row).
public struct OffsetRow<Base: ColumnReader>: ColumnReader {
    public let row: Base
    public let offset: Int

    @inlinable
    public init(row: Base, offset: Int) {
        self.row = row
        self.offset = offset
    }

    @inlinable public func int64(_ index: Int) throws -> Int64 { try row.int64(offset + index) }
    @inlinable public func optionalInt64(_ index: Int) throws -> Int64? { try row.optionalInt64(offset + index) }
    @inlinable public func text(_ index: Int) throws -> String { try row.text(offset + index) }
    @inlinable public func optionalText(_ index: Int) throws -> String? { try row.optionalText(offset + index) }
    @inlinable public func bool(_ index: Int) throws -> Bool { try row.bool(offset + index) }
    @inlinable public func blob(_ index: Int) throws -> [UInt8] { try row.blob(offset + index) }
}
