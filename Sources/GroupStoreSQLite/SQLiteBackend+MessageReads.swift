import GRDB
import GroupModel
import GroupStore
import GroupStoreSQL

/// Message reads over SQLite: history and unread counts read `group_messages` alone, through
/// `group_messages_by_seq`.
extension SQLiteBackend {
    public func message(
        app: String, groupID: String, senderID: String, clientMessageID: String
    ) async throws -> StoredMessage? {
        try await pool.read { db in
            let groupKey = try Rows.groupKey(db, app: app, groupID: groupID, dismissedToo: true)
            return try MessageRows.messageByClientID(
                groupKey: groupKey, appID: app, groupID: groupID, senderID: senderID,
                clientMessageID: clientMessageID, db: db)
        }
    }

    public func messages(app: String, groupID: String, range: MessageRange, limit: Int) async throws -> MessagePage {
        let limit = max(1, limit)
        return try await pool.read { db in
            let (groupKey, latest) = try Self.liveGroupPosition(db, app: app, groupID: groupID)
            let statement: Statement
            let arguments: StatementArguments
            switch range.direction {
            case .older:
                statement = try db.cachedStatement(
                    sql: """
                        SELECT \(MessageRows.messageColumns) FROM group_messages gm
                        WHERE group_key = ? AND seq < ? AND seq > ? ORDER BY seq DESC LIMIT ?
                        """)
                arguments = [groupKey, range.anchor ?? Int64.max, range.floor, limit + 1]
            case .newer:
                statement = try db.cachedStatement(
                    sql: """
                        SELECT \(MessageRows.messageColumns) FROM group_messages gm
                        WHERE group_key = ? AND seq > ? ORDER BY seq LIMIT ?
                        """)
                arguments = [groupKey, max(range.anchor ?? 0, range.floor), limit + 1]
            }
            var messages: [GroupMessage] = []
            let rows = try Row.fetchCursor(statement, arguments: arguments)
            while let row = try rows.next() {
                messages.append(try MessageRows.message(row, appID: app, groupID: groupID).message)
            }
            var page = MessagePage(overfetched: messages, limit: limit, latestSequence: latest)
            if range.direction == .older { page.messages.reverse() }
            return page
        }
    }

    public func replies(app: String, groupID: String, to sequence: Int64, after: Int64, limit: Int) async throws -> MessagePage {
        let limit = max(1, limit)
        return try await pool.read { db in
            let (groupKey, latest) = try Self.liveGroupPosition(db, app: app, groupID: groupID)
            let replies = try MessageRows.replies(
                groupKey: groupKey, appID: app, groupID: groupID, to: sequence, after: after, limit: limit + 1, db: db)
            return MessagePage(overfetched: replies.map(\.message), limit: limit, latestSequence: latest)
        }
    }

    /// The key and latest sequence of a live group (`GROUP_NOT_FOUND`: missing or dismissed).
    private static func liveGroupPosition(_ db: Database, app: String, groupID: String) throws -> (key: Int64, latest: Int64) {
        guard let row = try Row.fetchOne(
            db.cachedStatement(
                sql: "SELECT group_key, latest_seq FROM groups WHERE app_id = ? AND group_id = ? AND dismissed_at IS NULL"),
            arguments: [app, groupID])
        else { throw GroupError.groupNotFound(groupID) }
        return (try row.decode(atIndex: 0), try row.decode(atIndex: 1))
    }

    public func eventIDs(app: String, groupID: String, sequences: [Int64]) async throws -> [Int64: Int64] {
        try await pool.read { db in
            let groupKey = try Rows.groupKey(db, app: app, groupID: groupID, dismissedToo: true)
            var result: [Int64: Int64] = [:]
            for sequence in sequences {
                result[sequence] = try Int64.fetchOne(
                    db.cachedStatement(sql: "SELECT event_id FROM group_events WHERE group_key = ? AND seq = ?"),
                    arguments: [groupKey, sequence])
            }
            return result
        }
    }

    public func unreadMentions(app: String, userID: String, groupIDs: [String]) async throws -> [String: UnreadMention] {
        if groupIDs.isEmpty { return [:] }
        return try await pool.read { db in try Self.unreadMentions(app: app, userID: userID, groupIDs: groupIDs, db: db) }
    }

