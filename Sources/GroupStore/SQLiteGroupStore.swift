import Dispatch
import Foundation
import GRDB
public import GroupModel
import Synchronization

/// The embedded ``GroupStore``: one SQLite file in WAL mode, through a GRDB `DatabasePool`.
///
/// - Writes are serialised by the pool's single writer and grouped into transactions
///   (`GroupCommitQueue`): every write waiting when the writer is free commits in one
///   transaction, one fsync, each in its own savepoint; a write returns once its batch has
///   committed. Reads run concurrently on reader connections and see the last committed state.
/// - Every method runs its SQL on GRDB's own dispatch queues through GRDB's async API, never on
///   a NIO event loop or the Swift cooperative pool.
/// - Durability: each connection sets `PRAGMA synchronous` from ``Durability``. With
///   `synchronous=FULL` in WAL mode, SQLite fsyncs the WAL before a commit returns, so a commit
///   this store has acknowledged survives a process crash (and an OS crash or power loss); with
///   `NORMAL` it survives a process crash but the latest commits may be lost on power loss.
/// - ``groups(app:ids:)`` answers from an in-memory cache of group records when it can (see
///   `GroupCache`): exact because this store is the file's only writer, one node over SQLite.
///   A hit touches neither SQLite nor GRDB's queues. Every mutation that changes a `groups` or
///   `group_custom` row must call `changesGroups(_:in:)` inside its transaction, before it
///   commits; the cache drops those records when, and only if, the mutation's changes commit.
///   (A PostgreSQL store shared by several nodes will need the cache invalidated through the
///   shared event log instead.)
/// - Reads use statements prepared once per connection (`cachedStatement`), explicit column
///   lists decoded by index, and skip the custom-field query unless a row has custom fields
///   (`has_custom`, migration v2).
public final class SQLiteGroupStore: GroupStore {
    /// The default number of group records the cache holds.
    public static let defaultCacheCapacity = 100_000

    /// The path of the database file.
    public let path: String
    /// The durability the connections were opened with.
    public let durability: Durability
    let pool: DatabasePool
    /// Group commit: every write goes through it, batched into transactions.
    let commits: GroupCommitQueue
    /// The group records cache of ``groups(app:ids:)``.
    let cache: GroupCache
    /// Tests only: called with the method name at the end of each write transaction, before it
    /// commits; throwing rolls the transaction back.
    let faultInjection = Mutex<(@Sendable (String) throws -> Void)?>(nil)
    /// Whether member rows are written with their origin (`join_source`, `inviter_id`, v6). False
    /// only for a file opened with migrations up to one before v6 (tests of older files).
    let storesMemberOrigin: Bool

    /// Open (creating if needed) the database at `path` and run pending migrations.
    ///
    /// - Important: Blocking file I/O: call at startup, or use ``open(path:durability:)`` from
    ///   async code.
    /// - Parameters:
    ///   - path: The SQLite file; its directory must exist.
    ///   - durability: `synchronous` for every connection (default ``Durability/full``).
    ///   - cacheCapacity: The most group records kept in memory (0: no cache).
    /// - Throws: `GroupError` `INTERNAL` (with the SQLite error as `cause`) if the file cannot be
    ///   opened or migrated.
    ///   - batching: How pending writes are grouped into transactions.
    public convenience init(
        path: String, durability: Durability = .full, cacheCapacity: Int = SQLiteGroupStore.defaultCacheCapacity,
        batching: WriteBatching = .defaults
    ) throws {
        try self.init(path: path, durability: durability, cacheCapacity: cacheCapacity, batching: batching, migratingUpTo: nil)
    }

