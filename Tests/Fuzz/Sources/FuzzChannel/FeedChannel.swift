import FuzzSupport
import GRPCProtocol
import NIOCore
import NIOEmbedded

/// Feeds `bytes` to a connected `channel` as a client's reads, in the chunks `seed` picks
/// (``Chunker``), each followed by `channelReadComplete` and a run of the loop (and, with
/// `advancesClock`, a second of the loop's clock); stops early when the channel closes or its
/// handler throws. Then closes the channel and runs the loop once more, so that the handlers'
/// tasks see the close and end. Everything the server writes is read and dropped.
public func feedAndClose(_ channel: EmbeddedChannel, _ bytes: UnsafeRawBufferPointer, seed: UInt8, advancesClock: Bool) {
    for chunk in Chunker(bytes, seed: seed) {
        guard channel.isActive else { break }
        var buffer = channel.allocator.buffer(capacity: chunk.count)
        buffer.writeBytes(chunk)
        do {
            try channel.writeInbound(buffer)
        } catch {
            break
        }
        channel.pipeline.fireChannelReadComplete()
        channel.embeddedEventLoop.run()
        if advancesClock { channel.embeddedEventLoop.advanceTime(by: .seconds(1)) }
        drainOutbound(channel)
    }
    _ = try? channel.finish(acceptAlreadyClosed: true)
    channel.embeddedEventLoop.run()
    drainOutbound(channel)
}

/// Reads and drops what the server wrote.
public func drainOutbound(_ channel: EmbeddedChannel) {
    while let written = try? channel.readOutbound(as: ByteBuffer.self), written.readableBytes >= 0 {}
}

/// One method of each kind, each echoing its request: `/fuzz.Echo/Inline`, `/fuzz.Echo/Fail`
/// (refused, `INVALID_ARGUMENT`), `/fuzz.Echo/Unary`, `/fuzz.Echo/Stream` (three messages) and
/// `/fuzz.Echo/Bidi`.
public func echoRouter() -> ServerRouter {
    var router = ServerRouter()
    router.register("/fuzz.Echo/Inline", .inlineUnary { request, _ in .success(request) })
    router.register("/fuzz.Echo/Fail", .inlineUnary { _, _ in .failure(GRPCStatus(.invalidArgument, "refused")) })
    router.register("/fuzz.Echo/Unary", .unary { request, _ in request })
    router.register("/fuzz.Echo/Stream", .serverStreaming { request, _, writer in
        for _ in 0..<3 { try await writer.write(request) }
    })
    router.register("/fuzz.Echo/Bidi", .bidirectionalStreaming { requests, _, writer in
        for try await request in requests { try await writer.write(request) }
    })
    return router
}
