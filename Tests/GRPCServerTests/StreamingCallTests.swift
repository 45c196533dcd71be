import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

@testable import GRPCProtocol
@testable import GRPCServer

/// A real server on port 0 with a router of test handlers, and the raw HTTP/2 client.
private final class TestServer: Sendable {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let server: GRPCServer

    init(_ router: ServerRouter, configure: (inout ServerConfiguration) -> Void = { _ in }) async throws {
        var configuration = ServerConfiguration()
        configuration.port = 0
        configure(&configuration)
        server = GRPCServer(configuration: configuration, router: router, group: group, logger: Logger(label: "test"))
        try await server.start()
    }

    func client() async throws -> H2TestClient {
        try await H2TestClient.connect(port: server.localPort!, group: group)
    }

    func stop() async {
        await server.shutdownGracefully()
        try? await group.shutdownGracefully()
    }
}

/// Records what a handler saw, for the test to wait on.
private final class Probe: Sendable {
    private let events = NIOLockedValueBox<[String]>([])
    private let waiters = NIOLockedValueBox<[(String, CheckedContinuation<Void, Never>)]>([])

    func record(_ event: String) {
        let ready = events.withLockedValue { events -> [CheckedContinuation<Void, Never>] in
            events.append(event)
            return waiters.withLockedValue { waiters in
                let ready = waiters.filter { $0.0 == event }.map(\.1)
                waiters.removeAll { $0.0 == event }
                return ready
            }
        }
        for continuation in ready { continuation.resume() }
    }

    /// Waits until `event` was recorded.
    func wait(_ event: String) async {
        await withCheckedContinuation { continuation in
            let seen = events.withLockedValue { events -> Bool in
                if events.contains(event) { return true }
                waiters.withLockedValue { $0.append((event, continuation)) }
                return false
            }
            if seen { continuation.resume() }
        }
    }

    var all: [String] { events.withLockedValue { $0 } }
}

