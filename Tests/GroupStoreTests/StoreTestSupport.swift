@testable import GroupStore

extension Store {
    /// The SQLite backend under this store (tests of SQLite-only behaviour: migrations, pragmas).
    var sqlite: SQLiteBackend {
        get throws {
            guard let backend = backend as? SQLiteBackend else { throw SQLiteOnly() }
            return backend
        }
    }
}

/// A SQLite-only test ran against another backend.
struct SQLiteOnly: Error {}
