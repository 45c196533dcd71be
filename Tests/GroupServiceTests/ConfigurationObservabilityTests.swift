import Foundation
import GroupService
import Testing

@Suite("Configuration: metrics, access log and log")
struct ConfigurationObservabilityTests {
    @Test("absent: no metrics, access log off with every success sampled, info level, text format")
    func defaults() throws {
        let c = try GroupdConfiguration.parse(yaml: app)
        #expect(c.metrics == nil)
        #expect(c.accessLog == AccessLogSettings(enabled: false, sampleRate: 1))
        #expect(c.log == LogSettings(level: .info, format: .text))
    }

    @Test("every key parses; metrics.host defaults to loopback")
    func parse() throws {
        let c = try GroupdConfiguration.parse(yaml: """
            metrics: {port: 9464}
            access_log: {enabled: true, sample_rate: 0.25}
            log: {level: debug, format: json}

            """ + app)
        #expect(c.metrics == MetricsSettings(host: "127.0.0.1", port: 9464))
        #expect(c.accessLog == AccessLogSettings(enabled: true, sampleRate: 0.25))
        #expect(c.log == LogSettings(level: .debug, format: .json))
        for level in LogSettings.Level.allCases {
            #expect(try GroupdConfiguration.parse(yaml: "log: {level: \(level.rawValue)}\n" + app).log.level == level)
        }
    }

    /// A mistake: its text, the key path and a part of the message.
    struct Mistake: Sendable, CustomTestStringConvertible {
        var name: String
        var yaml: String
        var keyPath: String
        var expected: String
        var testDescription: String { name }
    }

    static let mistakes: [Mistake] = [
        Mistake(name: "metrics without port", yaml: "metrics: {host: 0.0.0.0}\n" + app,
                keyPath: "metrics.port", expected: "required key is missing"),
        Mistake(name: "metrics port out of range", yaml: "metrics: {port: 70000}\n" + app,
                keyPath: "metrics.port", expected: "from 0 to 65535"),
        Mistake(name: "metrics port of the gRPC listener", yaml: "listen: {port: 7000}\nmetrics: {port: 7000}\n" + app,
                keyPath: "metrics.port", expected: "other than listen.port"),
        Mistake(name: "metrics host empty", yaml: "metrics: {host: '', port: 9000}\n" + app,
                keyPath: "metrics.host", expected: "an address"),
        Mistake(name: "unknown metrics key", yaml: "metrics: {port: 9000, path: /m}\n" + app,
                keyPath: "metrics.path", expected: "unknown key; expected one of: host, port"),
        Mistake(name: "sample rate above 1", yaml: "access_log: {enabled: true, sample_rate: 1.5}\n" + app,
                keyPath: "access_log.sample_rate", expected: "from 0 to 1, found 1.5"),
        Mistake(name: "sample rate negative", yaml: "access_log: {sample_rate: -0.1}\n" + app,
                keyPath: "access_log.sample_rate", expected: "from 0 to 1"),
        Mistake(name: "enabled not a boolean", yaml: "access_log: {enabled: sometimes}\n" + app,
                keyPath: "access_log.enabled", expected: "true or false"),
        Mistake(name: "unknown access_log key", yaml: "access_log: {enabled: true, rate: 1}\n" + app,
                keyPath: "access_log.rate", expected: "unknown key; expected one of: enabled, sample_rate"),
        Mistake(name: "unknown level", yaml: "log: {level: verbose}\n" + app,
                keyPath: "log.level", expected: "expected one of trace, debug, info, notice, warning, error, critical, found 'verbose'"),
        Mistake(name: "unknown format", yaml: "log: {format: xml}\n" + app,
                keyPath: "log.format", expected: "expected text or json, found 'xml'"),
        Mistake(name: "unknown log key", yaml: "log: {level: info, colour: true}\n" + app,
                keyPath: "log.colour", expected: "unknown key; expected one of: level, format"),
    ]

    @Test("each mistake names the key path and what was expected", arguments: mistakes)
    func mistake(_ m: Mistake) throws {
        let error = try #require(configError(m.yaml))
        #expect(error.file == "groupd.yaml")
        #expect(error.keyPath == m.keyPath, "\(error)")
        #expect(error.message.contains(m.expected), "\(error)")
    }

    @Test("validate() checks values set in code too")
    func validateInCode() throws {
        var c = try GroupdConfiguration.parse(yaml: app)
        c.accessLog.sampleRate = .nan
        #expect(throws: ConfigurationError.self) { try c.validate() }
        c.accessLog.sampleRate = 0
        c.metrics = MetricsSettings(port: -1)
        #expect(throws: ConfigurationError.self) { try c.validate() }
    }

    @Test("the keys round trip through encoding")
    func roundTrip() throws {
        var c = try GroupdConfiguration.parse(yaml: app)
        c.metrics = MetricsSettings(host: "0.0.0.0", port: 9100)
        c.accessLog = AccessLogSettings(enabled: true, sampleRate: 0.5)
        c.log = LogSettings(level: .warning, format: .json)
        let text = String(decoding: try JSONEncoder().encode(c), as: UTF8.self)
        #expect(try GroupdConfiguration.parse(yaml: text) == c)
    }

    @Test("metrics needs a restart; access_log and log reload")
    func restartOnly() throws {
        let running = try GroupdConfiguration.parse(yaml: app)
        var next = running
        next.metrics = MetricsSettings(port: 9100)
        next.accessLog.enabled = true
        next.log.level = .debug
        let (kept, changes) = next.keepingRestartOnlyKeys(of: running)
        #expect(changes.map(\.key) == ["metrics"])
        #expect(kept.metrics == nil)
        #expect(kept.accessLog.enabled)
        #expect(kept.log.level == .debug)
    }
}
