import FuzzSupport
import GRPCProtocol
import NIOCore

/// The gRPC deframer fed a stream in arbitrary chunks must hand out exactly what a one-pass
/// reading of the whole stream finds: the same messages in the same order, then the same
/// failure (or the same incomplete tail).
///
/// Input: byte 0 seeds the chunking (0 = one chunk), byte 1 picks the message size limit, the
/// rest is the stream.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDeframer(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let input = fuzzInput(start, count)
    guard input.count >= 2 else { return 0 }
    let limits = [0, 1, 16, 255, 1024, 4 << 20]
    let limit = limits[Int(input[1]) % limits.count]
    let stream = UnsafeRawBufferPointer(rebasing: input[2...])

    let expected = referenceDeframe(stream, limit: limit)

    var deframer = GRPCMessageDeframer(maxMessageBytes: limit)
    var found: [Outcome] = []
    var failed = false
    var useBuffer = false
    chunks: for chunk in Chunker(stream, seed: input[0]) {
        // Both append paths, alternately.
        if useBuffer {
            var buffer = ByteBuffer()
            buffer.writeBytes(chunk)
            deframer.append(buffer)
        } else {
            deframer.append(chunk)
        }
        useBuffer.toggle()
        while true {
            do throws(GRPCMessageDeframer.Failure) {
                guard let message = try deframer.next() else { break }
                found.append(.message(compressed: message.compressed, bytes: Array(message.bytes.readableBytesView)))
            } catch {
                found.append(.failure(error))
                failed = true
                break chunks
            }
        }
    }
    precondition(found == expected.outcomes, "chunked deframing differs from a one-pass reading: \(found) vs \(expected.outcomes)")
    if !failed {
        precondition(deframer.hasPartialMessage == (expected.leftover > 0), "partial message flag wrong: leftover \(expected.leftover)")
    }
    deframer.release()
    precondition(!deframer.hasPartialMessage)
    return 0
}

enum Outcome: Equatable {
    case message(compressed: Bool, bytes: [UInt8])
    case failure(GRPCMessageDeframer.Failure)
}

/// The gRPC length-prefixed format read straight from the whole stream.
func referenceDeframe(_ stream: UnsafeRawBufferPointer, limit: Int) -> (outcomes: [Outcome], leftover: Int) {
    var outcomes: [Outcome] = []
    var offset = 0
    while stream.count - offset >= 5 {
        let flags = stream[offset]
        let length = (1...4).map { Int(stream[offset + $0]) }.reduce(0) { $0 << 8 | $1 }
        if flags & 0xFE != 0 { return (outcomes + [.failure(.invalidFlags(flags))], stream.count - offset) }
        if length > limit { return (outcomes + [.failure(.messageTooLarge(length: length, limit: limit))], stream.count - offset) }
        guard stream.count - offset - 5 >= length else { break }
        outcomes.append(.message(compressed: flags == 1, bytes: Array(stream[offset + 5..<offset + 5 + length])))
        offset += 5 + length
    }
    return (outcomes, stream.count - offset)
}
