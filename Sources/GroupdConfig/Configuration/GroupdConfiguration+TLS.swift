public import GRPCServer
import NIOCore

/// `tls` and `keepalive`: how connections are secured, kept alive, aged and policed.
///
/// ```yaml
/// tls:
///   cert_file: server.pem        # the server's certificate chain, leaf first
///   key_file: server.key         # its private key
///   client_ca_file: clients.pem  # optional: require client certificates signed by these CAs
/// keepalive:
///   time_seconds: 7200
///   timeout_seconds: 20
///   max_connection_idle_seconds: 0
///   max_connection_age_seconds: 0
///   max_connection_age_grace_seconds: 0
///   min_ping_interval_seconds: 300
///   permit_without_stream: false
/// ```
extension GroupdConfiguration {
    /// `tls`: serve gRPC over TLS (ALPN `h2`) instead of plaintext h2c.
    public struct TLS: Sendable, Hashable {
        /// `tls.cert_file`: the server's certificate chain in PEM, leaf first. Required. A relative
        /// path is relative to the configuration file's directory. Read again on every SIGHUP.
        public var certFile: String
        /// `tls.key_file`: the certificate's private key in PEM (unencrypted). Required.
        public var keyFile: String
        /// `tls.client_ca_file`: CA certificates in PEM; when set, every client must present a
        /// certificate signed by one of them (mutual TLS). Default: none, no client certificate.
        public var clientCAFile: String?
        /// `tls.handshake_timeout_seconds`: a connection whose TLS handshake has not completed
        /// this long after it was accepted is closed; above 0, at most 3600. Default 120.
        public var handshakeTimeoutSeconds: Double

        /// The default handshake timeout (grpc-go's connection timeout).
        public static let defaultHandshakeTimeoutSeconds: Double = 120

        /// Name the files.
        public init(certFile: String, keyFile: String, clientCAFile: String? = nil, handshakeTimeoutSeconds: Double = Self.defaultHandshakeTimeoutSeconds) {
            self.certFile = certFile
            self.keyFile = keyFile
            self.clientCAFile = clientCAFile
            self.handshakeTimeoutSeconds = handshakeTimeoutSeconds
        }

        /// The files, relative paths resolved against `directory` (the configuration file's;
        /// `nil`: the working directory).
        public func files(relativeTo directory: String?) -> TLSFiles {
            func resolve(_ path: String) -> String {
                guard !path.hasPrefix("/"), let directory, !directory.isEmpty else { return path }
                return directory.hasSuffix("/") ? directory + path : directory + "/" + path
            }
            return TLSFiles(certificateChain: resolve(certFile), privateKey: resolve(keyFile), clientCA: clientCAFile.map(resolve))
        }
    }

    /// `keepalive`: server PINGs, connection idle and age limits, and the policing of client
    /// PINGs, as grpc-go's `keepalive.ServerParameters` and `EnforcementPolicy` (same defaults).
    /// Every duration is in seconds, fractions allowed, at most ``maximumSeconds``.
    public struct Keepalive: Sendable, Hashable, CustomStringConvertible {
        /// `keepalive.time_seconds`: after this long without anything from the client, the server
        /// sends a PING; 0 = never. Default 7200.
        public var timeSeconds: Double = 7200
        /// `keepalive.timeout_seconds`: the connection is closed when nothing (the PING's ACK or
        /// any frame) arrives this long after the server's PING; above 0. Default 20.
        public var timeoutSeconds: Double = 20
        /// `keepalive.max_connection_idle_seconds`: a connection without an open stream for this
        /// long gets a graceful GOAWAY; 0 = never. Default 0.
        public var maxConnectionIdleSeconds: Double = 0
        /// `keepalive.max_connection_age_seconds`: a connection open this long (±10 % jitter) gets
        /// a graceful GOAWAY; 0 = never. Default 0.
        public var maxConnectionAgeSeconds: Double = 0
        /// `keepalive.max_connection_age_grace_seconds`: after the age GOAWAY, calls in flight may
        /// run this long before the connection is closed; 0 = up to `drain_timeout_seconds`. Default 0.
        public var maxConnectionAgeGraceSeconds: Double = 0
        /// `keepalive.min_ping_interval_seconds`: client PINGs closer together than this are
        /// strikes; the third strike in a row gets GOAWAY `ENHANCE_YOUR_CALM` (`too_many_pings`)
        /// and the connection closes. Default 300.
        public var minPingIntervalSeconds: Double = 300
        /// `keepalive.permit_without_stream`: whether client PINGs are welcome while no stream is
        /// open (when false, such a PING less than 2 hours after the previous is a strike).
        /// Default false.
        public var permitWithoutStream: Bool = false

        /// grpc-go's defaults.
        public static var defaults: Keepalive { Keepalive() }

        /// The largest duration accepted: one year.
        public static let maximumSeconds: Double = 31_536_000

        /// The defaults.
        public init() {}

