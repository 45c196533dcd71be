import Logging
import NIOCore
import NIOEmbedded
import Testing

@testable import GRPCProtocol
@testable import GRPCServer

/// A client whose socket takes nothing (the channel stays unwritable): the stalled-write timeout
/// ends its connection, and one that starts reading again in time keeps it. `HTTP2Connection` in
/// an `EmbeddedChannel`, its timers on the embedded loop's clock.
@Suite struct HTTP2ConnectionBacklogTests {
    typealias Frame = EmbeddedHTTP2Client.Frame

    final class Client: EmbeddedHTTP2Client {
        init(stalledWriteTimeout: TimeAmount) throws {
            var configuration = ServerConfiguration()
            configuration.limits.stalledWriteTimeout = stalledWriteTimeout
            try super.init(HTTP2Connection(router: Self.echoRouter(), configuration: configuration, logger: Logger(label: "test")))
            try sendPreface()
            _ = take()
        }

        /// A unary call whose response is a 1000-byte message.
        func call(_ id: UInt32) throws {
            let block = Self.headerBlock([(":method", "POST"), (":scheme", "http"), (":path", "/test.Echo/Now"), (":authority", "t"),
                                          ("content-type", "application/grpc")])
            try send(Frame(type: Frame.headers, flags: Frame.endHeaders, streamID: id, payload: block))
            try send(Frame(type: Frame.data, flags: Frame.endStream, streamID: id, payload: [0, 0, 0, 0x03, 0xE8] + Array(repeating: 7, count: 1000)))
        }
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
