@testable import GRPCProtocol
@testable import GRPCServer
import Dispatch
import GroupAPI
import GroupService
import NIOCore
import NIOEmbedded
import Synchronization
import Testing

/// `Health/Watch` against the health service's own router entry, with a real `ServerStreamWriter`
/// whose connection side records every status and acknowledges it at once.
@Suite("Health watch")
struct HealthWatchTests {
    private typealias Status = Grpc_Health_V1_HealthCheckResponse.ServingStatus

    @Test("store availability changed from two threads at once reaches a watcher in order: every status differs from the one before, the last is what Check reports")
    func changesFromTwoThreadsInOrder() async throws {
        let health = HealthService()
        var router = ServerRouter()
        health.register(in: &router)
        let (deliveries, delivered) = AsyncStream<Status>.makeStream()
        let box = Mutex<ServerStreamWriter?>(nil)
        let writer = ServerStreamWriter(capacity: 1 << 20, deliver: { buffer in
            if let response = try? Grpc_Health_V1_HealthCheckResponse(serializedBytes: Array(buffer.readableBytesView)) {
                delivered.yield(response.status)
            }
            box.withLock { $0 }?.didSend()
        })
        box.withLock { $0 = writer }
        let path = Grpc_Health_V1_Health.Method.watch.path
        guard case .serverStreaming(let watch) = try #require(router.handler(for: path)) else {
            Issue.record("Watch is not server-streaming")
            return
        }
        let context = ServerContext(path: path, metadata: Metadata())
        let call = Task {
            try await watch(ByteBuffer(bytes: Grpc_Health_V1_HealthCheckRequest().serializedBytes()), context, writer)
        }
        // The watch is registered once its first status arrived.
        var iterator = deliveries.makeAsyncIterator()
        guard let first = await iterator.next() else {
            Issue.record("the watch ended before its first status")
            return
        }
        var statuses = [first]

        // Two threads flip the availability as a failing call and the database probe do: each
        // change that lands is yielded; a yield made after the lock that decided it could reach
        // the watcher after a later change, and leave it with a status that no longer holds.
        // On dispatch's threads, not the test's: the cooperative pool is as wide as the cores.
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                DispatchQueue.concurrentPerform(iterations: 2) { thread in
                    for step in 0..<5_000 { health.setStoreAvailable((step + thread) % 2 == 0) }
                }
                done.resume()
            }
        }
        let check = try #require(router.handler(for: Grpc_Health_V1_Health.Method.check.path))
        guard case .inlineUnary(let checkBody) = check else {
            Issue.record("Check is not inline")
            return
        }
        let checked = try Grpc_Health_V1_HealthCheckResponse(
            serializedBytes: Array(try checkBody(ByteBuffer(), context).get().readableBytesView)).status
        health.beginShutdown()
        _ = await call.result
        delivered.finish()
        while let status = await iterator.next() { statuses.append(status) }

        // First SERVING, then the changes, then NOT_SERVING at shutdown.
        #expect(statuses.first == .serving)
        #expect(statuses.last == .notServing)
        let changes = Array(statuses.dropFirst().dropLast())
        #expect(changes.count >= 2)
        let repeated = zip(statuses.dropLast(), changes).filter { $0 == $1 }.count
        #expect(repeated == 0, "\(repeated) statuses repeat the one before")
        #expect((changes.last ?? .serving) == checked)
    }
}
