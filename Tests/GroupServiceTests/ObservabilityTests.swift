import Foundation
import GRPCProtocol
import GroupAPI
import GroupModel
@testable import GroupService
import GroupTestSupport
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import Testing

/// Lines written to a ``LogOutput``, kept for the test.
private final class CapturedLines: Sendable {
    private let box = NIOLockedValueBox<[String]>([])
    var lines: [String] { box.withLockedValue { $0 } }
    func append(_ line: String) { box.withLockedValue { $0.append(line) } }
}

private func output(_ settings: LogSettings = .defaults) -> (LogOutput, CapturedLines) {
    let captured = CapturedLines()
    return (LogOutput(settings: settings) { captured.append($0) }, captured)
}

private func json(_ line: String) throws -> [String: Any] {
    try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
}

private func finished(
    _ path: String, _ status: GRPCStatus, metadata: Metadata = Metadata(), annotations: CallAnnotations? = nil
) -> FinishedCall {
    FinishedCall(
        path: path, status: status, durationNanoseconds: 1_234_567, peer: "127.0.0.1:5000", metadata: metadata,
        annotations: annotations)
}

@Suite("Observability: trace context")
struct TraceParentTests {
    @Test("a valid traceparent gives its trace id, parent id and flags")
    func valid() throws {
        let parsed = try #require(TraceParent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
        #expect(parsed.traceID == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(parsed.parentID == "00f067aa0ba902b7")
        #expect(parsed.flags == "01")
        // A later version may carry more fields after the flags.
        #expect(TraceParent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-extra") != nil)
    }

    @Test("malformed values are refused", arguments: [
        "", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  // uppercase
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  // zero trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  // zero parent id
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  // forbidden version
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",  // version 00 has four fields
        "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
        "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
    ])
    func invalid(_ header: String) {
        #expect(TraceParent(header) == nil)
    }
}

@Suite("Observability: log output")
struct LogOutputTests {
    @Test("text lines keep StreamLogHandler's layout; values with spaces are quoted")
    func text() throws {
        let (out, captured) = output()
        var logger = Logger(label: "groupd.test") { out.handler(label: $0) }
        logger[metadataKey: "component"] = "test"
        logger.info("hello", metadata: ["plain": "x=1", "spaced": "two words", "empty": ""])
        let line = try #require(captured.lines.first)
        #expect(line.hasSuffix(" info groupd.test : component=test empty=\"\" plain=x=1 spaced=\"two words\" [GroupServiceTests] hello\n"))
        #expect(line.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z "#, options: .regularExpression) != nil)
    }

    @Test("json lines are one object with ts, level, label, msg and the metadata")
    func jsonFormat() throws {
        let (out, captured) = output(LogSettings(level: .info, format: .json))
        let logger = Logger(label: "groupd.test") { out.handler(label: $0) }
        logger.warning("a \"quoted\"\nmessage", metadata: ["msg": "clash", "list": ["a", "b"], "n": "\(3)"])
        let line = try #require(captured.lines.first)
        #expect(line.hasSuffix("}\n") && line.filter { $0 == "\n" }.count == 1)
        let object = try json(line)
        #expect(object["level"] as? String == "warning")
        #expect(object["label"] as? String == "groupd.test")
        #expect(object["msg"] as? String == "a \"quoted\"\nmessage")
        #expect(object["_msg"] as? String == "clash")
        #expect(object["list"] as? [String] == ["a", "b"])
        #expect(object["n"] as? String == "3")
        #expect((object["ts"] as? String)?.hasSuffix("Z") == true)
    }

    @Test("apply() changes the level and the format of loggers made before")
    func reload() throws {
        let (out, captured) = output()
        let logger = Logger(label: "groupd") { out.handler(label: $0) }
        logger.debug("hidden")
        #expect(captured.lines.isEmpty)
        out.apply(LogSettings(level: .debug, format: .json))
        logger.debug("shown")
        #expect(try json(try #require(captured.lines.last))["msg"] as? String == "shown")
        out.apply(LogSettings(level: .error, format: .text))
        logger.warning("hidden too")
        #expect(captured.lines.count == 1)
        // A logger's own level still wins.
        var own = logger
        own.logLevel = .trace
        own.trace("own level")
        #expect(captured.lines.count == 2)
    }
}

@Suite("Observability: batched lines")
struct BatchedLogLinesTests {
    private func batchingOutput(flushDelay: DispatchTimeInterval = LogOutput.defaultFlushDelay) -> (LogOutput, CapturedLines) {
        let captured = CapturedLines()
        let out = LogOutput(settings: LogSettings(level: .info, format: .json), batching: true, flushDelay: flushDelay) {
            captured.append($0)
        }
        return (out, captured)
    }

