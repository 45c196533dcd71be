/// The admission of one AVChatRoom's messages at its rate (`limits.av_chat_room_messages_per_second`),
/// shedding by priority: a token bucket holding one second of the rate, refilled continuously.
///
/// - `high` is always admitted (it takes a token if there is one, never going below zero).
/// - `normal` is admitted while a whole token is left.
/// - `low` is admitted only while half the bucket (rounded down) is still left after taking.
///
/// So as a room's traffic climbs past its rate, `low` messages are shed first (once the bucket
/// is half spent), then `normal` (once it is empty), and `high` is kept; a quiet room admits a
/// burst of one second's worth (about half of it `low`; at a rate of 1, `low` is treated as
/// `normal`). A pure value: the caller keeps one per room and supplies the time.
public struct MessageShedding: Sendable, Hashable {
    /// Tokens left (0…rate).
    public private(set) var tokens: Double
    /// When ``tokens`` was last brought up to date.
    public private(set) var updated: Timestamp

    /// A full bucket for `rate` messages a second, at `now`.
    public init(rate: Int, now: Timestamp) {
        self.tokens = Double(Self.capacity(rate))
        self.updated = now
    }

    /// The bucket's size for a configured rate (at least 1).
    static func capacity(_ rate: Int) -> Int { max(1, rate) }

    /// Admit or shed one message of `priority` at `now`.
    /// - Returns: `true` when admitted (a token is taken), `false` when shed.
    public mutating func admit(_ priority: MessagePriority, rate: Int, now: Timestamp) -> Bool {
        refill(rate: rate, now: now)
        let capacity = Double(Self.capacity(rate))
        switch priority {
        case .high:
            tokens = max(0, tokens - 1)
            return true
        case .normal:
            guard tokens >= 1 else { return false }
        case .low:
            guard tokens - 1 >= (capacity / 2).rounded(.down) else { return false }
        }
        tokens -= 1
        return true
    }

    /// Counts a message the room admitted elsewhere (another node) at `now`: takes a token if
    /// there is one, never going below zero, so the room's rate is shared by every node.
    public mutating func consume(rate: Int, now: Timestamp) {
        refill(rate: rate, now: now)
        tokens = max(0, tokens - 1)
    }

    /// Whether the bucket is full at `now` (the room has been quiet: forgetting it changes nothing).
    public func isFull(rate: Int, now: Timestamp) -> Bool {
        var copy = self
        copy.refill(rate: rate, now: now)
        return copy.tokens >= Double(Self.capacity(rate))
    }

    private mutating func refill(rate: Int, now: Timestamp) {
        let capacity = Double(Self.capacity(rate))
        let elapsed = now.millisecondsSince1970 - updated.millisecondsSince1970
        // A clock that stepped back refills nothing rather than draining the bucket.
        if elapsed > 0 {
            tokens = min(capacity, tokens + Double(elapsed) * capacity / 1000)
            updated = now
        }
        if tokens > capacity { tokens = capacity }
    }
}
