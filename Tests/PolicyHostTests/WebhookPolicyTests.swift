import Foundation
import PolicyHost
import Testing

/// The webhook plugin loaded by a real host, without a receiver: its configuration errors, its
/// failures, and the after-event journal it keeps, which shows the order and the replay the host
/// gives it. (Deliveries, signatures and answers are tested live in tests/test_webhooks.py.)
@Suite("WebhookPolicy: configuration, failures, the after-event journal, replay")
struct WebhookPolicyTests {
    /// Nothing listens on port 1 of the loopback: every call is refused at once.
    static let unreachable = "http://127.0.0.1:1/hooks"

    static func plugin(_ config: String, hooks: [PolicyHook], failureMode: FailureMode? = nil) -> PluginConfiguration {
        PluginConfiguration(path: PluginLibraries.path("WebhookPolicy"), config: config, hooks: hooks, failureMode: failureMode)
    }

    static func temporaryDirectory() throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("webhook-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url.path
    }

    /// The `event_id`s in `<dir>/<app>.journal`, in file order.
    static func journaledIDs(_ directory: String, app: String = "app") -> [Int64] {
        guard let text = try? String(contentsOfFile: "\(directory)/\(app).journal", encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            let entry = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            return (entry?["event_id"] as? NSNumber)?.int64Value
        }
    }

    static func event(_ id: Int64, group: String = "g1") -> HookRequest {
        HookRequest(groupID: group, eventType: "GROUP_INFO_CHANGED", fields: [HookField("name", "n\(id)")],
                    eventID: id, groupSequence: id, eventTimeMilliseconds: 1_700_000_000_000 + id)
    }

    @Test("a bad configuration refuses the instance, saying why", arguments: [
        ("", "not JSON"),
        ("[1]", "must be a JSON object"),
        (#"{"secret": "s"}"#, "\"url\" is required"),
        (#"{"url": "ftp://example.com", "secret": "s"}"#, "\"url\" is required"),
        (#"{"url": "http://example.com"}"#, "\"secret\" is required"),
        (#"{"url": "http://example.com", "secret": ""}"#, "\"secret\" is required"),
        (#"{"url": "http://example.com", "secret": "s", "colour": 1}"#, "unknown config key \"colour\""),
        (#"{"url": "http://example.com", "secret": "s", "retry_min_ms": 0}"#, "\"retry_min_ms\" must be"),
        (#"{"url": "http://example.com", "secret": "s", "retry_min_ms": 500, "retry_max_ms": 100}"#, "\"retry_max_ms\" (100) is below"),
        (#"{"url": "http://example.com", "secret": "s", "delivery_timeout_ms": "10"}"#, "\"delivery_timeout_ms\" must be"),
        (#"{"url": "http://example.com", "secret": "s", "events": "GROUP_CREATED"}"#, "\"events\" must be an array"),
        (#"{"url": "http://example.com", "secret": "s", "queue_dir": "/proc/version/queue"}"#, "cannot create queue_dir"),
    ])
    func badConfiguration(config: String, expected: String) async throws {
        try await withHost(threads: 1) { host in
            do throws(PolicyLoadError) {
                try host.apply(["app": AppPolicyConfiguration(plugins: [Self.plugin(config, hooks: [.beforeCreateGroup])])])
                Issue.record("config \(config) was accepted")
            } catch {
                #expect(error.code == .instanceFailed)
                #expect(error.message.contains(expected), "\(error.message)")
            }
        }
    }

    @Test("an unreachable URL is a plugin error: fail closed refuses, fail open allows")
    func unreachableURL() async throws {
        try await withHost(threads: 2) { host in
            try host.apply([
                "closed": AppPolicyConfiguration(plugins: [
                    Self.plugin(#"{"url": "\#(Self.unreachable)", "secret": "s"}"#, hooks: [.beforeCreateGroup], failureMode: .failClosed),
                ], budget: .seconds(2)),
                "open": AppPolicyConfiguration(plugins: [
                    Self.plugin(#"{"url": "\#(Self.unreachable)", "secret": "s"}"#, hooks: [.beforeCreateGroup]),
                ], budget: .seconds(2)),
            ])
            let request = HookRequest(operatorID: "alice", fields: [HookField("name", "team")])
            guard case .error(let failure) = await host.run(.beforeCreateGroup, app: "closed", request: request) else {
                Issue.record("fail closed did not refuse")
                return
            }
            #expect(failure.kind == .pluginError)
            #expect(failure.plugin == "webhook")
            #expect(failure.message.contains("webhook Group.CallbackBeforeCreateGroup"), "\(failure.message)")
            #expect(await host.run(.beforeCreateGroup, app: "open", request: request) == .allow)
        }
    }

    @Test("after_event without queue_dir is a plugin error, counted")
    func afterEventWithoutQueue() async throws {
        try await withHost(threads: 1) { host in
            try host.apply(["app": AppPolicyConfiguration(plugins: [
                Self.plugin(#"{"url": "\#(Self.unreachable)", "secret": "s"}"#, hooks: [.afterEvent]),
            ])])
            host.notify(app: "app", event: Self.event(1))
            await host.afterEventsDelivered()
            #expect(host.statistics(app: "app").first?.failures == 1)
        }
    }

    @Test("after-events are journaled in the order they were notified, from many tasks' notifications")
    func journalOrder() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await withHost(threads: 4) { host in
            try host.apply(["app": AppPolicyConfiguration(plugins: [
                Self.plugin(#"{"url": "\#(Self.unreachable)", "secret": "s", "queue_dir": "\#(directory)", "retry_min_ms": 1000}"#,
                            hooks: [.afterEvent]),
            ])])
            for id in 1...300 { host.notify(app: "app", event: Self.event(Int64(id), group: "g\(id % 3)")) }
            await host.afterEventsDelivered()
            #expect(Self.journaledIDs(directory).count == 300)
            #expect(Self.journaledIDs(directory) == Array(1...300))
        }
    }

    @Test("at start-up the host replays what the journal misses, before new events, without repeats")
    func replay() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let config = #"{"url": "\#(Self.unreachable)", "secret": "s", "queue_dir": "\#(directory)", "retry_min_ms": 1000}"#
        // A first life: events 1...10 journaled.
        try await withHost(threads: 2) { host in
            try host.apply(["app": AppPolicyConfiguration(plugins: [Self.plugin(config, hooks: [.afterEvent])])])
            #expect(host.beginAfterEventReplays().isEmpty)  // an empty journal starts from now
            for id in 1...10 { host.notify(app: "app", event: Self.event(Int64(id))) }
            await host.afterEventsDelivered()
            #expect(Self.journaledIDs(directory).count == 10)
        }
        // The next life: the log has 11...15 that never reached the plugin (a crash in between).
        try await withHost(threads: 2) { host in
            try host.apply(["app": AppPolicyConfiguration(plugins: [Self.plugin(config, hooks: [.afterEvent])])])
            let replays = host.beginAfterEventReplays()
            #expect(replays.map(\.app) == ["app"])
            #expect(replays.first?.position == 10)
            // New events committed while the replay reads the log: 15 (also in the log) and 16.
            host.notify(app: "app", event: Self.event(15))
            host.notify(app: "app", event: Self.event(16))
            for id in 9...15 { replays[0].offer(Self.event(Int64(id))) }
            replays[0].finish()
            await host.afterEventsDelivered()
            #expect(Self.journaledIDs(directory).count == 16)
            #expect(Self.journaledIDs(directory) == Array(1...16))
        }
    }
}
