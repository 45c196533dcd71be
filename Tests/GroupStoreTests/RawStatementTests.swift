import GRDB
@testable import GroupStore
@testable import GroupStorePostgres
@testable import GroupStoreSQL
@testable import GroupStoreSQLite
import Testing

@Suite("Raw statements: binding and reading values as GRDB would")
struct RawStatementTests {
    @Test("texts (empty, with NUL, non-ASCII), blobs (empty, binary), integers and NULL round-trip")
    func roundTrip() throws {
        let queue = try DatabaseQueue()
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT, b BLOB, c INTEGER)")
            let insert = try RawStatement(db, "INSERT INTO t (id, a, b, c) VALUES (?, ?, ?, ?)")
            let values: [(String?, [UInt8], Int64?)] = [
                ("", [], 0), ("a\u{0}b", [0, 255, 1], -1), ("é😀", [7], Int64.max), (nil, [], nil),
            ]
            for (index, value) in values.enumerated() {
                try insert.execute([.int(index), .text(value.0), .blob(value.1), .integer(value.2)])
            }
            var read: [(String?, [UInt8], Int64?)] = []
            try RawStatement(db, "SELECT a, b, c FROM t ORDER BY id").rows([]) { row in
                read.append((row.optionalText(0), row.blob(1), row.optionalInt64(2)))
            }
            #expect(read.map(\.0) == values.map(\.0))
            #expect(read.map(\.1) == values.map(\.1))
            #expect(read.map(\.2) == values.map(\.2))
            // The NUL is inside the stored text: three bytes.
            #expect(try Int.fetchOne(db, sql: "SELECT length(CAST(a AS BLOB)) FROM t WHERE id = 1") == 3)
            #expect(try RawStatement(db, "SELECT a FROM t WHERE id = ?").first([.int(9)]) { $0.text(0) } == nil)
        }
    }

    @Test("a constraint violation is a DatabaseError with the extended code; the statement is usable again")
    func errors() throws {
        let queue = try DatabaseQueue()
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE t (k TEXT UNIQUE)")
            let insert = try RawStatement(db, "INSERT INTO t (k) VALUES (?)")
            try insert.execute([.text("x")])
            #expect {
                try insert.execute([.text("x")])
            } throws: { error in
                (error as? DatabaseError)?.extendedResultCode == .SQLITE_CONSTRAINT_UNIQUE
            }
            try insert.execute([.text("y")])
            #expect(try Int.fetchOne(db, sql: "SELECT count(*) FROM t") == 2)
        }
    }
}
