import Dispatch
import Foundation
import GRDB
public import GroupModel

/// The embedded ``GroupStore``: one SQLite file in WAL mode, through a GRDB `DatabasePool`.
///
/// - Writes are serialised by the pool's single writer; reads run concurrently on reader
///   connections and see the last committed state.
/// - Every method runs its SQL on GRDB's own dispatch queues through GRDB's async API, never on
///   a NIO event loop or the Swift cooperative pool.
/// - Durability: each connection sets `PRAGMA synchronous` from ``Durability``. With
///   `synchronous=FULL` in WAL mode, SQLite fsyncs the WAL before a commit returns, so a commit
///   this store has acknowledged survives a process crash (and an OS crash or power loss); with
///   `NORMAL` it survives a process crash but the latest commits may be lost on power loss.
public final class SQLiteGroupStore: GroupStore {
    /// The path of the database file.
    public let path: String
    /// The durability the connections were opened with.
    public let durability: Durability
    private let pool: DatabasePool

    /// Open (creating if needed) the database at `path` and run pending migrations.
    ///
    /// - Important: Blocking file I/O: call at startup, or use ``open(path:durability:)`` from
    ///   async code.
    /// - Parameters:
    ///   - path: The SQLite file; its directory must exist.
    ///   - durability: `synchronous` for every connection (default ``Durability/full``).
    /// - Throws: `GroupError` `INTERNAL` (with the SQLite error as `cause`) if the file cannot be
    ///   opened or migrated.
    public init(path: String, durability: Durability = .full) throws {
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
            self.pool = try DatabasePool(path: path, configuration: configuration)
            // DatabasePool sets `synchronous = NORMAL` on its writer after `prepareDatabase` runs
            // (when it switches to WAL), so the writer, the only connection that commits, is set
            // again here; it is kept for the pool's lifetime.
            try self.pool.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA synchronous = \(synchronous)")
            }
            try Self.migrator.migrate(self.pool)
        } catch {
            throw GroupError.internal("cannot open the store at \(path): \(error)", cause: error)
        }
    }

    /// Open the store off the calling task's thread (the open and migrations block on file I/O).
    /// - Parameters:
    ///   - path: The SQLite file; its directory must exist.
    ///   - durability: `synchronous` for every connection.
    /// - Throws: As ``init(path:durability:)``.
    public static func open(path: String, durability: Durability = .full) async throws -> SQLiteGroupStore {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(with: Result { try SQLiteGroupStore(path: path, durability: durability) })
            }
        }
    }

    /// The identifiers of the migrations applied to the file, in order (`["v1", …]`).
    public func appliedMigrations() async throws -> [String] {
        try await self.run { [pool] in
            try await pool.read { db in try Self.migrator.appliedIdentifiers(db).sorted() }
        }
    }

    /// The `synchronous` setting a connection actually runs with (`nil` if neither FULL nor NORMAL).
    public func effectiveDurability() async throws -> Durability? {
        try await self.run { [pool] in
            try await pool.write { db in
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
        try await self.run { [pool] in
            try await pool.write { db in
                let group = plan.group
                do {
                    try db.execute(
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
                            """,
                        arguments: StatementArguments(Rows.groupInsertValues(group, nextJoinOrder: plan.members.count + 1)))
                } catch let error as DatabaseError where error.extendedResultCode == .SQLITE_CONSTRAINT_UNIQUE {
                    throw GroupError.groupIDTaken(group.id)
                }
                let groupKey = db.lastInsertedRowID
                for (key, value) in group.custom {
                    try db.execute(
                        sql: "INSERT INTO group_custom (group_key, key, value) VALUES (?, ?, ?)",
                        arguments: [groupKey, key, Data(value)])
                }
                for member in plan.members {
                    try Rows.insert(member, groupKey: groupKey, appID: group.appID, db: db)
                }
                let events = try Rows.appendEvents(
                    plan.events, groupKey: groupKey, appID: group.appID, groupID: group.id,
                    after: 0, time: group.createdAt, db: db)
                var stored = group
                stored.memberCount = plan.members.count
                stored.latestSequence = events.last?.sequence ?? 0
                return Committed(value: stored, events: events)
            }
        }
    }

    public func groups(app: String, ids: [String]) async throws -> [String: Group] {
        let ids = Array(Set(ids))
        if ids.isEmpty { return [:] }
        return try await self.run { [pool] in
            try await pool.read { db in
                let placeholders = Rows.placeholders(ids.count)
                let rows = try Row.fetchAll(
                    db,
                    sql: """
                        SELECT * FROM groups
                        WHERE app_id = ? AND group_id IN (\(placeholders)) AND dismissed_at IS NULL
                        """,
                    arguments: StatementArguments([app] + ids))
                var byKey: [Int64: Group] = [:]
                for row in rows {
                    byKey[row["group_key"]] = try Rows.group(row)
                }
                if !byKey.isEmpty {
                    let keys = Array(byKey.keys)
                    let customRows = try Row.fetchAll(
                        db,
                        sql: "SELECT group_key, key, value FROM group_custom WHERE group_key IN (\(Rows.placeholders(keys.count)))",
                        arguments: StatementArguments(keys))
                    for row in customRows {
                        let key: Int64 = row["group_key"]
                        let value: Data = row["value"]
                        byKey[key]?.custom[row["key"]] = [UInt8](value)
                    }
                }
                return Dictionary(uniqueKeysWithValues: byKey.values.map { ($0.id, $0) })
            }
        }
    }

    public func memberships(app: String, userID: String, groupIDs: [String]) async throws -> [String: Member] {
        let groupIDs = Array(Set(groupIDs))
        if groupIDs.isEmpty { return [:] }
        return try await self.run { [pool] in
            try await pool.read { db in
                let rows = try Row.fetchAll(
                    db,
                    sql: """
                        SELECT g.group_id, m.* FROM groups g
                        JOIN members m ON m.group_key = g.group_key AND m.user_id = ?
                        WHERE g.app_id = ? AND g.group_id IN (\(Rows.placeholders(groupIDs.count)))
                          AND g.dismissed_at IS NULL
                        """,
                    arguments: StatementArguments([userID, app] + groupIDs))
                var result: [String: Member] = [:]
                var groupIDByKey: [Int64: String] = [:]
                for row in rows {
                    let groupID: String = row["group_id"]
                    result[groupID] = try Rows.member(row)
                    groupIDByKey[row["group_key"]] = groupID
                }
                if !groupIDByKey.isEmpty {
                    let keys = Array(groupIDByKey.keys)
                    let customRows = try Row.fetchAll(
                        db,
                        sql: """
                            SELECT group_key, key, value FROM member_custom
                            WHERE user_id = ? AND group_key IN (\(Rows.placeholders(keys.count)))
                            """,
                        arguments: StatementArguments([userID] + keys.map { $0 as any DatabaseValueConvertible }))
                    for row in customRows {
                        let key: Int64 = row["group_key"]
                        let value: Data = row["value"]
                        if let groupID = groupIDByKey[key] {
                            result[groupID]?.custom[row["key"]] = [UInt8](value)
                        }
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
        try await self.run { [pool] in
            try await pool.write { db in
                guard let row = try Row.fetchOne(
                    db,
                    sql: "SELECT * FROM groups WHERE app_id = ? AND group_id = ? AND dismissed_at IS NULL",
                    arguments: [app, groupID])
                else { throw GroupError.groupNotFound(groupID) }
                let groupKey: Int64 = row["group_key"]
                let group = try Rows.group(row)
                var membership: Member?
                if let operatorID {
                    membership = try Row.fetchOne(
                        db, sql: "SELECT * FROM members WHERE group_key = ? AND user_id = ?",
                        arguments: [groupKey, operatorID]
                    ).map(Rows.member)
                }
                let drafts = try plan(group, membership)
                try db.execute(
                    sql: "UPDATE groups SET dismissed_at = ?, updated_at = ? WHERE group_key = ?",
                    arguments: [time.millisecondsSince1970, time.millisecondsSince1970, groupKey])
                return try Rows.appendEvents(
                    drafts, groupKey: groupKey, appID: app, groupID: groupID, after: group.latestSequence,
                    time: time, db: db)
            }
        }
    }

    public func events(app: String, groupID: String, after sequence: Int64, limit: Int) async throws -> [GroupEvent] {
        try await self.run { [pool] in
            try await pool.read { db in
                guard let groupKey = try Int64.fetchOne(
                    db, sql: "SELECT group_key FROM groups WHERE app_id = ? AND group_id = ?",
                    arguments: [app, groupID])
                else { throw GroupError.groupNotFound(groupID) }
                let rows = try Row.fetchAll(
                    db,
                    sql: """
                        SELECT * FROM group_events WHERE group_key = ? AND seq > ? ORDER BY seq LIMIT ?
                        """,
                    arguments: [groupKey, sequence, max(0, limit)])
                return try rows.map(Rows.event)
            }
        }
    }

    public func close() async throws {
        try await self.run { [pool] in
            try pool.close()
        }
    }

    // MARK: Errors

    /// Run `body`, letting `GroupError` through and wrapping anything else as `INTERNAL`.
    private func run<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as GroupError {
            throw error
        } catch {
            throw GroupError.internal("storage failure", cause: error)
        }
    }
}
