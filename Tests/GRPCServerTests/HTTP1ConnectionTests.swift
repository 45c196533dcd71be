import Foundation
import Logging
import NIOCore
import NIOEmbedded
import Testing

@testable import GRPCProtocol
@testable import GRPCServer

/// An HTTP/1.1 client written byte by byte against a real `HTTP2Connection` (which hands the
/// connection to `HTTP1Connection` at its first bytes) in an `EmbeddedChannel`; the route
/// `/test.Echo/Echo` answers its request message inline, `/test.Echo/Async` from an async handler
/// that never suspends.
private final class HTTP1Client {
    let channel = EmbeddedChannel()

    /// The reads the connection passed on towards the socket.
    let readCounter = ReadCounter()

    /// A stream nothing is ever written to: `/test.Echo/Hang` waits on it until its call is cancelled.
    private let never = AsyncStream<Void>.makeStream()

    init(maxMessageBytes: Int = 64) throws {
        var router = ServerRouter()
        // Ends only when its call is cancelled (the connection closing): waits on an event that
        // never comes, not on time.
        let never = self.never.stream
        router.register("/test.Echo/Hang", .unary { _, _ in
            for await _ in never {}
            throw CancellationError()
        }, needsToken: false)
        router.register("/test.Echo/Echo", .inlineUnary { request, _ in .success(request) }, needsToken: false)
        router.register("/test.Echo/Async", .unary { request, _ in request }, needsToken: false)
        let connect = ConnectProtocol(router: router, codec: nil, maxMessageBytes: maxMessageBytes)
        let connection = HTTP2Connection(
            router: router, configuration: ServerConfiguration(), logger: Logger(label: "test"), connect: connect)
        try channel.pipeline.syncOperations.addHandler(readCounter)
        try channel.pipeline.syncOperations.addHandler(connection)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
    }

    func send(_ text: String) throws {
        try channel.writeInbound(ByteBuffer(string: text))
    }

    /// Everything the server wrote since the last call, and the buffers it came in, after the
    /// loop ran what was queued on it (responses are flushed at the end of the loop's turn) unless
    /// `runningTheLoop` is false.
    func received(runningTheLoop: Bool = true) throws -> (text: String, writes: Int) {
        if runningTheLoop { channel.embeddedEventLoop.run() }
        var text = ""
        var writes = 0
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) {
            text += String(buffer: buffer)
            writes += 1
        }
        return (text, writes)
    }

    static func echo(_ body: String, fields: String = "", version: String = "HTTP/1.1") -> String {
        "POST /test.Echo/Echo \(version)\r\nHost: h\r\nContent-Type: application/proto\r\nContent-Length: \(body.utf8.count)\r\n\(fields)\r\n\(body)"
    }

    static func ok(_ body: String, extra: String = "") -> String {
        "HTTP/1.1 200 OK\r\ncontent-type: application/proto\r\ncontent-length: \(body.utf8.count)\r\n\(extra)\r\n\(body)"
    }
}

/// Counts the reads asked of the channel that reach it.
final class ReadCounter: ChannelOutboundHandler {
    typealias OutboundIn = Any
    var reads = 0

    func read(context: ChannelHandlerContext) {
        reads += 1
        context.read()
    }
}

@Suite("HTTP/1.1 connections: framing, pipelining, keep-alive and refusals")
struct HTTP1ConnectionTests {
    @Test("a call is answered with its length in one write, and the connection stays open")
    func call() throws {
        let client = try HTTP1Client()
        try client.send(HTTP1Client.echo("abc"))
        let (text, writes) = try client.received()
        #expect(text == HTTP1Client.ok("abc"))
        #expect(writes == 1)
        #expect(client.channel.isActive)
    }

