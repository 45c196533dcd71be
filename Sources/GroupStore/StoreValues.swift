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
