public import GroupModel
import GroupStore
import GroupStoreSQL

/// AVChatRoom presences over PostgreSQL (`room_presence`, shared by every node). Renewals,
/// sweeps and a dismissed room's drop go through the room connection (``PostgresBackend/roomSession``,
/// `synchronous_commit = off`): a lease lost in a crash is renewed by the next pass, or ends, as it
/// would have. A join's hold and a leave's drop are written in the mutation's own transaction
/// (``PostgresTransaction``, with ``PostgresPresenceRows``).
extension PostgresBackend {
    public func holdPresence(app: String, groupID: String, users: [String], until: Timestamp) async throws {
        try await rooms.run { session in
            try await session.command(
                PostgresPresenceRows.hold, PostgresPresenceRows.holdArguments(app: app, groupID: groupID, users: users, until: until))
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
                try await session.command(PostgresPresenceRows.drop, [.text(app), .text(groupID), .texts(users)])
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
                PostgresPresenceRows.present, [.text(app), .text(groupID), .texts(users), .integer(now.millisecondsSince1970)]
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

/// The statements of `room_presence` that the backend's calls and a mutation's transaction share.
enum PostgresPresenceRows {
    /// Holds presences until a time (one held longer keeps its end): app, group, end, users.
    static let hold = """
        INSERT INTO room_presence (app_id, group_id, user_id, expires_at)
        SELECT ?, ?, u, ? FROM unnest(?::text[]) AS u
        ON CONFLICT (app_id, group_id, user_id)
        DO UPDATE SET expires_at = GREATEST(room_presence.expires_at, excluded.expires_at)
        """

    /// ``hold``'s arguments (the users once each, sorted: concurrent holds lock rows in one order).
    static func holdArguments(app: String, groupID: String, users: [String], until: Timestamp) -> [PGValue] {
        [.text(app), .text(groupID), .integer(until.millisecondsSince1970), .texts(Array(Set(users)).sorted())]
    }

    /// Ends presences in a room: app, group, users.
    static let drop = "DELETE FROM room_presence WHERE app_id = ? AND group_id = ? AND user_id = ANY(?)"

    /// Which users hold a presence in a room that has not ended: app, group, users, now.
    static let present = """
        SELECT user_id FROM room_presence
        WHERE app_id = ? AND group_id = ? AND user_id = ANY(?) AND expires_at > ?
        """

    /// A room's online count (a row with a null user) and which of some users are present (a row
    /// each), in one statement: ``readingArguments(app:groupID:users:now:)``.
    static let reading = """
        SELECT NULL::text, COUNT(*) FROM room_presence WHERE app_id = ? AND group_id = ? AND expires_at > ?
        UNION ALL
        SELECT user_id, 0 FROM room_presence WHERE app_id = ? AND group_id = ? AND expires_at > ? AND user_id = ANY(?)
        """

    /// ``reading``'s arguments.
    static func readingArguments(app: String, groupID: String, users: [String], now: Timestamp) -> [PGValue] {
        let room: [PGValue] = [.text(app), .text(groupID), .integer(now.millisecondsSince1970)]
        return room + room + [.texts(users)]
    }

    /// Reads a room's presences for `users` in one statement of `session`.
    static func read(_ session: PostgresSession, app: String, groupID: String, users: [String], now: Timestamp) async throws -> RoomPresence {
        var presence = RoomPresence(present: [], online: 0)
        try await session.rows(reading, readingArguments(app: app, groupID: groupID, users: users, now: now)) { row in
            if let user = try row.optionalText(0) {
                presence.present.insert(user)
            } else {
                presence.online = try row.int(1)
            }
        }
        return presence
    }
}