    private func write(_ out: LogOutput, _ message: String, batched: Bool) {
        out.write(level: .info, label: "groupd.access", message: message, metadata: [:], source: "test", batched: batched)
    }

    private func messages(_ captured: CapturedLines) throws -> [String] {
        try captured.lines.joined().split(separator: "\n").map { try json(String($0))["msg"] as? String ?? "" }
    }

    @Test("a line written at once comes after the batched lines before it, in order")
    func order() throws {
        let (out, captured) = batchingOutput()
        write(out, "a", batched: true)
        write(out, "b", batched: true)
        write(out, "c", batched: false)
        #expect(try messages(captured) == ["a", "b", "c"])
    }

    @Test("flush() writes the batched lines waiting")
    func flush() throws {
        let (out, captured) = batchingOutput()
        write(out, "a", batched: true)
        out.flush()
        #expect(try messages(captured) == ["a"])
    }

    @Test("past the pending limit the caller writes the batch itself")
    func limit() throws {
        // The writer queue never takes a batch within the test: what is out, the caller wrote.
        let (out, captured) = batchingOutput(flushDelay: .seconds(3600))
        let message = String(repeating: "x", count: 1000)
        var written = 0
        while written * 1000 < LogOutput.pendingLimit + 1000 {
            write(out, message, batched: true)
            written += 1
        }
        // A write crossed the limit (each line is 1,000 to 1,200 bytes): the batch up to it, at
        // least pendingLimit bytes, is out without waiting for the queue.
        #expect(try messages(captured).count >= LogOutput.pendingLimit / 1200)
        #expect(try messages(captured).allSatisfy { $0 == message })
    }
}

