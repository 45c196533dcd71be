import GRPCServer
import GroupModel

/// `transport`: the transport's defences against hostile or broken clients, each with a default
/// that protects (docs/TRANSPORT.md, "Hostile clients").
///
/// ```yaml
/// transport:
///   preface_timeout_seconds: 10
///   idle_timeout_seconds: 60
///   max_unauthenticated_calls: 256
///   max_queued_bytes_per_connection: 4194304
///   max_queued_bytes: 134217728
///   stalled_write_timeout_seconds: 30
///   reset_burst: 200
///   max_resets_per_second: 100
///   reads_per_turn: 4
///   read_buffer_bytes: 65536
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

        // Clients that do not read (zero flow-control window, or a socket left unread).

        /// `transport.max_queued_bytes_per_connection`: bytes one connection may hold queued for
        /// its client (response messages, plus 2 KiB per stream waiting to send); past it, its
        /// streams the client blocks are reset with RST_STREAM(ENHANCE_YOUR_CALM) and new ones
        /// refused with REFUSED_STREAM until it is under half. 65536 to 1 GiB. Default 4 MiB.
        public var maxQueuedBytesPerConnection: Int = TransportLimits.defaults.maxQueuedBytesPerConnection
        /// `transport.max_queued_bytes`: the same over every connection; a connection adding to a
        /// total above it sheds its blocked streams. From `max_queued_bytes_per_connection` to
        /// 64 GiB. Default 128 MiB.
        public var maxQueuedBytes: Int = TransportLimits.defaults.maxQueuedBytes
        /// `transport.stalled_write_timeout_seconds`: a connection with bytes queued that sends
        /// none of them for this long gets GOAWAY(ENHANCE_YOUR_CALM) and is closed. Above 0, at
        /// most 3600. Default 30.
        public var stalledWriteTimeoutSeconds: Double = 30

        // Rapid reset (CVE-2023-44487).

        /// `transport.reset_burst`: how many streams a connection may reset (RST_STREAM), or have
        /// refused for its fault, in a burst; 1 to 1,000,000. Default 200.
        public var resetBurst: Int = TransportLimits.defaults.resetBurst
        /// `transport.max_resets_per_second`: how many more it may reset each second once the burst
        /// is spent; past that the connection gets GOAWAY `ENHANCE_YOUR_CALM` and closes;
        /// 1 to 1,000,000. Default 100.
        public var maxResetsPerSecond: Int = TransportLimits.defaults.resetsPerSecond

        // Fairness between the connections of one event loop.

        /// `transport.reads_per_turn`: socket reads of one connection before its event loop turns to
        /// its other connections; 1 to 64. Default 4.
        public var readsPerTurn: Int = TransportLimits.defaults.readsPerTurn
        /// `transport.read_buffer_bytes`: the largest single read, a power of two from 4096 to
        /// 1048576. Default 65536. One connection is read at most `reads_per_turn` ×
        /// `read_buffer_bytes` per turn of its loop.
        public var readBufferBytes: Int = TransportLimits.defaults.readBufferBytes

        /// The defaults above.
        public static var defaults: Transport { Transport() }

        /// The defaults.
        public init() {}

        /// The YAML keys of the integers and the property each sets.
        static var integerKeys: [(key: String, path: WritableKeyPath<Transport, Int>)] {
            [
                ("max_unauthenticated_calls", \.maxUnauthenticatedCalls),
                ("max_queued_bytes_per_connection", \.maxQueuedBytesPerConnection),
                ("max_queued_bytes", \.maxQueuedBytes),
                ("reset_burst", \.resetBurst),
                ("max_resets_per_second", \.maxResetsPerSecond),
                ("reads_per_turn", \.readsPerTurn),
                ("read_buffer_bytes", \.readBufferBytes),
            ]
        }

        /// The YAML keys of the durations and the property each sets.
        static var durationKeys: [(key: String, path: WritableKeyPath<Transport, Double>)] {
            [
                ("preface_timeout_seconds", \.prefaceTimeoutSeconds),
                ("idle_timeout_seconds", \.idleTimeoutSeconds),
                ("stalled_write_timeout_seconds", \.stalledWriteTimeoutSeconds),
            ]
        }

        /// `preface_timeout_seconds: 10.0, …` (for the restart-only log line).
        public var description: String {
            (Self.durationKeys.map { "\($0.key): \(self[keyPath: $0.path])" }
                + Self.integerKeys.map { "\($0.key): \(self[keyPath: $0.path])" }).joined(separator: ", ")
        }
    }

    /// Check `transport` against its documented ranges.
    func validateTransportLimits(_ problems: inout ConfigurationProblems) {
        func fail(_ key: String, _ message: String) {
            problems.add("transport." + key, message)
        }
        let preface = transport.prefaceTimeoutSeconds
        if !(preface.isFinite && preface > 0 && preface <= 3600) {
            fail("preface_timeout_seconds", "expected seconds above 0 and at most 3600, found \(preface)")
        }
        let idle = transport.idleTimeoutSeconds
        if !(idle.isFinite && (0...86_400).contains(idle)) {
            fail("idle_timeout_seconds", "expected seconds from 0 (never) to 86400, found \(idle)")
        }
        let calls = transport.maxUnauthenticatedCalls
        if !(1...1_000_000).contains(calls) {
            fail("max_unauthenticated_calls", "expected a value from 1 to 1000000, found \(calls)")
        }
        let perConnection = transport.maxQueuedBytesPerConnection
        if !(65536...(1 << 30)).contains(perConnection) {
            fail("max_queued_bytes_per_connection", "expected bytes from 65536 to \(1 << 30), found \(perConnection)")
        } else if !(perConnection...(1 << 36)).contains(transport.maxQueuedBytes) {
            fail(
                "max_queued_bytes",
                "expected bytes from max_queued_bytes_per_connection (\(perConnection)) to \(1 << 36), found \(transport.maxQueuedBytes)")
        }
        let stalled = transport.stalledWriteTimeoutSeconds
        if !(stalled.isFinite && stalled > 0 && stalled <= 3600) {
            fail("stalled_write_timeout_seconds", "expected seconds above 0 and at most 3600, found \(stalled)")
        }
        func check(_ value: Int, _ key: String, _ range: ClosedRange<Int>) {
            if !range.contains(value) { fail(key, "expected \(range.lowerBound) to \(range.upperBound), found \(value)") }
        }
        check(transport.resetBurst, "reset_burst", 1...1_000_000)
        check(transport.maxResetsPerSecond, "max_resets_per_second", 1...1_000_000)
        check(transport.readsPerTurn, "reads_per_turn", 1...64)
        let buffer = transport.readBufferBytes
        if !(4096...1_048_576).contains(buffer) {
            check(buffer, "read_buffer_bytes", 4096...1_048_576)
        } else if buffer.nonzeroBitCount != 1 {
            fail("read_buffer_bytes", "expected a power of two from 4096 to 1048576, found \(buffer)")
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
        let c = try decoder.configMapping(allowing: Self.durationKeys.map(\.key) + Self.integerKeys.map(\.key))
        self.init()
        for (key, path) in Self.durationKeys {
            self[keyPath: path] = try c.value(key, or: self[keyPath: path])
        }
        for (key, path) in Self.integerKeys {
            self[keyPath: path] = try c.value(key, or: self[keyPath: path])
        }
    }

    /// Encode every key.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: ConfigKey.self)
        for (key, path) in Self.durationKeys {
            try c.encode(self[keyPath: path], forKey: ConfigKey(key))
        }
        for (key, path) in Self.integerKeys {
            try c.encode(self[keyPath: path], forKey: ConfigKey(key))
        }
    }
}
