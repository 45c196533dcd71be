/// How urgently a group message must be delivered. An AVChatRoom over its rate sheds `low`
/// first, then `normal`; `high` is always kept (Tencent's message priorities).
public enum MessagePriority: String, Sendable, Hashable, CaseIterable, Comparable {
    /// Kept even over the rate (gifts, likes the room must see).
    case high
    /// The default.
    case normal
    /// Shed first (chatter).
    case low

    /// How much shedding protects this priority: `low` 0, `normal` 1, `high` 2.
    public var rank: Int {
        switch self {
        case .low: 0
        case .normal: 1
        case .high: 2
        }
    }

    /// Orders by ``rank`` (`low < normal < high`).
    public static func < (lhs: MessagePriority, rhs: MessagePriority) -> Bool {
        lhs.rank < rhs.rank
    }
}

/// What a sender gives for one group message: a type tag, a text and/or opaque bytes, a priority
/// and an optional idempotency key.
public struct MessageContent: Sendable, Hashable {
    /// App-defined type tag (`text`, `image`, `custom`…; ≤ ``GroupRules/messageTypeBytes``).
    public var type: String
    /// Text body (moderated by policy plugins as `message.text`).
    public var text: String
    /// Opaque body.
    public var payload: [UInt8]
    /// Delivery priority.
    public var priority: MessagePriority
    /// The client's idempotency key (`nil`: none): a retry with the same key by the same sender in
    /// the same group answers the first result and sends nothing more.
    public var clientMessageID: String?
    /// The users mentioned (@user), in the order given.
    public var mentionedUserIDs: [String]
    /// Whether everyone is mentioned (@all).
    public var mentionAll: Bool

    /// Create message content.
    public init(
        type: String = "", text: String = "", payload: [UInt8] = [], priority: MessagePriority = .normal,
        clientMessageID: String? = nil, mentionedUserIDs: [String] = [], mentionAll: Bool = false
    ) {
        self.type = type
        self.text = text
        self.payload = payload
        self.priority = priority
        self.clientMessageID = clientMessageID
        self.mentionedUserIDs = mentionedUserIDs
        self.mentionAll = mentionAll
    }
}

/// A message sent to a group, as stored and delivered.
public struct GroupMessage: Sendable, Hashable {
    /// The app the group belongs to.
    public var appID: String
    /// The group.
    public var groupID: String
    /// The message's number in the group's sequence, shared with events; 0 for an AVChatRoom
    /// message, which is not stored.
    public var sequence: Int64
    /// Server-generated unique id (32 hex digits).
    public var messageID: String
    /// The sender's user id.
    public var senderID: String
    /// The sender's name card at send time, for display.
    public var senderNameCard: String
    /// What was sent.
    public var content: MessageContent
    /// When the server accepted it.
    public var time: Timestamp
    /// Its recall, if it was recalled (then `content` keeps only the priority and the client id).
    public var recall: MessageRecall?
    /// Its latest edit, if it was edited (then `content`'s text and payload are that edit's).
    public var edit: MessageEdit?
    /// The message it replies to, with a snapshot of it (`nil`: not a reply, or recalled).
    public var replyTo: MessageReference?

    /// Create a message.
    public init(
        appID: String, groupID: String, sequence: Int64, messageID: String, senderID: String,
        senderNameCard: String = "", content: MessageContent, time: Timestamp, recall: MessageRecall? = nil,
        edit: MessageEdit? = nil, replyTo: MessageReference? = nil
    ) {
        self.recall = recall
        self.edit = edit
        self.replyTo = replyTo
        self.appID = appID
        self.groupID = groupID
        self.sequence = sequence
        self.messageID = messageID
        self.senderID = senderID
        self.senderNameCard = senderNameCard
        self.content = content
        self.time = time
    }
}

/// Who recalled a message, and when.
public struct MessageRecall: Sendable, Hashable {
    /// Who recalled it (`nil`: the app's backend).
    public var by: String?
    /// When.
    public var time: Timestamp

    /// Create a recall.
    public init(by: String?, time: Timestamp) {
        self.by = by
        self.time = time
    }
}

/// A reply's reference to the message it answers, with a snapshot of that message (its sender,
/// type tag and the start of its text) taken when the reply was sent. The snapshot follows the
/// original: an edit of the original rewrites ``preview``, its recall makes the reference a
/// tombstone (``recalled``, type and preview cleared); a purge of the original leaves it as it was.
public struct MessageReference: Sendable, Hashable {
    /// The original's sequence in the group.
    public var sequence: Int64
    /// The original's message id.
    public var messageID: String
    /// The original's sender.
    public var senderID: String
    /// The original's type tag (empty once recalled).
    public var type: String
    /// The first ``GroupRules/replyPreviewCharacters`` characters of the original's text (empty
    /// once recalled).
    public var preview: String
    /// Whether the original was recalled.
    public var recalled: Bool

    /// Create a reference.
    public init(sequence: Int64, messageID: String, senderID: String, type: String, preview: String, recalled: Bool = false) {
        self.sequence = sequence
        self.messageID = messageID
        self.senderID = senderID
        self.type = type
        self.preview = preview
        self.recalled = recalled
    }

    /// The reference to `message`, its snapshot taken now.
    public init(to message: GroupMessage) {
        self.init(
            sequence: message.sequence, messageID: message.messageID, senderID: message.senderID,
            type: message.content.type, preview: GroupRules.replyPreview(of: message.content.text))
    }
}

/// Who edited a message last, when, and how many edits it has had.
public struct MessageEdit: Sendable, Hashable {
    /// Who edited it last (`nil`: the app's backend).
    public var by: String?
    /// When it was edited last.
    public var time: Timestamp
    /// How many times it was edited (1 after the first edit).
    public var count: Int

    /// Create an edit.
    public init(by: String?, time: Timestamp, count: Int) {
        self.by = by
        self.time = time
        self.count = count
    }
}

/// The caller's unread mention in a group (Tencent's group @ info).
public enum UnreadMention: String, Sendable, Hashable, CaseIterable {
    /// No unread mention.
    case none
    /// An unread message mentions the user.
    case me
    /// An unread message mentions everyone.
    case all
    /// Both.
    case allAndMe = "all_and_me"

    /// The kind from what the unread messages hold.
    public init(me: Bool, all: Bool) {
        switch (me, all) {
        case (false, false): self = .none
        case (true, false): self = .me
        case (false, true): self = .all
        case (true, true): self = .allAndMe
        }
    }
}

/// What happened to a sent message.
public enum SendOutcome: Sendable, Hashable {
    /// Accepted: stored (not AVChatRoom) and delivered. `deduplicated` when this answers a retry
    /// with the client message id of an earlier send.
    case sent(GroupMessage, deduplicated: Bool)
    /// AVChatRoom over its rate: dropped by priority, not delivered.
    case shed(GroupMessage)
}
