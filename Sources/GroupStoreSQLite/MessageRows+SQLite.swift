import Foundation
import GRDB
import GroupModel
import GroupStore
import GroupStoreSQL

extension MessageRows {
    /// Inserts the `message_mentions` rows of a message stored as `sequence`.
    static func insertMentions(_ message: GroupMessage, sequence: Int64, groupKey: Int64, db: Database) throws {
        for user in mentionRows(message) {
            try db.cachedStatement(sql: "INSERT OR IGNORE INTO message_mentions (group_key, user_id, seq) VALUES (?, ?, ?)")
                .execute(arguments: [groupKey, user, sequence])
        }
    }

    /// The stored message `sequence` of a group, if any.
    static func message(groupKey: Int64, appID: String, groupID: String, sequence: Int64, db: Database) throws -> StoredMessage? {
        try RawStatement(db, "SELECT \(messageColumns) FROM group_messages gm WHERE gm.group_key = ? AND gm.seq = ?")
            .first([.integer(groupKey), .integer(sequence)]) { try message($0, appID: appID, groupID: groupID) }
    }

    /// When `senderID` last sent a message to the group (`group_messages_by_sender`).
    static func lastSent(groupKey: Int64, senderID: String, db: Database) throws -> Timestamp? {
        try Int64.fetchOne(
            db.cachedStatement(
                sql: "SELECT time FROM group_messages WHERE group_key = ? AND sender_id = ? ORDER BY seq DESC LIMIT 1"),
            arguments: [groupKey, senderID]).map(Timestamp.init(millisecondsSince1970:))
    }

    /// Turns the message `sequence` into a tombstone: the body, mentions and reply reference
    /// cleared, the recall recorded, its `message_mentions` rows deleted; the snapshots its replies
    /// hold become tombstones (type and preview cleared, `group_messages_by_reply`).
    static func recall(sequence: Int64, _ recall: MessageRecall, groupKey: Int64, db: Database) throws {
        try db.cachedStatement(
            sql: """
                UPDATE group_messages SET type = '', text = '', payload = x'', mention_all = 0, mentioned_ids = '[]',
                    recalled_by = ?, recall_time = ?, reply_seq = NULL, reply_message_id = NULL, reply_sender_id = NULL,
                    reply_type = NULL, reply_preview = NULL
                WHERE group_key = ? AND seq = ?
                """
        ).execute(arguments: [recall.by, recall.time.millisecondsSince1970, groupKey, sequence])
        try db.cachedStatement(sql: "DELETE FROM message_mentions WHERE group_key = ? AND seq = ?")
            .execute(arguments: [groupKey, sequence])
        try db.cachedStatement(
            sql: "UPDATE group_messages SET reply_type = '', reply_preview = NULL WHERE group_key = ? AND reply_seq = ?"
        ).execute(arguments: [groupKey, sequence])
    }

    /// Replaces the text and payload of the message `sequence` and records its edit (the type,
    /// priority and mentions stay as sent).
    static func edit(_ edit: MessageBodyEdit, groupKey: Int64, db: Database) throws {
        try db.cachedStatement(
            sql: "UPDATE group_messages SET text = ?, payload = ?, edit_count = ?, edited_by = ?, edit_time = ? WHERE group_key = ? AND seq = ?"
        ).execute(arguments: [
            edit.text, Data(edit.payload), edit.edit.count, edit.edit.by, edit.edit.time.millisecondsSince1970, groupKey,
            edit.sequence,
        ])
        try db.cachedStatement(sql: "UPDATE group_messages SET reply_preview = ? WHERE group_key = ? AND reply_seq = ?")
            .execute(arguments: [GroupRules.replyPreview(of: edit.text), groupKey, edit.sequence])
    }

    /// The replies to the message `sequence` above `after` (a page's start, or the reader's
    /// history floor), oldest first (`group_messages_by_reply`).
    static func replies(
        groupKey: Int64, appID: String, groupID: String, to sequence: Int64, after: Int64, limit: Int, db: Database
    ) throws -> [StoredMessage] {
        var replies: [StoredMessage] = []
        try RawStatement(
            db,
            "SELECT \(messageColumns) FROM group_messages gm WHERE gm.group_key = ? AND gm.reply_seq = ? AND gm.seq > ? ORDER BY gm.seq LIMIT ?"
        ).rows([.integer(groupKey), .integer(sequence), .integer(after), .integer(Int64(limit))]) {
            replies.append(try message($0, appID: appID, groupID: groupID))
        }
        return replies
    }

    /// Whether `userID` has an unread mention after `sequence`: a kept `message_mentions` row
    /// (@me), an unrecalled @all message from someone else (@all).
    static func unreadMention(groupKey: Int64, userID: String, after sequence: Int64, db: Database) throws -> UnreadMention {
        let me = try Bool.fetchOne(
            db.cachedStatement(
                sql: "SELECT EXISTS (SELECT 1 FROM message_mentions WHERE group_key = ? AND user_id = ? AND seq > ?)"),
            arguments: [groupKey, userID, sequence]) ?? false
        let all = try Bool.fetchOne(
            db.cachedStatement(
                sql: """
                    SELECT EXISTS (SELECT 1 FROM group_messages
                        WHERE group_key = ? AND mention_all = 1 AND seq > ? AND sender_id <> ?)
                    """),
            arguments: [groupKey, sequence, userID]) ?? false
        return UnreadMention(me: me, all: all)
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
