import Foundation
public import GroupStore
public import GroupStorePostgres
public import GroupStoreSQLite

/// A directory under the system's temporary directory, removed when this value is released.
public final class TemporaryDirectory: Sendable {
    /// The directory's path (no trailing slash).
    public let path: String

    /// Create a fresh, empty directory.
    /// - Throws: If it cannot be created.
    public init(prefix: String = "groupd-test") throws {
        let base = FileManager.default.temporaryDirectory.path
        let path = base + "/" + prefix + "-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        self.path = path
    }

    /// `path/name`.
    public func file(_ name: String) -> String { self.path + "/" + name }

    deinit {
        try? FileManager.default.removeItem(atPath: self.path)
    }
}

/// A `Store` over a fresh database: a `SQLiteBackend` in a temporary file (removed when this
/// value is released), or a `PostgresBackend` on a new database of the test server
/// (``PostgresTestServer``), closed when this value is released.
///
/// Keep the value alive for as long as the store is used. ``reopen()`` closes the store and
/// opens the same database again (to test persistence).
public final class TemporaryStore: Sendable {
    /// The directory holding the SQLite file (and its WAL); empty for PostgreSQL.
    public let directory: TemporaryDirectory
    /// The path of the SQLite file.
    public let path: String
    /// The durability the store was opened with (SQLite).
    public let durability: Durability
    /// The open store.
    public let store: Store
    /// Its backend.
    public let backend: any StoreBackend
    /// The PostgreSQL settings of the store's database (`nil`: SQLite).
    public let postgres: PostgresStoreSettings?
    private let cacheCapacity: Int
    private let batching: WriteBatching

    /// Open a fresh SQLite store in a new temporary directory.
    /// - Parameters:
    ///   - durability: The backend's durability.
    ///   - cacheCapacity: The store's group cache (0: none).
    ///   - batching: The store's group commit.
    public convenience init(
        durability: Durability = .full, cacheCapacity: Int = Store.defaultCacheCapacity, batching: WriteBatching = .defaults
    ) async throws {
        let directory = try TemporaryDirectory()
        try await self.init(directory: directory, durability: durability, cacheCapacity: cacheCapacity, batching: batching, postgres: nil)
    }

    /// Open a fresh PostgreSQL store: a new database on the test server.
    public convenience init(postgres server: PostgresStoreSettings, cacheCapacity: Int = 0, batching: WriteBatching = .defaults) async throws {
        let name = "groupd_test_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        try await PostgresBackend.createDatabase(named: name, settings: server)
        var settings = server
        settings.url = PostgresTestServer.url(server.url, database: name)
        try await self.init(
            directory: try TemporaryDirectory(), durability: .full, cacheCapacity: cacheCapacity, batching: batching,
            postgres: settings)
    }

    private init(
        directory: TemporaryDirectory, durability: Durability, cacheCapacity: Int, batching: WriteBatching,
        postgres: PostgresStoreSettings?
    ) async throws {
        self.directory = directory
        self.path = directory.file("groupd.sqlite")
        self.durability = durability
        self.cacheCapacity = cacheCapacity
        self.batching = batching
        self.postgres = postgres
        if let postgres {
            self.backend = try await PostgresBackend.open(settings: postgres)
        } else {
            self.backend = try await SQLiteBackend.open(path: self.path, durability: durability)
        }
        self.store = Store(backend: backend, cacheCapacity: cacheCapacity, batching: batching)
    }

    deinit {
        // A PostgreSQL store holds connections and threads until closed.
        (backend as? PostgresBackend)?.closeNow()
    }

    /// The SQLite backend (tests of SQLite-only behaviour).
    /// - Throws: When the store is on PostgreSQL.
    public var sqliteBackend: SQLiteBackend {
        get throws {
            guard let backend = backend as? SQLiteBackend else { throw NotOnThisBackend() }
            return backend
        }
    }

    /// Makes every batch's commit fail with `error` from now on (`nil`: commits work again), as
    /// a full disk would: the backend-specific hook of the conformance suite.
    public func failCommits(with error: (any Error)?) {
        (backend as? SQLiteBackend)?.injectCommitFailure(error)
        (backend as? PostgresBackend)?.injectCommitFailure(error)
    }

    /// Close this store and open the same database again.
    /// - Returns: A new value over the same database (a SQLite directory stays until both are released).
    public func reopen() async throws -> TemporaryStore {
        try await self.store.close()
        return try await TemporaryStore(
            directory: self.directory, durability: self.durability, cacheCapacity: cacheCapacity, batching: .defaults,
            postgres: postgres)
    }

