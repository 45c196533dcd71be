import GRDB
import GroupModel
import GroupStore
import GroupStoreSQL

/// The rows of message reactions over SQLite (v17): `reaction_counts` per key of a message,
/// `message_reactions` per user and key. Every statement reads or writes by a key's prefix.
enum ReactionRows {
    /// A message's key counts and `userID`'s keys on it.
    static func state(groupKey: Int64, sequence: Int64, userID: String, db: Database) throws -> ReactionState {
        var state = ReactionState()
        let counts = try Row.fetchCursor(
            db.cachedStatement(
                sql: """
                    SELECT reaction_key, count, next_ordinal, key_ordinal FROM reaction_counts
                    WHERE group_key = ? AND seq = ?
                    """),
            arguments: [groupKey, sequence])
        while let row = try counts.next() {
            let key: String = try row.decode(atIndex: 0)
            state.counts[key] = ReactionCount(
                key: key, count: try row.decode(atIndex: 1), nextOrdinal: try row.decode(atIndex: 2),
                keyOrdinal: try row.decode(atIndex: 3))
        }
        state.userKeys = Set(try String.fetchAll(
            db.cachedStatement(sql: "SELECT reaction_key FROM message_reactions WHERE group_key = ? AND seq = ? AND user_id = ?"),
            arguments: [groupKey, sequence, userID]))
        return state
    }

    /// Writes a reaction: the user's row inserted or deleted, the key's count row inserted,
    /// updated or (at 0) deleted.
    static func write(_ write: ReactionWrite, groupKey: Int64, time: Timestamp, db: Database) throws {
        let after = write.after
        if write.adds {
            try db.cachedStatement(
                sql: """
                    INSERT INTO message_reactions (group_key, seq, user_id, reaction_key, ordinal, time)
                    VALUES (?, ?, ?, ?, ?, ?)
                    """
            ).execute(arguments: [groupKey, write.sequence, write.userID, after.key, write.ordinal, time.millisecondsSince1970])
        } else {
            try db.cachedStatement(
                sql: "DELETE FROM message_reactions WHERE group_key = ? AND seq = ? AND user_id = ? AND reaction_key = ?"
            ).execute(arguments: [groupKey, write.sequence, write.userID, after.key])
        }
        if after.count == 0 {
            try db.cachedStatement(sql: "DELETE FROM reaction_counts WHERE group_key = ? AND seq = ? AND reaction_key = ?")
                .execute(arguments: [groupKey, write.sequence, after.key])
        } else if write.newKey {
            try db.cachedStatement(
                sql: """
                    INSERT INTO reaction_counts (group_key, seq, reaction_key, count, next_ordinal, key_ordinal)
                    VALUES (?, ?, ?, ?, ?, ?)
                    """
            ).execute(arguments: [groupKey, write.sequence, after.key, after.count, after.nextOrdinal, after.keyOrdinal])
        } else {
            try db.cachedStatement(
                sql: "UPDATE reaction_counts SET count = ?, next_ordinal = ? WHERE group_key = ? AND seq = ? AND reaction_key = ?"
            ).execute(arguments: [after.count, after.nextOrdinal, groupKey, write.sequence, after.key])
        }
    }

    /// The reactions of the stored, unrecalled messages among `sequences` (see
    /// `Store.reactions(app:groupID:sequences:reader:usersPerKey:)`).
    static func summaries(
        groupKey: Int64, sequences: [Int64], reader: String?, usersPerKey: Int, db: Database
    ) throws -> [Int64: [ReactionSummary]] {
        var result: [Int64: [ReactionSummary]] = [:]
        for sequence in Set(sequences) {
            let live = try Bool.fetchOne(
                db.cachedStatement(sql: "SELECT recall_time IS NULL FROM group_messages WHERE group_key = ? AND seq = ?"),
                arguments: [groupKey, sequence])
            guard live == true else { continue }
            let mine = try reader.map {
                Set(try String.fetchAll(
                    db.cachedStatement(
                        sql: "SELECT reaction_key FROM message_reactions WHERE group_key = ? AND seq = ? AND user_id = ?"),
                    arguments: [groupKey, sequence, $0]))
            } ?? []
            var summaries: [ReactionSummary] = []
            let rows = try Row.fetchAll(
                db.cachedStatement(
                    sql: "SELECT reaction_key, count FROM reaction_counts WHERE group_key = ? AND seq = ? ORDER BY key_ordinal"),
                arguments: [groupKey, sequence])
            for row in rows {
                let key: String = try row.decode(atIndex: 0)
                let first = usersPerKey == 0 ? [] : try String.fetchAll(
                    db.cachedStatement(
                        sql: """
                            SELECT user_id FROM message_reactions INDEXED BY message_reactions_by_key
                            WHERE group_key = ? AND seq = ? AND reaction_key = ? ORDER BY ordinal LIMIT ?
                            """),
                    arguments: [groupKey, sequence, key, usersPerKey])
                summaries.append(ReactionSummary(
                    key: key, count: try row.decode(atIndex: 1), reactedByReader: mine.contains(key), firstUsers: first))
            }
            result[sequence] = summaries
        }
        return result
    }

    /// A page of a key's users by ordinal, after `after`.
    static func users(
        groupKey: Int64, sequence: Int64, key: String, after: Int64, limit: Int, db: Database
    ) throws -> ReactionUserPage {
        let count = try Int.fetchOne(
            db.cachedStatement(sql: "SELECT count FROM reaction_counts WHERE group_key = ? AND seq = ? AND reaction_key = ?"),
            arguments: [groupKey, sequence, key]) ?? 0
        var users: [(userID: String, ordinal: Int64)] = []
        let rows = try Row.fetchCursor(
            db.cachedStatement(
                sql: """
                    SELECT user_id, ordinal FROM message_reactions INDEXED BY message_reactions_by_key
                    WHERE group_key = ? AND seq = ? AND reaction_key = ? AND ordinal > ? ORDER BY ordinal LIMIT ?
                    """),
            arguments: [groupKey, sequence, key, after, limit + 1])
        while let row = try rows.next() {
            users.append((userID: try row.decode(atIndex: 0), ordinal: try row.decode(atIndex: 1)))
        }
        let hasMore = users.count > limit
        if hasMore { users.removeLast(users.count - limit) }
        return ReactionUserPage(users: users, hasMore: hasMore, count: count)
    }
}

extension SQLiteBackend {
    public func reactions(
        app: String, groupID: String, sequences: [Int64], reader: String?, usersPerKey: Int
    ) async throws -> [Int64: [ReactionSummary]] {
        try await pool.read { db in
            let groupKey = try Rows.groupKey(db, app: app, groupID: groupID)
            return try ReactionRows.summaries(
                groupKey: groupKey, sequences: sequences, reader: reader, usersPerKey: usersPerKey, db: db)
        }
    }

    public func reactionUsers(
        app: String, groupID: String, sequence: Int64, key: String, after: Int64, limit: Int
    ) async throws -> ReactionUserPage {
        try await pool.read { db in
            let groupKey = try Rows.groupKey(db, app: app, groupID: groupID)
            return try ReactionRows.users(groupKey: groupKey, sequence: sequence, key: key, after: after, limit: limit, db: db)
        }
    }
}
