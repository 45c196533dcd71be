import GroupModel
import GroupStore
import GroupStoreSQL

/// Message reads over PostgreSQL: history and unread counts read `group_messages` alone, through
/// `group_messages_by_seq` (as on SQLite, `SQLiteBackend+MessageReads.swift`).
extension PostgresBackend {
    public func message(
        app: String, groupID: String, senderID: String, clientMessageID: String
    ) async throws -> StoredMessage? {
        try await read { session in
            let groupKey = try await PostgresRows.groupKey(app: app, groupID: groupID, dismissedToo: true, session: session)
            return try await PostgresMessageRows.messageByClientID(
                app: app, groupKey: groupKey, groupID: groupID, senderID: senderID,
                clientMessageID: clientMessageID, session: session)
        }
    }

    public func messages(app: String, groupID: String, range: MessageRange, limit: Int) async throws -> MessagePage {
        let limit = max(1, limit)
        return try await read { session in
            let (groupKey, latest) = try await Self.liveGroupPosition(session, app: app, groupID: groupID)
            let sql: String
            let arguments: [PGValue]
            switch range.direction {
            case .older:
                sql = """
                    SELECT \(PostgresMessageRows.columns) FROM group_messages gm
                    WHERE gm.app_id = ? AND gm.group_key = ? AND gm.seq < ? AND gm.seq > ?
                    ORDER BY gm.seq DESC LIMIT ?
                    """
                arguments = [
                    .text(app), .integer(groupKey), .integer(range.anchor ?? Int64.max), .integer(range.floor),
                    .int(limit + 1),
                ]
            case .newer:
                sql = """
                    SELECT \(PostgresMessageRows.columns) FROM group_messages gm
                    WHERE gm.app_id = ? AND gm.group_key = ? AND gm.seq > ? ORDER BY gm.seq LIMIT ?
                    """
                arguments = [.text(app), .integer(groupKey), .integer(max(range.anchor ?? 0, range.floor)), .int(limit + 1)]
            }
            var messages: [GroupMessage] = []
            try await session.rows(sql, arguments) { row in
                messages.append(try MessageRows.message(row, appID: app, groupID: groupID).message)
            }
            var page = MessagePage(overfetched: messages, limit: limit, latestSequence: latest)
            if range.direction == .older { page.messages.reverse() }
            return page
        }
    }

    public func eventIDs(app: String, groupID: String, sequences: [Int64]) async throws -> [Int64: Int64] {
        try await read { session in
            let groupKey = try await PostgresRows.groupKey(app: app, groupID: groupID, dismissedToo: true, session: session)
            var result: [Int64: Int64] = [:]
            if sequences.isEmpty { return result }
            try await session.rows(
                "SELECT seq, event_id FROM group_events WHERE app_id = ? AND group_key = ? AND seq = ANY(?)",
                [.text(app), .integer(groupKey), .integers(Array(Set(sequences)))]
            ) { row in result[try row.int64(0)] = try row.int64(1) }
            return result
        }
    }

    /// Two columns of a membership `m`: whether a kept mention of the member (`message_mentions`)
    /// and whether an unrecalled @all message of another sender lies after their read position
    /// and join, as 0/1.
    static let unreadMentionColumns = """
        (EXISTS (SELECT 1 FROM message_mentions mm
         WHERE mm.app_id = m.app_id AND mm.group_key = m.group_key AND mm.user_id = m.user_id
           AND mm.seq > GREATEST(m.last_read_seq, m.join_seq)))::int::int8,
        (EXISTS (SELECT 1 FROM group_messages a
         WHERE a.app_id = m.app_id AND a.group_key = m.group_key AND a.mention_all = 1
           AND a.seq > GREATEST(m.last_read_seq, m.join_seq) AND a.sender_id <> m.user_id))::int::int8
        """

    public func unreadMentions(app: String, userID: String, groupIDs: [String]) async throws -> [String: UnreadMention] {
        if groupIDs.isEmpty { return [:] }
        if groupIDs.contains(where: GroupID.isTopic) {
            let states = try await readStates(app: app, userID: userID, groupIDs: groupIDs)
            return states.mapValues(\.unreadMention)
        }
        return try await readStatement { session in
            var mentions: [String: UnreadMention] = [:]
            try await session.rows(
                """
                SELECT g.group_id, \(Self.unreadMentionColumns)
                FROM groups g
                JOIN \(PostgresRows.membershipProbe)
                WHERE g.app_id = ? AND g.group_id \(PostgresRows.oneOrAny(groupIDs).sql)
                """,
                [.text(userID), .text(app), PostgresRows.oneOrAny(groupIDs).value]
            ) { row in mentions[try row.text(0)] = UnreadMention(me: try row.bool(1), all: try row.bool(2)) }
            return mentions
        }
    }

