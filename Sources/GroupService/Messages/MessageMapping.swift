import GroupAPI
import GroupModel
import GroupStore

/// Conversions between the API's message types and the domain's, in both directions.
enum MessageMapping {
    // MARK: Into the domain

    /// A request's priority (UNSPECIFIED = NORMAL).
    /// - Throws: `INVALID_ARGUMENT` naming `field` for an unknown value.
    static func priority(_ priority: Groupd_V1_MessagePriority, field: String = "priority") throws -> MessagePriority {
        switch priority {
        case .unspecified, .normal: return .normal
        case .high: return .high
        case .low: return .low
        case .UNRECOGNIZED(let value):
            throw GroupError.invalidArgument(field: field, "unknown priority \(value)")
        }
    }

    // MARK: Out of the domain

    /// The API's priority.
    static func priority(_ priority: MessagePriority) -> Groupd_V1_MessagePriority {
        switch priority {
        case .high: .high
        case .normal: .normal
        case .low: .low
        }
    }

    /// A message as the API shows it (history, send answers, streams).
    static func message(_ message: GroupMessage) -> Groupd_V1_GroupMessage {
        .with {
            $0.groupID = message.groupID
            $0.sequence = UInt64(max(message.sequence, 0))
            $0.messageID = message.messageID
            $0.senderUserID = message.senderID
            $0.clientMessageID = message.content.clientMessageID ?? ""
            $0.type = message.content.type
            $0.text = message.content.text
            $0.payload = message.content.payload
            $0.priority = priority(message.content.priority)
            $0.sendTime = APIMapping.timestamp(message.time)
            $0.senderNameCard = message.senderNameCard
            $0.mentionedUserIds = message.content.mentionedUserIDs
            $0.mentionAll = message.content.mentionAll
            if let recall = message.recall {
                $0.recalled = true
                $0.recalledByUserID = recall.by ?? ""
                $0.recallTime = APIMapping.timestamp(recall.time)
            }
            if let edit = message.edit {
                $0.editCount = UInt32(clamping: edit.count)
                $0.editedByUserID = edit.by ?? ""
                $0.editTime = APIMapping.timestamp(edit.time)
            }
            if let reference = message.replyTo { $0.replyTo = Self.reference(reference) }
        }
    }

    /// A reply's reference as the API shows it.
    static func reference(_ reference: MessageReference) -> Groupd_V1_MessageReference {
        .with {
            $0.sequence = UInt64(max(reference.sequence, 0))
            $0.messageID = reference.messageID
            $0.senderUserID = reference.senderID
            $0.type = reference.type
            $0.preview = reference.preview
            $0.recalled = reference.recalled
        }
    }

    /// The API's unread mention kind.
    static func unreadMention(_ mention: UnreadMention) -> Groupd_V1_UnreadMention {
        switch mention {
        case .none: .unspecified
        case .me: .me
        case .all: .all
        case .allAndMe: .allAndMe
        }
    }

    /// A stored message as the API shows it.
    static func message(_ stored: StoredMessage) -> Groupd_V1_GroupMessage {
        message(stored.message)
    }
}
