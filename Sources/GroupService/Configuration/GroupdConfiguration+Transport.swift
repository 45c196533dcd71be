public import GRPCServer
import GroupModel
import NIOCore

/// `transport`: the transport's defences against hostile clients, each with a default that
/// protects (docs/TRANSPORT.md, "Hostile clients").
///
/// ```yaml
/// transport:
///   preface_timeout_seconds: 10
///   idle_timeout_seconds: 60
///   max_unauthenticated_calls: 256
/// ```
extension GroupdConfiguration {
    /// `transport`: budgets and timeouts against hostile clients. Every key needs a restart.
    public struct Transport: Sendable, Hashable, CustomStringConvertible {
        // Slowloris: silent, half-open and unused connections.

        /// `transport.preface_timeout_seconds`: a connection that has not sent the HTTP/2 client
        /// preface and its first SETTINGS this long after it was accepted (on TLS: after its
        /// handshake) is closed; above 0, at most 3600. Default 10.
        public var prefaceTimeoutSeconds: Double = 10
        /// `transport.idle_timeout_seconds`: a connection that has never opened a stream this long
        /// after it was accepted (on TLS: after its handshake) gets GOAWAY `NO_ERROR` and closes;
        /// 0 = never, at most 86400. Default 60.
        public var idleTimeoutSeconds: Double = 60

        // Unauthenticated work.

        /// `transport.max_unauthenticated_calls`: calls in flight without a verified token, over
        /// every connection (health and reflection calls until they end, the other methods' calls
        /// until their handler checks the token); a call above it gets `RESOURCE_EXHAUSTED`
        /// (`TOO_MANY_UNAUTHENTICATED_CALLS`) unless its token verifies; 1 to 1000000. Default 256.
        public var maxUnauthenticatedCalls: Int = 256

        /// The defaults above.
        public static var defaults: Transport { Transport() }

        /// The defaults.
        public init() {}

        /// `preface_timeout_seconds: 10, …` (for the restart-only log line).
        public var description: String {
            "preface_timeout_seconds: \(prefaceTimeoutSeconds), idle_timeout_seconds: \(idleTimeoutSeconds), "
                + "max_unauthenticated_calls: \(maxUnauthenticatedCalls)"
        }

        /// The YAML keys.
        static let keys = ["preface_timeout_seconds", "idle_timeout_seconds", "max_unauthenticated_calls"]

        /// The transport's limits.
        public var limits: TransportLimits {
            func amount(_ seconds: Double) -> TimeAmount { .nanoseconds(Int64((seconds * 1e9).rounded())) }
            var limits = TransportLimits()
            limits.prefaceTimeout = amount(prefaceTimeoutSeconds)
            limits.unusedConnectionTimeout = idleTimeoutSeconds == 0 ? nil : amount(idleTimeoutSeconds)
            limits.maxUnauthenticatedCalls = maxUnauthenticatedCalls
            limits.unauthenticatedCallsRefusal = GroupError(
                code: .resourceExhausted, reason: .tooManyUnauthenticatedCalls,
                message: "\(maxUnauthenticatedCalls) calls without a verified token are in flight "
                    + "(transport.max_unauthenticated_calls); retry later, or call with a valid token",
                metadata: ["limit": "\(maxUnauthenticatedCalls)"]
            ).grpcStatus
            return limits
        }
    }

    /// Check `transport` against its documented ranges.
    func validateTransportLimits(file: String) throws {
        func fail(_ key: String, _ message: String) -> ConfigurationError {
            ConfigurationError(file: file, keyPath: "transport." + key, message: message)
        }
        let preface = transport.prefaceTimeoutSeconds
        guard preface.isFinite, preface > 0, preface <= 3600 else {
            throw fail("preface_timeout_seconds", "expected seconds above 0 and at most 3600, found \(preface)")
        }
        let idle = transport.idleTimeoutSeconds
        guard idle.isFinite, (0...86_400).contains(idle) else {
            throw fail("idle_timeout_seconds", "expected seconds from 0 (never) to 86400, found \(idle)")
        }
        let calls = transport.maxUnauthenticatedCalls
        guard (1...1_000_000).contains(calls) else {
            throw fail("max_unauthenticated_calls", "expected a value from 1 to 1000000, found \(calls)")
        }
    }
}

extension GroupError.Reason {
    /// `transport.max_unauthenticated_calls` calls without a verified token are in flight: the
    /// call was refused before any work (RESOURCE_EXHAUSTED); metadata `limit`. Retry later, or
    /// call with a valid token (which is let through).
    public static let tooManyUnauthenticatedCalls: Self = "TOO_MANY_UNAUTHENTICATED_CALLS"
}

// MARK: Decoding and encoding

extension GroupdConfiguration.Transport: Codable {
    /// Decode, taking the default for every absent key and refusing unknown keys.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.configMapping(allowing: Self.keys)
        self.init()
        self.prefaceTimeoutSeconds = try c.value("preface_timeout_seconds", or: prefaceTimeoutSeconds)
        self.idleTimeoutSeconds = try c.value("idle_timeout_seconds", or: idleTimeoutSeconds)
        self.maxUnauthenticatedCalls = try c.value("max_unauthenticated_calls", or: maxUnauthenticatedCalls)
    }

    /// Encode every key.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: ConfigKey.self)
        try c.encode(prefaceTimeoutSeconds, forKey: ConfigKey("preface_timeout_seconds"))
        try c.encode(idleTimeoutSeconds, forKey: ConfigKey("idle_timeout_seconds"))
        try c.encode(maxUnauthenticatedCalls, forKey: ConfigKey("max_unauthenticated_calls"))
    }
}
