public import GRPCServer
import NIOCore

/// `transport`: the limits that keep hostile or broken peers from exhausting the server
/// (docs/TRANSPORT.md, "Hostile peers").
///
/// ```yaml
/// transport:
///   max_queued_bytes_per_connection: 4194304
///   max_queued_bytes: 134217728
///   stalled_write_timeout_seconds: 30
/// ```
extension GroupdConfiguration {
    /// `transport`: limits against hostile or broken peers. Every key needs a restart.
    public struct Transport: Sendable, Hashable, CustomStringConvertible {
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

        /// The defaults.
        public static var defaults: Transport { Transport() }

        /// The defaults.
        public init() {}

        /// The YAML keys of the integers and the property each sets.
        static var byteKeys: [(key: String, path: WritableKeyPath<Transport, Int>)] {
            [
                ("max_queued_bytes_per_connection", \.maxQueuedBytesPerConnection),
                ("max_queued_bytes", \.maxQueuedBytes),
            ]
        }

        /// The YAML keys of the durations and the property each sets.
        static var durationKeys: [(key: String, path: WritableKeyPath<Transport, Double>)] {
            [("stalled_write_timeout_seconds", \.stalledWriteTimeoutSeconds)]
        }

        /// `max_queued_bytes_per_connection: 4194304, …` (for the restart-only log line).
        public var description: String {
            (Self.byteKeys.map { "\($0.key): \(self[keyPath: $0.path])" }
                + Self.durationKeys.map { "\($0.key): \(self[keyPath: $0.path])" }).joined(separator: ", ")
        }

        /// The transport's limits.
        public var limits: TransportLimits {
            var limits = TransportLimits()
            limits.maxQueuedBytesPerConnection = maxQueuedBytesPerConnection
            limits.maxQueuedBytes = maxQueuedBytes
            limits.stalledWriteTimeout = .nanoseconds(Int64((stalledWriteTimeoutSeconds * 1e9).rounded()))
            return limits
        }

        /// Check every key against its documented range.
        func validate(file: String) throws {
            func fail(_ key: String, _ message: String) -> ConfigurationError {
                ConfigurationError(file: file, keyPath: "transport." + key, message: message)
            }
            let perConnection = maxQueuedBytesPerConnection
            guard (65536...(1 << 30)).contains(perConnection) else {
                throw fail("max_queued_bytes_per_connection", "expected bytes from 65536 to \(1 << 30), found \(perConnection)")
            }
            guard (perConnection...(1 << 36)).contains(maxQueuedBytes) else {
                throw fail(
                    "max_queued_bytes",
                    "expected bytes from max_queued_bytes_per_connection (\(perConnection)) to \(1 << 36), found \(maxQueuedBytes)")
            }
            let timeout = stalledWriteTimeoutSeconds
            guard timeout.isFinite, timeout > 0, timeout <= 3600 else {
                throw fail("stalled_write_timeout_seconds", "expected seconds above 0 and at most 3600, found \(timeout)")
            }
        }
    }
}

extension GroupdConfiguration.Transport: Codable {
    /// Decode, taking the default for every absent key and refusing unknown keys.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.configMapping(allowing: Self.byteKeys.map(\.key) + Self.durationKeys.map(\.key))
        self.init()
        for (key, path) in Self.byteKeys {
            self[keyPath: path] = try c.value(key, or: self[keyPath: path])
        }
        for (key, path) in Self.durationKeys {
            self[keyPath: path] = try c.value(key, or: self[keyPath: path])
        }
    }

    /// Encode every key.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: ConfigKey.self)
        for (key, path) in Self.byteKeys {
            try c.encode(self[keyPath: path], forKey: ConfigKey(key))
        }
        for (key, path) in Self.durationKeys {
            try c.encode(self[keyPath: path], forKey: ConfigKey(key))
        }
    }
}
