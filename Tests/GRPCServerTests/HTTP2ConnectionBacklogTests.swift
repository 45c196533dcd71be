import Logging
import NIOCore
import NIOEmbedded
import Testing

@testable import GRPCServer

/// A client whose socket takes nothing (the channel stays unwritable): the stalled-write timeout
/// ends its connection, and one that starts reading again in time keeps it. `HTTP2Connection` in
/// an `EmbeddedChannel`, its timers on the embedded loop's clock.
@Suite struct HTTP2ConnectionBacklogTests {
    typealias Frame = HTTP2ConnectionKeepaliveTests.Frame

    final class Client {
        let channel = EmbeddedChannel()
        private var pending: [UInt8] = []

        init(stalledWriteTimeout: TimeAmount) throws {
            var configuration = ServerConfiguration()
            configuration.limits.stalledWriteTimeout = stalledWriteTimeout
            var router = ServerRouter()
            router.register("/test.Echo/Now", .inlineUnary { request, _ in .success(request) })
            try channel.pipeline.syncOperations.addHandler(
                HTTP2Connection(router: router, configuration: configuration, logger: Logger(label: "test")))
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
            try send(Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + Frame(type: Frame.settings, flags: 0, streamID: 0, payload: []).bytes)
            try send(Frame(type: Frame.settings, flags: Frame.ack, streamID: 0, payload: []).bytes)
            _ = take()
        }

        func send(_ bytes: [UInt8]) throws { try channel.writeInbound(ByteBuffer(bytes: bytes)) }

        /// A unary call whose response is a 1000-byte message.
        func call(_ id: UInt32) throws {
            var block: [UInt8] = []
            for (name, value) in [(":method", "POST"), (":scheme", "http"), (":path", "/test.Echo/Now"), (":authority", "t"),
                                  ("content-type", "application/grpc")] {
                block += [0, UInt8(name.utf8.count)] + Array(name.utf8) + [UInt8(value.utf8.count)] + Array(value.utf8)
            }
            try send(Frame(type: Frame.headers, flags: Frame.endHeaders, streamID: id, payload: block).bytes)
            try send(Frame(type: Frame.data, flags: Frame.endStream, streamID: id, payload: [0, 0, 0, 0x03, 0xE8] + Array(repeating: 7, count: 1000)).bytes)
        }

        func take() -> [Frame] {
            while let buffer = try? channel.readOutbound(as: ByteBuffer.self) { pending += buffer.readableBytesView }
            var frames: [Frame] = []
            while pending.count >= 9 {
                let length = Int(pending[0]) << 16 | Int(pending[1]) << 8 | Int(pending[2])
                guard pending.count >= 9 + length else { break }
                let id = pending[5..<9].reduce(UInt32(0)) { $0 << 8 | UInt32($1) } & 0x7FFF_FFFF
                frames.append(Frame(type: pending[3], flags: pending[4], streamID: id, payload: Array(pending[9..<9 + length])))
                pending.removeFirst(9 + length)
            }
            return frames
        }

        func advance(by amount: TimeAmount) { channel.embeddedEventLoop.advanceTime(by: amount) }
    }

    @Test func aSocketThatTakesNothingIsClosedAfterTheStalledWriteTimeout() throws {
        let client = try Client(stalledWriteTimeout: .seconds(30))
        client.channel.isWritable = false
        try client.call(1)
        #expect(client.take().isEmpty, "nothing is written while the channel is not writable")
        client.advance(by: .seconds(29))
        #expect(client.channel.isActive)
        client.advance(by: .seconds(1))
        #expect(!client.channel.isActive, "closed once the timeout passed without a byte sent")
        let goAway = try #require(client.take().first { $0.type == Frame.goAway }?.goAway)
        #expect(goAway.errorCode == 0xB && goAway.debug == "write_stalled" && goAway.lastStreamID == 1)
    }

    @Test func aSocketThatTakesBytesAgainInTimeKeepsTheConnection() throws {
        let client = try Client(stalledWriteTimeout: .seconds(30))
        client.channel.isWritable = false
        try client.call(1)
        client.advance(by: .seconds(20))
        client.channel.isWritable = true
        client.channel.pipeline.fireChannelWritabilityChanged()
        let frames = client.take()
        #expect(frames.contains { $0.type == Frame.data && $0.streamID == 1 }, "the response goes out once the socket takes it")
        client.advance(by: .seconds(120))
        #expect(client.channel.isActive)
        #expect(!client.take().contains { $0.type == Frame.goAway })
    }
}
