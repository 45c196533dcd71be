import GRPCProtocol
import GroupAPI
import NIOConcurrencyHelpers
import NIOCore

/// The standard `grpc.health.v1.Health` service: `Check` answers on the event loop with no
/// authentication (load balancers and orchestrators call it); `List` reports every service;
/// `Watch` streams the status and every change. Known services are "" (the whole server) and every service in Protos/.
public final class HealthService: Sendable {
    private typealias Status = Grpc_Health_V1_HealthCheckResponse.ServingStatus

    private struct State {
        var serving = true
        /// Whether the store's database answers (a shared database can become unreachable).
        var storeAvailable = true
        /// What `Check` reports: serving, and the database reachable.
        var ready: Bool { serving && storeAvailable }
        var watchers: [Int: AsyncStream<Status>.Continuation] = [:]
        var nextWatcher = 0
    }

    private let state = NIOLockedValueBox(State())
    private let knownServices: Set<String>
    private let servingResponse: ByteBuffer
    private let notServingResponse: ByteBuffer

    /// Creates the service, serving.
    /// - Parameter services: The service names `Check` knows besides "".
    public init(services: [String] = GroupAPI.allServiceNames) {
        knownServices = Set(services + [""])
        servingResponse = MessageCoding.encode(Grpc_Health_V1_HealthCheckResponse.with { $0.status = .serving })
        notServingResponse = MessageCoding.encode(Grpc_Health_V1_HealthCheckResponse.with { $0.status = .notServing })
    }

    /// Registers `Check`, `List` and `Watch`, which need no token.
    public func register(in router: inout ServerRouter) {
        router.register(Grpc_Health_V1_Health.Method.check.path, .inlineUnary { [self] request, _ in
            check(request)
        }, needsToken: false)
        router.register(Grpc_Health_V1_Health.Method.list.path, .inlineUnary { [self] request, _ in
            list(request)
        }, needsToken: false)
        router.register(Grpc_Health_V1_Health.Method.watch.path, .serverStreaming { [self] request, _, writer in
            try await watch(request, writer: writer)
        }, needsToken: false)
    }

    /// Reports NOT_SERVING from now on and ends every `Watch` stream with `UNAVAILABLE`, so
    /// watchers move to another node while the server drains.
    public func beginShutdown() {
        // Yielded under the lock, as every change is, so no watcher sees two changes out of order.
        state.withLockedValue { state in
            state.serving = false
            for continuation in state.watchers.values {
                continuation.yield(.notServing)
                continuation.finish()
            }
            state.watchers.removeAll()
        }
    }

    /// The store's database became reachable (`true`) or unreachable: `Check` and `Watch` report
    /// SERVING or NOT_SERVING accordingly, so a load balancer sends calls to another node
    /// meanwhile.
    ///
    /// The change is yielded to the watchers under the lock that sets it (a yield only buffers it
    /// or resumes the watcher's task): two changes made at once from two threads reach every
    /// watcher in the order they were made, so the last status a watcher got is the one that holds.
    public func setStoreAvailable(_ available: Bool) {
        state.withLockedValue { state in
            guard state.storeAvailable != available else { return }
            state.storeAvailable = available
            guard state.serving else { return }
            for watcher in state.watchers.values { watcher.yield(available ? .serving : .notServing) }
        }
    }

    private func check(_ request: ByteBuffer) -> Result<ByteBuffer, GRPCStatus> {
        let service: String
        do {
            service = try MessageCoding.decode(Grpc_Health_V1_HealthCheckRequest.self, from: request).service
        } catch {
            return .failure(error)
        }
        guard knownServices.contains(service) else {
            return .failure(GRPCStatus(.notFound, "unknown service \(service)"))
        }
        return .success(state.withLockedValue { $0.ready } ? servingResponse : notServingResponse)
    }

    private func list(_ request: ByteBuffer) -> Result<ByteBuffer, GRPCStatus> {
        do {
            _ = try MessageCoding.decode(Grpc_Health_V1_HealthListRequest.self, from: request)
        } catch {
            return .failure(error)
        }
        let status: Status = state.withLockedValue { $0.ready } ? .serving : .notServing
        var response = Grpc_Health_V1_HealthListResponse()
        for service in knownServices {
            response.statuses[service] = Grpc_Health_V1_HealthCheckResponse.with { $0.status = status }
        }
        return .success(MessageCoding.encode(response))
    }

    private func watch(_ request: ByteBuffer, writer: ServerStreamWriter) async throws {
        let service = try MessageCoding.decode(Grpc_Health_V1_HealthCheckRequest.self, from: request).service
        // The health protocol keeps the stream open for a service it does not know (yet), and
        // reports SERVICE_UNKNOWN; such a watch ends at shutdown like every other.
        let known = knownServices.contains(service)
        let (changes, continuation) = AsyncStream<Status>.makeStream()
        let (id, serving, ready) = state.withLockedValue { state in
            let id = state.nextWatcher
            state.nextWatcher += 1
            if state.serving { state.watchers[id] = continuation }
            return (id, state.serving, state.ready)
        }
        defer { _ = state.withLockedValue { $0.watchers.removeValue(forKey: id) } }
        let first: Status = known ? (ready ? .serving : .notServing) : .serviceUnknown
        try await writer.write(MessageCoding.encode(Grpc_Health_V1_HealthCheckResponse.with { $0.status = first }))
        guard serving else { throw GRPCStatus(.unavailable, "server is shutting down") }
        for await status in changes where known {
            try await writer.write(MessageCoding.encode(Grpc_Health_V1_HealthCheckResponse.with { $0.status = status }))
        }
        try Task.checkCancellation()
        throw GRPCStatus(.unavailable, "server is shutting down")
    }
}