    public func readStates(app: String, userID: String, groupIDs: [String]) async throws -> [String: ReadState] {
        let groupIDs = groupIDs.count > 1 ? Array(Set(groupIDs)) : groupIDs
        if groupIDs.isEmpty { return [:] }
        let topics = groupIDs.filter(GroupID.isTopic)
        if topics.isEmpty {
            return try await readStatement { session in
                try await Self.readStates(session, app: app, userID: userID, groupIDs: groupIDs)
            }
        }
        let others = groupIDs.filter { !GroupID.isTopic($0) }
        return try await read { session in
            var states = others.isEmpty ? [:] : try await Self.readStates(session, app: app, userID: userID, groupIDs: others)
            try await session.rows(
                """
                SELECT t.group_id, \(Self.topicStateColumns)
                FROM groups t
                \(Self.topicStateJoins)
                WHERE t.app_id = ? AND t.group_id = ANY(?) AND t.parent_key IS NOT NULL
                """,
                [.text(userID), .text(app), .texts(topics)]
            ) { row in
                states[try row.text(0)] = try Self.readState(row)
            }
            return states
        }
    }

    /// The joins ``topicStateColumns`` reads, after topic `t`: member row `m` of the user (the
    /// `?`) in its community (``membershipProbe(app:community:)``), and the position
    /// (``topicPosition``).
    static let topicStateJoins = """
        JOIN LATERAL \(membershipProbe(app: "t.app_id", community: "t.parent_key")) m ON true
        \(topicPosition)
        """

    /// The member row `m` of the user (the `?`) in the community of app `app` whose key is
    /// `community` (SQL expressions), as a lateral subquery: one probe of the members' key.
    static func membershipProbe(app: String, community: String) -> String {
        """
        (SELECT m.* FROM members m
            WHERE m.app_id = \(app) AND m.group_key = \(community) AND m.user_id COLLATE "C" = ? LIMIT 1)
        """
    }

    /// After topic `t` and member row `m`: the position `p.seq`, the `topic_reads` row of the
    /// member's current membership (at most one: the key is the topic and the user) or 0. A
    /// plain outer join: as an aggregate in a lateral subquery, every topic of a thousand paid a
    /// cache lookup and an aggregate node besides its probe (a fifth of the joined list's
    /// statement, docs/PERFORMANCE.md).
    static let topicPosition = """
        LEFT JOIN topic_reads r
            ON r.app_id = t.app_id AND r.topic_key = t.group_key AND r.user_id = m.user_id AND r.joined_at = m.joined_at
        CROSS JOIN LATERAL (SELECT coalesce(r.last_read_seq, 0) AS seq) p
        """

    /// A member's read state in topic `t` (``topicStateJoins``), in ``readState(_:)`` order: the
    /// position, then the unread count and mentions among the messages after it sent since they
    /// joined the community (at or after their join time), and the last message's time. The
    /// position is read once (a join, not a subquery each column repeats), and the message
    /// subqueries run only for a topic whose latest sequence is past it (a topic without
    /// messages has no last message time): a member of a thousand topics, most of them read,
    /// costs a thousand index probes, not five thousand.
    static let topicStateColumns = """
        p.seq,
        CASE WHEN t.latest_seq > p.seq THEN
        (SELECT COUNT(*) FROM group_messages u
         WHERE u.app_id = t.app_id AND u.group_key = t.group_key
           AND u.seq > p.seq AND u.time >= m.joined_at AND u.sender_id <> m.user_id) ELSE 0 END,
        CASE WHEN t.latest_seq > 0 THEN
        (SELECT l.time FROM group_messages l
         WHERE l.app_id = t.app_id AND l.group_key = t.group_key ORDER BY l.seq DESC LIMIT 1) END,
        (t.latest_seq > p.seq AND EXISTS (SELECT 1 FROM message_mentions mm JOIN group_messages mg
            ON mg.app_id = mm.app_id AND mg.group_key = mm.group_key AND mg.seq = mm.seq
         WHERE mm.app_id = t.app_id AND mm.group_key = t.group_key AND mm.user_id = m.user_id
           AND mm.seq > p.seq AND mg.time >= m.joined_at))::int::int8,
        (t.latest_seq > p.seq AND EXISTS (SELECT 1 FROM group_messages a
         WHERE a.app_id = t.app_id AND a.group_key = t.group_key AND a.mention_all = 1
           AND a.seq > p.seq AND a.time >= m.joined_at AND a.sender_id <> m.user_id))::int::int8
        """

