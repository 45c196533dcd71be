import GRPCProtocol
import GroupAPI
import GroupModel
@testable import GroupService
import GroupStore
import GroupTestSupport
import InMemoryTracing
import NIOCore
import Testing
import Tracing

/// With `tracing` configured, every call runs in a server span named and attributed as the
/// OpenTelemetry RPC conventions say, ended with the outcome the observer reports, and a
/// mutation's commit is a child span with its batch's size. Without `tracing`, no span is made.
/// (The OTLP export and `traceparent` are tested against a real collector: tests/test_tracing.py.)
@Suite("Call tracing: server spans and commit spans")
struct CallTracingTests {
    static func tracedConfiguration() -> GroupdConfiguration {
        var configuration = TestApps.configuration()
        configuration.tracing = TracingSettings(otlpEndpoint: "http://127.0.0.1:4317")
        return configuration
    }

    /// Calls `path` through the router's handler as the transport would.
    static func call(
        _ h: ServiceHarness, _ path: String, _ request: [UInt8], as identity: TestIdentity,
        callProtocol: CallProtocol = .grpc, traceparent: String? = nil
    ) async throws -> GRPCStatus {
        let (authorization, _) = try await h.headers(for: identity)
        var metadata = Metadata()
        if let authorization { metadata.append(name: "authorization", value: authorization) }
        if let traceparent { metadata.append(name: "traceparent", value: traceparent) }
        let context = ServerContext(path: path, metadata: metadata, callProtocol: callProtocol)
        guard case .unary(let body) = h.router.handler(for: path) else {
            Issue.record("\(path) is not a unary handler")
            return GRPCStatus(.internal)
        }
        do {
            _ = try await body(ByteBuffer(bytes: request), context)
            return GRPCStatus(.ok)
        } catch {
            return GRPCStatus(for: error)
        }
    }

    @Test("a CreateGroup is a server span with the RPC attributes, and its commit a child span with the batch size")
    func serverAndCommitSpans() async throws {
        let tracer = InMemoryTracer()
        let h = try await ServiceHarness(configuration: Self.tracedConfiguration(), tracer: tracer)
        let path = Groupd_V1_GroupService.Method.createGroup.path
        let request = try Groupd_V1_CreateGroupRequest.with {
            $0.groupID = "traced"
            $0.type = .public
            $0.ownerUserID = "alice"
            $0.profile = .with { $0.name = "traced" }
        }.serializedBytes()
        let status = try await Self.call(h, path, request, as: .admin)
        #expect(status.code == .ok)

        let spans = tracer.finishedSpans
        let server = try #require(spans.first { $0.operationName == "groupd.v1.GroupService/CreateGroup" })
        #expect(server.kind == .server)
        #expect(attribute(server, "rpc.system") == .string("grpc"))
        #expect(attribute(server, "rpc.service") == .string("groupd.v1.GroupService"))
        #expect(attribute(server, "rpc.method") == .string("CreateGroup"))
        #expect(attribute(server, "rpc.grpc.status_code") == .int64(0))
        #expect(attribute(server, "groupd.app") == .string(TestApps.appA))
        #expect(server.status == nil)

        let commit = try #require(spans.first { $0.operationName == "store.commit" })
        #expect(commit.parentSpanID == server.spanID)
        #expect(commit.traceID == server.traceID)
        #expect(commit.kind == .internal)
        #expect(attribute(commit, "groupd.store.batch_size") == .int64(1))
        #expect(attribute(commit, "groupd.store.mutation") == .string("createGroup"))
        #expect(attribute(commit, "groupd.store.outcome") == .string("committed"))
    }

