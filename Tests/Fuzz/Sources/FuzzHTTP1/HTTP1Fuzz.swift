import FuzzChannel
import FuzzSupport
import Logging
import NIOCore
import NIOEmbedded

import GRPCProtocol
@testable import GRPCServer

/// groupd's HTTP/1.1 request parser and connection fed what a client might send.
///
/// First the parser alone: fed in arbitrary chunks it must find exactly what a one-pass reading of
/// the whole input finds (the same heads, body bytes and ends, then the same refusal or the same
/// wait for more), and every head it accepts must be unambiguous (one framing). Then a whole
/// connection (``HTTP2Connection`` handing over to ``HTTP1Connection``, Connect with inline, async,
/// failing and server-streaming methods, and a bidirectional one it refuses) is fed the same
/// chunks and closed: nothing may crash, leak or touch freed memory.
///
/// Input: byte 0's low 7 bits seed the chunking (0 = one chunk); its high bit advances the loop's
/// clock by a second after every chunk. The rest is what the client sends.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTP1(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let input = fuzzInput(start, count)
    guard input.count >= 1 else { return 0 }
    let bytes = UnsafeRawBufferPointer(rebasing: input[1...])
    let seed = input[0] & 0x7F

    let whole = parse([bytes])
    let chunked = parse(Array(Chunker(bytes, seed: seed)))
    precondition(whole == chunked, "chunked parsing differs from a one-pass reading: \(chunked) vs \(whole)")

    let channel = EmbeddedChannel()
    let connection = HTTP2Connection(router: router, configuration: configuration, logger: logger, connect: connect)
    try! channel.pipeline.syncOperations.addHandler(connection)
    try! channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
    feedAndClose(channel, bytes, seed: seed, advancesClock: input[0] & 0x80 != 0)
    return 0
}

/// What the parser made of the input: one line per event, and how it stopped.
private func parse(_ chunks: [UnsafeRawBufferPointer]) -> [String] {
    var parser = HTTP1RequestParser(limits: limits)
    var buffer = ByteBuffer()
    var events: [String] = []
    var body: [UInt8] = []
    for chunk in chunks {
        buffer.writeBytes(chunk)
        do throws(HTTP1RequestError) {
            while let event = try parser.next(&buffer) {
                switch event {
                case .head(let head):
                    let framings = head.headers.filter { $0.name == "content-length" || $0.name == "transfer-encoding" }
                    precondition(framings.count <= 1, "a head with two framings was accepted: \(head.headers)")
                    precondition(head.minorVersion <= 1 && !head.method.isEmpty && !head.target.isEmpty)
                    events.append("head \(head.method) \(head.target) 1.\(head.minorVersion) \(head.framing) \(head.keepAlive) \(head.headers.count)")
                case .body(let part):
                    precondition(part.readableBytes > 0, "an empty body event")
                    body += part.readableBytesView
                case .end:
                    events.append("body \(body.count) \(body.hashValue) end")
                    body = []
                }
            }
        } catch {
            events.append("refused \(error.code.httpStatus)")
            return events
        }
    }
    events.append("waiting with \(body.count) body bytes")
    return events
}


private let logger = Logger(label: "fuzz", factory: { _ in SwiftLogNoOpLogHandler() })

/// Small enough that the fuzzer reaches them.
private let limits = HTTP1RequestParser.Limits(maxHeadBytes: 512, maxHeaderFields: 8, maxChunkLineBytes: 64, maxMethodBytes: 32)

private let configuration: ServerConfiguration = {
    var configuration = ServerConfiguration()
    configuration.maxMessageBytes = 1 << 10
    configuration.streamQueueCapacity = 4
    return configuration
}()

/// One method of each kind (a bidirectional one too, which Connect refuses).
private let router = echoRouter()

private let connect = ConnectProtocol(router: router, codec: nil, maxMessageBytes: configuration.maxMessageBytes)
