import Foundation
import GroupService
import Testing

@Suite("Configuration: tracing")
struct ConfigurationTracingTests {
    @Test("absent: no tracing")
    func absent() throws {
        #expect(try GroupdConfiguration.parse(yaml: app).tracing == nil)
    }

    @Test("tracing parses; every key but otlp_endpoint has a default", arguments: [
        ("tracing: {otlp_endpoint: 'http://127.0.0.1:4317'}", TracingSettings(otlpEndpoint: "http://127.0.0.1:4317")),
        (
            """
            tracing: {otlp_endpoint: 'https://collector:4317/', sample_ratio: 0.01, service_name: groupd-eu,
                      export_interval_ms: 250, max_queue_size: 4096, max_batch_size: 256}
            """,
            TracingSettings(
                otlpEndpoint: "https://collector:4317/", sampleRatio: 0.01, serviceName: "groupd-eu",
                exportIntervalMilliseconds: 250, maxQueueSize: 4096, maxBatchSize: 256)
        ),
    ])
    func parse(_ yaml: String, _ expected: TracingSettings) throws {
        let tracing = try #require(try GroupdConfiguration.parse(yaml: yaml + "\n" + app).tracing)
        #expect(tracing == expected)
    }

    static let mistakes: [ConfigurationMistake] = [
        ConfigurationMistake(name: "tracing without endpoint", yaml: "tracing: {sample_ratio: 1}\n" + app,
                keyPath: "tracing.otlp_endpoint", expected: "required key is missing"),
        ConfigurationMistake(name: "endpoint without scheme", yaml: "tracing: {otlp_endpoint: '127.0.0.1:4317'}\n" + app,
                keyPath: "tracing.otlp_endpoint", expected: "expected http://host:port or https://host:port"),
        ConfigurationMistake(name: "endpoint without port", yaml: "tracing: {otlp_endpoint: 'http://collector'}\n" + app,
                keyPath: "tracing.otlp_endpoint", expected: "expected http://host:port"),
        ConfigurationMistake(name: "endpoint with a path", yaml: "tracing: {otlp_endpoint: 'http://collector:4317/v1/traces'}\n" + app,
                keyPath: "tracing.otlp_endpoint", expected: "expected http://host:port"),
        ConfigurationMistake(name: "ratio above 1", yaml: "tracing: {otlp_endpoint: 'http://c:4317', sample_ratio: 1.5}\n" + app,
                keyPath: "tracing.sample_ratio", expected: "a share from 0 to 1"),
        ConfigurationMistake(name: "ratio below 0", yaml: "tracing: {otlp_endpoint: 'http://c:4317', sample_ratio: -0.1}\n" + app,
                keyPath: "tracing.sample_ratio", expected: "a share from 0 to 1"),
        ConfigurationMistake(name: "empty service name", yaml: "tracing: {otlp_endpoint: 'http://c:4317', service_name: ''}\n" + app,
                keyPath: "tracing.service_name", expected: "a name"),
        ConfigurationMistake(name: "zero interval", yaml: "tracing: {otlp_endpoint: 'http://c:4317', export_interval_ms: 0}\n" + app,
                keyPath: "tracing.export_interval_ms", expected: "from 1 to 3600000"),
        ConfigurationMistake(name: "zero queue", yaml: "tracing: {otlp_endpoint: 'http://c:4317', max_queue_size: 0}\n" + app,
                keyPath: "tracing.max_queue_size", expected: "from 1 to 1000000"),
        ConfigurationMistake(name: "batch larger than the queue", yaml: "tracing: {otlp_endpoint: 'http://c:4317', max_queue_size: 10, max_batch_size: 11}\n" + app,
                keyPath: "tracing.max_batch_size", expected: "from 1 to 10"),
        ConfigurationMistake(name: "unknown tracing key", yaml: "tracing: {otlp_endpoint: 'http://c:4317', exporter: zipkin}\n" + app,
                keyPath: "tracing.exporter", expected: "unknown key; expected one of: otlp_endpoint, sample_ratio"),
    ]

    @Test("each mistake names the key path and what was expected", arguments: mistakes)
    func mistake(_ m: ConfigurationMistake) throws {
        try m.check()
    }

    @Test("the key round trips through encoding")
    func roundTrip() throws {
        var c = try GroupdConfiguration.parse(yaml: app)
        c.tracing = TracingSettings(otlpEndpoint: "http://[::1]:4317", sampleRatio: 0.5)
        let text = String(decoding: try JSONEncoder().encode(c), as: UTF8.self)
        #expect(try GroupdConfiguration.parse(yaml: text) == c)
    }

    @Test("tracing needs a restart")
    func restartOnly() throws {
        let running = try GroupdConfiguration.parse(yaml: app)
        var next = running
        next.tracing = TracingSettings(otlpEndpoint: "http://127.0.0.1:4317")
        let (kept, changes) = next.keepingRestartOnlyKeys(of: running)
        #expect(changes.map(\.key) == ["tracing"])
        #expect(kept.tracing == nil)
        #expect(GroupdConfiguration.restartOnlyKeys.contains("tracing"))
    }
}
