import Dispatch
import Foundation
import GRDB
import GRDBSQLite
import GroupModel
import GroupStore
import GroupStoreSQL
import GroupStoreSettings
import Synchronization

/// The embedded `StoreBackend`: one SQLite file in WAL mode, through a GRDB `DatabasePool`.
///
/// - Batches (``commit(_:scopes:then:)``) run on the pool's single writer connection, one
///   `BEGIN IMMEDIATE … COMMIT` each. Reads run concurrently on reader connections and see the
///   last committed state.
/// - Every method runs its SQL on GRDB's own dispatch queues, never on a NIO event loop or the
///   Swift cooperative pool.
/// - Durability: each connection sets `PRAGMA synchronous` from `Durability`. With
///   `synchronous=FULL` in WAL mode, SQLite fsyncs the WAL before `COMMIT` returns, so a batch
///   this backend reports committed survives a process crash (and an OS crash or power loss);
///   with `NORMAL` it survives a process crash but the latest commits may be lost on power loss.
/// - Reads use statements prepared once per connection (`cachedStatement`), explicit column
///   lists decoded by index, and skip the custom-field query unless a row has custom fields
///   (`has_custom`, migration v2).
public final class SQLiteBackend: StoreBackend {
    /// The path of the database file.
    public let path: String
    /// The durability the connections were opened with.
    public let durability: Durability
    let pool: DatabasePool
    /// Whether member rows are written with their origin (`join_source`, `inviter_id`, v6). False
    /// only for a file opened with migrations up to one before v6 (tests of older files).
    let storesMemberOrigin: Bool
    /// Whether the file keeps `joined_counts` (v7); false only for a file opened with migrations
    /// up to one before v7 (tests of older files), whose counts are counted.
    let keepsJoinedCounts: Bool
    /// Whether group rows have `edit_settings_permission` and `owner_quit` (v8); false only for
    /// a file opened with migrations up to one before v8 (tests of older files), whose groups read
    /// their type's defaults.
    let storesOwnerSettings: Bool
    /// Whether the file has invite links, `members.invite_link_id` and
    /// `groups.invite_link_permission` (v14); false only for a file opened with migrations up to
    /// one before v14 (tests of older files).
    let storesInviteLinks: Bool
    /// Whether the file keeps member versions, member tombstones and joined-group changes (v15);
    /// false only for a file opened with migrations up to one before it (tests of older files).
    let storesSyncVersions: Bool
    /// Whether the file has message reactions (v17); false only for a file opened with
    /// migrations up to one before it (tests of older files).
    let storesReactions: Bool
    /// Whether the file has topics (`groups.parent_key`, `topic_reads`: v21); false only for a
    /// file opened with migrations up to one before it (tests of older files).
    let storesTopics: Bool
    /// Tests only: makes the next batches' `COMMIT` fail (as a full disk would).
    let commitFault = Mutex<(any Error)?>(nil)
    /// Users' views of groups (GetGroupsInfo with an operator) that arrive together, read in one
    /// read transaction (``userView(app:userID:of:)``).
    let userViews: CoalescedReads<SQLiteUserView, GroupsForUser>

    /// Open (creating if needed) the database at `path` and run pending migrations.
    ///
    /// - Important: Blocking file I/O: call at startup, or use ``open(path:durability:)`` from
    ///   async code.
    /// - Parameters:
    ///   - path: The SQLite file; its directory must exist.
    ///   - durability: `synchronous` for every connection (default `Durability.full`).
    /// - Throws: `GroupError` `INTERNAL` (with the SQLite error as `cause`) if the file cannot be
    ///   opened or migrated.
    public convenience init(path: String, durability: Durability = .full) throws {
        try self.init(path: path, durability: durability, migratingUpTo: nil)
    }

