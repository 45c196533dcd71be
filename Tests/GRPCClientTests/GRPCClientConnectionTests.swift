import GRPCClient
import GRPCProtocol
import GroupAPI
import GroupModel
import GroupService
import GroupTestSupport
import NIOCore
import NIOPosix
import Testing

/// The client against groupd's own transport (GRPCServer on port 0) with handlers made for the test:
/// what only a client on a wire meets (answers that are not the response, a slow reader's window,
/// a lost connection, an unreachable port, a TLS listener). The calls' semantics, the same in
/// process and live, are `CallSemanticsTests`.
@Suite("The gRPC client against a live server")
struct GRPCClientConnectionTests {
    /// Told by the streaming handler when the server sees a call end (the client's RST_STREAM).
    /// Also told when a flooding handler finds its queue full (the client's window is shut).
    final class Events: Sendable {
        private let closed: AsyncStream<Void>
        private let continuation: AsyncStream<Void>.Continuation
        private let full: AsyncStream<Int>
        private let fullContinuation: AsyncStream<Int>.Continuation

        init() {
            (closed, continuation) = AsyncStream<Void>.makeStream()
            (full, fullContinuation) = AsyncStream<Int>.makeStream()
        }

        func close() {
            continuation.yield()
        }

        func waitClosed() async {
            for await _ in closed { return }
        }

        func queueFull(after written: Int) {
            fullContinuation.yield(written)
        }

        /// How many messages the flood had written when its queue was full.
        func waitFull() async -> Int? {
            for await written in full { return written }
            return nil
        }
    }

    /// The test methods: a checked unary, streams, a call that never answers, a flood, garbage.
    static func router(events: Events) -> ServerRouter {
        var router = ServerRouter()
        router.register(Grpc_Health_V1_Health.Method.check.path, .unary { request, context in
            let check = try request.withUnsafeReadableBytes { try Grpc_Health_V1_HealthCheckRequest(serializedBytes: $0) }
            guard check.service.isEmpty else {
                throw GroupError.invalidArgument(field: "service", "unknown service \(check.service)").grpcStatus
            }
            guard context.metadata["authorization"] == "Bearer t0ken" else {
                throw GRPCStatus(.unauthenticated, "no token")
            }
            return ByteBuffer(bytes: Grpc_Health_V1_HealthCheckResponse.with { $0.status = .serving }.serializedBytes())
        })
        router.register("/test.Echo/Stream", .serverStreaming { request, _, writer in
            writer.onClose { events.close() }
            let count = Int(request.getInteger(at: request.readerIndex, as: UInt8.self) ?? 0)
            for index in 0..<count {
                try await writer.write(ByteBuffer(bytes: [UInt8(index)]))
            }
            if count == 255 {
                // Wait for the client to go away: the call ends when it resets the stream.
                try await untilCancelled()
            }
        })
        router.register("/test.Echo/Hang", .unary { _, _ in
            try await untilCancelled()
            return ByteBuffer()
        })
        router.register("/test.Echo/Twice", .serverStreaming { _, _, writer in
            let serving = Grpc_Health_V1_HealthCheckResponse.with { $0.status = .serving }.serializedBytes()
            try await writer.write(ByteBuffer(bytes: serving))
            try await writer.write(ByteBuffer(bytes: serving))
        })
        router.register("/test.Echo/Flood", .serverStreaming { _, _, writer in
            let message = ByteBuffer(repeating: 7, count: 16 << 10)
            var written = 0
            var reported = false
            while true {
                switch writer.tryWrite(message) {
                case .enqueued:
                    written += 1
                case .closed:
                    return
                case .full:
                    if !reported {
                        reported = true
                        events.queueFull(after: written)
                    }
                    try await writer.write(message)
                    written += 1
                }
            }
        })
        router.register("/test.Echo/Garbage", .unary { _, _ in ByteBuffer(bytes: [0xFF]) })
        return router
    }

    static func withServer(_ body: (GRPCClientConnection, Events) async throws -> Void) async throws {
        let events = Events()
        try await LiveEndpoint.with(router(events: events)) { connection in try await body(connection, events) }
    }

