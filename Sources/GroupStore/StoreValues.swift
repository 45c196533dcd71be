public import GroupModel

/// The result of a committed mutation: its value and the events committed with it, numbered.
public struct Committed<Value: Sendable>: Sendable {
    /// What the mutation produced (the created group, say).
    public var value: Value
    /// The events committed in the same transaction, in sequence order.
    public var events: [GroupEvent]

    /// Create a result.
    public init(value: Value, events: [GroupEvent]) {
        self.value = value
        self.events = events
    }
}

/// How hard the store pushes each commit to disk (SQLite's `synchronous` pragma in WAL mode).
public enum Durability: String, Sendable, Hashable, CaseIterable, Codable {
    /// `synchronous=FULL`: the WAL is fsynced at every commit; an acknowledged commit survives a
    /// process crash and also an OS crash or power loss.
    case full
    /// `synchronous=NORMAL`: the WAL is fsynced only at checkpoints; an acknowledged commit
    /// survives a process crash, but the latest commits may be lost on OS crash or power loss.
    case normal
}
