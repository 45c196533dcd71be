#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// A source of wall-clock time, injected wherever the domain needs "now" so that tests control it.
///
/// Named `WallClock` rather than `Clock` so that it does not shadow the standard library's
/// `Clock` protocol (which measures durations, not calendar time) in modules that import this one.
public protocol WallClock: Sendable {
    /// The current time.
    func now() -> Timestamp
}

/// The operating system's real-time clock (`CLOCK_REALTIME`).
public struct SystemWallClock: WallClock {
    /// Create the system clock.
    public init() {}

    /// The current time from `clock_gettime(CLOCK_REALTIME)`.
    public func now() -> Timestamp {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Timestamp(millisecondsSince1970: Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000)
    }
}

/// A clock that only moves when told to, for tests of expiry (mute, tokens, applications).
public final class ManualWallClock: WallClock {
    // Mutex makes the mutable time safe to read and advance from any task.
    private let current: Mutex<Timestamp>

    /// Create a clock standing at `start`.
    public init(_ start: Timestamp = Timestamp(millisecondsSince1970: 1_700_000_000_000)) {
        self.current = Mutex(start)
    }

    /// The time the clock stands at.
    public func now() -> Timestamp { self.current.withLock { $0 } }

    /// Move the clock forward (or back, with a negative value) by `seconds`.
    public func advance(seconds: Int64) {
        self.current.withLock { $0 = $0.adding(seconds: seconds) }
    }

    /// Set the clock to `time`.
    public func set(_ time: Timestamp) {
        self.current.withLock { $0 = time }
    }
}
