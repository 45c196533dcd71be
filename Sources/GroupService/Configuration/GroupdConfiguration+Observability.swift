/// `metrics`: the Prometheus endpoint. Absent: no metrics are kept and nothing listens.
///
/// ```yaml
/// metrics:
///   host: 127.0.0.1   # default
///   port: 9090        # required; 0 picks a free port
/// ```
public struct MetricsSettings: Sendable, Hashable {
    /// `metrics.host`: the address the HTTP endpoint binds. Default `127.0.0.1`.
    public var host: String
    /// `metrics.port`: its TCP port (required; `0` picks a free one, logged at start-up).
    public var port: Int

    /// Create endpoint settings.
    public init(host: String = "127.0.0.1", port: Int) {
        self.host = host
        self.port = port
    }
}

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

extension MetricsSettings: Codable {
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
        let level: String = try c.value("level", or: Self.defaults.level.rawValue)
        guard let parsedLevel = Level(rawValue: level) else {
            throw ConfigurationFault(
                path: c.codingPath + [ConfigKey("level")],
                message: "expected one of \(Level.allCases.map(\.rawValue).joined(separator: ", ")), found '\(level)'")
        }
        let format: String = try c.value("format", or: Self.defaults.format.rawValue)
        guard let parsedFormat = Format(rawValue: format) else {
            throw ConfigurationFault(
                path: c.codingPath + [ConfigKey("format")], message: "expected text or json, found '\(format)'")
        }
        self.init(level: parsedLevel, format: parsedFormat)
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
    static let observabilityKeys = ["metrics", "access_log", "log"]

    /// Decodes `metrics`, `access_log` and `log` from the top-level mapping.
    mutating func decodeObservability(_ c: KeyedDecodingContainer<ConfigKey>) throws {
        self.metrics = try c.decodeIfPresent(MetricsSettings.self, forKey: ConfigKey("metrics"))
        self.accessLog = try c.value("access_log", or: .defaults)
        self.log = try c.value("log", or: .defaults)
    }

    /// Encodes `metrics` (when set), `access_log` and `log` into the top-level mapping.
    func encodeObservability(_ c: inout KeyedEncodingContainer<ConfigKey>) throws {
        try c.encodeIfPresent(metrics, forKey: ConfigKey("metrics"))
        try c.encode(accessLog, forKey: ConfigKey("access_log"))
        try c.encode(log, forKey: ConfigKey("log"))
    }

    /// Checks `metrics` and `access_log` against their documented ranges.
    /// - Throws: ``ConfigurationError`` naming `file` and the key path.
    func validateObservability(file: String) throws {
        if let metrics {
            guard !metrics.host.isEmpty else {
                throw ConfigurationError(file: file, keyPath: "metrics.host", message: "expected an address, found an empty string")
            }
            guard (0...65535).contains(metrics.port) else {
                throw ConfigurationError(
                    file: file, keyPath: "metrics.port", message: "expected a value from 0 to 65535, found \(metrics.port)")
            }
            if metrics.port != 0, metrics.port == listen.port, metrics.host == listen.host {
                throw ConfigurationError(
                    file: file, keyPath: "metrics.port",
                    message: "expected a port other than listen.port (\(listen.port)) on the same host")
            }
        }
        guard accessLog.sampleRate.isFinite, (0...1).contains(accessLog.sampleRate) else {
            throw ConfigurationError(
                file: file, keyPath: "access_log.sample_rate",
                message: "expected a share from 0 to 1, found \(accessLog.sampleRate)")
        }
    }
}