    /// A read state from columns 1–5 of a row (after the group id): the position, the unread
    /// count, the last message's time, and the unread mentions of the user and of everyone.
    static func readState(_ row: some ColumnReader) throws -> ReadState {
        ReadState(
            readSequence: try row.int64(1), unreadCount: Int(try row.int64(2)),
            lastMessageAt: try row.optionalInt64(3).map(Timestamp.init(millisecondsSince1970:)),
            unreadMention: UnreadMention(me: try row.bool(4), all: try row.bool(5)))
    }

    /// The read states of `userID` in the groups (none a topic), in one statement.
    private static func readStates(
        _ session: PostgresSession, app: String, userID: String, groupIDs: [String]
    ) async throws -> [String: ReadState] {
        // One statement: per membership, the unread count and the newest message's time
        // (``PostgresMessageRows/unreadCount(app:groupKey:userID:after:session:)`` and
        // ``PostgresMessageRows/lastMessageTime(app:groupKey:session:)`` as subqueries).
        // Dismissed groups included, as on SQLite.
        var states: [String: ReadState] = [:]
        try await session.rows(
            """
            SELECT g.group_id, m.last_read_seq,
                (SELECT COUNT(*) FROM group_messages u
                 WHERE u.app_id = m.app_id AND u.group_key = m.group_key
                   AND u.seq > GREATEST(m.last_read_seq, m.join_seq) AND u.sender_id <> m.user_id),
                (SELECT l.time FROM group_messages l
                 WHERE l.app_id = m.app_id AND l.group_key = m.group_key ORDER BY l.seq DESC LIMIT 1),
                \(Self.unreadMentionColumns)
            FROM groups g
            JOIN \(PostgresRows.membershipProbe)
            WHERE g.app_id = ? AND g.group_id \(PostgresRows.oneOrAny(groupIDs).sql)
            """,
            [.text(userID), .text(app), PostgresRows.oneOrAny(groupIDs).value]
        ) { row in
            states[try row.text(0)] = try Self.readState(row)
        }
        return states
    }

    public func readPositions(app: String, groupID: String) async throws -> [MemberReadPosition] {
        if GroupID.isTopic(groupID) {
            return try await read { session in
                // The community's members, with their position in the topic when written for
                // their current membership (join sequences are the community's: 0 here).
                guard let (topicKey, communityKey) = try await session.first(
                    """
                    SELECT g.group_key, g.parent_key FROM groups g
                    JOIN groups c ON c.app_id = g.app_id AND c.group_key = g.parent_key AND c.dismissed_at IS NULL
                    WHERE g.app_id = ? AND g.group_id = ? AND g.dismissed_at IS NULL
                    """, [.text(app), .text(groupID)], { (try $0.int64(0), try $0.int64(1)) })
                else { throw GroupError.groupNotFound(groupID) }
                var positions: [MemberReadPosition] = []
                try await session.rows(
                    """
                    SELECT m.user_id, coalesce(r.last_read_seq, 0),
                        (SELECT coalesce(max(gm.seq), 0) FROM group_messages gm
                         WHERE gm.app_id = m.app_id AND gm.group_key = ? AND gm.time < m.joined_at)
                    FROM members m
                    LEFT JOIN topic_reads r ON r.app_id = m.app_id AND r.topic_key = ? AND r.user_id = m.user_id
                        AND r.joined_at = m.joined_at
                    WHERE m.app_id = ? AND m.group_key = ? ORDER BY m.user_id COLLATE "C"
                    """,
                    [.integer(topicKey), .integer(topicKey), .text(app), .integer(communityKey)]
                ) { row in
                    // The join sequence: the topic's latest message sent before the member joined.
                    positions.append(MemberReadPosition(
                        userID: try row.text(0), joinSequence: try row.int64(2), readSequence: try row.int64(1)))
                }
                return positions
            }
        }
        return try await read { session in
            let groupKey = try await PostgresRows.groupKey(app: app, groupID: groupID, session: session)
            var positions: [MemberReadPosition] = []
            try await session.rows(
                """
                SELECT user_id, join_seq, last_read_seq FROM members
                WHERE app_id = ? AND group_key = ? ORDER BY user_id COLLATE "C"
                """,
                [.text(app), .integer(groupKey)]
            ) { row in
                positions.append(MemberReadPosition(
                    userID: try row.text(0), joinSequence: try row.int64(1), readSequence: try row.int64(2)))
            }
            return positions
        }
    }
}

