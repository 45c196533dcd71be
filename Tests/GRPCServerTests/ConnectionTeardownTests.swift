import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import Testing

@testable import GRPCProtocol
@testable import GRPCServer

/// nghttp2 holds the connection as unretained user data (`Unmanaged.passUnretained`), so the
/// session must be deleted before its `HTTP2Connection` goes, and never while nghttp2 is still
/// inside one of its own calls. These tests end connections in every awkward order — closed from
/// inside a callback, closed with handlers running, a protocol error in the middle of a buffer,
/// closed while a flush writes — and check that the session is gone, the handlers' tasks ended and
/// the connection was freed. `make test-sanitize` runs them under AddressSanitizer, which turns
/// any use of freed memory along the way into a failure.
@Suite struct ConnectionTeardownTests {
    typealias Frame = HTTP2ConnectionKeepaliveTests.Frame

    /// What the handlers did, for the test to check once the loop ran.
    final class Record: Sendable {
        private let state = NIOLockedValueBox<(started: Int, ended: Int)>((0, 0))
        func started() { state.withLockedValue { $0.started += 1 } }
        func ended() { state.withLockedValue { $0.ended += 1 } }
        var counts: (started: Int, ended: Int) { state.withLockedValue { $0 } }
    }

    /// Lets a handler reach the channel its call arrived on (the tests' handlers close it).
    final class ChannelBox: @unchecked Sendable {
        var channel: EmbeddedChannel?
    }

    /// One connection in an `EmbeddedChannel`, handlers of every kind, the client's side written
    /// frame by frame.
    final class Harness {
        let channel = EmbeddedChannel()
        let record = Record()
        let box = ChannelBox()
        weak var weakConnection: HTTP2Connection?
        private(set) var connection: HTTP2Connection?

        init(outboundFirst: (any ChannelOutboundHandler & Sendable)? = nil) throws {
            var router = ServerRouter()
            let record = record, box = box
            router.register("/t.T/Echo", .inlineUnary { request, _ in .success(request) })
            // Closes the connection from inside nghttp2's mem_recv: inline handlers run in the
            // callback that completes the request.
            router.register("/t.T/CloseInline", .inlineUnary { request, _ in
                box.channel?.close(promise: nil)
                return .success(request)
            })
            router.register("/t.T/Bidi", .bidirectionalStreaming { requests, _, writer in
                record.started()
                defer { record.ended() }
                for try await request in requests { try await writer.write(request) }
            })
            router.register("/t.T/Stream", .serverStreaming { request, _, writer in
                record.started()
                defer { record.ended() }
                while true { try await writer.write(request) }
            })
            let connection = HTTP2Connection(router: router, configuration: ServerConfiguration(), logger: Logger(label: "test"))
            self.connection = connection
            self.weakConnection = connection
            if let outboundFirst { try channel.pipeline.syncOperations.addHandler(outboundFirst) }
            try channel.pipeline.syncOperations.addHandler(connection)
            box.channel = channel
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        }

        /// The client preface and an empty SETTINGS.
        var preface: [UInt8] {
            Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + Frame(type: Frame.settings, flags: 0, streamID: 0, payload: []).bytes
        }

        /// HEADERS for `path` on stream `id` (HPACK literals, no Huffman), END_STREAM if asked.
        func headers(_ id: UInt32, _ path: String, endStream: Bool = false) -> [UInt8] {
            var block: [UInt8] = []
            for (name, value) in [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "test"),
                                  ("content-type", "application/grpc"), ("te", "trailers")] {
                block += [0, UInt8(name.utf8.count)] + Array(name.utf8) + [UInt8(value.utf8.count)] + Array(value.utf8)
            }
            return Frame(type: Frame.headers, flags: Frame.endHeaders | (endStream ? Frame.endStream : 0), streamID: id, payload: block).bytes
        }