    @Test("an async handler that does not suspend answers within the read that brought its request")
    func asyncWithoutSuspending() throws {
        let client = try HTTP1Client()
        let request = HTTP1Client.echo("abc", fields: "Connection: close\r\n")
            .replacingOccurrences(of: "/test.Echo/Echo", with: "/test.Echo/Async")
        // The last answer is written and flushed at once; nothing runs the embedded loop, so the
        // handler ran within the read, not as a job queued on the loop.
        try client.send(request)
        #expect(try client.received(runningTheLoop: false).text == HTTP1Client.ok("abc", extra: "connection: close\r\n"))
    }

    @Test("pipelined requests are answered in order, a refusal among them, the connection kept")
    func pipelined() throws {
        let client = try HTTP1Client()
        try client.send(HTTP1Client.echo("one") + "GET /test.Echo/Echo HTTP/1.1\r\nHost: h\r\n\r\n" + HTTP1Client.echo("two"))
        let text = try client.received().text
        let first = try #require(text.range(of: HTTP1Client.ok("one")))
        let refusal = try #require(text.range(of: "HTTP/1.1 405 Method Not Allowed\r\n"))
        let second = try #require(text.range(of: HTTP1Client.ok("two")))
        #expect(first.upperBound <= refusal.lowerBound && refusal.upperBound <= second.lowerBound)
        #expect(client.channel.isActive)
    }

    @Test("pipelined bytes past 64 KiB behind a call in progress stop the reading; fewer do not")
    func pipelinedBytesHoldReads() throws {
        let client = try HTTP1Client()
        let hang = "POST /test.Echo/Hang HTTP/1.1\r\nContent-Type: application/proto\r\nContent-Length: 1\r\n\r\nx"
        try client.send(hang)
        // A small pipelined request waits unparsed; reading goes on.
        try client.send(HTTP1Client.echo("next"))
        var before = client.readCounter.reads
        client.channel.read()
        #expect(client.readCounter.reads == before + 1)
        // Past the bound, it stops until the call in progress is answered.
        try client.send(String(repeating: "z", count: HTTP1Connection.maxBufferedBytes))
        before = client.readCounter.reads
        client.channel.read()
        #expect(client.readCounter.reads == before)
        #expect(try client.received().text.isEmpty)
        _ = try client.channel.finish(acceptAlreadyClosed: true)
    }

    @Test("a request arriving a byte at a time is answered once whole")
    func byteByByte() throws {
        let client = try HTTP1Client()
        for character in HTTP1Client.echo("slow") { try client.send(String(character)) }
        #expect(try client.received().text == HTTP1Client.ok("slow"))
    }

    @Test("a chunked body is gathered, its trailers dropped")
    func chunked() throws {
        let client = try HTTP1Client()
        try client.send("POST /test.Echo/Echo HTTP/1.1\r\nContent-Type: application/proto\r\nTransfer-Encoding: chunked\r\n\r\n")
        try client.send("3\r\nabc\r\n2;x=y\r\nde\r\n0\r\nX-Checksum: 1\r\n\r\n")
        #expect(try client.received().text == HTTP1Client.ok("abcde"))
        #expect(client.channel.isActive)
    }

    @Test("Connection: close is answered with connection: close, then the close; what follows is not read")
    func connectionClose() throws {
        let client = try HTTP1Client()
        try client.send(HTTP1Client.echo("bye", fields: "Connection: close\r\n") + HTTP1Client.echo("never"))
        #expect(try client.received().text == HTTP1Client.ok("bye", extra: "connection: close\r\n"))
        #expect(!client.channel.isActive)
    }

    @Test("HTTP/1.0 closes after the response unless it asked for keep-alive, which is said back")
    func http10() throws {
        let closing = try HTTP1Client()
        try closing.send(HTTP1Client.echo("a", version: "HTTP/1.0"))
        #expect(try closing.received().text == HTTP1Client.ok("a", extra: "connection: close\r\n"))
        #expect(!closing.channel.isActive)

        let keeping = try HTTP1Client()
        try keeping.send(HTTP1Client.echo("b", fields: "Connection: keep-alive\r\n", version: "HTTP/1.0"))
        #expect(try keeping.received().text == HTTP1Client.ok("b", extra: "connection: keep-alive\r\n"))
        #expect(keeping.channel.isActive)
    }