@Suite("Observability: access log")
struct AccessLogTests {
    @Test("a line has the call's outcome, caller, peer, request id and trace context")
    func fields() throws {
        let (out, captured) = output(LogSettings(level: .critical, format: .json))
        let log = AccessLog(settings: AccessLogSettings(enabled: true, sampleRate: 1), output: out)
        let annotations = CallAnnotations()
        annotations.setCaller(app: "app-one", operatorID: "alice")
        annotations.setReason("GROUP_NOT_FOUND")
        let metadata = Metadata([
            ("x-request-id", "req-1"), ("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        ])
        log.record(finished("/m", GRPCStatus(.notFound, "no group"), metadata: metadata, annotations: annotations), method: "/m")
        let object = try json(try #require(captured.lines.first))
        #expect(object["label"] as? String == "groupd.access")
        #expect(object["level"] as? String == "notice")
        #expect(object["method"] as? String == "/m")
        #expect(object["code"] as? String == "NOT_FOUND")
        #expect(object["reason"] as? String == "GROUP_NOT_FOUND")
        #expect(object["error"] as? String == "no group")
        #expect(object["app"] as? String == "app-one")
        #expect(object["operator"] as? String == "alice")
        #expect(object["peer"] as? String == "127.0.0.1:5000")
        #expect(object["duration_ms"] as? String == "1.234")
        #expect(object["request_id"] as? String == "req-1")
        #expect(object["trace_id"] as? String == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(object["parent_id"] as? String == "00f067aa0ba902b7")
    }

    @Test("the fields come sorted by key, every optional one included (the line's order)")
    func sortedFields() throws {
        let (out, _) = output()
        let log = AccessLog(settings: AccessLogSettings(enabled: true, sampleRate: 1), output: out)
        let annotations = CallAnnotations()
        annotations.setCaller(app: "app-one", operatorID: "alice")
        annotations.setReason("GROUP_NOT_FOUND")
        for traceparent in ["00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "not a traceparent"] {
            let call = finished(
                "/x.Y/Z", GRPCStatus(.notFound, "no group"),
                metadata: Metadata([("x-request-id", "req-1"), ("traceparent", traceparent)]), annotations: annotations)
            let keys = log.fields(call, method: GroupdMetrics.unknownMethod, sequence: 1).map(\.key)
            #expect(keys == keys.sorted())
            #expect(Set(["app", "code", "duration_ms", "error", "method", "operator", "path", "peer", "reason", "request_id"]).isSubset(of: keys))
            #expect(keys.contains("trace_id") == (traceparent.count == 55))
            #expect(keys.contains("traceparent_invalid") == (traceparent.count != 55))
        }
    }

    @Test("a missing or unusable x-request-id gets a generated one; each differs")
    func generatedRequestIDs() throws {
        let (out, captured) = output(LogSettings(level: .info, format: .json))
        let log = AccessLog(settings: AccessLogSettings(enabled: true, sampleRate: 1), output: out)
        log.record(finished("/m", .ok), method: "/m")
        log.record(finished("/m", .ok, metadata: Metadata([("x-request-id", "has space")])), method: "/m")
        log.record(finished("/m", .ok, metadata: Metadata([("x-request-id", String(repeating: "x", count: 129))])), method: "/m")
        let ids = try captured.lines.map { try json($0)["request_id"] as? String }
        #expect(ids.count == 3 && Set(ids).count == 3)
        #expect(ids.allSatisfy { $0?.range(of: "^[0-9a-f]+-[0-9a-f]+$", options: .regularExpression) != nil })
    }

    @Test("sampling applies to successes only; off writes nothing; apply() changes both")
    func sampling() throws {
        let (out, captured) = output()
        let log = AccessLog(settings: AccessLogSettings(enabled: true, sampleRate: 0), output: out)
        for _ in 0..<100 { log.record(finished("/m", .ok), method: "/m") }
        log.record(finished("/m", GRPCStatus(.unauthenticated)), method: "/m")
        log.record(finished("/m", GRPCStatus(.resourceExhausted)), method: "/m")
        #expect(captured.lines.count == 2)

        log.apply(AccessLogSettings(enabled: true, sampleRate: 0.5))
        for _ in 0..<2000 { log.record(finished("/m", .ok), method: "/m") }
        let sampled = captured.lines.count - 2
        #expect((800...1200).contains(sampled), "\(sampled) of 2000 at 0.5")

        log.apply(AccessLogSettings(enabled: false, sampleRate: 1))
        log.record(finished("/m", GRPCStatus(.internal)), method: "/m")
        #expect(captured.lines.count == sampled + 2)
        #expect(!log.isEnabled)
    }
}

@Suite("Observability: metrics")
struct MetricsTests {
    @Test("calls are counted by method, code and reason; unknown paths are one label; histograms agree")
    func exposition() throws {
        let metrics = GroupdMetrics(methods: ["/a.S/One", "/a.S/Two"])
        metrics.callFinished(path: "/a.S/One", code: .ok, reason: nil, nanoseconds: 30_000)
        metrics.callFinished(path: "/a.S/One", code: .ok, reason: nil, nanoseconds: 2_000_000)
        metrics.callFinished(path: "/a.S/One", code: .notFound, reason: "GROUP_NOT_FOUND", nanoseconds: 10)
        metrics.callFinished(path: "/evil\"path", code: .unimplemented, reason: nil, nanoseconds: 10)
        metrics.rateLimitRefused(limit: "operator")
        metrics.storeCommitted(mutations: 3, duration: .milliseconds(2))
        metrics.pluginCalled(plugin: "keyword-moderation", hook: "before_create_group", duration: .microseconds(80))
        metrics.addCollector { $0.set("groupd_config_generation", to: 7) }
        let text = String(decoding: metrics.render(), as: UTF8.self)
        let lines = Set(text.split(separator: "\n").map(String.init))
        for expected in [
            #"groupd_rpc_calls_total{method="/a.S/One",code="OK",reason="",protocol="grpc"} 2"#,
            #"groupd_rpc_calls_total{method="/a.S/One",code="NOT_FOUND",reason="GROUP_NOT_FOUND",protocol="grpc"} 1"#,
            #"groupd_rpc_calls_total{method="/a.S/Two",code="OK",reason="",protocol="grpc"} 0"#,
            #"groupd_rpc_calls_total{method="unknown",code="UNIMPLEMENTED",reason="",protocol="grpc"} 1"#,
            #"groupd_rpc_duration_seconds_count{method="/a.S/One"} 3"#,
            #"groupd_rpc_duration_seconds_bucket{method="/a.S/One",le="0.00005"} 2"#,
            #"groupd_rpc_duration_seconds_bucket{method="/a.S/One",le="+Inf"} 3"#,
            #"groupd_rate_limit_refusals_total{limit="operator"} 1"#,
            #"groupd_rate_limit_refusals_total{limit="app"} 0"#,
            "groupd_store_commit_batch_size_sum 3.0",
            "groupd_store_commit_duration_seconds_count 1",
            #"groupd_policy_hook_duration_seconds_count{plugin="keyword-moderation",hook="before_create_group"} 1"#,
            "groupd_config_generation 7.0",
            "# TYPE groupd_rpc_calls_total counter",
            "# TYPE groupd_rpc_duration_seconds histogram",
            "# TYPE groupd_rpc_calls_in_flight gauge",
        ] {
            #expect(lines.contains(expected), "missing \(expected) in\n\(text)")
        }
        #expect(!text.contains("evil"))
    }

    @Test("gauges set at scrape time disappear when no longer set")
    func scrapedGauges() {
        let metrics = GroupdMetrics(methods: [])
        let present = NIOLockedValueBox(true)
        metrics.addCollector { gauges in
            if present.withLockedValue({ $0 }) {
                gauges.set("groupd_policy_circuit_breaker_state", [("app", "a"), ("plugin", "p")], to: 2)
            }
        }
        #expect(String(decoding: metrics.render(), as: UTF8.self).contains(#"groupd_policy_circuit_breaker_state{app="a",plugin="p"} 2.0"#))
        present.withLockedValue { $0 = false }
        #expect(!String(decoding: metrics.render(), as: UTF8.self).contains(#"plugin="p""#))
    }
}

@Suite("Observability: the service's side")
struct ServiceTelemetryTests {
    private static func telemetry(
        _ change: (inout GroupdConfiguration) -> Void = { _ in }
    ) -> (ServiceTelemetry, CapturedLines) {
        var configuration = TestApps.configuration()
        change(&configuration)
        let (out, captured) = output(configuration.log)
        return (ServiceTelemetry(configuration: configuration, logOutput: out), captured)
    }

    @Test("the router serves exactly methodPaths")
    func methodPaths() async throws {
        let h = try await ServiceHarness()
        #expect(h.router.paths == GroupdService.methodPaths)
    }

    @Test("handlers annotate the caller and the reason of their error")
    func annotations() async throws {
        let h = try await ServiceHarness()
        let (authorization, _) = try await h.headers(for: .admin(app: TestApps.appA))
        let handler = try #require(h.router.handler(for: Methods.dismissGroup.path))
        guard case .unary(let body) = handler else { Issue.record("DismissGroup is unary"); return }
        let annotations = CallAnnotations()
        let context = ServerContext(
            path: Methods.dismissGroup.path, metadata: Metadata([("authorization", authorization!)]),
            annotations: annotations)
        let request = Groupd_V1_DismissGroupRequest.with { $0.groupID = "missing" }
        do {
            _ = try await body(ByteBuffer(bytes: request.serializedBytes()), context)
            Issue.record("dismissing a missing group succeeded")
        } catch {
            #expect((error as? GroupError)?.reason == .groupNotFound)
        }
        #expect(annotations.values == CallAnnotations.Values(app: TestApps.appA, operatorID: nil, reason: "GROUP_NOT_FOUND"))
    }

    @Test("each scrape reports SQLite's heap")
    func memoryGauges() async throws {
        let (telemetry, _) = Self.telemetry { $0.metrics = MetricsSettings(port: 0) }
        let h = try await ServiceHarness(telemetry: telemetry)
        let metrics = try #require(telemetry.metrics)
        // A write, so that the store's writer has pages in its cache.
        try await h.create(.work, owner: "owner", as: .admin(app: TestApps.appA))
        let text = String(decoding: metrics.render(), as: UTF8.self)
        func gauge(_ name: String) -> Double? {
            text.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ")[1]) }
        }
        let sqlite = try #require(gauge("groupd_store_library_memory_bytes"), "\(text)")
        // At least the writer's one page of the group just written.
        #expect(sqlite >= 4096)
    }

    @Test("a reload puts the new log level, format and access-log settings in force")
    func reload() async throws {
        let (telemetry, _) = Self.telemetry()
        let h = try await ServiceHarness(telemetry: telemetry)
        #expect(telemetry.logOutput.level == .info && !telemetry.accessLog.isEnabled)
        var next = h.configuration
        next.log = LogSettings(level: .debug, format: .json)
        next.accessLog = AccessLogSettings(enabled: true, sampleRate: 0.1)
        _ = try await h.service.reload(to: next)
        #expect(telemetry.logOutput.level == .debug)
        #expect(telemetry.logOutput.format == .json)
        #expect(telemetry.accessLog.isEnabled && telemetry.observesCalls)
    }

    @Test("the observer counts calls, connections and streams, and logs each call")
    func observer() throws {
        let (telemetry, captured) = Self.telemetry {
            $0.metrics = MetricsSettings(port: 0)
            $0.accessLog.enabled = true
        }
        let metrics = try #require(telemetry.metrics)
        let path = GroupdService.methodPaths[0]
        telemetry.connectionOpened()
        telemetry.streamOpened()
        telemetry.callStarted(path: path)
        var text = String(decoding: metrics.render(), as: UTF8.self)
        #expect(text.contains("groupd_rpc_calls_in_flight 1.0") && text.contains("groupd_connections_open 1.0"))
        let annotations = CallAnnotations()
        annotations.setReason("IGNORED_ON_OK")
        telemetry.callFinished(finished(path, .ok, annotations: annotations))
        telemetry.streamClosed()
        telemetry.connectionClosed()
        text = String(decoding: metrics.render(), as: UTF8.self)
        #expect(text.contains(#"groupd_rpc_calls_total{method="\#(path)",code="OK",reason="",protocol="grpc"} 1"#), "\(text)")
        #expect(text.contains("groupd_rpc_calls_in_flight 0.0") && text.contains("groupd_streams_open 0.0"))
        #expect(captured.lines.count == 1 && captured.lines[0].contains("method=\(path) "))
    }
}
