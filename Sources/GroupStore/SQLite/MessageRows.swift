import Foundation
import GRDB
import GroupModel

/// The SQL of `group_messages` rows, run inside the caller's transaction.
enum MessageRows {
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