    @Test("a unary call answered with two messages, or with bytes that are not its response, is INTERNAL")
    func badAnswers() async throws {
        try await Self.withServer { connection, _ in
            let twice = ProtoMethod<Grpc_Health_V1_HealthCheckRequest, Grpc_Health_V1_HealthCheckResponse>(
                service: "test.Echo", method: "Twice", isServerStreaming: false)
            await #expect(throws: GRPCCallError(.internal, "a unary call answered with more than one message")) {
                _ = try await connection.unary(twice, .init())
            }
            let garbage = ProtoMethod<Grpc_Health_V1_HealthCheckRequest, Grpc_Health_V1_HealthCheckResponse>(
                service: "test.Echo", method: "Garbage", isServerStreaming: false)
            await #expect {
                _ = try await connection.unary(garbage, .init())
            } throws: { error in
                guard let error = error as? GRPCCallError else { return false }
                return error.code == .internal && error.message.hasPrefix("the response is not a valid grpc.health.v1.HealthCheckResponse")
            }
        }
    }

    @Test("a slow reader: the server's queue fills, and taking messages reopens the window", .timeLimit(.minutes(1)))
    func slowReader() async throws {
        try await Self.withServer { connection, events in
            var iterator = connection.call(path: "/test.Echo/Flood", request: []).makeAsyncIterator()
            let first = try await iterator.next()
            #expect(first?.readableBytes == 16 << 10)
            _ = await events.waitFull()
            // The client gives window back only as messages are taken (no automatic updates): were
            // that broken, the stream would stall here once its window ran out.
            for _ in 0..<1000 {
                let message = try await iterator.next()
                #expect(message?.readableBytes == 16 << 10)
            }
        }
    }

    @Test("calls in flight end UNAVAILABLE when the connection closes; a closed port is UNAVAILABLE")
    func connectionLoss() async throws {
        try await Self.withServer { connection, _ in
            let stream = connection.call(path: "/test.Echo/Hang", request: [])
            await connection.close()
            await #expect {
                for try await _ in stream {}
            } throws: { error in
                (error as? GRPCCallError)?.code == .unavailable
            }
        }
        let listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).get()
        let port = listener.localAddress!.port!
        try await listener.close()
        await #expect {
            _ = try await GRPCClientConnection.connect(to: .init(host: "127.0.0.1", port: port))
        } throws: { error in
            (error as? GRPCCallError)?.code == .unavailable
        }
    }

    @Test("a TLS listener that answers the preface with an alert and closes is named as such, however fast it closes")
    func tlsAnswerBeforeTheHandlerIsFound() async throws {
        // The alert and the close may arrive before `connect` finds its handler in the pipeline, or
        // after: both must say the server speaks TLS, never that the handler was not found.
        let listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(TLSAlertAnswer())
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let port = listener.localAddress!.port!
        for _ in 0..<50 {
            var message = ""
            do {
                let connection = try await GRPCClientConnection.connect(to: .init(host: "127.0.0.1", port: port))
                do {
                    _ = try await connection.unary(Grpc_Health_V1_Health.Method.check, .init())
                } catch {
                    message = error.message
                }
                await connection.close()
            } catch {
                #expect(error.code == .unavailable)
                message = error.message
            }
            #expect(message.contains("answered in TLS") || message.contains("may expect TLS"), "\(message)")
        }
        try await listener.close()
    }
}

/// Answers a connection as a TLS server answers a plaintext HTTP/2 preface: a fatal alert, then close.
private final class TLSAlertAnswer: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer

    func channelActive(context: ChannelHandlerContext) {
        // TLS 1.2 record: alert, fatal, protocol_version.
        context.writeAndFlush(NIOAny(ByteBuffer(bytes: [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x46])), promise: nil)
        context.close(promise: nil)
    }
}

/// Suspends until the calling task is cancelled (a handler whose call the client resets or lets
/// time out), then throws `CancellationError`.
private func untilCancelled() async throws {
    let (never, continuation) = AsyncStream<Never>.makeStream()
    for await _ in never {}  // ends only when the task is cancelled: nothing is ever yielded
    withExtendedLifetime(continuation) {}
    try Task.checkCancellation()
}
