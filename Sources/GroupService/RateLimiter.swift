import GroupModel
import NIOCore
import Synchronization

extension GroupError.Reason {
    /// A rate limit of the app or the operator is spent; the status carries a
    /// `google.rpc.RetryInfo` with the delay after which a call would pass.
    public static let rateLimited: Self = "RATE_LIMITED"
}

/// One token bucket: `tokens` as of `updated` (monotonic nanoseconds).
struct TokenBucket: Sendable {
    /// Calls available as of `updated`, at most the rate's burst.
    var tokens: Double
    /// When `tokens` was computed, in monotonic nanoseconds.
    var updated: UInt64

    /// A full bucket at `now`.
    init(_ rate: RateLimits.Rate, now: UInt64) {
        self.tokens = Double(rate.burst)
        self.updated = now
    }

    /// The tokens at `now`: refilled at the rate, capped at the burst.
    func available(_ rate: RateLimits.Rate, now: UInt64) -> Double {
        let elapsed = now > updated ? Double(now - updated) / 1e9 : 0
        return min(Double(rate.burst), tokens + elapsed * rate.perSecond)
    }

    /// How long until one token is available at `now` (zero when one is).
    func wait(_ rate: RateLimits.Rate, now: UInt64) -> Double {
        let missing = 1 - available(rate, now: now)
        return missing <= 0 ? 0 : missing / rate.perSecond
    }

    /// Spend one token at `now`.
    mutating func take(_ rate: RateLimits.Rate, now: UInt64) {
        tokens = available(rate, now: now) - 1
        updated = now
    }

    /// Whether the bucket is full at `now`: then it is the same as a fresh one and may be dropped.
    func isFull(_ rate: RateLimits.Rate, now: UInt64) -> Bool {
        available(rate, now: now) >= Double(rate.burst)
    }
}

/// The bucket a call was refused by and how long until it would pass.
public struct RateLimitRefusal: Sendable, Hashable {
    /// `app`, `operator` or `operator_writes`: the `rate_limits` key of the bucket.
    public var scope: String
    /// How long until the call would pass, in seconds.
    public var retryAfterSeconds: Double
}

/// The rate limits of one app: its own bucket and one per operator (and per operator's writes),
/// checked together: a call passes only when every bucket that applies has a token, and then
/// takes one from each.
///
/// Memory stays bounded: an operator's bucket that has refilled completely is the same as none
/// and is dropped by a sweep that runs whenever the map doubles since the last one; if more than
/// ``maximumTrackedOperators`` operators are still mid-bucket after a sweep, the longest idle half
/// is dropped (those operators start again with a full bucket).
public final class AppRateLimiter: Sendable {
    /// The limits this limiter enforces; a reload keeps a limiter whose limits did not change.
    public let limits: RateLimits
    /// The most per-operator buckets held (per kind) after a sweep.
    public let maximumTrackedOperators: Int
    private let now: @Sendable () -> UInt64

    /// One kind of per-operator bucket.
    private struct OperatorBuckets {
        /// Each operator's bucket, by operator key.
        var buckets: [String: TokenBucket] = [:]
        /// The size at which the next sweep runs.
        var sweepAt = 1024
    }

    /// Every bucket of the app.
    private struct State {
        /// The app's own bucket, once a call took from it.
        var app: TokenBucket?
        /// `rate_limits.operator` buckets.
        var operators = OperatorBuckets()
        /// `rate_limits.operator_writes` buckets.
        var writes = OperatorBuckets()
    }

    // The mutex confines the buckets: every access is inside `withLock`.
    private let state = Mutex(State())

    /// Create the limiter of an app.
    /// - Parameters:
    ///   - limits: The app's `rate_limits`.
    ///   - maximumTrackedOperators: The bound on per-operator buckets kept after a sweep.
    ///   - now: Monotonic nanoseconds (injectable for tests).
    public init(
        limits: RateLimits, maximumTrackedOperators: Int = 100_000,
        now: @escaping @Sendable () -> UInt64 = { NIODeadline.now().uptimeNanoseconds }
    ) {
        self.limits = limits
        self.maximumTrackedOperators = max(2, maximumTrackedOperators)
        self.now = now
    }