    /// A second store on the same database, as another groupd node would open it (PostgreSQL
    /// only: nodes share it).
    public func anotherNode(batching: WriteBatching = .defaults) async throws -> TemporaryStore {
        guard postgres != nil else { throw NotOnThisBackend() }
        return try await TemporaryStore(
            directory: self.directory, durability: self.durability, cacheCapacity: cacheCapacity, batching: batching,
            postgres: postgres)
    }
}

/// A test that needs one backend ran against another.
public struct NotOnThisBackend: Error {}

/// The PostgreSQL server the tests use: `GROUPD_TEST_POSTGRES_URL` (`make test-postgres` starts
/// a throw-away cluster and sets it). Unset: the PostgreSQL cases are not run.
public enum PostgresTestServer {
    /// The server's settings (its URL names a database to connect to for `CREATE DATABASE`).
    ///
    /// The statement timeout is also the server's `idle_in_transaction_session_timeout`: 60 s, so
    /// that a debug build on a loaded machine (a batch planning 10,000 members between two
    /// statements took over 10 s there, and the server ended its transaction) is not mistaken for
    /// a node gone silent. The tests of timeouts set their own. The connect timeout is 10 s, not
    /// the default 2 s: a connection's handshake waited over 2 s on a machine busy with a build
    /// beside the tests, and the suite failed with a connect timeout.
    public static var settings: PostgresStoreSettings? {
        guard let url = ProcessInfo.processInfo.environment["GROUPD_TEST_POSTGRES_URL"], !url.isEmpty else { return nil }
        return PostgresStoreSettings(
            url: url, poolSize: 2, statementTimeoutMilliseconds: 60_000, connectTimeoutMilliseconds: 10_000)
    }

    /// `url` naming `database` instead.
    public static func url(_ url: String, database: String) -> String {
        guard var components = URLComponents(string: url) else { return url }
        components.path = "/" + database
        return components.string ?? url
    }
}

/// A fresh store in a temporary file, removed when the returned value is released.
public func temporaryStore(durability: Durability = .full) async throws -> TemporaryStore {
    try await TemporaryStore(durability: durability)
}

/// Run `body` with a fresh temporary store, then close it and remove its file.
public func withTemporaryStore<T>(durability: Durability = .full, _ body: (Store) async throws -> T) async throws -> T {
    try await withTemporaryStore(.sqlite, durability: durability, body)
}

/// The stores the backend conformance suite runs every test against: each backend, with and
/// without the group cache, since the cache must never change an answer.
public enum StoreKind: String, Sendable, CaseIterable, CustomStringConvertible {
    /// `SQLiteBackend` with the default group cache.
    case sqlite
    /// `SQLiteBackend` with no group cache: every read goes to the database.
    case sqliteWithoutCache
    /// `PostgresBackend` on a fresh database of ``PostgresTestServer`` (no group cache, as
    /// groupd runs it).
    case postgres

    /// The kinds to test: the SQLite ones, and PostgreSQL when a test server is given.
    public static var allCases: [StoreKind] {
        PostgresTestServer.settings == nil ? [.sqlite, .sqliteWithoutCache] : [.sqlite, .sqliteWithoutCache, .postgres]
    }

    public var description: String { rawValue }

    /// The group cache capacity of this kind.
    public var cacheCapacity: Int {
        switch self {
        case .sqlite: Store.defaultCacheCapacity
        case .sqliteWithoutCache, .postgres: 0
        }
    }
}

/// A fresh store of `kind`, removed (SQLite) or closed (PostgreSQL) when the returned value is released.
public func temporaryStore(
    _ kind: StoreKind, durability: Durability = .full, batching: WriteBatching = .defaults
) async throws -> TemporaryStore {
    switch kind {
    case .sqlite, .sqliteWithoutCache:
        return try await TemporaryStore(durability: durability, cacheCapacity: kind.cacheCapacity, batching: batching)
    case .postgres:
        guard let server = PostgresTestServer.settings else { throw NotOnThisBackend() }
        return try await TemporaryStore(postgres: server, cacheCapacity: kind.cacheCapacity, batching: batching)
    }
}

/// Run `body` with a fresh temporary store of `kind`, then close it and remove its file.
public func withTemporaryStore<T>(
    _ kind: StoreKind, durability: Durability = .full, _ body: (Store) async throws -> T
) async throws -> T {
    let temporary = try await temporaryStore(kind, durability: durability)
    do {
        let result = try await body(temporary.store)
        try await temporary.store.close()
        return result
    } catch {
        try? await temporary.store.close()
        throw error
    }
}