    /// ``unreadMentions(app:userID:groupIDs:)`` inside a read.
    static func unreadMentions(app: String, userID: String, groupIDs: [String], db: Database) throws -> [String: UnreadMention] {
        let (topicIDs, groupIDs) = TopicReads.split(groupIDs)
        var mentions: [String: UnreadMention] = [:]
        for (id, state) in try TopicReads.states(app: app, userID: userID, topicIDs: topicIDs, db: db) {
            mentions[id] = state.unreadMention
        }
        if groupIDs.isEmpty { return mentions }
        let padded = Rows.padded(groupIDs)
        let rows = try Row.fetchCursor(
            db.cachedStatement(
                sql: """
                    SELECT g.group_id, g.group_key, max(m.last_read_seq, m.join_seq) FROM groups g
                    JOIN members m ON m.group_key = g.group_key AND m.user_id = ?
                    WHERE g.app_id = ? AND g.group_id IN (\(Rows.placeholders(padded.count)))
                    """),
            arguments: StatementArguments([userID, app] + padded))
        var found: [(id: String, key: Int64, after: Int64)] = []
        while let row = try rows.next() {
            found.append((try row.decode(atIndex: 0), try row.decode(atIndex: 1), try row.decode(atIndex: 2)))
        }
        for entry in found {
            mentions[entry.id] = try MessageRows.unreadMention(groupKey: entry.key, userID: userID, after: entry.after, db: db)
        }
        return mentions
    }

    public func readStates(app: String, userID: String, groupIDs: [String]) async throws -> [String: ReadState] {
        let groupIDs = groupIDs.count > 1 ? Array(Set(groupIDs)) : groupIDs
        if groupIDs.isEmpty { return [:] }
        return try await pool.read { db in
            let (topicIDs, groupIDs) = TopicReads.split(groupIDs)
            var states = try TopicReads.states(app: app, userID: userID, topicIDs: topicIDs, db: db)
            if groupIDs.isEmpty { return states }
            let padded = Rows.padded(groupIDs)
            let rows = try Row.fetchCursor(
                db.cachedStatement(
                    sql: """
                        SELECT g.group_id, g.group_key, m.last_read_seq, m.join_seq FROM groups g
                        JOIN members m ON m.group_key = g.group_key AND m.user_id = ?
                        WHERE g.app_id = ? AND g.group_id IN (\(Rows.placeholders(padded.count)))
                        """),
                arguments: StatementArguments([userID, app] + padded))
            var found: [(id: String, key: Int64, read: Int64, join: Int64)] = []
            while let row = try rows.next() {
                found.append((try row.decode(atIndex: 0), try row.decode(atIndex: 1),
                              try row.decode(atIndex: 2), try row.decode(atIndex: 3)))
            }
            for entry in found {
                let unread = try MessageRows.unreadCount(
                    groupKey: entry.key, userID: userID, after: max(entry.read, entry.join), db: db)
                states[entry.id] = ReadState(
                    readSequence: entry.read, unreadCount: unread,
                    lastMessageAt: try MessageRows.lastMessageTime(groupKey: entry.key, db: db),
                    unreadMention: try MessageRows.unreadMention(
                        groupKey: entry.key, userID: userID, after: max(entry.read, entry.join), db: db))
            }
            return states
        }
    }

    public func readPositions(app: String, groupID: String) async throws -> [MemberReadPosition] {
        try await pool.read { db in
            let groupKey = try Rows.groupKey(db, app: app, groupID: groupID)
            if GroupID.isTopic(groupID) { return try TopicReads.readPositions(topicKey: groupKey, db: db) }
            let rows = try Row.fetchCursor(
                db.cachedStatement(
                    sql: "SELECT user_id, join_seq, last_read_seq FROM members WHERE group_key = ? ORDER BY user_id"),
                arguments: [groupKey])
            var positions: [MemberReadPosition] = []
            while let row = try rows.next() {
                positions.append(MemberReadPosition(
                    userID: try row.decode(atIndex: 0), joinSequence: try row.decode(atIndex: 1),
                    readSequence: try row.decode(atIndex: 2)))
            }
            return positions
        }
    }
}