    /// How many per-operator buckets are held (both kinds).
    public var trackedOperators: Int {
        state.withLock { $0.operators.buckets.count + $0.writes.buckets.count }
    }

    /// Take one call from every bucket that applies, or refuse without taking any.
    /// - Parameters:
    ///   - operatorKey: The operator's key (see ``GroupdService``: the acting user, or the token's subject).
    ///   - isWrite: Whether the method changes state (then `operator_writes` applies too).
    /// - Returns: `nil` when the call may go ahead; else the bucket that refused and the delay.
    public func acquire(operatorKey: String, isWrite: Bool) -> RateLimitRefusal? {
        if limits.isUnlimited { return nil }
        let now = self.now()
        let limits = self.limits
        let cap = self.maximumTrackedOperators
        return state.withLock { state in
            var refusal: RateLimitRefusal?
            func check(_ bucket: TokenBucket?, _ rate: RateLimits.Rate, _ scope: String) {
                let wait = bucket?.wait(rate, now: now) ?? 0
                if wait > 0, wait > (refusal?.retryAfterSeconds ?? 0) {
                    refusal = RateLimitRefusal(scope: scope, retryAfterSeconds: wait)
                }
            }
            if let rate = limits.perApp { check(state.app, rate, "app") }
            if let rate = limits.perOperator { check(state.operators.buckets[operatorKey], rate, "operator") }
            if isWrite, let rate = limits.perOperatorWrites { check(state.writes.buckets[operatorKey], rate, "operator_writes") }
            if let refusal { return refusal }

            if let rate = limits.perApp {
                var bucket = state.app ?? TokenBucket(rate, now: now)
                bucket.take(rate, now: now)
                state.app = bucket
            }
            if let rate = limits.perOperator {
                Self.take(operatorKey, rate, in: &state.operators, now: now, cap: cap)
            }
            if isWrite, let rate = limits.perOperatorWrites {
                Self.take(operatorKey, rate, in: &state.writes, now: now, cap: cap)
            }
            return nil
        }
    }

    /// Take one token from `key`'s bucket in `map`, sweeping the map when it has grown enough.
    private static func take(_ key: String, _ rate: RateLimits.Rate, in map: inout OperatorBuckets, now: UInt64, cap: Int) {
        var bucket = map.buckets[key] ?? TokenBucket(rate, now: now)
        bucket.take(rate, now: now)
        map.buckets[key] = bucket
        guard map.buckets.count >= map.sweepAt else { return }
        map.buckets = map.buckets.filter { !$0.value.isFull(rate, now: now) }
        if map.buckets.count > cap {
            // Still too many operators mid-bucket: keep the most recently active half.
            let kept = map.buckets.sorted { $0.value.updated > $1.value.updated }.prefix(cap / 2)
            map.buckets = Dictionary(uniqueKeysWithValues: kept.map { ($0.key, $0.value) })
        }
        map.sweepAt = min(max(1024, map.buckets.count * 2), cap + 1)
    }
}

/// The rate limiters of every app of a configuration snapshot.
public struct RateLimiters: Sendable {
    /// Each app's limiter, by app id.
    public let apps: [String: AppRateLimiter]

    /// The limiters for `configuration`, reusing those of `previous` whose app kept the same
    /// limits, so that a reload neither resets nor refills a bucket it did not change.
    public init(
        configuration: GroupdConfiguration, previous: RateLimiters? = nil,
        now: @escaping @Sendable () -> UInt64 = { NIODeadline.now().uptimeNanoseconds }
    ) {
        var apps: [String: AppRateLimiter] = [:]
        for app in configuration.apps where !app.rateLimits.isUnlimited {
            if let old = previous?.apps[app.id], old.limits == app.rateLimits {
                apps[app.id] = old
            } else {
                apps[app.id] = AppRateLimiter(limits: app.rateLimits, now: now)
            }
        }
        self.apps = apps
    }

    /// Whether `method` (a gRPC path) only reads: its name starts with `Get`, `List`, `Search`
    /// or `Check`, or it is `Subscribe` or `Watch`. Every other method counts as a write.
    public static func isRead(method path: String) -> Bool {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        return ["Get", "List", "Search", "Check"].contains { name.hasPrefix($0) } || name == "Subscribe" || name == "Watch"
    }
}
