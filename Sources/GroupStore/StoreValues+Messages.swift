public import GroupModel

/// A stored group message: the `group_events` row that numbers it (kind `GROUP_MESSAGE`) and
/// its body from `group_messages`, keyed by that row's `event_id`.
public struct StoredMessage: Sendable, Hashable {
    /// The `group_events.event_id` of the message's event row (the app-wide firehose order).
    public var eventID: Int64
    /// The message, with its sequence.
    public var message: GroupMessage

    /// Create a stored message.
    public init(eventID: Int64, message: GroupMessage) {
        self.eventID = eventID
        self.message = message
    }
}

/// The answer of ``Store/appendMessage(_:at:reply:check:)``.
public struct AppendedMessage: Sendable {
    /// The message as stored: the new one, or the earlier one a retry repeats.
    public var stored: StoredMessage
    /// True when `stored` is an earlier message with the same sender and client message id.
    public var deduplicated: Bool
    /// The events committed with it (empty for a deduplicated retry).
    public var events: [GroupEvent]

    /// Create an answer.
    public init(stored: StoredMessage, deduplicated: Bool, events: [GroupEvent]) {
        self.stored = stored
        self.deduplicated = deduplicated
        self.events = events
    }
}

/// The answer of ``Store/editMessage(app:groupID:sequence:text:payload:operatorID:at:write:plan:)``.
public struct EditedMessage: Sendable, Hashable {
    /// The message as history shows it after the call.
    public var message: GroupMessage
    /// True when the stored body was the requested one already: nothing was written.
    public var unchanged: Bool

    /// Create an answer.
    public init(message: GroupMessage, unchanged: Bool) {
        self.message = message
        self.unchanged = unchanged
    }
}

/// Which stored messages a history read returns: a window of sequences walked one way.
public struct MessageRange: Sendable, Hashable {
    /// Which way the walk goes.
    public enum Direction: String, Sendable, Hashable {
        /// Toward lower sequences, from `before` (exclusive) down to `floor` (exclusive).
        case older
        /// Toward higher sequences, from `after` (exclusive).
        case newer
    }

    /// The walk's direction.
    public var direction: Direction
    /// The anchor, exclusive: OLDER returns sequences below it (`nil`: from the newest), NEWER
    /// above it (`nil`: from the first visible).
    public var anchor: Int64?
    /// The first sequence the reader may not see: only messages with a greater sequence are
    /// returned (0: all).
    public var floor: Int64

    /// Create a range.
    public init(direction: Direction, anchor: Int64?, floor: Int64) {
        self.direction = direction
        self.anchor = anchor
        self.floor = floor
    }
}

/// One page of history.
public struct MessagePage: Sendable {
    /// The messages, ascending by sequence whatever the direction.
    public var messages: [GroupMessage]
    /// Whether more messages lie beyond this page in the walk's direction.
    public var hasMore: Bool
    /// The group's latest sequence when read.
    public var latestSequence: Int64

    /// Create a page.
    public init(messages: [GroupMessage], hasMore: Bool, latestSequence: Int64) {
        self.messages = messages
        self.hasMore = hasMore
        self.latestSequence = latestSequence
    }

    /// The page of a read that asked for one message more than `limit`: the first `limit`, and
    /// whether there was more.
    public init(overfetched messages: [GroupMessage], limit: Int, latestSequence: Int64) {
        self.init(
            messages: Array(messages.prefix(limit)), hasMore: messages.count > limit, latestSequence: latestSequence)
    }
}

/// A member's read state in one group.
public struct ReadState: Sendable, Hashable {
    /// The read position: the sequence read up to and including.
    public var readSequence: Int64
    /// Messages after the read position (and after the member's join), not sent by the member.
    public var unreadCount: Int
    /// When the group's newest stored message was sent; `nil` when it has none.
    public var lastMessageAt: Timestamp?
    /// Whether an unread, unrecalled message from someone else mentions the member or everyone.
    public var unreadMention: UnreadMention

    /// Create a read state.
    public init(readSequence: Int64, unreadCount: Int, lastMessageAt: Timestamp? = nil, unreadMention: UnreadMention = .none) {
        self.readSequence = readSequence
        self.unreadCount = unreadCount
        self.lastMessageAt = lastMessageAt
        self.unreadMention = unreadMention
    }
}

/// What ``Store/markRead(app:groupID:userID:upTo:at:plan:)`` hands its plan: the
/// group, the member, where they have read up to, and the latest message the request covers.
public struct ReadSnapshot: Sendable {
    /// The group.
    public var group: Group
    /// The reader's membership (nil: not a member).
    public var membership: Member?
    /// The read position before the call.
    public var readSequence: Int64
    /// The sequence of the latest message at or below the requested sequence (0: none).
    public var latestMessageSequence: Int64

    /// Create a snapshot.
    public init(group: Group, membership: Member?, readSequence: Int64, latestMessageSequence: Int64) {
        self.group = group
        self.membership = membership
        self.readSequence = readSequence
        self.latestMessageSequence = latestMessageSequence
    }
}
