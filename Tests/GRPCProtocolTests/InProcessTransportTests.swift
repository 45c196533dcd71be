import GRPCProtocol
import NIOCore
import Synchronization
import Testing

/// What the in-process transport keeps of a call's semantics beyond what `CallSemanticsTests`
/// runs in both modes: the writer's queue freeing as the caller takes messages, detached calls,
/// request messages of each kind of method, handler errors.
@Suite struct InProcessTransportTests {
    /// A signal a handler gives and the test waits for: an `AsyncStream` that keeps the first.
    private static func signal() -> (wait: AsyncStream<Void>, fire: AsyncStream<Void>.Continuation) {
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingOldest(1))
        return (stream, continuation)
    }

    private static func text(_ buffer: ByteBuffer) -> String { String(buffer: buffer) }

    @Test("a full writer queue frees a slot as the caller takes each message")
    func backPressure() async throws {
        let full = Self.signal()
        let counts = Mutex<[Int]>([])
        var router = ServerRouter()
        router.register("/t.T/Flood", .serverStreaming { _, _, writer in
            var written = 0
            while written < 6 {
                switch writer.tryWrite(ByteBuffer(string: "\(written)")) {
                case .enqueued: written += 1
                case .closed: return
                case .full:
                    counts.withLock { $0.append(written) }
                    full.fire.yield()
                    try await writer.write(ByteBuffer(string: "\(written)"))
                    written += 1
                }
            }
        })
        let transport = InProcessTransport(router: router, streamQueueCapacity: 2)
        var iterator = transport.call(path: "/t.T/Flood", request: ByteBuffer()).makeAsyncIterator()
        for await _ in full.wait { break }
        // Two messages wait; the handler is held at the third until one is taken.
        #expect(counts.withLock { $0 } == [2])
        var received: [String] = []
        while let message = try await iterator.next() { received.append(Self.text(message)) }
        #expect(received == ["0", "1", "2", "3", "4", "5"])
    }

    @Test("a detached call stays open after its handler returns, until its writer finishes it")
    func detached() async throws {
        let writerBox = Mutex<ServerStreamWriter?>(nil)
        let ready = Self.signal()
        var router = ServerRouter()
        router.register("/t.T/Detached", .serverStreaming { _, _, writer in
            writer.detach()
            try await writer.write(ByteBuffer(string: "hello"))
            writerBox.withLock { $0 = writer }
            ready.fire.yield()
        })
        let transport = InProcessTransport(router: router)
        var iterator = transport.call(path: "/t.T/Detached", request: ByteBuffer()).makeAsyncIterator()
        #expect(try await iterator.next().map(Self.text) == "hello")
        for await _ in ready.wait { break }
        let writer = try #require(writerBox.withLock { $0 })
        try await writer.write(ByteBuffer(string: "later"))
        #expect(try await iterator.next().map(Self.text) == "later")
        writer.finish(GRPCStatus(.aborted, "done"))
        await #expect(throws: GRPCStatus(.aborted, "done")) { _ = try await iterator.next() }
        #expect(writer.isClosed)
    }

    @Test("request messages: a bidirectional handler reads them all, a unary method takes exactly one")
    func requests() async throws {
        var router = ServerRouter()
        router.register("/t.T/Count", .bidirectionalStreaming { requests, _, writer in
            var texts: [String] = []
            for try await request in requests { texts.append(Self.text(request)) }
            try await writer.write(ByteBuffer(string: texts.joined(separator: ",")))
        })
        router.register("/t.T/Unary", .unary { request, _ in request })
        let transport = InProcessTransport(router: router)
        var joined: [String] = []
        for try await message in transport.call(path: "/t.T/Count", requests: ["a", "b", "c"].map { ByteBuffer(string: $0) }) {
            joined.append(Self.text(message))
        }
        #expect(joined == ["a,b,c"])
        await #expect(throws: GRPCStatus(.internal, "more than one request message for a method that takes one")) {
            for try await _ in transport.call(path: "/t.T/Unary", requests: [ByteBuffer(), ByteBuffer()]) {}
        }
        await #expect(throws: GRPCStatus(.internal, "request stream ended without a message")) {
            for try await _ in transport.call(path: "/t.T/Unary", requests: []) {}
        }
    }

    @Test("a handler's error ends the call with its status: its own, CANCELLED, or INTERNAL")
    func errors() async throws {
        struct Opaque: Error {}
        var router = ServerRouter()
        router.register("/t.T/Status", .unary { _, _ in throw GRPCStatus(.notFound, "none") })
        router.register("/t.T/Opaque", .unary { _, _ in throw Opaque() })
        router.register("/t.T/Cancelled", .unary { _, _ in throw CancellationError() })
        router.register("/t.T/Inline", .inlineUnary { _, _ in .failure(GRPCStatus(.outOfRange, "far")) })
        let transport = InProcessTransport(router: router)
        let expected: [(String, GRPCStatus)] = [
            ("/t.T/Status", GRPCStatus(.notFound, "none")), ("/t.T/Opaque", GRPCStatus(.internal, "internal error")),
            ("/t.T/Cancelled", GRPCStatus(.cancelled, "the call was cancelled")), ("/t.T/Inline", GRPCStatus(.outOfRange, "far")),
        ]
        for (path, status) in expected {
            await #expect(throws: status, "\(path)") {
                for try await _ in transport.call(path: path, request: ByteBuffer()) {}
            }
        }
    }
}
