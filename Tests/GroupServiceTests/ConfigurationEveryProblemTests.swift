import Foundation
import GroupService
import Testing

/// Loading reports every mistake of a file, one error each: unknown keys and values outside their
/// set do not stop decoding (issue 27, item 7), and each section's range checks go on after their
/// first mistake. Only a value of the wrong type (or a missing required key) stops, with the
/// mistakes found before it.
@Suite("Configuration: every problem of a file is reported")
struct ConfigurationEveryProblemTests {
    /// `keyPath: message` of every problem `yaml` has.
    static func problems(_ yaml: String) -> [String] {
        guard let error = configError(yaml) else { return [] }
        return error.all.map { "\($0.keyPath): \($0.message)" }
    }

    @Test("values outside their set are reported with the range errors that follow them")
    func enumsAndRanges() {
        let found = Self.problems("""
            durability: sometimes
            log: {level: verbose}
            store: {tls: maybe}
            max_connections: 0
            """ + "\n" + app)
        #expect(found == [
            "durability: expected full or normal, found 'sometimes'",
            "store.tls: expected disable, prefer or require, found 'maybe'",
            "log.level: expected one of trace, debug, info, notice, warning, error, critical, found 'verbose'",
            "max_connections: expected a value from 1 to 1000000, found 0",
        ])
    }

    @Test("an unknown key is one problem among the others")
    func unknownKeys() {
        let found = Self.problems("max_conections: 5\nlisten: {port: 70000, hots: x}\n" + app)
        #expect(found.count == 3)
        #expect(found[0].hasPrefix("max_conections: unknown key"))
        #expect(found[1].hasPrefix("listen.hots: unknown key"))
        #expect(found[2] == "listen.port: expected a value from 0 to 65535, found 70000")
    }

    @Test("a section's checks go on after its first mistake")
    func sections() {
        let found = Self.problems("transport: {reads_per_turn: 0, reset_burst: 0}\nkeepalive: {timeout_seconds: 0}\n" + app)
        #expect(found == [
            "keepalive.timeout_seconds: expected seconds above 0, found 0",
            "transport.reset_burst: expected 1 to 1000000, found 0",
            "transport.reads_per_turn: expected 1 to 64, found 0",
        ])
    }

    @Test("policy mistakes are each reported")
    func policy() {
        let found = Self.problems(app + """

                policy:
                  budget_ms: 0
                  failure_modes: {before_invite: sometimes}
                  plugins: [{path: a.so, hooks: [before_lunch], failure_mode: never}]
            """)
        #expect(found.count == 4)
        #expect(found.contains("apps[0].policy.budget_ms: expected milliseconds from 1 to 60000, found 0"))
        #expect(found.contains("apps[0].policy.failure_modes.before_invite: expected fail_closed or fail_open, found 'sometimes'"))
        #expect(found.contains { $0.hasPrefix("apps[0].policy.plugins[0].hooks[0]: unknown hook 'before_lunch'") })
        #expect(found.contains("apps[0].policy.plugins[0].failure_mode: expected fail_closed or fail_open, found 'never'"))
    }

    @Test("a wrong type stops decoding, after the mistakes found before it")
    func wrongType() {
        #expect(Self.problems("durability: sometimes\nauth: {clock_skew_seconds: soon}\n" + app) == [
            "durability: expected full or normal, found 'sometimes'",
            "auth.clock_skew_seconds: expected an integer",
        ])
    }

    @Test("the webhook plugin with after_event needs queue_dir", arguments: [
        ("{url: 'http://h/', secret: s}", true),
        ("'{\"url\": \"http://h/\", \"secret\": \"s\"}'", true),
        ("{url: 'http://h/', secret: s, queue_dir: /var/q}", false),
    ])
    func webhookQueueDir(config: String, refused: Bool) {
        let yaml = app + """

                policy:
                  plugins:
                    - path: /opt/groupd/plugins/libWebhookPolicy.so
                      config: \(config)
                      hooks: [before_create_group, after_event]
            """
        let found = Self.problems(yaml)
        #expect(found == (refused ? [
            "apps[0].policy.plugins[0].config: the webhook plugin needs \"queue_dir\" (the after-event journal's directory) when its hooks include after_event",
        ] : []))
        // Without after_event, no queue is needed.
        #expect(Self.problems(yaml.replacingOccurrences(of: ", after_event]", with: "]")).isEmpty)
    }

    @Test("the metrics port clashes with listen only on overlapping addresses", arguments: [
        ("0.0.0.0", "127.0.0.1", true), ("::", "10.0.0.1", true), ("127.0.0.1", "::ffff:127.0.0.1", true),
        ("localhost", "127.0.0.1", true), ("127.0.0.1", "127.0.0.2", false), ("0.0.0.0", "::1", false),
        ("::1", "::1", true), ("a.example", "A.example", true), ("a.example", "b.example", false),
    ])
    func metricsClash(listen: String, metrics: String, clash: Bool) {
        let found = Self.problems("listen: {host: '\(listen)', port: 7000}\nmetrics: {host: '\(metrics)', port: 7000}\n" + app)
        #expect(found == (clash ? ["metrics.port: expected a port other than listen.port (7000): \(metrics) and \(listen) share it"] : []))
    }
}
