import Foundation
import GroupModel
import GroupStore

/// The SQL of `group_messages` rows, run inside the caller's transaction.
public enum MessageRows {
    /// The columns ``message(_:appID:groupID:)`` decodes, in `SELECT` order.
    package static let messageColumns = columns(eventID: "gm.event_id")

    /// ``messageColumns`` with the message's event id taken from `eventID` (an SQL expression):
    /// PostgreSQL reads it from the message's event row (`PostgresMessageRows.columns`).
    package static func columns(eventID: String) -> String {
        "\(eventID), gm.seq, gm.message_id, gm.sender_id, gm.client_message_id, gm.type, gm.text, gm.payload, "
            + "gm.priority, gm.sender_name_card, gm.time, gm.mention_all, gm.mentioned_ids, gm.recalled_by, gm.recall_time, "
            + "gm.edit_count, gm.edited_by, gm.edit_time, gm.reply_seq, gm.reply_message_id, gm.reply_sender_id, gm.reply_type, "
            + "gm.reply_preview"
    }
    package static let messageColumnCount = 23

    /// Decode a row selected with ``messageColumns``, by index.
    @inlinable
    public static func message(_ row: some ColumnReader, appID: String, groupID: String) throws -> StoredMessage {
        let content = MessageContent(
            type: try row.text(5), text: try row.text(6), payload: try row.blob(7),
            priority: try Rows.parse(row.text(8), MessagePriority.init(rawValue:)),
            clientMessageID: try row.optionalText(4), mentionedUserIDs: decodeIDs(try row.text(12)),
            mentionAll: try row.int64(11) != 0)
        let recall = try row.optionalInt64(14).map {
            MessageRecall(by: try row.optionalText(13), time: Timestamp(millisecondsSince1970: $0))
        }
        let edit = try row.optionalInt64(17).map {
            MessageEdit(by: try row.optionalText(16), time: Timestamp(millisecondsSince1970: $0), count: Int(try row.int64(15)))
        }
        let replyTo = try row.optionalInt64(18).map {
            let preview = try row.optionalText(22)
            return MessageReference(
                sequence: $0, messageID: try row.text(19), senderID: try row.text(20), type: try row.text(21),
                preview: preview ?? "", recalled: preview == nil)
        }
        let message = GroupMessage(
            appID: appID, groupID: groupID, sequence: try row.int64(1), messageID: try row.text(2),
            senderID: try row.text(3), senderNameCard: try row.text(9), content: content,
            time: Timestamp(millisecondsSince1970: try row.int64(10)), recall: recall, edit: edit, replyTo: replyTo)
        return StoredMessage(eventID: try row.int64(0), message: message)
    }

    /// The `mentioned_ids` JSON array of user ids (`[]` when empty).
    package static func encodeIDs(_ ids: [String]) -> String {
        ids.isEmpty ? "[]" : ((try? Rows.jsonArray(ids)) ?? "[]")
    }

    /// The user ids of a `mentioned_ids` column (empty when malformed).
    public static func decodeIDs(_ text: String) -> [String] {
        if text == "[]" || text.isEmpty { return [] }
        return (try? JSONDecoder().decode([String].self, from: Data(text.utf8))) ?? []
    }

    /// The user ids of `message` whose mention is kept in `message_mentions`: each mentioned
    /// user but the sender, once.
    package static func mentionRows(_ message: GroupMessage) -> [String] {
        var seen: Set<String> = []
        return message.content.mentionedUserIDs.filter { $0 != message.senderID && seen.insert($0).inserted }
    }
}
