import Foundation
public import GroupStore

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

/// A ``Store`` over a ``SQLiteBackend`` in a temporary file; the file goes when this value is
/// released.
///
/// Keep the value alive for as long as the store is used. ``reopen()`` closes the store and
/// opens the same file again (to test persistence).
public final class TemporaryStore: Sendable {
    /// The directory holding the database file (and its WAL).
    public let directory: TemporaryDirectory
    /// The path of the database file.
    public let path: String
    /// The durability the store was opened with.
    public let durability: Durability
    /// The open store.
    public let store: Store
    /// Its backend.
    public let backend: SQLiteBackend

    /// Open a fresh store in a new temporary directory.
    /// - Parameters:
    ///   - durability: The backend's durability.
    ///   - cacheCapacity: The store's group cache (0: none).
    ///   - batching: The store's group commit.
    public convenience init(
        durability: Durability = .full, cacheCapacity: Int = Store.defaultCacheCapacity, batching: WriteBatching = .defaults
    ) async throws {
        let directory = try TemporaryDirectory()
        try await self.init(directory: directory, durability: durability, cacheCapacity: cacheCapacity, batching: batching)
    }

    private init(directory: TemporaryDirectory, durability: Durability, cacheCapacity: Int, batching: WriteBatching) async throws {
        self.directory = directory
        self.path = directory.file("groupd.sqlite")
        self.durability = durability
        self.backend = try await SQLiteBackend.open(path: self.path, durability: durability)
        self.store = Store(backend: backend, cacheCapacity: cacheCapacity, batching: batching)
    }

    /// Makes every batch's commit fail with `error` from now on (`nil`: commits work again), as
    /// a full disk would: the backend-specific hook of the conformance suite.
    public func failCommits(with error: (any Error)?) {
        backend.injectCommitFailure(error)
    }

    /// Close this store and open the same file again.
    /// - Returns: A new value over the same directory (which stays until both are released).
    public func reopen() async throws -> TemporaryStore {
        try await self.store.close()
        return try await TemporaryStore(
            directory: self.directory, durability: self.durability, cacheCapacity: Store.defaultCacheCapacity, batching: .defaults)
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
    /// ``SQLiteBackend`` with the default group cache.
    case sqlite
    /// ``SQLiteBackend`` with no group cache: every read goes to the database.
    case sqliteWithoutCache

    public var description: String { rawValue }

    /// The group cache capacity of this kind.
    public var cacheCapacity: Int {
        switch self {
        case .sqlite: Store.defaultCacheCapacity
        case .sqliteWithoutCache: 0
        }
    }
}

/// A fresh store of `kind` in a temporary file, removed when the returned value is released.
public func temporaryStore(
    _ kind: StoreKind, durability: Durability = .full, batching: WriteBatching = .defaults
) async throws -> TemporaryStore {
    try await TemporaryStore(durability: durability, cacheCapacity: kind.cacheCapacity, batching: batching)
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
