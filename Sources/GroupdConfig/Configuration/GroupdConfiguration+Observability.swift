#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An HTTP listener of its own beside the gRPC one: `metrics` (``MetricsSettings``) and `console`
/// (``ConsoleSettings``). Absent from the file: nothing listens.
///
/// ```yaml
/// metrics:
///   host: 127.0.0.1   # default
///   port: 9090        # required; 0 picks a free port
/// ```
public struct EndpointSettings: Sendable, Hashable {
    /// `<key>.host`: the address the listener binds. Default `127.0.0.1`.
    public var host: String
    /// `<key>.port`: its TCP port (required; `0` picks a free one, logged at start-up).
    public var port: Int

    /// Create endpoint settings.
    /// - Parameters:
    ///   - host: The address to bind.
    ///   - port: The TCP port.
    public init(host: String = "127.0.0.1", port: Int) {
        self.host = host
        self.port = port
    }
}

/// `metrics`: the Prometheus endpoint. Absent: no metrics are kept and nothing listens.
public typealias MetricsSettings = EndpointSettings

/// `access_log`: one log line per call.
///
/// ```yaml
/// access_log:
///   enabled: true     # default false
///   sample_rate: 0.1  # successful calls logged (0 to 1); failed calls are always logged
/// ```
public struct AccessLogSettings: Sendable, Hashable {
    /// `access_log.enabled`: whether calls are logged. Default `false`.
    public var enabled: Bool
    /// `access_log.sample_rate`: the share of successful (`OK`) calls logged, 0 to 1. Failed calls
    /// (a bad token, a rate limit, a policy rejection, any other error) are always logged.
    /// Default `1`.
    public var sampleRate: Double

    /// Off.
    public static var defaults: AccessLogSettings { AccessLogSettings(enabled: false, sampleRate: 1) }

    /// Create access-log settings.
    public init(enabled: Bool, sampleRate: Double) {
        self.enabled = enabled
        self.sampleRate = sampleRate
    }
}

/// `log`: what groupd's log says and how.
///
/// ```yaml
/// log:
///   level: info       # trace, debug, info, notice, warning, error, critical
///   format: text      # text or json (one object per line)
/// ```
public struct LogSettings: Sendable, Hashable {
    /// The lowest level written, in increasing severity.
    public enum Level: String, Sendable, Hashable, CaseIterable {
        case trace, debug, info, notice, warning, error, critical
    }

    /// How each line is written.
    public enum Format: String, Sendable, Hashable, CaseIterable {
        /// `2026-01-01T00:00:00.000Z info groupd : key=value [module] message`.
        case text
        /// One JSON object per line: `ts`, `level`, `label`, `msg` and the metadata as fields.
        case json
    }

    /// `log.level`: the lowest level written. Default `info`.
    public var level: Level
    /// `log.format`: `text` (default) or `json`.
    public var format: Format

    /// `info`, `text`.
    public static var defaults: LogSettings { LogSettings(level: .info, format: .text) }

    /// Create log settings.
    public init(level: Level, format: Format) {
        self.level = level
        self.format = format
    }
}

// MARK: Decoding and encoding

extension EndpointSettings: Codable {
    /// Decode; `port` is required, unknown keys refused.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.configMapping(allowing: ["host", "port"])
        self.init(host: try c.value("host", or: "127.0.0.1"), port: try c.required("port"))
    }

    /// Encode both keys.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: ConfigKey.self)
        try c.encode(host, forKey: ConfigKey("host"))
        try c.encode(port, forKey: ConfigKey("port"))
    }
}

extension AccessLogSettings: Codable {
    /// Decode, taking the default for every absent key and refusing unknown keys.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.configMapping(allowing: ["enabled", "sample_rate"])
        self.init(
            enabled: try c.value("enabled", or: Self.defaults.enabled),
            sampleRate: try c.value("sample_rate", or: Self.defaults.sampleRate))
    }

    /// Encode both keys.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: ConfigKey.self)
        try c.encode(enabled, forKey: ConfigKey("enabled"))
        try c.encode(sampleRate, forKey: ConfigKey("sample_rate"))
    }
}

extension LogSettings: Codable {
    /// Decode, taking the default for every absent key and refusing unknown keys and values.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.configMapping(allowing: ["level", "format"])
        let level = try decoder.member(
            "level", c.value("level", or: Self.defaults.level.rawValue),
            expected: "one of \(Level.allCases.map(\.rawValue).joined(separator: ", "))",
            fallback: Self.defaults.level, Level.init(rawValue:))
        let format = try decoder.member(
            "format", c.value("format", or: Self.defaults.format.rawValue), expected: "text or json",
            fallback: Self.defaults.format, Format.init(rawValue:))
        self.init(level: level, format: format)
    }

    /// Encode both keys.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: ConfigKey.self)
        try c.encode(level.rawValue, forKey: ConfigKey("level"))
        try c.encode(format.rawValue, forKey: ConfigKey("format"))
    }
}

