import GRPCProtocol

extension GroupdConfiguration {
    /// `compression`: how responses are compressed. Requests compressed with `gzip` or
    /// `deflate` are always accepted (their inflated size bounded by `max_message_bytes`).
    ///
    /// ```yaml
    /// compression:
    ///   responses: true   # answer in the request's encoding when the client accepts it
    ///   min_bytes: 1024   # smaller response messages go uncompressed
    /// ```
    public struct Compression: Codable, Sendable, Hashable {
        /// `compression.responses`: compress response messages with the request's encoding
        /// (`grpc-encoding`) when the client's `grpc-accept-encoding` lists it. Default true;
        /// false answers every call in `identity`.
        public var responses: Bool
        /// `compression.min_bytes`: response messages smaller than this go uncompressed, as do
        /// those compression would not shrink; 0–2147483647. Default 1024.
        public var minBytes: Int

        /// The defaults: responses compressed from 1024 bytes.
        public static var defaults: Compression { Compression(responses: true, minBytes: 1024) }

        /// Create compression settings.
        public init(responses: Bool, minBytes: Int) {
            self.responses = responses
            self.minBytes = minBytes
        }

        /// Decode, taking the default for every absent key and refusing unknown keys and values.
        public init(from decoder: any Decoder) throws {
            let c = try decoder.configMapping(allowing: ["responses", "min_bytes"])
            self.responses = try c.value("responses", or: Self.defaults.responses)
            self.minBytes = try c.value("min_bytes", or: Self.defaults.minBytes)
            if !(0...Int(Int32.max)).contains(minBytes) {
                try decoder.record(["min_bytes"], "expected a value from 0 to \(Int32.max), found \(minBytes)")
                self.minBytes = Self.defaults.minBytes
            }
        }

        /// Encode both keys.
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: ConfigKey.self)
            try c.encode(self.responses, forKey: ConfigKey("responses"))
            try c.encode(self.minBytes, forKey: ConfigKey("min_bytes"))
        }

        /// The transport's form of these settings.
        public var responseCompression: ResponseCompression {
            var settings = ResponseCompression()
            settings.enabled = responses
            settings.minBytes = minBytes
            return settings
        }
    }
}
