import Foundation
import GRDB
import GroupModel

/// The SQL of `group_messages` rows, run inside the caller's transaction.
enum MessageRows {
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


    // MARK: Rows

    /// The columns ``message(_:appID:groupID:)`` decodes, in `SELECT` order.
    static let messageColumns =
        "gm.event_id, gm.seq, gm.message_id, gm.sender_id, gm.client_message_id, gm.type, gm.text, gm.payload, "
        + "gm.priority, gm.sender_name_card, gm.time"
    static let messageColumnCount = 11

    /// Decode a row selected with ``messageColumns``, by index.
    static func message(_ row: some ColumnReader, appID: String, groupID: String) throws -> StoredMessage {
        let content = MessageContent(
            type: try row.text(5), text: try row.text(6), payload: try row.blob(7),
            priority: try Rows.parse(row.text(8), MessagePriority.init(rawValue:)),
            clientMessageID: try row.optionalText(4))
        let message = GroupMessage(
            appID: appID, groupID: groupID, sequence: try row.int64(1), messageID: try row.text(2),
            senderID: try row.text(3), senderNameCard: try row.text(9), content: content,
            time: Timestamp(millisecondsSince1970: try row.int64(10)))
        return StoredMessage(eventID: try row.int64(0), message: message)
    }

    static func messageByClientID(
        groupKey: Int64, appID: String, groupID: String, senderID: String, clientMessageID: String, db: Database
    ) throws -> StoredMessage? {
        try RawStatement(
            db,
            """
            SELECT \(messageColumns) FROM group_messages gm
            WHERE gm.group_key = ? AND gm.sender_id = ? AND gm.client_message_id = ?
            """
        ).first([.integer(groupKey), .text(senderID), .text(clientMessageID)]) {
            try message($0, appID: appID, groupID: groupID)
        }
    }

    /// When the group's newest stored message was sent (`group_messages_by_seq` finds it from the end).
    static func lastMessageTime(groupKey: Int64, db: Database) throws -> Timestamp? {
        try Int64.fetchOne(
            db.cachedStatement(sql: "SELECT time FROM group_messages WHERE group_key = ? ORDER BY seq DESC LIMIT 1"),
            arguments: [groupKey]).map(Timestamp.init(millisecondsSince1970:))
    }

    /// Messages of a group after `sequence` not sent by `userID`.
    static func unreadCount(groupKey: Int64, userID: String, after sequence: Int64, db: Database) throws -> Int {
        try Int.fetchOne(
            db.cachedStatement(
                sql: "SELECT count(*) FROM group_messages WHERE group_key = ? AND seq > ? AND sender_id <> ?"),
            arguments: [groupKey, sequence, userID]) ?? 0
    }
}
