import NIOConcurrencyHelpers
import NIOCore
import Testing

@testable import GRPCProtocol
@testable import GRPCServer

/// The batched path from streaming calls to DATA frames: the connection's outbox and the
/// stream's queue of unframed messages.
@Suite struct StreamOutboundTests {
    /// The bytes of a gRPC-framed uncompressed message.
    private func framed(_ payload: [UInt8]) -> [UInt8] {
        let length = UInt32(payload.count)
        return [0, UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)] + payload
    }

    /// Drains a stream through DATA payloads of at most `size` bytes; returns the bytes.
    private func drain(_ stream: HTTP2Stream, payloadSize size: Int) -> [UInt8] {
        var out: [UInt8] = []
        var scratch = [UInt8](repeating: 0xAA, count: size)
        while true {
            let count = scratch.withUnsafeMutableBytes { stream.drainOutbound(into: $0) }
            if count == 0 { return out }
            out += scratch[0..<count]
        }
    }

    @Test func outboxSchedulesOneDrainPerBurstAndKeepsOrder() {
        let outbox = ConnectionOutbox()
        #expect(outbox.post(ByteBuffer(bytes: [1]), toStream: 1))
        #expect(!outbox.post(ByteBuffer(bytes: [2]), toStream: 3))
        #expect(!outbox.post(ByteBuffer(bytes: [3]), toStream: 1))
        var batch: [ConnectionOutbox.Entry] = []
        outbox.takeAll(into: &batch)
        #expect(batch.map(\.streamID) == [1, 3, 1])
        #expect(batch.map { Array($0.message.readableBytesView) } == [[1], [2], [3]])
        // After the drain took the entries, the next message schedules a new drain.
        batch.removeAll(keepingCapacity: true)
        #expect(outbox.post(ByteBuffer(bytes: [4]), toStream: 5))
        outbox.takeAll(into: &batch)
        #expect(batch.map(\.streamID) == [5])
        outbox.takeAll(into: &batch)
        #expect(batch.isEmpty)
    }

    @Test func messagesAreFramedAsTheyAreSentWhateverThePayloadSize() {
        let messages: [[UInt8]] = [[1, 2, 3], [], Array(0..<200).map { UInt8($0) }, [9]]
        let expected = messages.flatMap(framed)
        for size in [1, 2, 3, 4, 5, 6, 7, 16, 1000] {
            let stream = HTTP2Stream(id: 1, maxMessageBytes: 1024, allocator: ByteBufferAllocator())
            for message in messages { stream.appendMessage(ByteBuffer(bytes: message), fromWriter: false) }
            #expect(drain(stream, payloadSize: size) == expected, "DATA payloads of \(size) bytes")
            #expect(stream.outbound.isEmpty)
        }
    }

    @Test func sharedMessageIsNotConsumedByOneStream() {
        let shared = ByteBuffer(bytes: [7, 7, 7, 7])
        let first = HTTP2Stream(id: 1, maxMessageBytes: 1024, allocator: ByteBufferAllocator())
        let second = HTTP2Stream(id: 3, maxMessageBytes: 1024, allocator: ByteBufferAllocator())
        first.appendMessage(shared, fromWriter: false)
        second.appendMessage(shared, fromWriter: false)
        #expect(drain(first, payloadSize: 3) == framed([7, 7, 7, 7]))
        #expect(drain(second, payloadSize: 100) == framed([7, 7, 7, 7]))
        #expect(shared.readableBytes == 4)
    }

    @Test func writerSlotIsFreedOnlyWhenTheWholeMessageIsSent() {
        let writer = ServerStreamWriter(capacity: 1) { _ in }
        let stream = HTTP2Stream(id: 1, maxMessageBytes: 1024, allocator: ByteBufferAllocator())
        stream.writer = writer
        #expect(writer.tryWrite(ByteBuffer(bytes: [1, 2])) == .enqueued)
        stream.appendMessage(ByteBuffer(bytes: [1, 2]), fromWriter: true)
        var scratch = [UInt8](repeating: 0, count: 6)
        let partial = scratch.withUnsafeMutableBytes { stream.drainOutbound(into: $0) }
        #expect(partial == 6)
        #expect(writer.queuedCount == 1)
        #expect(writer.tryWrite(ByteBuffer(bytes: [3])) == .full)
        let rest = scratch.withUnsafeMutableBytes { stream.drainOutbound(into: $0) }
        #expect(rest == 1)
        #expect(writer.queuedCount == 0)
        #expect(writer.tryWrite(ByteBuffer(bytes: [3])) == .enqueued)
    }
}
