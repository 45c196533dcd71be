import Foundation
import GRDB
public import GroupModel

extension Schema {
    /// v5 (issue 5): group message bodies.
    ///
    /// - A message is a `group_events` row of kind `GROUP_MESSAGE` (its sequence, time, sender,
    ///   and the store's commit path to subscribers) plus this row, keyed by the event's
    ///   `event_id`, holding the body. `group_key` and `seq` are repeated here so that history
    ///   pages and unread counts read one index, and no foreign key ties the body to its event
    ///   row: history outlives the event log's retention. Bodies go with their group (cascade).
    /// - `(group_key, sender_id, client_message_id)` is UNIQUE where a client id is given: a retry
    ///   finds the first message, and two concurrent retries cannot both insert.
    /// - `group_messages_by_seq` covers the unread count (`seq` above the read position, sender
    ///   not the reader) without reading the table.
    static func v5(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE group_messages (
                event_id INTEGER PRIMARY KEY,
                group_key INTEGER NOT NULL REFERENCES groups(group_key) ON DELETE CASCADE,
                seq INTEGER NOT NULL,
                message_id TEXT NOT NULL,
                sender_id TEXT NOT NULL,
                client_message_id TEXT,
                type TEXT NOT NULL DEFAULT '',
                text TEXT NOT NULL DEFAULT '',
                payload BLOB NOT NULL DEFAULT x'',
                priority TEXT NOT NULL CHECK (priority IN ('high', 'normal', 'low')),
                sender_name_card TEXT NOT NULL DEFAULT '',
                time INTEGER NOT NULL
            );
            CREATE INDEX group_messages_by_seq ON group_messages(group_key, seq, sender_id);
            CREATE UNIQUE INDEX group_messages_by_client_id
                ON group_messages(group_key, sender_id, client_message_id)
                WHERE client_message_id IS NOT NULL;
            """)
    }
}

/// ``GroupMessageStore`` over SQLite.
///
/// - A send is one write transaction: group row, earlier message with the same client id, the
///   sender's membership, the pure check, then the event (through `Rows.appendEvents`, like every
///   event) and the body. The group's cache record is invalidated (`latest_seq` moves).
/// - History and unread counts read `group_messages` alone, through `group_messages_by_seq`.
extension SQLiteGroupStore: GroupMessageStore {
    public func appendMessage(
        _ message: GroupMessage, at time: Timestamp,
        check: @escaping @Sendable (Group, Member?) throws -> String
    ) async throws -> AppendedMessage {
        try await self.run { [commits] in
            try await commits.write { db in
                let read = try Rows.liveGroup(db, app: message.appID, groupID: message.groupID)
                let groupKey = read.key
                if let clientID = message.content.clientMessageID,
                    let earlier = try Self.messageByClientID(
                        groupKey: groupKey, appID: message.appID, groupID: message.groupID,
                        senderID: message.senderID, clientMessageID: clientID, db: db)
                {
                    return AppendedMessage(stored: earlier, deduplicated: true, events: [])
                }
                let membership = try Row.fetchOne(
                    db.cachedStatement(
                        sql: "SELECT \(Rows.memberColumns) FROM members m WHERE m.group_key = ? AND m.user_id = ?"),
                    arguments: [groupKey, message.senderID]
                ).map { try Rows.member($0).member }
                let nameCard = try check(read.group, membership)

                self.changesGroups([GroupCache.Key(app: message.appID, id: message.groupID)], in: db)
                let draft = GroupEvent.Draft(kind: .groupMessage, operatorID: message.senderID)
                let events = try Rows.appendEvents(
                    [draft], groupKey: groupKey, appID: message.appID, groupID: message.groupID,
                    after: read.group.latestSequence, time: time, db: db)
                let sequence = events[0].sequence
                guard let eventID = try Int64.fetchOne(
                    db.cachedStatement(sql: "SELECT event_id FROM group_events WHERE group_key = ? AND seq = ?"),
                    arguments: [groupKey, sequence])
                else { throw GroupError.internal("the message's event row is missing") }
                var stored = message
                stored.sequence = sequence
                stored.senderNameCard = nameCard
                stored.time = time
                let content = stored.content
                try db.cachedStatement(
                    sql: """
                        INSERT INTO group_messages (
                            event_id, group_key, seq, message_id, sender_id, client_message_id, type, text,
                            payload, priority, sender_name_card, time)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                        """
                ).execute(arguments: [
                    eventID, groupKey, sequence, stored.messageID, stored.senderID, content.clientMessageID,
                    content.type, content.text, Data(content.payload), content.priority.rawValue, nameCard,
                    time.millisecondsSince1970,
                ])
                try self.injectedFault("appendMessage")
                return AppendedMessage(
                    stored: StoredMessage(eventID: eventID, message: stored), deduplicated: false, events: events)
            }
        }
    }

    public func message(
        app: String, groupID: String, senderID: String, clientMessageID: String
    ) async throws -> StoredMessage? {
        try await self.run { [pool] in
            try await pool.read { db in
                let groupKey = try Rows.groupKey(db, app: app, groupID: groupID, dismissedToo: true)
                return try Self.messageByClientID(
                    groupKey: groupKey, appID: app, groupID: groupID, senderID: senderID,
                    clientMessageID: clientMessageID, db: db)
            }
        }
    }

    public func messages(app: String, groupID: String, range: MessageRange, limit: Int) async throws -> MessagePage {
        let limit = max(1, limit)
        return try await self.run { [pool] in
            try await pool.read { db in
                guard let row = try Row.fetchOne(
                    db.cachedStatement(
                        sql: """
                            SELECT group_key, latest_seq FROM groups
                            WHERE app_id = ? AND group_id = ? AND dismissed_at IS NULL
                            """),
                    arguments: [app, groupID])
                else { throw GroupError.groupNotFound(groupID) }
                let groupKey: Int64 = try row.decode(atIndex: 0)
                let latest: Int64 = try row.decode(atIndex: 1)
                let statement: Statement
                let arguments: StatementArguments
                switch range.direction {
                case .older:
                    statement = try db.cachedStatement(
                        sql: """
                            SELECT \(Self.messageColumns) FROM group_messages gm
                            WHERE group_key = ? AND seq < ? AND seq > ? ORDER BY seq DESC LIMIT ?
                            """)
                    arguments = [groupKey, range.anchor ?? Int64.max, range.floor, limit + 1]
                case .newer:
                    statement = try db.cachedStatement(
                        sql: """
                            SELECT \(Self.messageColumns) FROM group_messages gm
                            WHERE group_key = ? AND seq > ? ORDER BY seq LIMIT ?
                            """)
                    arguments = [groupKey, max(range.anchor ?? 0, range.floor), limit + 1]
                }
                var messages: [GroupMessage] = []
                let rows = try Row.fetchCursor(statement, arguments: arguments)
                while let row = try rows.next() {
                    messages.append(try Self.message(row, appID: app, groupID: groupID).message)
                }
                let hasMore = messages.count > limit
                if hasMore { messages.removeLast(messages.count - limit) }
                if range.direction == .older { messages.reverse() }
                return MessagePage(messages: messages, hasMore: hasMore, latestSequence: latest)
            }
        }
    }

    public func markRead(
        app: String, groupID: String, userID: String, upTo: Int64?, at time: Timestamp,
        plan: @escaping @Sendable (ReadSnapshot) throws -> (readSequence: Int64, events: [GroupEvent.Draft])
    ) async throws -> Committed<(state: ReadState, group: Group)> {
        try await self.run { [commits] in
            try await commits.write { db in
                let read = try Rows.liveGroup(db, app: app, groupID: groupID)
                let groupKey = read.key
                var membership: Member?
                var position: Int64 = 0
                if let memberRow = try Row.fetchOne(
                    db.cachedStatement(
                        sql: """
                            SELECT \(Rows.memberColumns), m.last_read_seq FROM members m
                            WHERE m.group_key = ? AND m.user_id = ?
                            """),
                    arguments: [groupKey, userID])
                {
                    membership = try Rows.member(memberRow).member
                    position = try memberRow.decode(atIndex: Rows.memberColumnCount)
                }
                let latestMessage = try Int64.fetchOne(
                    db.cachedStatement(sql: "SELECT max(seq) FROM group_messages WHERE group_key = ? AND seq <= ?"),
                    arguments: [groupKey, upTo ?? Int64.max]) ?? 0
                let (newPosition, drafts) = try plan(ReadSnapshot(
                    group: read.group, membership: membership, readSequence: position,
                    latestMessageSequence: latestMessage))
                if newPosition != position {
                    try db.cachedStatement(sql: "UPDATE members SET last_read_seq = ? WHERE group_key = ? AND user_id = ?")
                        .execute(arguments: [newPosition, groupKey, userID])
                }
                var events: [GroupEvent] = []
                if !drafts.isEmpty {
                    self.changesGroups([GroupCache.Key(app: app, id: groupID)], in: db)
                    events = try Rows.appendEvents(
                        drafts, groupKey: groupKey, appID: app, groupID: groupID, after: read.group.latestSequence,
                        time: time, db: db)
                }
                try self.injectedFault("markRead")
                let floor = max(newPosition, membership?.joinSequence ?? 0)
                let unread = try Self.unreadCount(groupKey: groupKey, userID: userID, after: floor, db: db)
                var group = read.group
                group.latestSequence = events.last?.sequence ?? group.latestSequence
                return Committed(
                    value: (state: ReadState(
                        readSequence: newPosition, unreadCount: unread,
                        lastMessageAt: try Self.lastMessageTime(groupKey: groupKey, db: db)), group: group),
                    events: events)
            }
        }
    }

    public func eventIDs(app: String, groupID: String, sequences: [Int64]) async throws -> [Int64: Int64] {
        try await self.run { [pool] in
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
    }

    public func readStates(app: String, userID: String, groupIDs: [String]) async throws -> [String: ReadState] {
        let groupIDs = groupIDs.count > 1 ? Array(Set(groupIDs)) : groupIDs
        if groupIDs.isEmpty { return [:] }
        return try await self.run { [pool] in
            try await pool.read { db in
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
                var states: [String: ReadState] = [:]
                for entry in found {
                    let unread = try Self.unreadCount(
                        groupKey: entry.key, userID: userID, after: max(entry.read, entry.join), db: db)
                    states[entry.id] = ReadState(
                        readSequence: entry.read, unreadCount: unread,
                        lastMessageAt: try Self.lastMessageTime(groupKey: entry.key, db: db))
                }
                return states
            }
        }
    }

    public func purgeMessages(app: String, olderThan cutoff: Timestamp, limit: Int) async throws -> Int {
        try await self.run { [commits] in
            try await commits.write { db in
                let ids = try Int64.fetchAll(
                    db.cachedStatement(
                        sql: """
                            SELECT event_id FROM group_events
                            WHERE time < ? AND app_id = ? AND kind = 'GROUP_MESSAGE' LIMIT ?
                            """),
                    arguments: [cutoff.millisecondsSince1970, app, max(0, limit)])
                if ids.isEmpty { return 0 }
                let list = try Rows.jsonArray(ids)
                try db.cachedStatement(sql: "DELETE FROM group_messages WHERE event_id IN (SELECT value FROM json_each(?))")
                    .execute(arguments: [list])
                try db.cachedStatement(sql: "DELETE FROM group_events WHERE event_id IN (SELECT value FROM json_each(?))")
                    .execute(arguments: [list])
                return ids.count
            }
        }
    }

    /// The bodies of the given `group_events` rows that are messages, in the caller's
    /// transaction; rows without a body (not messages) are absent. Event delivery reads the
    /// bodies of committed `GROUP_MESSAGE` rows through this.
    /// - Parameters:
    ///   - db: A read or write transaction.
    ///   - eventIDs: `group_events.event_id` values.
    /// - Returns: Each found body by event id.
    static func messageBodies(_ db: Database, eventIDs: [Int64]) throws -> [Int64: StoredMessage] {
        let eventIDs = eventIDs.count > 1 ? Array(Set(eventIDs)) : eventIDs
        if eventIDs.isEmpty { return [:] }
        var result: [Int64: StoredMessage] = [:]
        result.reserveCapacity(eventIDs.count)
        // Chunked so that one statement per padded size serves any count.
        var start = 0
        while start < eventIDs.count {
            let chunk = Array(eventIDs[start..<min(start + 512, eventIDs.count)])
            start += chunk.count
            let padded = Rows.padded(chunk)
            let rows = try Row.fetchCursor(
                db.cachedStatement(
                    sql: """
                        SELECT \(messageColumns), g.app_id, g.group_id FROM group_messages gm
                        JOIN groups g ON g.group_key = gm.group_key
                        WHERE gm.event_id IN (\(Rows.placeholders(padded.count)))
                        """),
                arguments: StatementArguments(padded))
            while let row = try rows.next() {
                let count = messageColumnCount
                let stored = try message(
                    row, appID: try row.decode(atIndex: count), groupID: try row.decode(atIndex: count + 1))
                result[stored.eventID] = stored
            }
        }
        return result
    }

    /// As ``messageBodies(_:eventIDs:)``, on this store's pool (a read transaction).
    public func messageBodies(eventIDs: [Int64]) async throws -> [Int64: StoredMessage] {
        try await self.run { [pool] in
            try await pool.read { db in try Self.messageBodies(db, eventIDs: eventIDs) }
        }
    }

    // MARK: Rows

    /// The columns ``message(_:appID:groupID:)`` decodes, in `SELECT` order.
    static let messageColumns =
        "gm.event_id, gm.seq, gm.message_id, gm.sender_id, gm.client_message_id, gm.type, gm.text, gm.payload, "
        + "gm.priority, gm.sender_name_card, gm.time"
    static let messageColumnCount = 11

    /// Decode a row selected with ``messageColumns``, by index.
    static func message(_ row: Row, appID: String, groupID: String) throws -> StoredMessage {
        let payload: Data = try row.decode(atIndex: 7)
        let content = MessageContent(
            type: try row.decode(atIndex: 5), text: try row.decode(atIndex: 6), payload: [UInt8](payload),
            priority: try Rows.parse(row.decode(atIndex: 8), MessagePriority.init(rawValue:)),
            clientMessageID: try row.decode(atIndex: 4))
        let message = GroupMessage(
            appID: appID, groupID: groupID, sequence: try row.decode(atIndex: 1), messageID: try row.decode(atIndex: 2),
            senderID: try row.decode(atIndex: 3), senderNameCard: try row.decode(atIndex: 9), content: content,
            time: Timestamp(millisecondsSince1970: try row.decode(atIndex: 10)))
        return StoredMessage(eventID: try row.decode(atIndex: 0), message: message)
    }

    static func messageByClientID(
        groupKey: Int64, appID: String, groupID: String, senderID: String, clientMessageID: String, db: Database
    ) throws -> StoredMessage? {
        try Row.fetchOne(
            db.cachedStatement(
                sql: """
                    SELECT \(messageColumns) FROM group_messages gm
                    WHERE gm.group_key = ? AND gm.sender_id = ? AND gm.client_message_id = ?
                    """),
            arguments: [groupKey, senderID, clientMessageID]
        ).map { try message($0, appID: appID, groupID: groupID) }
    }

    /// Messages of a group after `sequence` not sent by `userID`.
    /// When the group's newest stored message was sent (`group_messages_by_seq` finds it from the end).
    static func lastMessageTime(groupKey: Int64, db: Database) throws -> Timestamp? {
        try Int64.fetchOne(
            db.cachedStatement(sql: "SELECT time FROM group_messages WHERE group_key = ? ORDER BY seq DESC LIMIT 1"),
            arguments: [groupKey]).map(Timestamp.init(millisecondsSince1970:))
    }

    static func unreadCount(groupKey: Int64, userID: String, after sequence: Int64, db: Database) throws -> Int {
        try Int.fetchOne(
            db.cachedStatement(
                sql: "SELECT count(*) FROM group_messages WHERE group_key = ? AND seq > ? AND sender_id <> ?"),
            arguments: [groupKey, sequence, userID]) ?? 0
    }
}