extension PostgresBackend {
    public func replies(app: String, groupID: String, to sequence: Int64, after: Int64, limit: Int) async throws -> MessagePage {
        let limit = max(1, limit)
        return try await read { session in
            let (groupKey, latest) = try await Self.liveGroupPosition(session, app: app, groupID: groupID)
            var messages: [GroupMessage] = []
            try await session.rows(
                """
                SELECT \(PostgresMessageRows.columns) FROM group_messages gm
                WHERE gm.app_id = ? AND gm.group_key = ? AND gm.reply_seq = ? AND gm.seq > ? ORDER BY gm.seq LIMIT ?
                """,
                [.text(app), .integer(groupKey), .integer(sequence), .integer(after), .int(limit + 1)]
            ) { row in
                messages.append(try MessageRows.message(row, appID: app, groupID: groupID).message)
            }
            return MessagePage(overfetched: messages, limit: limit, latestSequence: latest)
        }
    }

    /// The key and latest sequence of a live group (`GROUP_NOT_FOUND`: missing or dismissed).
    private static func liveGroupPosition(
        _ session: PostgresSession, app: String, groupID: String
    ) async throws -> (key: Int64, latest: Int64) {
        guard let group = try await session.first(
            // A topic is live while its community is.
            """
            SELECT g.group_key, g.latest_seq FROM groups g WHERE g.app_id = ? AND g.group_id = ? AND g.dismissed_at IS NULL
              AND (g.parent_key IS NULL OR EXISTS (
                SELECT 1 FROM groups c WHERE c.app_id = g.app_id AND c.group_key = g.parent_key AND c.dismissed_at IS NULL))
            """,
            [.text(app), .text(groupID)],
            { (try $0.int64(0), try $0.int64(1)) })
        else { throw GroupError.groupNotFound(groupID) }
        return group
    }
}

/// The SQL of `group_messages` rows over PostgreSQL, in the caller's transaction. Rows are
/// selected with ``columns`` and decoded by `MessageRows.message(_:appID:groupID:)`.
enum PostgresMessageRows {
    /// `MessageRows.messageColumns`, the body's event id read from its event row (same group and
    /// sequence). A body is inserted before its batch's tail numbers the batch's events, with the
    /// event's provisional id, and is never stamped with the final one (a second version of every
    /// message row, written by the tail, made each send cost PostgreSQL more): the body's own
    /// `event_id` is the answer only for a body of the open batch, whose event row the tail has not
    /// inserted yet, and which only that batch can see.
    static let columns = MessageRows.columns(
        eventID: """
            COALESCE((SELECT e.event_id FROM group_events e
                WHERE e.app_id = gm.app_id AND e.group_key = gm.group_key AND e.seq = gm.seq), gm.event_id)
            """)

    /// The message `senderID` sent to the group with `clientMessageID` (`nil`: none).
    static func messageByClientID(
        app: String, groupKey: Int64, groupID: String, senderID: String, clientMessageID: String,
        session: PostgresSession
    ) async throws -> StoredMessage? {
        try await session.first(
            """
            SELECT \(PostgresMessageRows.columns) FROM group_messages gm
            WHERE gm.app_id = ? AND gm.group_key = ? AND gm.sender_id = ? AND gm.client_message_id = ?
            """,
            [.text(app), .integer(groupKey), .text(senderID), .text(clientMessageID)],
            { try MessageRows.message($0, appID: app, groupID: groupID) })
    }

    /// When the group's newest stored message was sent (`group_messages_by_seq` finds it from the end).
    static func lastMessageTime(app: String, groupKey: Int64, session: PostgresSession) async throws -> Timestamp? {
        try await session.first(
            "SELECT time FROM group_messages WHERE app_id = ? AND group_key = ? ORDER BY seq DESC LIMIT 1",
            [.text(app), .integer(groupKey)],
            { Timestamp(millisecondsSince1970: try $0.int64(0)) })
    }

    /// Messages of a group after `sequence` not sent by `userID`.
    static func unreadCount(
        app: String, groupKey: Int64, userID: String, after sequence: Int64, session: PostgresSession
    ) async throws -> Int {
        try await session.first(
            "SELECT COUNT(*) FROM group_messages WHERE app_id = ? AND group_key = ? AND seq > ? AND sender_id <> ?",
            [.text(app), .integer(groupKey), .integer(sequence), .text(userID)],
            { try $0.int(0) }) ?? 0
    }
}