        /// `time_seconds: 7200, timeout_seconds: 20, …` (for the restart-only log line).
        public var description: String {
            (Self.durationKeys.map { "\($0.key): \(self[keyPath: $0.path])" } + ["permit_without_stream: \(permitWithoutStream)"])
                .joined(separator: ", ")
        }

        /// The transport's settings.
        public var settings: KeepaliveSettings {
            func amount(_ seconds: Double) -> TimeAmount { .nanoseconds(Int64((seconds * 1e9).rounded())) }
            func optional(_ seconds: Double) -> TimeAmount? { seconds == 0 ? nil : amount(seconds) }
            var settings = KeepaliveSettings()
            settings.time = optional(timeSeconds)
            settings.timeout = amount(timeoutSeconds)
            settings.maxConnectionIdle = optional(maxConnectionIdleSeconds)
            settings.maxConnectionAge = optional(maxConnectionAgeSeconds)
            settings.maxConnectionAgeGrace = optional(maxConnectionAgeGraceSeconds)
            settings.minPingInterval = amount(minPingIntervalSeconds)
            settings.permitWithoutStream = permitWithoutStream
            return settings
        }

        /// The YAML keys of the durations and the property each sets.
        static var durationKeys: [(key: String, path: WritableKeyPath<Keepalive, Double>)] {
            [
                ("time_seconds", \.timeSeconds),
                ("timeout_seconds", \.timeoutSeconds),
                ("max_connection_idle_seconds", \.maxConnectionIdleSeconds),
                ("max_connection_age_seconds", \.maxConnectionAgeSeconds),
                ("max_connection_age_grace_seconds", \.maxConnectionAgeGraceSeconds),
                ("min_ping_interval_seconds", \.minPingIntervalSeconds),
            ]
        }
    }

    /// The TLS files of this configuration, relative paths resolved against `directory`.
    public func tlsFiles(relativeTo directory: String?) -> TLSFiles? {
        tls?.files(relativeTo: directory)
    }

    /// Check `tls` and `keepalive` against their documented ranges.
    func validateTransport(_ problems: inout ConfigurationProblems) {
        if let tls {
            let paths: [(String, String?)] = [("cert_file", tls.certFile), ("key_file", tls.keyFile), ("client_ca_file", tls.clientCAFile)]
            for (key, value) in paths {
                if let value, value.isEmpty { problems.add("tls." + key, "expected a file path, found an empty string") }
            }
            let timeout = tls.handshakeTimeoutSeconds
            if !(timeout.isFinite && timeout > 0 && timeout <= 3600) {
                problems.add("tls.handshake_timeout_seconds", "expected seconds above 0 and at most 3600, found \(timeout)")
            }
        }
        let maximum = Keepalive.maximumSeconds
        for (key, path) in Keepalive.durationKeys {
            let value = keepalive[keyPath: path]
            if !(value.isFinite && (0...maximum).contains(value)) {
                problems.add("keepalive." + key, "expected seconds from 0 to \(Int(maximum)), found \(value)")
            }
        }
        if keepalive.timeoutSeconds == 0 {
            problems.add("keepalive.timeout_seconds", "expected seconds above 0, found 0")
        }
    }
}

// MARK: Decoding and encoding

extension GroupdConfiguration.TLS: Codable {
    private static let keys = ["cert_file", "key_file", "client_ca_file", "handshake_timeout_seconds"]

    /// Decode; `cert_file` and `key_file` are required, unknown keys refused.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.configMapping(allowing: Self.keys)
        self.certFile = try c.required("cert_file")
        self.keyFile = try c.required("key_file")
        self.clientCAFile = try c.decodeIfPresent(String.self, forKey: ConfigKey("client_ca_file"))
        self.handshakeTimeoutSeconds = try c.value("handshake_timeout_seconds", or: Self.defaultHandshakeTimeoutSeconds)
    }

    /// Encode every key.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: ConfigKey.self)
        try c.encode(certFile, forKey: ConfigKey("cert_file"))
        try c.encode(keyFile, forKey: ConfigKey("key_file"))
        try c.encodeIfPresent(clientCAFile, forKey: ConfigKey("client_ca_file"))
        try c.encode(handshakeTimeoutSeconds, forKey: ConfigKey("handshake_timeout_seconds"))
    }
}

extension GroupdConfiguration.Keepalive: Codable {
    /// Decode, taking the default for every absent key and refusing unknown keys.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.configMapping(allowing: Self.durationKeys.map(\.key) + ["permit_without_stream"])
        self.init()
        for (key, path) in Self.durationKeys {
            self[keyPath: path] = try c.value(key, or: self[keyPath: path])
        }
        self.permitWithoutStream = try c.value("permit_without_stream", or: permitWithoutStream)
    }

    /// Encode every key.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: ConfigKey.self)
        for (key, path) in Self.durationKeys {
            try c.encode(self[keyPath: path], forKey: ConfigKey(key))
        }
        try c.encode(permitWithoutStream, forKey: ConfigKey("permit_without_stream"))
    }
}
