import Logging
import NIOCore
import NIOEmbedded
import NIOTLS
import Testing

@testable import GRPCProtocol
@testable import GRPCServer

/// The handler between TLS and HTTP/2: only a handshake that negotiated `h2`, completed in time,
/// lets bytes through.
@Suite struct TLSHandshakeGateTests {
    /// Collects what passes the gate.
    final class Reads: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        var bytes: [UInt8] = []
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            bytes += unwrapInboundIn(data).readableBytesView
        }
    }

    private func channel(timeout: TimeAmount = .seconds(120), acceptsHTTP1: Bool = false) throws -> (EmbeddedChannel, Reads) {
        let reads = Reads()
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(
            TLSHandshakeGate(handshakeTimeout: timeout, logger: Logger(label: "test"), acceptsHTTP1: acceptsHTTP1))
        try channel.pipeline.syncOperations.addHandler(reads)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return (channel, reads)
    }

    @Test func h2PassesBytesThrough() throws {
        let (channel, reads) = try channel()
        channel.pipeline.fireUserInboundEventTriggered(TLSUserEvent.handshakeCompleted(negotiatedProtocol: "h2"))
        try channel.writeInbound(ByteBuffer(bytes: [1, 2, 3]))
        #expect(reads.bytes == [1, 2, 3])
        // The handshake timeout no longer applies.
        channel.embeddedEventLoop.advanceTime(by: .seconds(500))
        #expect(channel.isActive)
    }

    @Test func http1PassesWhenConnectIsServed() throws {
        let (channel, reads) = try channel(acceptsHTTP1: true)
        channel.pipeline.fireUserInboundEventTriggered(TLSUserEvent.handshakeCompleted(negotiatedProtocol: "http/1.1"))
        try channel.writeInbound(ByteBuffer(bytes: [4, 5]))
        #expect(reads.bytes == [4, 5])
        #expect(channel.isActive)
    }

    @Test(arguments: ["http/1.1", nil] as [String?])
    func anythingButH2IsClosed(negotiated: String?) throws {
        let (channel, reads) = try channel()
        channel.pipeline.fireUserInboundEventTriggered(TLSUserEvent.handshakeCompleted(negotiatedProtocol: negotiated))
        #expect(!channel.isActive)
        _ = try? channel.writeInbound(ByteBuffer(bytes: [1, 2, 3]))
        #expect(reads.bytes.isEmpty, "no byte reaches HTTP/2")
    }

    @Test func handshakeNotDoneInTimeIsClosed() throws {
        let (channel, reads) = try channel(timeout: .seconds(10))
        try channel.writeInbound(ByteBuffer(bytes: [9]))
        #expect(reads.bytes.isEmpty, "nothing passes before the handshake")
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(9_999))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(!channel.isActive)
    }
}