    @Test("Expect: 100-continue: 100 for an accepted call, then the response")
    func continueAccepted() throws {
        let client = try HTTP1Client()
        try client.send("POST /test.Echo/Echo HTTP/1.1\r\nContent-Type: application/proto\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n")
        #expect(try client.received().text == "HTTP/1.1 100 Continue\r\n\r\n")
        try client.send("hi")
        #expect(try client.received().text == HTTP1Client.ok("hi"))
    }

    @Test("Expect: 100-continue on a refused call: the refusal at once instead of 100, then the close")
    func continueRefused() throws {
        let client = try HTTP1Client()
        try client.send("POST /test.Echo/Nope HTTP/1.1\r\nContent-Type: application/proto\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n")
        let text = try client.received().text
        #expect(text.hasPrefix("HTTP/1.1 404 Not Found\r\n"))
        #expect(text.contains("connection: close\r\n"))
        #expect(!text.contains("100 Continue"))
        #expect(!client.channel.isActive)
    }

    @Test("a request the parser refuses gets its status in plain text, then the close", arguments: [
        ("POST /test.Echo/Echo HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        ("POST /test.Echo/Echo HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", 400),
        ("POST /test.Echo/Echo HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
        ("POST /test.Echo/Echo HTTP/2.0\r\n\r\n", 505),
        ("POST /test.Echo/Echo HTTP/1.1\r\nExpect: later\r\n\r\n", 417),
        ("POST /test.Echo/Echo HTTP/1.1\r\nX: " + String(repeating: "a", count: 90 * 1024) + "\r\n\r\n", 431),
        ("\u{16}\u{03}\u{01}\u{02}\u{00}\u{01}", 400),
    ])
    func refused(_ request: String, _ status: Int) throws {
        let client = try HTTP1Client()
        try client.send(request + HTTP1Client.echo("after"))
        let text = try client.received().text
        #expect(text.hasPrefix("HTTP/1.1 \(status) "))
        #expect(text.contains("content-type: text/plain; charset=utf-8\r\n") && text.contains("connection: close\r\n"))
        #expect(!text.contains("after"))
        #expect(!client.channel.isActive)
    }

    @Test("a malformed chunk mid-body ends the call unanswered but for the 400, and the connection")
    func badChunk() throws {
        let client = try HTTP1Client()
        try client.send("POST /test.Echo/Echo HTTP/1.1\r\nContent-Type: application/proto\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n")
        try client.send("zz\r\n")
        #expect(try client.received().text.hasPrefix("HTTP/1.1 400 Bad Request\r\n"))
        #expect(!client.channel.isActive)
    }

    @Test("a body over the limit is refused at once (declared or chunked), and the connection closed")
    func bodyTooLarge() throws {
        let declared = try HTTP1Client(maxMessageBytes: 4)
        try declared.send("POST /test.Echo/Echo HTTP/1.1\r\nContent-Type: application/proto\r\nContent-Length: 5\r\n\r\n")
        let text = try declared.received().text
        #expect(text.hasPrefix("HTTP/1.1 429 Too Many Requests\r\n"))
        #expect(text.contains("resource_exhausted") && text.contains("connection: close\r\n"))
        #expect(!declared.channel.isActive)

        let chunked = try HTTP1Client(maxMessageBytes: 4)
        try chunked.send("POST /test.Echo/Echo HTTP/1.1\r\nContent-Type: application/proto\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n")
        #expect(try chunked.received().text.isEmpty)
        try chunked.send("2\r\nde\r\n")
        #expect(try chunked.received().text.hasPrefix("HTTP/1.1 429 Too Many Requests\r\n"))
        #expect(!chunked.channel.isActive)
    }
}
