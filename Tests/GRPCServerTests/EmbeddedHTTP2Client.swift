import NIOCore
import NIOEmbedded

@testable import GRPCProtocol
@testable import GRPCServer

/// A client written frame by frame against a real `HTTP2Connection` (nghttp2 inside) in an
/// `EmbeddedChannel`, whose timers run on the embedded loop's clock. The suites subclass it with
/// the configuration, router and helpers they need.
class EmbeddedHTTP2Client {
    /// One HTTP/2 frame, as sent or as read back from the server.
    struct Frame: Equatable {
        var type: UInt8
        var flags: UInt8
        var streamID: UInt32
        var payload: [UInt8]

        static let data: UInt8 = 0, headers: UInt8 = 1, rstStream: UInt8 = 3, settings: UInt8 = 4, ping: UInt8 = 6
        static let goAway: UInt8 = 7, windowUpdate: UInt8 = 8
        static let ack: UInt8 = 1, endStream: UInt8 = 1, endHeaders: UInt8 = 4

        var bytes: [UInt8] {
            let length = UInt32(payload.count)
            return [UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF), type, flags,
                    UInt8(streamID >> 24 & 0x7F), UInt8(streamID >> 16 & 0xFF), UInt8(streamID >> 8 & 0xFF), UInt8(streamID & 0xFF)]
                + payload
        }

        /// The whole frames at the start of `bytes`, removed from it (a partial frame stays).
        static func takeWhole(from bytes: inout [UInt8]) -> [Frame] {
            var frames: [Frame] = []
            while bytes.count >= 9 {
                let length = Int(bytes[0]) << 16 | Int(bytes[1]) << 8 | Int(bytes[2])
                guard bytes.count >= 9 + length else { break }
                let id = bytes[5..<9].reduce(UInt32(0)) { $0 << 8 | UInt32($1) } & 0x7FFF_FFFF
                frames.append(Frame(type: bytes[3], flags: bytes[4], streamID: id, payload: Array(bytes[9..<9 + length])))
                bytes.removeFirst(9 + length)
            }
            return frames
        }

        /// GOAWAY's last stream id, error code and debug data.
        var goAway: (lastStreamID: UInt32, errorCode: UInt32, debug: String)? {
            guard type == Self.goAway, payload.count >= 8 else { return nil }
            func word(_ at: Int) -> UInt32 { payload[at..<at + 4].reduce(0) { $0 << 8 | UInt32($1) } }
            return (word(0) & 0x7FFF_FFFF, word(4), String(decoding: payload[8...], as: UTF8.self))
        }
    }

    /// The client connection preface's fixed part.
    static let magic = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    let channel = EmbeddedChannel()
    /// Bytes the server wrote that do not make a whole frame yet.
    private var pending: [UInt8] = []

    /// Puts `connection` in the channel and connects it.
    init(_ connection: HTTP2Connection) throws {
        try channel.pipeline.syncOperations.addHandler(connection)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
    }

    var isOpen: Bool { channel.isActive }

    /// Sends `bytes` as one read.
    func send(_ bytes: [UInt8]) throws { try channel.writeInbound(ByteBuffer(bytes: bytes)) }

    func send(_ frame: Frame) throws { try send(frame.bytes) }

    /// The client preface and an empty SETTINGS, then (unless told not to) the ACK of the
    /// server's SETTINGS.
    func sendPreface(acknowledgingSettings: Bool = true) throws {
        try send(Self.magic + Frame(type: Frame.settings, flags: 0, streamID: 0, payload: []).bytes)
        if acknowledgingSettings {
            try send(Frame(type: Frame.settings, flags: Frame.ack, streamID: 0, payload: []))
        }
    }

    /// Every whole frame the server wrote since the last call.
    func take() -> [Frame] {
        while let buffer = try? channel.readOutbound(as: ByteBuffer.self) { pending += buffer.readableBytesView }
        return Frame.takeWhole(from: &pending)
    }

    func advance(by amount: TimeAmount) { channel.embeddedEventLoop.advanceTime(by: amount) }

    /// A router with one method, `/test.Echo/Now`, a unary call that answers its request.
    static func echoRouter() -> ServerRouter {
        var router = ServerRouter()
        router.register("/test.Echo/Now", .inlineUnary { request, _ in .success(request) })
        return router
    }

    /// A header block of HPACK literals without indexing, no Huffman (every string under 127 bytes).
    static func headerBlock(_ fields: [(String, String)]) -> [UInt8] {
        var block: [UInt8] = []
        for (name, value) in fields {
            block += [0, UInt8(name.utf8.count)] + Array(name.utf8) + [UInt8(value.utf8.count)] + Array(value.utf8)
        }
        return block
    }
}
