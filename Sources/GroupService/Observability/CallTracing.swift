import GRPCProtocol
import Synchronization
import Tracing

/// One server span per sampled call, when `tracing` is configured (docs/OBSERVABILITY.md, "Traces").
///
/// Sampling is decided here, before the tracer is asked for anything: a call whose `traceparent`
/// carries the caller's decision follows it, any other call is kept with probability
/// `tracing.sample_ratio` (``RatioSampler``). An unsampled call gets no span and no trace
/// context, so neither its commit nor its policy hooks make spans: it costs a header lookup and
/// an atomic increment.
///
/// The span starts as the handler does, continuing the caller's trace from its `traceparent`
/// (extracted by the tracer: swift-otel's reads W3C Trace Context), and is the handler task's
/// current context, so that the store's commit span and the policy hooks' spans are its
/// children; authentication adds the caller's app (``CallTracing/recordApp(_:)``). It ends as
/// the handler does, with the status the transport sends for its outcome: `OK`, the thrown
/// error's status and stable reason, `DEADLINE_EXCEEDED` or `CANCELLED` for a task the transport
/// cancelled. Its name and attributes follow the OpenTelemetry RPC semantic conventions:
/// `groupd.v1.GroupService/CreateGroup`, `rpc.system` (`grpc` or `connect_rpc`), `rpc.service`,
/// `rpc.method`, `rpc.grpc.status_code`, and groupd's `groupd.app` and `groupd.reason`.
struct CallTracing: Sendable {
    let tracer: any Tracer
    let sampler: RatioSampler

    init(tracer: any Tracer, sampleRatio: Double) {
        self.tracer = tracer
        self.sampler = RatioSampler(ratio: sampleRatio)
    }

    /// The span name and the `rpc.service` and `rpc.method` of a path, split once per route.
    struct Names: Sendable {
        let span: String
        let service: String
        let method: String

        init(path: String) {
            let trimmed = path.hasPrefix("/") ? String(path.dropFirst()) : path
            self.span = trimmed
            if let slash = trimmed.lastIndex(of: "/") {
                self.service = String(trimmed[..<slash])
                self.method = String(trimmed[trimmed.index(after: slash)...])
            } else {
                self.service = ""
                self.method = trimmed
            }
        }
    }

    /// `handler`, each of its sampled calls in a server span of its own, recording the stable
    /// reason of a thrown error in the call's annotations as `Routes.annotatingErrors` does (in
    /// the same layer: each async layer around a handler costs every call).
    func wrap(_ handler: RPCHandler, path: String) -> RPCHandler {
        let names = Names(path: path)
        switch handler {
        case .inlineUnary(let body):
            return .inlineUnary { bytes, server in
                guard let span = startSpan(names, server) else { return body(bytes, server) }
                let result = body(bytes, server)
                switch result {
                case .success: Self.end(span, code: .ok, reason: nil)
                case .failure(let status): Self.end(span, code: status.code, reason: nil)
                }
                return result
            }
        case .unary(let body):
            return .unary { bytes, server in
                guard let span = startSpan(names, server) else {
                    do { return try await body(bytes, server) } catch { Routes.annotate(error, server); throw error }
                }
                return try await Self.run(span, server) { try await body(bytes, server) }
            }
        case .serverStreaming(let body):
            return .serverStreaming { bytes, server, writer in
                guard let span = startSpan(names, server) else {
                    do { return try await body(bytes, server, writer) } catch { Routes.annotate(error, server); throw error }
                }
                try await Self.run(span, server) { try await body(bytes, server, writer) }
            }
        case .bidirectionalStreaming(let body):
            return .bidirectionalStreaming { requests, server, writer in
                guard let span = startSpan(names, server) else {
                    do { return try await body(requests, server, writer) } catch { Routes.annotate(error, server); throw error }
                }
                try await Self.run(span, server) { try await body(requests, server, writer) }
            }
        }
    }

    /// Whether a call with `metadata` is traced: the caller's decision when its `traceparent` is
    /// valid, else the ratio's.
    func sampled(_ metadata: Metadata) -> Bool {
        if let header = metadata["traceparent"], let parent = TraceParent(header) { return parent.sampled }
        return sampler.next()
    }