extension GroupdConfiguration {
    /// The observability keys' names in the configuration's top-level mapping.
    static let observabilityKeys = ["metrics", "access_log", "log", "tracing"]

    /// Decodes `metrics`, `access_log`, `log` and `tracing` from the top-level mapping.
    mutating func decodeObservability(_ c: KeyedDecodingContainer<ConfigKey>) throws {
        self.metrics = try c.decodeIfPresent(MetricsSettings.self, forKey: ConfigKey("metrics"))
        self.accessLog = try c.value("access_log", or: .defaults)
        self.log = try c.value("log", or: .defaults)
        self.tracing = try c.decodeIfPresent(TracingSettings.self, forKey: ConfigKey("tracing"))
    }

    /// Encodes `metrics` and `tracing` (when set), `access_log` and `log` into the top-level mapping.
    func encodeObservability(_ c: inout KeyedEncodingContainer<ConfigKey>) throws {
        try c.encodeIfPresent(metrics, forKey: ConfigKey("metrics"))
        try c.encode(accessLog, forKey: ConfigKey("access_log"))
        try c.encode(log, forKey: ConfigKey("log"))
        try c.encodeIfPresent(tracing, forKey: ConfigKey("tracing"))
    }

    /// Checks `metrics` and `access_log` against their documented ranges. The metrics endpoint
    /// may not take the gRPC listener's port on an address the listener covers: the same address,
    /// or either one a wildcard (`0.0.0.0` covers every IPv4 address, `::` every address).
    func validateObservability(_ problems: inout ConfigurationProblems) {
        if let metrics {
            validateEndpoint("metrics", host: metrics.host, port: metrics.port, &problems)
        }
        if !(accessLog.sampleRate.isFinite && (0...1).contains(accessLog.sampleRate)) {
            problems.add("access_log.sample_rate", "expected a share from 0 to 1, found \(accessLog.sampleRate)")
        }
    }

    /// Whether listeners on hosts `a` and `b` (and one port) would both take the same address:
    /// equal addresses (`127.0.0.1`, `::ffff:127.0.0.1`; `localhost` counts as loopback), or a
    /// wildcard on either side: `0.0.0.0` with any IPv4 address, `::` with any address (it
    /// accepts IPv4 too). Other host names are compared by name.
    static func addressesOverlap(_ a: String, _ b: String) -> Bool {
        let x = ListenAddress(a), y = ListenAddress(b)
        switch (x, y) {
        case (.any6, _), (_, .any6): return true
        case (.any4, .any4), (.any4, .v4), (.v4, .any4): return true
        case (.any4, .name), (.name, .any4): return true  // a name may resolve to an IPv4 address
        case (.v4(let p), .v4(let q)): return p == q
        case (.v6(let p), .v6(let q)): return p == q
        case (.name(let p), .name(let q)): return p == q
        case (.v4(let p), .name("localhost")), (.name("localhost"), .v4(let p)): return p == ListenAddress.loopback4
        case (.v6(let p), .name("localhost")), (.name("localhost"), .v6(let p)): return p == ListenAddress.loopback6
        default: return false
        }
    }
}

/// A listener host, as the clash check compares them.
private enum ListenAddress: Equatable {
    case any4, any6
    case v4([UInt8]), v6([UInt8])
    case name(String)

    static let loopback4: [UInt8] = [127, 0, 0, 1]
    static let loopback6: [UInt8] = Array(repeating: 0, count: 15) + [1]

    init(_ host: String) {
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, host, &v4) == 1 {
            let bytes = withUnsafeBytes(of: &v4) { Array($0) }
            self = bytes == [0, 0, 0, 0] ? .any4 : .v4(bytes)
        } else if inet_pton(AF_INET6, host, &v6) == 1 {
            let bytes = withUnsafeBytes(of: &v6) { Array($0) }
            if bytes.allSatisfy({ $0 == 0 }) {
                self = .any6
            } else if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xff && bytes[11] == 0xff {
                // IPv4-mapped (::ffff:a.b.c.d): the IPv4 address.
                let mapped = Array(bytes[12..<16])
                self = mapped == [0, 0, 0, 0] ? .any4 : .v4(mapped)
            } else {
                self = .v6(bytes)
            }
        } else {
            self = .name(host.lowercased())
        }
    }
}
