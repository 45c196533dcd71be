import GroupModel
import GroupStore
import GroupStoreSQL

/// The rows of message reactions over PostgreSQL (v13), as SQLite's `ReactionRows`: every
/// statement reads or writes by a key's prefix, prepared once per connection.
enum PostgresReactionRows {
    /// A message's key counts and `userID`'s keys on it, in the caller's transaction.
    static func state(
        _ session: PostgresSession, app: String, groupKey: Int64, sequence: Int64, userID: String
    ) async throws -> ReactionState {
        var state = ReactionState()
        try await session.rows(
            """
            SELECT reaction_key, count, next_ordinal, key_ordinal FROM reaction_counts
            WHERE app_id = ? AND group_key = ? AND seq = ?
            """, [.text(app), .integer(groupKey), .integer(sequence)]
        ) { row in
            let key = try row.text(0)
            state.counts[key] = ReactionCount(
                key: key, count: try row.int(1), nextOrdinal: try row.int64(2), keyOrdinal: try row.int64(3))
        }
        try await session.rows(
            "SELECT reaction_key FROM message_reactions WHERE app_id = ? AND group_key = ? AND seq = ? AND user_id = ?",
            [.text(app), .integer(groupKey), .integer(sequence), .text(userID)]
        ) { row in state.userKeys.insert(try row.text(0)) }
        return state
    }

    /// Writes a reaction: the user's row inserted or deleted, the key's count row inserted,
    /// updated or (at 0) deleted.
    static func write(
        _ write: ReactionWrite, _ session: PostgresSession, app: String, groupKey: Int64, time: Timestamp
    ) async throws {
        let after = write.after
        let message: [PGValue] = [.text(app), .integer(groupKey), .integer(write.sequence)]
        if write.adds {
            try await session.command(
                """
                INSERT INTO message_reactions (app_id, group_key, seq, user_id, reaction_key, ordinal, time)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """, message + [.text(write.userID), .text(after.key), .integer(write.ordinal), .integer(time.millisecondsSince1970)])
        } else {
            try await session.command(
                "DELETE FROM message_reactions WHERE app_id = ? AND group_key = ? AND seq = ? AND user_id = ? AND reaction_key = ?",
                message + [.text(write.userID), .text(after.key)])
        }
        if after.count == 0 {
            try await session.command(
                "DELETE FROM reaction_counts WHERE app_id = ? AND group_key = ? AND seq = ? AND reaction_key = ?",
                message + [.text(after.key)])
        } else if write.newKey {
            try await session.command(
                """
                INSERT INTO reaction_counts (app_id, group_key, seq, reaction_key, count, next_ordinal, key_ordinal)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """,
                message + [.text(after.key), .int(after.count), .integer(after.nextOrdinal), .integer(after.keyOrdinal)])
        } else {
            try await session.command(
                """
                UPDATE reaction_counts SET count = ?, next_ordinal = ?
                WHERE app_id = ? AND group_key = ? AND seq = ? AND reaction_key = ?
                """, [.int(after.count), .integer(after.nextOrdinal)] + message + [.text(after.key)])
        }
    }
}

extension PostgresBackend {
    public func reactions(
        app: String, groupID: String, sequences: [Int64], reader: String?, usersPerKey: Int
    ) async throws -> [Int64: [ReactionSummary]] {
        try await read { session in
            let groupKey = try await PostgresRows.groupKey(app: app, groupID: groupID, session: session)
            var result: [Int64: [ReactionSummary]] = [:]
            for sequence in Set(sequences) {
                let message: [PGValue] = [.text(app), .integer(groupKey), .integer(sequence)]
                let live = try await session.first(
                    "SELECT (recall_time IS NULL)::int::int8 FROM group_messages WHERE app_id = ? AND group_key = ? AND seq = ?",
                    message, { try $0.bool(0) })
                guard live == true else { continue }
                var mine: Set<String> = []
                if let reader {
                    try await session.rows(
                        "SELECT reaction_key FROM message_reactions WHERE app_id = ? AND group_key = ? AND seq = ? AND user_id = ?",
                        message + [.text(reader)]
                    ) { mine.insert(try $0.text(0)) }
                }
                var counts: [(key: String, count: Int)] = []
                try await session.rows(
                    """
                    SELECT reaction_key, count FROM reaction_counts
                    WHERE app_id = ? AND group_key = ? AND seq = ? ORDER BY key_ordinal
                    """, message
                ) { counts.append((key: try $0.text(0), count: try $0.int(1))) }
                var summaries: [ReactionSummary] = []
                for (key, count) in counts {
                    var first: [String] = []
                    if usersPerKey > 0 {
                        try await session.rows(
                            """
                            SELECT user_id FROM message_reactions
                            WHERE app_id = ? AND group_key = ? AND seq = ? AND reaction_key = ? ORDER BY ordinal LIMIT ?
                            """, message + [.text(key), .int(usersPerKey)]
                        ) { first.append(try $0.text(0)) }
                    }
                    summaries.append(ReactionSummary(key: key, count: count, reactedByReader: mine.contains(key), firstUsers: first))
                }
                result[sequence] = summaries
            }
            return result
        }
    }

    public func reactionUsers(
        app: String, groupID: String, sequence: Int64, key: String, after: Int64, limit: Int
    ) async throws -> ReactionUserPage {
        try await read { session in
            let groupKey = try await PostgresRows.groupKey(app: app, groupID: groupID, session: session)
            let message: [PGValue] = [.text(app), .integer(groupKey), .integer(sequence), .text(key)]
            let count = try await session.first(
                "SELECT count FROM reaction_counts WHERE app_id = ? AND group_key = ? AND seq = ? AND reaction_key = ?",
                message, { try $0.int(0) }) ?? 0
            var users: [(userID: String, ordinal: Int64)] = []
            try await session.rows(
                """
                SELECT user_id, ordinal FROM message_reactions
                WHERE app_id = ? AND group_key = ? AND seq = ? AND reaction_key = ? AND ordinal > ? ORDER BY ordinal LIMIT ?
                """, message + [.integer(after), .int(limit + 1)]
            ) { users.append((userID: try $0.text(0), ordinal: try $0.int64(1))) }
            let hasMore = users.count > limit
            if hasMore { users.removeLast(users.count - limit) }
            return ReactionUserPage(users: users, hasMore: hasMore, count: count)
        }
    }
}
