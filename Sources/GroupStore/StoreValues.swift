public import GroupModel

/// The result of a committed mutation, the one name for it from the store to the handlers: the
/// mutation's value, the group as it left it, and the events committed with it, numbered.
public struct Committed<Value: Sendable>: Sendable {
    /// What the mutation produced (the created group, the tombstone of a recalled message, a
    /// handler's own result).
    public var value: Value
    /// The group after the mutation, as stored (for an AVChatRoom the service adds the room's
    /// online audience to `memberCount`).
    public var group: Group
    /// The operator's membership after the mutation (`nil`: none, the backend, or a mutation that
    /// reads no membership: only the group mutations fill it).
    public var membership: Member?
    /// The events committed in the same transaction, in sequence order.
    public var events: [GroupEvent]

    /// Create a result.
    public init(value: Value, group: Group, membership: Member? = nil, events: [GroupEvent]) {
        self.value = value
        self.group = group
        self.membership = membership
        self.events = events
    }

    /// The same result with another value.
    public func map<Other: Sendable>(_ transform: (Value) throws -> Other) rethrows -> Committed<Other> {
        Committed<Other>(value: try transform(value), group: group, membership: membership, events: events)
    }
}

/// An AVChatRoom's presences as a mutation's transaction reads them
/// (``SnapshotRequest/Parts-swift.struct/presence``).
public struct RoomPresence: Sendable, Hashable {
    /// Which of the request's users (operator and targets) hold a presence that has not ended.
    public var present: Set<String>
    /// How many presences in the room have not ended (the online count).
    public var online: Int

    /// Creates a reading.
    public init(present: Set<String>, online: Int) {
        self.present = present
        self.online = online
    }
}

/// What a mutation changes of an AVChatRoom's presences, written in its transaction with its
/// rows and events (``WriteSet/presence``).
public struct PresenceChange: Sendable, Hashable {
    /// Users whose presence is held until ``until`` (a presence held longer keeps its end).
    public var hold: [String]
    /// When the held presences end.
    public var until: Timestamp
    /// Users whose presence ends now (they left).
    public var drop: [String]

    /// Creates a change.
    public init(hold: [String], until: Timestamp, drop: [String]) {
        self.hold = hold
        self.until = until
        self.drop = drop
    }

    /// Whether it changes nothing.
    public var isEmpty: Bool { hold.isEmpty && drop.isEmpty }
}