    @Test("a refused call's span carries its status code and reason and is not an error; its failed write's span is; Connect is connect_rpc")
    func refusedCall() async throws {
        let tracer = InMemoryTracer()
        let h = try await ServiceHarness(configuration: Self.tracedConfiguration(), tracer: tracer)
        let path = Groupd_V1_GroupService.Method.dismissGroup.path
        let request = try Groupd_V1_DismissGroupRequest.with { $0.groupID = "missing" }.serializedBytes()
        let status = try await Self.call(h, path, request, as: .admin, callProtocol: .connect)
        #expect(status.code == .notFound)
        let span = try #require(tracer.finishedSpans.first { $0.operationName == "groupd.v1.GroupService/DismissGroup" })
        #expect(attribute(span, "rpc.system") == .string("connect_rpc"))
        #expect(attribute(span, "rpc.grpc.status_code") == .int64(Int64(GRPCStatus.Code.notFound.rawValue)))
        #expect(attribute(span, "groupd.reason") == .string("GROUP_NOT_FOUND"))
        #expect(span.status == nil)
        // The dismissal's write failed in its transaction (no such group): its commit span says so.
        let commit = try #require(tracer.finishedSpans.first { $0.operationName == "store.commit" })
        #expect(commit.parentSpanID == span.spanID)
        #expect(commit.status?.code == .error)
    }

    @Test("the codes of server-side failures are errors; the client's refusals are not")
    func serverFailureIsAnError() {
        for code in [GRPCStatus.Code.unknown, .deadlineExceeded, .unimplemented, .internal, .unavailable, .dataLoss] {
            #expect(CallTracing.isServerError(code), "\(code)")
        }
        for code in [GRPCStatus.Code.ok, .cancelled, .invalidArgument, .notFound, .alreadyExists, .permissionDenied,
                     .resourceExhausted, .failedPrecondition, .aborted, .outOfRange, .unauthenticated] {
            #expect(!CallTracing.isServerError(code), "\(code)")
        }
    }

    @Test("without tracing configured the tracer makes no span")
    func untraced() async throws {
        let tracer = InMemoryTracer()
        let h = try await ServiceHarness(tracer: tracer)
        let request = try Groupd_V1_CreateGroupRequest.with {
            $0.type = .public
            $0.ownerUserID = "alice"
            $0.profile = .with { $0.name = "plain" }
        }.serializedBytes()
        let status = try await Self.call(h, Groupd_V1_GroupService.Method.createGroup.path, request, as: .admin)
        #expect(status.code == .ok)
        #expect(tracer.finishedSpans.isEmpty && tracer.activeSpans.isEmpty)
    }

    @Test("the ratio keeps its share of calls, spread evenly; 0 keeps none, 1 every one")
    func ratio() {
        func kept(_ ratio: Double, of calls: Int) -> Int {
            let sampler = RatioSampler(ratio: ratio)
            return (0..<calls).count { _ in sampler.next() }
        }
        #expect(kept(0, of: 10_000) == 0)
        #expect(kept(1, of: 10_000) == 10_000)
        #expect((90...110).contains(kept(0.01, of: 10_000)))
        #expect((4_900...5_100).contains(kept(0.5, of: 10_000)))
        #expect(kept(0.999_999_999_999_999_9, of: 1_000) >= 999)
        // Evenly: each tenth of the calls at 0.1 keeps about a tenth of its calls.
        let sampler = RatioSampler(ratio: 0.1)
        for _ in 0..<10 {
            #expect((70...130).contains((0..<1_000).count { _ in sampler.next() }))
        }
    }

    @Test("a caller's traceparent decides: -01 is traced even at ratio 0, -00 is not even at ratio 1")
    func callersDecision() async throws {
        for (ratio, flags, traced) in [(0.0, "01", true), (1.0, "00", false), (0.0, "00", false)] {
            let tracer = InMemoryTracer()
            var configuration = Self.tracedConfiguration()
            configuration.tracing?.sampleRatio = ratio
            let h = try await ServiceHarness(configuration: configuration, tracer: tracer)
            let header = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-" + flags
            let request = try Groupd_V1_CreateGroupRequest.with {
                $0.type = .public
                $0.ownerUserID = "alice"
                $0.profile = .with { $0.name = "sampled?" }
            }.serializedBytes()
            let status = try await Self.call(
                h, Groupd_V1_GroupService.Method.createGroup.path, request, as: .admin, traceparent: header)
            #expect(status.code == .ok)
            // Traced: the call's span and its commit's; not traced: nothing, not even the commit's.
            #expect(tracer.finishedSpans.count == (traced ? 2 : 0), "ratio \(ratio), flags \(flags)")
        }
    }
}

/// A finished span's attribute as a `SpanAttribute`, to compare.
private func attribute(_ span: FinishedInMemorySpan, _ key: String) -> SpanAttribute? {
    span.attributes[key]?.toSpanAttribute()
}
