import GRDB
public import GroupModel
import GroupStore
import GroupStoreSQL

/// AVChatRoom presences over SQLite (`room_presence`: one lease per app, room and viewer, with
/// the time it ends on the service's clock).
extension SQLiteBackend {
    public func holdPresence(app: String, groupID: String, users: [String], until: Timestamp) async throws {
        try await pool.write { db in try PresenceRows.hold(db, app: app, groupID: groupID, users: users, until: until) }
    }

    public func renewPresence(app: String, users: [String], now: Timestamp, until: Timestamp) async throws {
        try await pool.write { db in
            try db.execute(
                sql: """
                    UPDATE room_presence SET expires_at = MAX(expires_at, ?)
                    WHERE app_id = ? AND user_id IN (SELECT value FROM json_each(?)) AND expires_at > ?
                    """,
                arguments: [until.millisecondsSince1970, app, try Rows.jsonArray(users), now.millisecondsSince1970])
        }
    }

    public func dropPresence(app: String, groupID: String, users: [String]?) async throws {
        try await pool.write { db in
            if let users {
                try PresenceRows.drop(db, app: app, groupID: groupID, users: users)
            } else {
                try db.execute(sql: "DELETE FROM room_presence WHERE app_id = ? AND group_id = ?", arguments: [app, groupID])
            }
        }
    }

    public func presence(app: String, groupIDs: [String], now: Timestamp) async throws -> [String: Int] {
        try await pool.read { db in
            var counts: [String: Int] = [:]
            for group in Set(groupIDs) {
                counts[group] = try PresenceRows.online(db, app: app, groupID: group, now: now)
            }
            return counts
        }
    }

    public func presentUsers(app: String, groupID: String, users: [String], now: Timestamp) async throws -> Set<String> {
        try await pool.read { db in try PresenceRows.present(db, app: app, groupID: groupID, users: users, now: now) }
    }

    public func sweepPresence(before: Timestamp) async throws -> Int {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM room_presence WHERE expires_at <= ?", arguments: [before.millisecondsSince1970])
            return db.changesCount
        }
    }
}

/// The statements of `room_presence`, on a connection the caller holds (the backend's own
/// calls, and a mutation's transaction: ``SQLiteTransaction`` reads and writes a room's presences
/// with its rows).
enum PresenceRows {
    /// Holds the presences of `users` until `until` (one held longer keeps its end).
    static func hold(_ db: Database, app: String, groupID: String, users: [String], until: Timestamp) throws {
        let statement = try db.cachedStatement(
            sql: """
                INSERT INTO room_presence (app_id, group_id, user_id, expires_at) VALUES (?, ?, ?, ?)
                ON CONFLICT (app_id, group_id, user_id) DO UPDATE SET expires_at = MAX(expires_at, excluded.expires_at)
                """)
        for user in Set(users) {
            try statement.execute(arguments: [app, groupID, user, until.millisecondsSince1970])
        }
    }

    /// Ends the presences of `users` in a room.
    static func drop(_ db: Database, app: String, groupID: String, users: [String]) throws {
        try db.execute(
            sql: """
                DELETE FROM room_presence
                WHERE app_id = ? AND group_id = ? AND user_id IN (SELECT value FROM json_each(?))
                """,
            arguments: [app, groupID, try Rows.jsonArray(users)])
    }

    /// How many presences in a room have not ended at `now`.
    static func online(_ db: Database, app: String, groupID: String, now: Timestamp) throws -> Int {
        try Int.fetchOne(
            db.cachedStatement(sql: "SELECT COUNT(*) FROM room_presence WHERE app_id = ? AND group_id = ? AND expires_at > ?"),
            arguments: [app, groupID, now.millisecondsSince1970]) ?? 0
    }

    /// Which of `users` hold a presence in a room that has not ended at `now`.
    static func present(_ db: Database, app: String, groupID: String, users: [String], now: Timestamp) throws -> Set<String> {
        if users.isEmpty { return [] }
        return Set(try String.fetchAll(
            db,
            sql: """
                SELECT user_id FROM room_presence
                WHERE app_id = ? AND group_id = ? AND user_id IN (SELECT value FROM json_each(?)) AND expires_at > ?
                """,
            arguments: [app, groupID, try Rows.jsonArray(users), now.millisecondsSince1970]))
    }
}
