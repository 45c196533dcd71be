import GRPCProtocol
import NIOCore

/// A token bucket read against a clock the caller passes in (the event loop's `now`, so an
/// `EmbeddedEventLoop` drives it in tests): it starts full with `capacity` tokens, gains
/// `refillPerSecond` tokens a second up to `capacity`, and each ``take(at:)`` spends one.
///
/// Tokens are kept in nanosecond-tokens (a token is 10⁹ of them), so refills are exact integer
/// arithmetic at any rate and no fraction of a token is lost between two takes.
struct TokenBucket: Sendable, Equatable {
    /// The most tokens the bucket holds (and holds at the start).
    let capacity: Int64
    /// Tokens added per second.
    let refillPerSecond: Int64
    /// The tokens now, times 10⁹.
    private var scaledTokens: Int64
    /// When ``scaledTokens`` was last brought up to date.
    private var updated: NIODeadline

    private static let scale: Int64 = 1_000_000_000

    /// A full bucket.
    /// - Parameters:
    ///   - capacity: Tokens at the start and at most; at least 1, at most 10⁹.
    ///   - refillPerSecond: Tokens added per second; at least 1, at most 10⁹.
    ///   - now: The clock's reading at the start.
    init(capacity: Int, refillPerSecond: Int, now: NIODeadline) {
        precondition((1...1_000_000_000).contains(capacity), "capacity \(capacity)")
        precondition((1...1_000_000_000).contains(refillPerSecond), "refillPerSecond \(refillPerSecond)")
        self.capacity = Int64(capacity)
        self.refillPerSecond = Int64(refillPerSecond)
        self.scaledTokens = Int64(capacity) * Self.scale
        self.updated = now
    }

    /// Whole tokens in the bucket at `now`.
    mutating func tokens(at now: NIODeadline) -> Int64 {
        refill(at: now)
        return scaledTokens / Self.scale
    }

    /// Spends one token if there is one at `now`.
    /// - Returns: Whether a token was spent (false: the bucket is empty, nothing changes).
    mutating func take(at now: NIODeadline) -> Bool {
        refill(at: now)
        guard scaledTokens >= Self.scale else { return false }
        scaledTokens -= Self.scale
        return true
    }

    private mutating func refill(at now: NIODeadline) {
        // A clock that went back (it never does for the loop's monotonic clock) adds nothing.
        guard now > updated else { return }
        let full = capacity * Self.scale
        // Bounded before multiplying: past the time to fill from empty, more time adds nothing
        // (and hours × a large rate would overflow).
        let fillTime = full / refillPerSecond + 1
        let elapsed = min((now - updated).nanoseconds, fillTime)
        scaledTokens = min(full, scaledTokens + elapsed * refillPerSecond)
        updated = now
    }
}
