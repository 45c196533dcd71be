public import GroupModel
import GroupStore
import GroupStoreSQL

/// AVChatRoom presences over PostgreSQL (`room_presence`, shared by every node). Writes go
/// through the room connection (``PostgresBackend/roomSession``, `synchronous_commit = off`):
/// a lease lost in a crash is renewed by the next pass, or ends, as it would have.
extension PostgresBackend {
    public func holdPresence(app: String, groupID: String, users: [String], until: Timestamp) async throws {
        try await rooms.run { session in
            try await session.command(
                """
                INSERT INTO room_presence (app_id, group_id, user_id, expires_at)
                SELECT ?, ?, u, ? FROM unnest(?::text[]) AS u
                ON CONFLICT (app_id, group_id, user_id)
                DO UPDATE SET expires_at = GREATEST(room_presence.expires_at, excluded.expires_at)
                """,
                [.text(app), .text(groupID), .integer(until.millisecondsSince1970), .texts(Array(Set(users)).sorted())])
        }
    }

    public func renewPresence(app: String, users: [String], now: Timestamp, until: Timestamp) async throws {
        try await rooms.run { session in
            try await session.command(
                """
                UPDATE room_presence SET expires_at = GREATEST(expires_at, ?)
                WHERE app_id = ? AND user_id = ANY(?) AND expires_at > ?
                """,
                [.integer(until.millisecondsSince1970), .text(app), .texts(users), .integer(now.millisecondsSince1970)])
        }
    }

    public func dropPresence(app: String, groupID: String, users: [String]?) async throws {
        try await rooms.run { session in
            if let users {
                try await session.command(
                    "DELETE FROM room_presence WHERE app_id = ? AND group_id = ? AND user_id = ANY(?)",
                    [.text(app), .text(groupID), .texts(users)])
            } else {
                try await session.command(
                    "DELETE FROM room_presence WHERE app_id = ? AND group_id = ?", [.text(app), .text(groupID)])
            }
        }
    }

    public func presence(app: String, groupIDs: [String], now: Timestamp) async throws -> [String: Int] {
        try await readStatement { session in
            var counts = Dictionary(uniqueKeysWithValues: Set(groupIDs).map { ($0, 0) })
            try await session.rows(
                """
                SELECT group_id, COUNT(*) FROM room_presence
                WHERE app_id = ? AND group_id = ANY(?) AND expires_at > ? GROUP BY group_id
                """, [.text(app), .texts(Array(counts.keys)), .integer(now.millisecondsSince1970)]
            ) { row in counts[try row.text(0)] = try row.int(1) }
            return counts
        }
    }

    public func presentUsers(app: String, groupID: String, users: [String], now: Timestamp) async throws -> Set<String> {
        try await readStatement { session in
            var present: Set<String> = []
            try await session.rows(
                """
                SELECT user_id FROM room_presence
                WHERE app_id = ? AND group_id = ? AND user_id = ANY(?) AND expires_at > ?
                """, [.text(app), .text(groupID), .texts(users), .integer(now.millisecondsSince1970)]
            ) { present.insert(try $0.text(0)) }
            return present
        }
    }

    public func sweepPresence(before: Timestamp) async throws -> Int {
        try await rooms.run { session in
            try await session.execute(
                "DELETE FROM room_presence WHERE expires_at <= ?", [.integer(before.millisecondsSince1970)])
        }
    }
}
