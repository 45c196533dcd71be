import GRDB
public import GroupModel
import GroupStore
import GroupStoreSQL

/// AVChatRoom presences over SQLite (`room_presence`: one lease per app, room and viewer, with
/// the time it ends on the service's clock).
extension SQLiteBackend {
    public func holdPresence(app: String, groupID: String, users: [String], until: Timestamp) async throws {
        try await pool.write { db in
            let statement = try db.cachedStatement(
                sql: """
                    INSERT INTO room_presence (app_id, group_id, user_id, expires_at) VALUES (?, ?, ?, ?)
                    ON CONFLICT (app_id, group_id, user_id) DO UPDATE SET expires_at = MAX(expires_at, excluded.expires_at)
                    """)
            for user in Set(users) {
                try statement.execute(arguments: [app, groupID, user, until.millisecondsSince1970])
            }
        }
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
                try db.execute(
                    sql: """
                        DELETE FROM room_presence
                        WHERE app_id = ? AND group_id = ? AND user_id IN (SELECT value FROM json_each(?))
                        """,
                    arguments: [app, groupID, try Rows.jsonArray(users)])
            } else {
                try db.execute(sql: "DELETE FROM room_presence WHERE app_id = ? AND group_id = ?", arguments: [app, groupID])
            }
        }
    }

    public func presence(app: String, groupIDs: [String], now: Timestamp) async throws -> [String: Int] {
        try await pool.read { db in
            var counts: [String: Int] = [:]
            let statement = try db.cachedStatement(
                sql: "SELECT COUNT(*) FROM room_presence WHERE app_id = ? AND group_id = ? AND expires_at > ?")
            for group in Set(groupIDs) {
                counts[group] = try Int.fetchOne(statement, arguments: [app, group, now.millisecondsSince1970]) ?? 0
            }
            return counts
        }
    }

    public func presentUsers(app: String, groupID: String, users: [String], now: Timestamp) async throws -> Set<String> {
        try await pool.read { db in
            Set(try String.fetchAll(
                db,
                sql: """
                    SELECT user_id FROM room_presence
                    WHERE app_id = ? AND group_id = ? AND user_id IN (SELECT value FROM json_each(?)) AND expires_at > ?
                    """,
                arguments: [app, groupID, try Rows.jsonArray(users), now.millisecondsSince1970]))
        }
    }

    public func sweepPresence(before: Timestamp) async throws -> Int {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM room_presence WHERE expires_at <= ?", arguments: [before.millisecondsSince1970])
            return db.changesCount
        }
    }
}