    /// As the public initialiser, but running the migrations only up to `lastMigration` (tests:
    /// a file as an older version left it). `nil`: all of them.
    init(path: String, durability: Durability, migratingUpTo lastMigration: String?) throws {
        self.path = path
        self.durability = durability
        var configuration = Configuration()
        configuration.label = "groupd.store"
        configuration.foreignKeysEnabled = true
        configuration.busyMode = .timeout(5)
        let synchronous = durability == .full ? "FULL" : "NORMAL"
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = \(synchronous)")
        }
        do {
            let pool = try DatabasePool(path: path, configuration: configuration)
            self.pool = pool
            // Two batches at once at most: the pool has five readers, and reads of other kinds
            // keep three. Nothing is refused: a waiting read holds no connection.
            self.userViews = CoalescedReads(
                maxRunning: 2, maxWaiting: Int.max, weight: { $0.groups.count },
                refusal: { GroupError.internal("\($0) users' views wait") },
                fetch: { reads in try await pool.read { db in try reads.map { try Self.userView($0, db: db) } } })
            // DatabasePool sets `synchronous = NORMAL` on its writer after `prepareDatabase` runs
            // (when it switches to WAL), so the writer, the only connection that commits, is set
            // again here; it is kept for the pool's lifetime. The writer also keeps 64 MiB of
            // pages (the indexes a batch touches stay in memory), checkpoints every 10,000 WAL
            // pages instead of 1,000 (a hot page is copied once per checkpoint, not once per
            // thousand pages), and keeps its temporary files (statement journals) in memory.
            try self.pool.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA synchronous = \(synchronous)")
                try db.execute(sql: "PRAGMA cache_size = -65536")
                try db.execute(sql: "PRAGMA wal_autocheckpoint = 10000")
                try db.execute(sql: "PRAGMA temp_store = MEMORY")
            }
            if let lastMigration {
                try Schema.migrator.migrate(self.pool, upTo: lastMigration)
            } else {
                try Schema.migrator.migrate(self.pool)
            }
            let applied = try self.pool.read { try Schema.migrator.appliedIdentifiers($0) }
            self.storesMemberOrigin = applied.contains("v6")
            self.keepsJoinedCounts = applied.contains("v7")
            self.storesOwnerSettings = applied.contains("v8")
            self.storesInviteLinks = applied.contains("v14")
            self.storesSyncVersions = applied.contains("v15")
            self.storesReactions = applied.contains("v17")
            self.storesTopics = applied.contains("v21")
        } catch {
            throw GroupError.internal("cannot open the store at \(path): \(error)", cause: error)
        }
    }

    /// Open the database off the calling task's thread (the open and migrations block on file I/O).
    /// - Throws: As ``init(path:durability:)``.
    public static func open(path: String, durability: Durability = .full) async throws -> SQLiteBackend {
        try await open(path: path, durability: durability, migratingUpTo: nil)
    }

    /// As the public `open`, with the migrations run only up to `lastMigration` (tests).
    static func open(path: String, durability: Durability, migratingUpTo lastMigration: String?) async throws -> SQLiteBackend {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(with: Result {
                    try SQLiteBackend(path: path, durability: durability, migratingUpTo: lastMigration)
                })
            }
        }
    }

    /// The identifiers of the migrations applied to the file, in order (`["v1", …]`).
    public func appliedMigrations() async throws -> [String] {
        // In the order they were registered ("v10" sorts before "v2" as text).
        try await pool.read { db in
            let migrator = Schema.migrator
            let applied = try migrator.appliedIdentifiers(db)
            return migrator.migrations.filter(applied.contains)
        }
    }

    /// The `synchronous` setting the writer connection actually runs with (`nil` if neither FULL
    /// nor NORMAL).
    public func effectiveDurability() async throws -> Durability? {
        try await pool.writeWithoutTransaction { db in
            switch try Int.fetchOne(db, sql: "PRAGMA synchronous") {
            case 2: .full
            case 1: .normal
            default: nil
            }
        }
    }

    /// Tests only: from now on every batch's `COMMIT` fails with `error` (`nil`: commits work).
    public func injectCommitFailure(_ error: (any Error)?) {
        commitFault.withLock { $0 = error }
    }

    public func close() async throws {
        try pool.close()
    }

    /// SQLite's heap in this process (`sqlite3_memory_used`): the page caches of the writer
    /// (64 MiB at most) and the readers, the schemas, the prepared statements.
    public var libraryMemoryBytes: Int? { Int(sqlite3_memory_used()) }

    // MARK: Writes

    public func commit(_ work: [TransactionWork], scopes: [WriteScope], then: @escaping @Sendable (BatchOutcome) -> Void) {
        pool.asyncWriteWithoutTransaction { db in
            let db = OnThisThread(value: db)
            then(InlineTaskExecutor.run { await self.run(work, db: db.value) })
        }
    }

    /// One transaction on the writer: the pieces of work in order, then `COMMIT`.
    ///
    /// No savepoint per piece: in SQLite a savepoint copies every page a piece touches into the
    /// statement journal, several pages per mutation. A piece that throws having changed no row
    /// (`total_changes` did not move: plans throw before they write) needs no undo; one that
    /// changed rows aborts the transaction, and the store runs the others again.
    private func run(_ work: [TransactionWork], db: Database) async -> BatchOutcome {
        var failures: [Int: any Error] = [:]
        do {
            // `BEGIN` and `COMMIT` as statements prepared once (GRDB's `beginTransaction` and
            // `commit()` prepare theirs on every call: about 20,000 instructions a batch).
            try db.cachedStatement(sql: "BEGIN IMMEDIATE TRANSACTION").execute()
        } catch {
            return BatchOutcome(failures: [:], ending: .failed(error))
        }
        var transaction = SQLiteTransaction(db: db, storesMemberOrigin: storesMemberOrigin, keepsJoinedCounts: keepsJoinedCounts)
        transaction.storesOwnerSettings = storesOwnerSettings
        transaction.storesInviteLinks = storesInviteLinks
        transaction.storesSyncVersions = storesSyncVersions
        transaction.storesReactions = storesReactions
        for (index, item) in work.enumerated() {
            let changes = db.totalChangesCount
            do {
                try await item(transaction)
            } catch {
                failures[index] = error
                if db.isInsideTransaction && db.totalChangesCount == changes { continue }
                if db.isInsideTransaction {
                    try? db.rollback()
                    return BatchOutcome(failures: failures, ending: .aborted(at: index))
                }
                // SQLite ended the transaction itself (an I/O error, a full disk): what the
                // earlier pieces wrote is gone; the whole batch fails.
                return BatchOutcome(failures: failures, ending: .failed(error))
            }
        }
        do {
            if let fault = commitFault.withLock({ $0 }) { throw fault }
            try db.cachedStatement(sql: "COMMIT TRANSACTION").execute()
        } catch {
            try? db.rollback()
            return BatchOutcome(failures: failures, ending: .failed(error))
        }
        return BatchOutcome(failures: failures, ending: .committed)
    }
}
