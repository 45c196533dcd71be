/// An app's rate limits (`apps[].rate_limits`): token buckets for the whole app, for each
/// operator, and for each operator's writes. Every bucket is optional; an absent one is unlimited.
///
/// ```yaml
/// rate_limits:
///   app:              # every call of the app together
///     per_second: 2000
///     burst: 4000
///   operator:         # each operator (the token's sub, or x-operator-id with an admin token)
///     per_second: 50
///     burst: 100
///   operator_writes:  # each operator's writes only (every method but Get*, List*, Search*, Subscribe)
///     per_second: 10
/// ```
public struct RateLimits: Sendable, Hashable {
    /// One token bucket: refilled at `perSecond`, holding at most `burst` calls.
    public struct Rate: Sendable, Hashable {
        /// `….per_second`: calls a second, sustained; above 0 (fractions allowed: `0.5` is one
        /// call every two seconds). Required.
        public var perSecond: Double
        /// `….burst`: calls that may come at once after a quiet spell, at least 1. Default
        /// `per_second` rounded up.
        public var burst: Int

        /// Create a bucket's rate.
        public init(perSecond: Double, burst: Int) {
            self.perSecond = perSecond
            self.burst = burst
        }
    }

    /// `rate_limits.app`: the bucket shared by every call of the app; `nil` = unlimited.
    public var perApp: Rate?
    /// `rate_limits.operator`: one bucket per operator; `nil` = unlimited.
    public var perOperator: Rate?
    /// `rate_limits.operator_writes`: one bucket per operator, for writes only (checked besides
    /// `operator`); `nil` = unlimited.
    public var perOperatorWrites: Rate?

    /// No limit at all: the default.
    public static var unlimited: RateLimits { RateLimits() }

    /// Create rate limits; every bucket absent by default.
    public init(perApp: Rate? = nil, perOperator: Rate? = nil, perOperatorWrites: Rate? = nil) {
        self.perApp = perApp
        self.perOperator = perOperator
        self.perOperatorWrites = perOperatorWrites
    }

    /// Whether no bucket is configured.
    public var isUnlimited: Bool { perApp == nil && perOperator == nil && perOperatorWrites == nil }

    /// The YAML keys and the bucket each sets.
    static var bucketKeys: [(key: String, path: WritableKeyPath<RateLimits, Rate?>)] {
        [("app", \.perApp), ("operator", \.perOperator), ("operator_writes", \.perOperatorWrites)]
    }

    /// The largest `per_second` and `burst` accepted.
    public static let maximumRate = 1_000_000
}

extension RateLimits: Codable {
    /// Decode; every bucket optional, unknown keys refused.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.configMapping(allowing: Self.bucketKeys.map(\.key))
        self.init()
        for (key, path) in Self.bucketKeys {
            self[keyPath: path] = try c.decodeIfPresent(Rate.self, forKey: ConfigKey(key))
        }
    }

    /// Encode the configured buckets.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: ConfigKey.self)
        for (key, path) in Self.bucketKeys {
            try c.encodeIfPresent(self[keyPath: path], forKey: ConfigKey(key))
        }
    }
}

extension RateLimits.Rate: Codable {
    /// Decode; `per_second` is required and above 0, `burst` defaults to it rounded up.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.configMapping(allowing: ["per_second", "burst"])
        var perSecond: Double = try c.required("per_second")
        if !(perSecond.isFinite && perSecond > 0 && perSecond <= Double(RateLimits.maximumRate)) {
            try decoder.record(
                ["per_second"], "expected calls per second above 0 and at most \(RateLimits.maximumRate), found \(perSecond)")
            perSecond = 1  // a stand-in, so that the rest of the file is checked too
        }
        var burst: Int = try c.value("burst", or: Int(perSecond.rounded(.up)))
        if !(1...RateLimits.maximumRate).contains(burst) {
            try decoder.record(["burst"], "expected a value from 1 to \(RateLimits.maximumRate), found \(burst)")
            burst = 1
        }
        self.init(perSecond: perSecond, burst: burst)
    }

    /// Encode both keys.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: ConfigKey.self)
        try c.encode(self.perSecond, forKey: ConfigKey("per_second"))
        try c.encode(self.burst, forKey: ConfigKey("burst"))
    }
}
