public import GRPCServer

/// `transport`: limits that keep one hostile connection from costing the server more than its
/// share (docs/TRANSPORT.md says what each does on the wire).
///
/// ```yaml
/// transport:
///   reset_burst: 200              # streams a connection may reset in a burst
///   max_resets_per_second: 100    # and then per second; past that: GOAWAY ENHANCE_YOUR_CALM
///   reads_per_turn: 4             # socket reads of one connection per event-loop turn
///   read_buffer_bytes: 65536      # the largest single read
/// ```
extension GroupdConfiguration {
    /// `transport`: the transport's defences against hostile clients.
    public struct Transport: Sendable, Hashable, CustomStringConvertible {
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

        /// The defaults.
        public static var defaults: Transport { Transport() }

        /// The defaults.
        public init() {}

        /// `reset_burst: 200, max_resets_per_second: 100, …` (for the restart-only log line).
        public var description: String {
            "reset_burst: \(resetBurst), max_resets_per_second: \(maxResetsPerSecond), reads_per_turn: \(readsPerTurn), "
                + "read_buffer_bytes: \(readBufferBytes)"
        }

        /// The transport's limits.
        public var limits: TransportLimits {
            var limits = TransportLimits()
            limits.resetBurst = resetBurst
            limits.resetsPerSecond = maxResetsPerSecond
            limits.readsPerTurn = readsPerTurn
            limits.readBufferBytes = readBufferBytes
            return limits
        }

        static let keys = ["reset_burst", "max_resets_per_second", "reads_per_turn", "read_buffer_bytes"]
    }

    /// Check `transport` against its documented ranges.
    func validateTransportLimits(file: String) throws {
        func check(_ value: Int, _ key: String, _ range: ClosedRange<Int>) throws {
            guard range.contains(value) else {
                throw ConfigurationError(
                    file: file, keyPath: "transport." + key,
                    message: "expected \(range.lowerBound) to \(range.upperBound), found \(value)")
            }
        }
        try check(transport.resetBurst, "reset_burst", 1...1_000_000)
        try check(transport.maxResetsPerSecond, "max_resets_per_second", 1...1_000_000)
        try check(transport.readsPerTurn, "reads_per_turn", 1...64)
        try check(transport.readBufferBytes, "read_buffer_bytes", 4096...1_048_576)
        guard transport.readBufferBytes.nonzeroBitCount == 1 else {
            throw ConfigurationError(
                file: file, keyPath: "transport.read_buffer_bytes",
                message: "expected a power of two from 4096 to 1048576, found \(transport.readBufferBytes)")
        }
    }
}

extension GroupdConfiguration.Transport: Codable {
    /// Decode, taking the default for every absent key and refusing unknown keys.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.configMapping(allowing: Self.keys)
        self.init()
        self.resetBurst = try c.value("reset_burst", or: resetBurst)
        self.maxResetsPerSecond = try c.value("max_resets_per_second", or: maxResetsPerSecond)
        self.readsPerTurn = try c.value("reads_per_turn", or: readsPerTurn)
        self.readBufferBytes = try c.value("read_buffer_bytes", or: readBufferBytes)
    }

    /// Encode every key.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: ConfigKey.self)
        try c.encode(resetBurst, forKey: ConfigKey("reset_burst"))
        try c.encode(maxResetsPerSecond, forKey: ConfigKey("max_resets_per_second"))
        try c.encode(readsPerTurn, forKey: ConfigKey("reads_per_turn"))
        try c.encode(readBufferBytes, forKey: ConfigKey("read_buffer_bytes"))
    }
}