    /// Starts the call's span as a child of the caller's `traceparent` (or a new trace); nil when
    /// the call is not sampled.
    private func startSpan(_ names: Names, _ server: ServerContext) -> (any Span)? {
        guard sampled(server.metadata) else { return nil }
        var context = ServiceContext.topLevel
        tracer.extract(server.metadata, into: &context, using: MetadataExtractor())
        let span = tracer.startAnySpan(names.span, context: context, ofKind: .server)
        if span.isRecording {
            span.attributes["rpc.system"] = server.callProtocol == .connect ? "connect_rpc" : "grpc"
            span.attributes["rpc.service"] = names.service
            span.attributes["rpc.method"] = names.method
        }
        return span
    }

    /// Runs `body` with `span` as the current context (and as the call's span, for
    /// ``recordApp(_:)``), then ends it with the outcome.
    private static func run<T>(_ span: any Span, _ server: ServerContext, _ body: () async throws -> T) async throws -> T {
        var context = span.context
        context[CallSpanKey.self] = CallSpan(span: span)
        do {
            let result = try await ServiceContext.withValue(context) { try await body() }
            end(span, code: .ok, reason: nil)
            return result
        } catch {
            var code = GRPCStatus(for: error).code
            // A task the transport cancelled: the client reset the call, or its deadline passed.
            if Task.isCancelled, error is CancellationError || code == .cancelled {
                code = server.deadline.map { ContinuousClock.now >= $0 } == true ? .deadlineExceeded : .cancelled
            }
            Routes.annotate(error, server)
            end(span, code: code, reason: Routes.errorReason(error))
            throw error
        }
    }

    /// Sets the authenticated caller's app on the current call's span, when the call is traced.
    static func recordApp(_ app: String) {
        guard let call = ServiceContext.current?[CallSpanKey.self], call.span.isRecording else { return }
        call.span.attributes["groupd.app"] = app
    }

    /// Ends a call's span with its outcome. Server-side failures (the codes the RPC conventions
    /// name: `UNKNOWN`, `DEADLINE_EXCEEDED`, `UNIMPLEMENTED`, `INTERNAL`, `UNAVAILABLE`,
    /// `DATA_LOSS`) mark it an error; a refusal of the client's request does not.
    static func end(_ span: any Span, code: GRPCStatus.Code, reason: String?) {
        if span.isRecording {
            span.attributes["rpc.grpc.status_code"] = Int(code.rawValue)
            if let reason { span.attributes["groupd.reason"] = reason }
            if isServerError(code) {
                span.setStatus(SpanStatus(code: .error, message: reason ?? "\(code)"))
            }
        }
        span.end()
    }

    /// Whether a call that ended with `code` failed on the server's side.
    static func isServerError(_ code: GRPCStatus.Code) -> Bool {
        switch code {
        case .unknown, .deadlineExceeded, .unimplemented, .internal, .unavailable, .dataLoss: true
        default: false
        }
    }
}

/// The call's server span, in its task's `ServiceContext` (the commit's and the hooks' spans find
/// their parent through the tracer's own key; this one is for ``CallTracing/recordApp(_:)``).
struct CallSpan: Sendable {
    let span: any Span
}

private enum CallSpanKey: ServiceContextKey {
    typealias Value = CallSpan
}

/// Keeps a share of calls, spread evenly: the n-th call is kept when a hash of n (Fibonacci
/// hashing of a counter) falls under `ratio` of the hash's range. 1 keeps every call, 0 none.
final class RatioSampler: Sendable {
    private let threshold: UInt64
    private let all: Bool
    private let counter = Atomic<UInt64>(0)

    init(ratio: Double) {
        all = ratio >= 1
        let scaled = ratio * 18_446_744_073_709_551_616.0  // 2^64
        threshold = ratio <= 0 ? 0 : scaled >= 18_446_744_073_709_551_616.0 ? .max : UInt64(scaled)
    }

    /// Whether the next call is kept.
    func next() -> Bool {
        if all { return true }
        if threshold == 0 { return false }
        let n = counter.add(1, ordering: .relaxed).newValue
        return n &* 0x9E37_79B9_7F4A_7C15 < threshold
    }
}

/// Reads `traceparent` and `tracestate` from a call's metadata (names arrive lowercase).
struct MetadataExtractor: Extractor {
    func extract(key: String, from carrier: Metadata) -> String? { carrier[key] }
}
