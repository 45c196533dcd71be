/// A point in wall-clock time: whole milliseconds since 1970-01-01T00:00:00Z (the Unix epoch).
///
/// Milliseconds, not seconds, because mute expiry, application expiry and event ordering are
/// compared at sub-second precision; `Int64` covers ±292 million years. This is also how the
/// store persists time (an `INTEGER` column) and how the API reports it.
public struct Timestamp: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Milliseconds since the Unix epoch.
    public var millisecondsSince1970: Int64

    /// Create a timestamp from milliseconds since the Unix epoch.
    public init(millisecondsSince1970: Int64) {
        self.millisecondsSince1970 = millisecondsSince1970
    }

    /// Create a timestamp from whole seconds since the Unix epoch.
    public init(secondsSince1970: Int64) {
        self.millisecondsSince1970 = secondsSince1970 &* 1000
    }

    /// Whole seconds since the Unix epoch, rounded down.
    public var secondsSince1970: Int64 {
        let (q, r) = self.millisecondsSince1970.quotientAndRemainder(dividingBy: 1000)
        return r < 0 ? q - 1 : q
    }

    /// This timestamp moved by `seconds` (negative moves back).
    public func adding(seconds: Int64) -> Timestamp {
        Timestamp(millisecondsSince1970: self.millisecondsSince1970 &+ seconds &* 1000)
    }

    /// This timestamp moved by `milliseconds` (negative moves back).
    public func adding(milliseconds: Int64) -> Timestamp {
        Timestamp(millisecondsSince1970: self.millisecondsSince1970 &+ milliseconds)
    }

    /// Orders by time.
    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool {
        lhs.millisecondsSince1970 < rhs.millisecondsSince1970
    }

    /// The raw millisecond count, e.g. `1700000000000ms`.
    public var description: String { "\(self.millisecondsSince1970)ms" }
}