        /// One gRPC message on stream `id`.
        func message(_ id: UInt32, _ bytes: [UInt8], endStream: Bool = false) -> [UInt8] {
            let length = UInt32(bytes.count)
            let framed = [0, UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)] + bytes
            return Frame(type: Frame.data, flags: endStream ? Frame.endStream : 0, streamID: id, payload: framed).bytes
        }

        /// Hands `bytes` to the connection as one read, then runs the loop (the handlers' tasks).
        func send(_ bytes: [UInt8]) throws {
            try channel.writeInbound(ByteBuffer(bytes: bytes))
            channel.pipeline.fireChannelReadComplete()
            channel.embeddedEventLoop.run()
        }

        /// Every frame written so far.
        func written() -> [Frame] {
            var pending: [UInt8] = []
            while let buffer = try? channel.readOutbound(as: ByteBuffer.self) { pending += buffer.readableBytesView }
            return Frame.takeWhole(from: &pending)
        }

        /// Finishes the channel, runs what is left on the loop and lets the connection go; then
        /// checks that the session was deleted and the connection freed.
        func finish(sourceLocation: SourceLocation = #_sourceLocation) {
            _ = try? channel.finish(acceptAlreadyClosed: true)
            channel.embeddedEventLoop.run()
            #expect(connection?.session == nil, "the nghttp2 session outlived the channel", sourceLocation: sourceLocation)
            box.channel = nil
            connection = nil
            #expect(weakConnection == nil, "the connection was not freed", sourceLocation: sourceLocation)
        }
    }

    @Test("closed from inside an nghttp2 callback: the session is deleted once mem_recv has returned")
    func closedInsideACallback() throws {
        let harness = try Harness()
        // Everything in one read: nghttp2 is still parsing the buffer when the handler closes.
        try harness.send(
            harness.preface + harness.headers(1, "/t.T/CloseInline") + harness.message(1, [1, 2, 3], endStream: true)
                + harness.headers(3, "/t.T/Echo") + harness.message(3, [4], endStream: true))
        #expect(!harness.channel.isActive)
        #expect(harness.connection?.session == nil)
        harness.finish()
    }

    @Test("closed with streaming handlers running: their tasks are cancelled and end")
    func closedWithHandlersRunning() throws {
        let harness = try Harness()
        try harness.send(
            harness.preface + harness.headers(1, "/t.T/Bidi") + harness.message(1, [1])
                + harness.headers(3, "/t.T/Stream") + harness.message(3, [2], endStream: true))
        #expect(harness.record.counts.started == 2)
        #expect(harness.record.counts.ended == 0)
        harness.channel.close(promise: nil)
        harness.channel.embeddedEventLoop.run()
        #expect(harness.record.counts.ended == 2)
        harness.finish()
    }

    @Test("a protocol error in the middle of a buffer whose first frames started calls")
    func protocolErrorMidBuffer() throws {
        let harness = try Harness()
        // A DATA frame on stream 0 is a connection error (RFC 9113 §6.1), after a call started.
        let bad = Frame(type: Frame.data, flags: 0, streamID: 0, payload: [0, 0, 0, 0, 0]).bytes
        try harness.send(
            harness.preface + harness.headers(1, "/t.T/Bidi") + harness.message(1, [1]) + harness.headers(3, "/t.T/Echo")
                + bad + harness.headers(5, "/t.T/Echo", endStream: true))
        let goAway = harness.written().compactMap(\.goAway).last
        #expect(goAway?.errorCode == 1)  // PROTOCOL_ERROR
        #expect(!harness.channel.isActive)
        #expect(harness.record.counts.started == harness.record.counts.ended)
        harness.finish()
    }

    /// Closes the channel when the connection writes its `closeOnWrite`-th buffer.
    final class CloseOnWrite: ChannelOutboundHandler, @unchecked Sendable {
        typealias OutboundIn = ByteBuffer
        private var writes = 0
        private let closeOnWrite: Int
        init(closeOnWrite: Int) { self.closeOnWrite = closeOnWrite }

        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            writes += 1
            guard writes == closeOnWrite else { return context.write(data, promise: promise) }
            context.close(promise: nil)
            promise?.fail(ChannelError.ioOnClosedChannel)
        }
    }

    @Test("closed while a flush writes, streams open", arguments: [1, 2, 3])
    func closedDuringFlush(closeOnWrite: Int) throws {
        let harness = try Harness(outboundFirst: CloseOnWrite(closeOnWrite: closeOnWrite))
        // Write 1 is the server's SETTINGS, written when the channel becomes active.
        for (index, id) in [UInt32(1), 3, 5].enumerated() where harness.channel.isActive {
            try? harness.send(
                (index == 0 ? harness.preface : []) + harness.headers(id, "/t.T/Bidi") + harness.message(id, [UInt8(id)])
                    + harness.headers(id + 100, "/t.T/Echo") + harness.message(id + 100, [1], endStream: true))
        }
        #expect(!harness.channel.isActive)
        #expect(harness.record.counts.started == harness.record.counts.ended)
        harness.finish()
    }

    @Test("a connection whose channel never became active is freed with its session")
    func neverActive() throws {
        let channel = EmbeddedChannel()
        weak var weakConnection: HTTP2Connection?
        do {
            let connection = HTTP2Connection(router: ServerRouter(), configuration: ServerConfiguration(), logger: Logger(label: "test"))
            weakConnection = connection
            try channel.pipeline.syncOperations.addHandler(connection)
            #expect(connection.session != nil)
            _ = try? channel.finish(acceptAlreadyClosed: true)
            #expect(connection.session == nil)
        }
        #expect(weakConnection == nil)
    }
}