/// A one-shot gate a handler waits on.
private final class Gate: Sendable {
    private let state = NIOLockedValueBox<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func open() {
        let waiters = state.withLockedValue { state in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    func wait() async {
        await withCheckedContinuation { continuation in
            let open = state.withLockedValue { state -> Bool in
                if !state.open { state.waiters.append(continuation) }
                return state.open
            }
            if open { continuation.resume() }
        }
    }
}

@Suite struct StreamingCallTests {
    @Test("bidirectional: each request is handed over as it arrives, half-close ends the sequence")
    func echo() async throws {
        var router = ServerRouter()
        router.register("/t.T/Echo", .bidirectionalStreaming { requests, _, writer in
            for try await message in requests {
                try await writer.write(ByteBuffer(bytes: Array("echo:".utf8) + Array(message.readableBytesView)))
            }
            try await writer.write(ByteBuffer(bytes: Array("done".utf8)))
        })
        let server = try await TestServer(router)
        let client = try await server.client()
        let id = try await client.open("/t.T/Echo")
        for (index, word) in ["one", "two", "three"].enumerated() {
            // The answer to each message comes before the next is sent: nothing waits for the end.
            try await client.send(id, message: Array(word.utf8))
            let call = try await client.wait(for: id) { $0.messages.count == index + 1 }
            #expect(call.messages.last?.bytes == Array("echo:\(word)".utf8))
            #expect(!call.closed)
        }
        try await client.halfClose(id)
        let call = try await client.wait(for: id) { $0.closed }
        #expect(call.status == 0)
        #expect(call.messages.map { String(decoding: $0.bytes, as: UTF8.self) } == ["echo:one", "echo:two", "echo:three", "done"])
        #expect(call.header("grpc-accept-encoding") == "identity,deflate,gzip")
        await client.close()
        await server.stop()
    }

    @Test("client streaming: a handler reads every message, then answers once")
    func clientStreaming() async throws {
        var router = ServerRouter()
        router.register("/t.T/Count", .bidirectionalStreaming { requests, _, writer in
            var count = 0
            var bytes = 0
            for try await message in requests {
                count += 1
                bytes += message.readableBytes
            }
            try await writer.write(ByteBuffer(string: "\(count) messages, \(bytes) bytes"))
        })
        let server = try await TestServer(router)
        let client = try await server.client()
        let id = try await client.open("/t.T/Count")
        for size in [0, 1, 1000, 70_000, 5] {
            try await client.send(id, message: [UInt8](repeating: 7, count: size))
        }
        try await client.halfClose(id)
        let call = try await client.wait(for: id) { $0.closed }
        #expect(call.status == 0)
        #expect(call.messages.map { String(decoding: $0.bytes, as: UTF8.self) } == ["5 messages, 71006 bytes"])
        // A stream that ends at once gives an empty sequence.
        let empty = try await client.open("/t.T/Count")
        try await client.halfClose(empty)
        let none = try await client.wait(for: empty) { $0.closed }
        #expect(none.messages.map { String(decoding: $0.bytes, as: UTF8.self) } == ["0 messages, 0 bytes"])
        await client.close()
        await server.stop()
    }

    @Test("back-pressure: untaken messages hold the stream's window shut until the handler takes them")
    func backPressure() async throws {
        let gate = Gate()
        let probe = Probe()
        var router = ServerRouter()
        router.register("/t.T/Slow", .bidirectionalStreaming { requests, _, writer in
            probe.record("started")
            await gate.wait()
            var count = 0
            for try await _ in requests { count += 1 }
            try await writer.write(ByteBuffer(string: "\(count)"))
        })
        let server = try await TestServer(router)
        let client = try await server.client()
        let id = try await client.open("/t.T/Slow")
        await probe.wait("started")
        // 3 MiB in 48 messages against a 1 MiB stream window.
        let message = [UInt8](repeating: 1, count: 64 << 10)
        for _ in 0..<47 { try await client.send(id, message: message) }
        try await client.send(id, message: message, end: true)
        let total = 48 * (5 + (64 << 10))
        // The client stops with the window spent and most of its bytes unsent, and stays so.
        let blocked = try await client.wait(for: id) { $0.sentBytes >= 1 << 20 && !$0.pending.isEmpty }
        #expect(blocked.sentBytes < total)
        #expect(try await client.sendWindow(id) == 0)
        gate.open()
        let call = try await client.wait(for: id) { $0.closed }
        #expect(call.sentBytes == total)
        #expect(call.status == 0)
        #expect(call.messages.map { String(decoding: $0.bytes, as: UTF8.self) } == ["48"])
        await client.close()
        await server.stop()
    }

    @Test("a reset cancels the handler waiting for requests")
    func resetCancels() async throws {
        let probe = Probe()
        var router = ServerRouter()
        router.register("/t.T/Wait", .bidirectionalStreaming { requests, _, _ in
            do {
                for try await _ in requests { probe.record("message") }
                probe.record("ended")
            } catch is CancellationError {
                probe.record("cancelled")
                throw CancellationError()
            }
        })
        let server = try await TestServer(router)
        let client = try await server.client()
        let id = try await client.open("/t.T/Wait")
        try await client.send(id, message: [1])
        await probe.wait("message")
        try await client.reset(id)
        await probe.wait("cancelled")
        #expect(probe.all == ["message", "cancelled"])
        await client.close()
        await server.stop()
    }

    @Test("the deadline ends a streaming call with DEADLINE_EXCEEDED and cancels its handler")
    func deadline() async throws {
        let probe = Probe()
        var router = ServerRouter()
        router.register("/t.T/Wait", .bidirectionalStreaming { requests, _, writer in
            try await writer.write(ByteBuffer(string: "hello"))
            do {
                for try await _ in requests {}
            } catch is CancellationError {
                probe.record("cancelled")
                throw CancellationError()
            }
        })
        let server = try await TestServer(router)
        let client = try await server.client()
        let id = try await client.open("/t.T/Wait", headers: [("grpc-timeout", "100m")])
        let call = try await client.wait(for: id) { $0.closed }
        #expect(call.status == 4)
        #expect(call.messages.count == 1)
        await probe.wait("cancelled")
        await client.close()
        await server.stop()
    }

    @Test("a bad request message mid-stream ends the call with its status after the messages sent")
    func badMessageMidStream() async throws {
        var router = ServerRouter()
        router.register("/t.T/Echo", .bidirectionalStreaming { requests, _, writer in
            for try await message in requests { try await writer.write(message) }
        })
        let server = try await TestServer(router) { $0.maxMessageBytes = 1000 }
        let client = try await server.client()
        let id = try await client.open("/t.T/Echo")
        try await client.send(id, message: [1, 2, 3])
        try await client.wait(for: id) { $0.messages.count == 1 }
        try await client.send(id, message: [UInt8](repeating: 0, count: 1001))
        let call = try await client.wait(for: id) { $0.closed }
        #expect(call.status == 8)
        #expect(call.messages.map(\.bytes) == [[1, 2, 3]])
        // The connection still serves calls.
        let next = try await client.open("/t.T/Echo")
        try await client.send(next, message: [9], end: true)
        let ok = try await client.wait(for: next) { $0.closed }
        #expect(ok.status == 0 && ok.messages.map(\.bytes) == [[9]])
        await client.close()
        await server.stop()
    }
}

@Suite struct CompressedCallTests {
    private static func echoRouter() -> ServerRouter {
        var router = ServerRouter()
        router.register("/t.T/Unary", .unary { request, _ in request })
        router.register("/t.T/Stream", .serverStreaming { request, _, writer in
            try await writer.write(request)
            try await writer.write(ByteBuffer(bytes: [1, 2, 3]))
        })
        router.register("/t.T/Echo", .bidirectionalStreaming { requests, _, writer in
            for try await message in requests { try await writer.write(message) }
        })
        return router
    }

    private let allocator = ByteBufferAllocator()

    /// 4 KiB that compress well.
    private let text: [UInt8] = (0..<4096).map { Array("compress me, please. ".utf8)[$0 % 21] }

    private func compressed(_ compression: GRPCCompression, _ bytes: [UInt8]) -> [UInt8] {
        Array(compression.deflate(ByteBuffer(bytes: bytes), allocator: allocator)!.readableBytesView)
    }

    private func inflated(_ compression: GRPCCompression, _ bytes: [UInt8]) throws -> [UInt8] {
        Array(try compression.inflate(ByteBuffer(bytes: bytes), limit: 1 << 20, allocator: allocator).readableBytesView)
    }

    @Test("a compressed request is inflated; the response is compressed in its encoding when accepted",
          arguments: GRPCCompression.allCases)
    func unary(_ compression: GRPCCompression) async throws {
        let server = try await TestServer(Self.echoRouter())
        let client = try await server.client()
        let headers = [("grpc-encoding", compression.name), ("grpc-accept-encoding", "identity,deflate,gzip")]
        let call = try await client.unary("/t.T/Unary", message: compressed(compression, text), compressed: true, headers: headers)
        #expect(call.status == 0)
        #expect(call.header("grpc-encoding") == compression.name)
        let message = try #require(call.messages.first)
        #expect(message.compressed)
        #expect(try inflated(compression, message.bytes) == text)
        // Small messages go uncompressed under the same header.
        let small = try await client.unary("/t.T/Unary", message: [1, 2, 3], headers: headers)
        #expect(small.status == 0 && small.messages.first?.compressed == false && small.messages.first?.bytes == [1, 2, 3])
        await client.close()
        await server.stop()
    }

    @Test("responses stay identity when the client does not accept the encoding or compression is off")
    func identityResponses() async throws {
        let server = try await TestServer(Self.echoRouter())
        let client = try await server.client()
        let call = try await client.unary(
            "/t.T/Unary", message: compressed(.gzip, text), compressed: true,
            headers: [("grpc-encoding", "gzip"), ("grpc-accept-encoding", "identity")])
        #expect(call.status == 0 && call.header("grpc-encoding") == nil)
        #expect(call.messages.first?.compressed == false && call.messages.first?.bytes == text)
        await client.close()
        await server.stop()

        let off = try await TestServer(Self.echoRouter()) { $0.responseCompression.enabled = false }
        let offClient = try await off.client()
        let plain = try await offClient.unary(
            "/t.T/Unary", message: compressed(.gzip, text), compressed: true,
            headers: [("grpc-encoding", "gzip"), ("grpc-accept-encoding", "gzip")])
        #expect(plain.status == 0 && plain.header("grpc-encoding") == nil && plain.messages.first?.bytes == text)
        await offClient.close()
        await off.stop()
    }

    @Test("server-streaming and bidirectional responses are compressed per message")
    func streams() async throws {
        let server = try await TestServer(Self.echoRouter()) { $0.responseCompression.minBytes = 100 }
        let client = try await server.client()
        let headers = [("grpc-encoding", "gzip"), ("grpc-accept-encoding", "gzip")]
        let stream = try await client.unary("/t.T/Stream", message: text, headers: headers)
        #expect(stream.status == 0 && stream.header("grpc-encoding") == "gzip", "\(stream)")
        #expect(stream.messages.map(\.compressed) == [true, false])
        #expect(try inflated(.gzip, try #require(stream.messages.first).bytes) == text)
        let id = try await client.open("/t.T/Echo", headers: headers)
        try await client.send(id, message: compressed(.gzip, text), compressed: true)
        try await client.send(id, message: text, end: true)
        let echo = try await client.wait(for: id) { $0.closed }
        #expect(echo.status == 0 && echo.messages.count == 2)
        for message in echo.messages { #expect(try inflated(.gzip, message.bytes) == text) }
        await client.close()
        await server.stop()
    }

    @Test("a bomb within max_message_bytes compressed is RESOURCE_EXHAUSTED; the connection serves on")
    func bomb() async throws {
        let server = try await TestServer(Self.echoRouter()) { $0.maxMessageBytes = 1 << 20 }
        let client = try await server.client()
        let bomb = compressed(.gzip, [UInt8](repeating: 0, count: 64 << 20))
        #expect(bomb.count < 1 << 20)
        let call = try await client.unary("/t.T/Unary", message: bomb, compressed: true, headers: [("grpc-encoding", "gzip")])
        #expect(call.status == 8)
        #expect(call.trailer("grpc-message")?.contains("1048576") == true)
        let next = try await client.unary("/t.T/Unary", message: [4, 5])
        #expect(next.status == 0 && next.messages.first?.bytes == [4, 5])
        await client.close()
        await server.stop()
    }

    @Test("a corrupt body is INTERNAL; the connection serves on")
    func corrupt() async throws {
        let server = try await TestServer(Self.echoRouter())
        let client = try await server.client()
        var body = compressed(.deflate, text)
        body[body.count / 2] ^= 0xFF
        body[body.count / 2 + 1] ^= 0xFF
        let call = try await client.unary("/t.T/Unary", message: body, compressed: true, headers: [("grpc-encoding", "deflate")])
        #expect(call.status == 13)
        #expect(call.trailer("grpc-message")?.contains("decompressed") == true)
        let next = try await client.unary("/t.T/Unary", message: [4, 5])
        #expect(next.status == 0 && next.messages.first?.bytes == [4, 5])
        await client.close()
        await server.stop()
    }

    @Test("an unknown encoding is UNIMPLEMENTED and lists the supported ones")
    func unknownEncoding() async throws {
        let server = try await TestServer(Self.echoRouter())
        let client = try await server.client()
        let call = try await client.unary("/t.T/Unary", message: [1, 2], compressed: true, headers: [("grpc-encoding", "snappy")])
        #expect(call.status == 12)
        #expect(call.trailer("grpc-accept-encoding") == "identity,deflate,gzip")
        #expect(call.trailer("grpc-message")?.contains("snappy") == true)
        await client.close()
        await server.stop()
    }
}