    /// As the public initialiser, but running the migrations only up to `lastMigration` (tests:
    /// a file as an older version left it). `nil`: all of them.
    init(
        path: String, durability: Durability, cacheCapacity: Int, batching: WriteBatching = .defaults,
        migratingUpTo lastMigration: String?
    ) throws {
        self.path = path
        self.durability = durability
        self.cache = GroupCache(capacity: cacheCapacity)
        var configuration = Configuration()
        configuration.label = "groupd.store"
        configuration.foreignKeysEnabled = true
        configuration.busyMode = .timeout(5)
        let synchronous = durability == .full ? "FULL" : "NORMAL"
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = \(synchronous)")
        }
        do {
            self.pool = try DatabasePool(path: path, configuration: configuration)
            // DatabasePool sets `synchronous = NORMAL` on its writer after `prepareDatabase` runs
            // (when it switches to WAL), so the writer, the only connection that commits, is set
            // again here; it is kept for the pool's lifetime.
            try self.pool.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA synchronous = \(synchronous)")
            }
            if let lastMigration {
                try Self.migrator.migrate(self.pool, upTo: lastMigration)
            } else {
                try Self.migrator.migrate(self.pool)
            }
            self.storesMemberOrigin = try self.pool.read { try Self.migrator.appliedIdentifiers($0).contains("v6") }
        } catch {
            throw GroupError.internal("cannot open the store at \(path): \(error)", cause: error)
        }
        self.commits = GroupCommitQueue(
            pool: pool, batching: batching, latestEventID: { try Self.latestEventID($0) },
            readEvents: { db, after in
                try Self.loggedEvents(db, where: "e.event_id > ? ORDER BY e.event_id", arguments: [after])
            })
    }

    /// Open the store off the calling task's thread (the open and migrations block on file I/O).
    /// - Parameters:
    ///   - path: The SQLite file; its directory must exist.
    ///   - durability: `synchronous` for every connection.
    ///   - cacheCapacity: The most group records kept in memory (0: no cache).
    /// - Throws: As ``init(path:durability:cacheCapacity:)``.
    ///   - batching: How pending writes are grouped into transactions.
    public static func open(
        path: String, durability: Durability = .full, cacheCapacity: Int = SQLiteGroupStore.defaultCacheCapacity,
        batching: WriteBatching = .defaults
    ) async throws -> SQLiteGroupStore {
        try await open(path: path, durability: durability, cacheCapacity: cacheCapacity, batching: batching, migratingUpTo: nil)
    }

    /// As the public `open`, with the migrations run only up to `lastMigration` (tests).
    static func open(
        path: String, durability: Durability, cacheCapacity: Int, batching: WriteBatching = .defaults,
        migratingUpTo lastMigration: String?
    ) async throws -> SQLiteGroupStore {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(with: Result {
                    try SQLiteGroupStore(
                        path: path, durability: durability, cacheCapacity: cacheCapacity, batching: batching,
                        migratingUpTo: lastMigration)
                })
            }
        }
    }

    /// What the group cache holds and has served.
    public func cacheStatistics() -> GroupCacheStatistics {
        cache.statistics
    }

    /// The identifiers of the migrations applied to the file, in order (`["v1", …]`).
    public func appliedMigrations() async throws -> [String] {
        try await self.run { [pool] in
            try await pool.read { db in try Self.migrator.appliedIdentifiers(db).sorted() }
        }
    }

    /// The `synchronous` setting a connection actually runs with (`nil` if neither FULL nor NORMAL).
    public func effectiveDurability() async throws -> Durability? {
        try await self.run { [commits] in
            try await commits.write { db in
                switch try Int.fetchOne(db, sql: "PRAGMA synchronous") {
                case 2: .full
                case 1: .normal
                default: nil
                }
            }
        }
    }

    // MARK: GroupStore

    public func createGroup(_ plan: GroupCreationPlan) async throws -> Committed<Group> {
        try await self.run { [commits] in
            try await commits.write { db in try self.insertGroup(plan, db: db) }
        }
    }

    /// Writes a creation plan (group, custom fields, members, events) in the caller's write
    /// transaction, invalidating the group's cache record.
    func insertGroup(_ plan: GroupCreationPlan, db: Database) throws -> Committed<Group> {
        let group = plan.group
        self.changesGroups([GroupCache.Key(app: group.appID, id: group.id)], in: db)
        do {
            try db.cachedStatement(
                sql: """
                    INSERT INTO groups (
                        app_id, group_id, type, name, introduction, notification, face_url,
                        owner_id, max_members, member_count,
                        join_option, join_approvers, invite_permission, invitee_must_accept,
                        invitation_needs_approval, remove_members_permission,
                        edit_profile_permission, edit_member_info_permission,
                        mute_mode, mute_roles, mute_until, created_at, updated_at,
                        latest_seq, next_join_order)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?)
                    """
            ).execute(arguments: StatementArguments(Rows.groupInsertValues(group, nextJoinOrder: plan.members.count + 1)))
        } catch let error as DatabaseError where error.extendedResultCode == .SQLITE_CONSTRAINT_UNIQUE {
            throw GroupError.groupIDTaken(group.id)
        }
        let groupKey = db.lastInsertedRowID
        for (key, value) in group.custom {
            try db.cachedStatement(sql: "INSERT INTO group_custom (group_key, key, value) VALUES (?, ?, ?)")
                .execute(arguments: [groupKey, key, Data(value)])
        }
        for member in plan.members {
            try Rows.insert(member, groupKey: groupKey, appID: group.appID, origin: storesMemberOrigin, db: db)
        }
        let events = try Rows.appendEvents(
            plan.events, groupKey: groupKey, appID: group.appID, groupID: group.id,
            after: 0, time: group.updatedAt, db: db)
        try self.injectedFault("createGroup")
        var stored = group
        stored.memberCount = plan.members.count
        stored.latestSequence = events.last?.sequence ?? 0
        return Committed(value: stored, events: events)
    }

    public func groups(app: String, ids: [String]) async throws -> [String: Group] {
        let ids = ids.count > 1 ? Array(Set(ids)) : ids
        if ids.isEmpty { return [:] }
        let generation: UInt64
        switch cache.lookup(app: app, ids: ids) {
        case .hit(let groups): return groups
        case .miss(let since): generation = since
        }
        let groups = try await self.run { [pool] in
            try await pool.read { db in try Self.readGroups(app: app, ids: ids, db: db) }
        }
        cache.fill(app: app, groups: groups.values, generation: generation)
        return groups
    }

    /// The `SELECT` of ``readGroups(app:ids:db:)`` for `count` ids (a padded count).
    private static func groupsSQL(count: Int) -> String {
        if count <= 64, count.nonzeroBitCount == 1 { return groupsSQLByPowerOfTwo[count.trailingZeroBitCount] }
        return makeGroupsSQL(count: count)
    }

    private static let groupsSQLByPowerOfTwo = (0...6).map { makeGroupsSQL(count: 1 << $0) }

    private static func makeGroupsSQL(count: Int) -> String {
        """
        SELECT \(Rows.GroupColumn.list()) FROM groups
        WHERE app_id = ? AND group_id IN (\(Rows.placeholders(count))) AND dismissed_at IS NULL
        """
    }

    /// Read groups (not dismissed) with their custom fields, in the caller's transaction.
    private static func readGroups(app: String, ids: [String], db: Database) throws -> [String: Group] {
        let padded = Rows.padded(ids)
        let statement = try db.cachedStatement(sql: groupsSQL(count: padded.count))
        let rows = try Row.fetchCursor(statement, arguments: StatementArguments([app] + padded))
        var result: [String: Group] = [:]
        result.reserveCapacity(ids.count)
        var idByKey: [Int64: String] = [:]
        while let row = try rows.next() {
            let read = try Rows.group(row)
            result[read.group.id] = read.group
            if read.hasCustom { idByKey[read.key] = read.group.id }
        }
        if !idByKey.isEmpty {
            let keys = Rows.padded(Array(idByKey.keys))
            let statement = try db.cachedStatement(
                sql: "SELECT group_key, key, value FROM group_custom WHERE group_key IN (\(Rows.placeholders(keys.count)))")
            let customRows = try Row.fetchCursor(statement, arguments: StatementArguments(keys))
            while let row = try customRows.next() {
                guard let id = idByKey[try row.decode(atIndex: 0)] else { continue }
                let value: Data = try row.decode(atIndex: 2)
                result[id]?.custom[try row.decode(String.self, atIndex: 1)] = [UInt8](value)
            }
        }
        return result
    }

    public func memberships(app: String, userID: String, groupIDs: [String]) async throws -> [String: Member] {
        let groupIDs = groupIDs.count > 1 ? Array(Set(groupIDs)) : groupIDs
        if groupIDs.isEmpty { return [:] }
        return try await self.run { [pool] in
            try await pool.read { db in
                let padded = Rows.padded(groupIDs)
                let statement = try db.cachedStatement(
                    sql: """
                        SELECT g.group_id, \(Rows.memberColumns) FROM groups g
                        JOIN members m ON m.group_key = g.group_key AND m.user_id = ?
                        WHERE g.app_id = ? AND g.group_id IN (\(Rows.placeholders(padded.count)))
                          AND g.dismissed_at IS NULL
                        """)
                let rows = try Row.fetchCursor(statement, arguments: StatementArguments([userID, app] + padded))
                var result: [String: Member] = [:]
                var groupIDByKey: [Int64: String] = [:]
                while let row = try rows.next() {
                    let groupID: String = try row.decode(atIndex: 0)
                    let read = try Rows.member(row, at: 1)
                    result[groupID] = read.member
                    if read.hasCustom { groupIDByKey[read.groupKey] = groupID }
                }
                if !groupIDByKey.isEmpty {
                    let keys = Rows.padded(Array(groupIDByKey.keys))
                    let statement = try db.cachedStatement(
                        sql: """
                            SELECT group_key, key, value FROM member_custom
                            WHERE user_id = ? AND group_key IN (\(Rows.placeholders(keys.count)))
                            """)
                    let customRows = try Row.fetchCursor(
                        statement,
                        arguments: StatementArguments([userID] + keys.map { $0 as any DatabaseValueConvertible }))
                    while let row = try customRows.next() {
                        guard let groupID = groupIDByKey[try row.decode(atIndex: 0)] else { continue }
                        let value: Data = try row.decode(atIndex: 2)
                        result[groupID]?.custom[try row.decode(String.self, atIndex: 1)] = [UInt8](value)
                    }
                }
                return result
            }
        }
    }

    public func dismissGroup(
        app: String, groupID: String, operatorID: String?, at time: Timestamp,
        plan: @escaping @Sendable (Group, Member?) throws -> [GroupEvent.Draft]
    ) async throws -> [GroupEvent] {
        try await self.run { [commits] in
            try await commits.write { db in
                let read = try Rows.liveGroup(db, app: app, groupID: groupID)
                let groupKey = read.key
                var membership: Member?
                if let operatorID {
                    membership = try Row.fetchOne(
                        db.cachedStatement(
                            sql: "SELECT \(Rows.memberColumns) FROM members m WHERE m.group_key = ? AND m.user_id = ?"),
                        arguments: [groupKey, operatorID]
                    ).map { try Rows.member($0).member }
                }
                let drafts = try plan(read.group, membership)
                self.changesGroups([GroupCache.Key(app: app, id: groupID)], in: db)
                try db.cachedStatement(sql: "UPDATE groups SET dismissed_at = ?, updated_at = ? WHERE group_key = ?")
                    .execute(arguments: [time.millisecondsSince1970, time.millisecondsSince1970, groupKey])
                let events = try Rows.appendEvents(
                    drafts, groupKey: groupKey, appID: app, groupID: groupID, after: read.group.latestSequence,
                    time: time, db: db)
                try self.injectedFault("dismissGroup")
                return events
            }
        }
    }

    public func events(app: String, groupID: String, after sequence: Int64, limit: Int) async throws -> [GroupEvent] {
        try await self.run { [pool] in
            try await pool.read { db in
                let groupKey = try Rows.groupKey(db, app: app, groupID: groupID, dismissedToo: true)
                let rows = try Row.fetchCursor(
                    db.cachedStatement(
                        sql: """
                            SELECT \(Rows.eventColumns) FROM group_events
                            WHERE group_key = ? AND seq > ? ORDER BY seq LIMIT ?
                            """),
                    arguments: [groupKey, sequence, max(0, limit)])
                var events: [GroupEvent] = []
                while let row = try rows.next() { events.append(try Rows.event(row)) }
                return events
            }
        }
    }

    public func close() async throws {
        cache.close()
        try await self.run { [pool] in
            try pool.close()
        }
    }

    // MARK: Cache

    /// Declare, inside a mutation (on the writer), the groups whose `groups` or `group_custom`
    /// rows it changes (or may change). Until its batch ends their cached records are bypassed;
    /// if its changes commit they are dropped (once `COMMIT` has executed, before the write
    /// returns); if they are discarded (savepoint or batch rolled back) they stay.
    ///
    /// - Important: Every mutation that changes a group row (create, dismiss, profile, settings,
    ///   owner, member count, `latest_seq` through new events, custom fields…) must call this,
    ///   or reads may serve the record as it was before.
    func changesGroups(_ keys: [GroupCache.Key], in db: Database) {
        guard cache.capacity > 0 else { return }
        let cache = self.cache
        cache.beginWrite(keys)
        commits.afterMutation(committed: { cache.commitWrite(keys) }, discarded: { cache.rollbackWrite(keys) })
    }

    /// Tests only: make each write transaction run `fault` (with the method name) just before it
    /// commits; a throwing fault rolls the transaction back. `nil`: no fault.
    func injectFault(_ fault: (@Sendable (String) throws -> Void)?) {
        faultInjection.withLock { $0 = fault }
    }

    func injectedFault(_ method: String) throws {
        if let fault = faultInjection.withLock({ $0 }) { try fault(method) }
    }

    // MARK: Errors

    /// Run `body`, letting `GroupError` through and wrapping anything else as `INTERNAL`.
    func run<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as GroupError {
            throw error
        } catch {
            throw GroupError.internal("storage failure", cause: error)
        }
    }
}
