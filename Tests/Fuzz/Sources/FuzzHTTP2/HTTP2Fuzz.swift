import FuzzChannel
import FuzzSupport
import Logging
import NIOCore
import NIOEmbedded

import GRPCProtocol
@testable import GRPCServer

/// A server connection — nghttp2's session and groupd's callbacks, streams and handlers — fed
/// arbitrary bytes as a client would send them, then closed: nothing may crash, leak or touch
/// freed memory, whatever arrives and however it is split.
///
/// Input: byte 0's low 7 bits seed the chunking (0 = one chunk); its high bit advances the
/// loop's clock by a second after every chunk (keepalive, idle and drain timers). The rest is
/// what the client sends, its preface included.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTP2(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let input = fuzzInput(start, count)
    guard input.count >= 1 else { return 0 }
    let channel = EmbeddedChannel()
    let connection = HTTP2Connection(router: router, configuration: configuration, logger: logger)
    try! channel.pipeline.syncOperations.addHandler(connection)
    try! channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
    feedAndClose(
        channel, UnsafeRawBufferPointer(rebasing: input[1...]), seed: input[0] & 0x7F, advancesClock: input[0] & 0x80 != 0)
    precondition(connection.session == nil, "the nghttp2 session outlived its channel")
    return 0
}


private let logger = Logger(label: "fuzz", factory: { _ in SwiftLogNoOpLogHandler() })

private let configuration: ServerConfiguration = {
    var configuration = ServerConfiguration()
    // Small enough that the fuzzer reaches the limits.
    configuration.maxMessageBytes = 1 << 10
    configuration.streamQueueCapacity = 4
    configuration.http2.maxConcurrentStreams = 8
    return configuration
}()

/// One method of each kind.
private let router = echoRouter()
