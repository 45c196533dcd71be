import NIOConcurrencyHelpers
import NIOCore
import Testing

@testable import GRPCProtocol
@testable import GRPCServer

@Suite struct GRPCMessageDeframerTests {
    private func frame(_ payload: [UInt8], compressed: Bool = false) -> [UInt8] {
        let length = UInt32(payload.count)
        return [compressed ? 1 : 0, UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)] + payload
    }

    private func append(_ bytes: [UInt8], to deframer: inout GRPCMessageDeframer) {
        bytes.withUnsafeBytes { deframer.append($0) }
    }

    @Test func wholeMessageInOneChunk() throws {
        var deframer = GRPCMessageDeframer(maxMessageBytes: 100)
        append(frame([1, 2, 3]), to: &deframer)
        let message = try #require(try deframer.next())
        #expect(Array(message.bytes.readableBytesView) == [1, 2, 3])
        #expect(message.compressed == false)
        #expect(try deframer.next() == nil)
        #expect(!deframer.hasPartialMessage)
    }

    @Test(arguments: 1...7) func prefixAndBodySplitAtEveryByte(chunkSize: Int) throws {
        var deframer = GRPCMessageDeframer(maxMessageBytes: 100)
        let bytes = frame(Array(0..<20)) + frame([9, 9])
        var messages: [[UInt8]] = []
        var index = 0
        while index < bytes.count {
            let end = min(index + chunkSize, bytes.count)
            append(Array(bytes[index..<end]), to: &deframer)
            while let message = try deframer.next() { messages.append(Array(message.bytes.readableBytesView)) }
            index = end
        }
        #expect(messages == [Array(0..<20), [9, 9]])
        #expect(!deframer.hasPartialMessage)
    }

    @Test func incompletePrefixIsPartial() throws {
        var deframer = GRPCMessageDeframer(maxMessageBytes: 100)
        append([0, 0, 0], to: &deframer)
        #expect(try deframer.next() == nil)
        #expect(deframer.hasPartialMessage)
    }

    @Test func zeroLengthMessage() throws {
        var deframer = GRPCMessageDeframer(maxMessageBytes: 100)
        append(frame([]), to: &deframer)
        let message = try #require(try deframer.next())
        #expect(message.bytes.readableBytes == 0)
    }

    @Test func exactlyTheLimitIsAccepted() throws {
        var deframer = GRPCMessageDeframer(maxMessageBytes: 64)
        append(frame(Array(repeating: 7, count: 64)), to: &deframer)
        let message = try #require(try deframer.next())
        #expect(message.bytes.readableBytes == 64)
    }

    @Test func oneOverTheLimitIsRefusedFromThePrefixAlone() {
        var deframer = GRPCMessageDeframer(maxMessageBytes: 64)
        // Only the 5-byte prefix: the refusal must not wait for (or buffer) the body.
        append(Array(frame(Array(repeating: 7, count: 65)).prefix(5)), to: &deframer)
        #expect(throws: GRPCMessageDeframer.Failure.messageTooLarge(length: 65, limit: 64)) {
            try deframer.next()
        }
    }

    @Test func compressedFlagIsReported() throws {
        var deframer = GRPCMessageDeframer(maxMessageBytes: 64)
        append(frame([1], compressed: true), to: &deframer)
        #expect(try #require(try deframer.next()).compressed)
    }

    @Test func unknownFlagBitsAreRefused() {
        var deframer = GRPCMessageDeframer(maxMessageBytes: 64)
        append([0x80, 0, 0, 0, 0], to: &deframer)
        #expect(throws: GRPCMessageDeframer.Failure.invalidFlags(0x80)) { try deframer.next() }
    }

    @Test func framerWritesPrefix() {
        var out = ByteBuffer()
        GRPCMessageFramer.append(ByteBuffer(bytes: [1, 2, 3]), to: &out)
        #expect(Array(out.readableBytesView) == frame([1, 2, 3]))
    }
}

@Suite struct GRPCHeaderValueTests {
    @Test(arguments: [
        ("1H", Int64(3_600_000_000_000)), ("2M", 120_000_000_000), ("3S", 3_000_000_000),
        ("100m", 100_000_000), ("5u", 5_000), ("7n", 7), ("99999999S", 99_999_999_000_000_000),
    ])
    func timeoutUnits(value: String, nanos: Int64) {
        #expect(GRPCTimeout.parse(Array(value.utf8)) == nanos)
    }

    @Test func hugeTimeoutSaturates() {
        #expect(GRPCTimeout.parse(Array("99999999H".utf8)) == Int64.max)
    }

    @Test(arguments: ["", "S", "10", "10s", "123456789S", "-1S", "1.5S", "1 S"])
    func malformedTimeouts(value: String) {
        #expect(GRPCTimeout.parse(Array(value.utf8)) == nil)
    }

    @Test func percentEncodingRoundTrip() {
        let message = "group 'x' not found: 100% 名前\n"
        let encoded = GRPCPercentEncoding.encode(message)
        #expect(encoded.allSatisfy { $0 >= 0x20 && $0 <= 0x7E })
        #expect(String(decoding: encoded, as: UTF8.self).hasPrefix("group 'x' not found: 100%25 %E5"))
        #expect(GRPCPercentEncoding.decode(encoded) == message)
    }

    @Test func malformedPercentEscapesAreKept() {
        #expect(GRPCPercentEncoding.decode(Array("50%zz%4".utf8)) == "50%zz%4")
    }

    @Test(arguments: [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foobar", "Zm9vYmFy")])
    func base64Vectors(input: String, output: String) {
        #expect(String(decoding: Base64.encode(Array(input.utf8)), as: UTF8.self) == output)
    }

    @Test func statusCodeNames() {
        #expect(GRPCStatus.Code.unauthenticated.description == "UNAUTHENTICATED")
        #expect(GRPCStatus.Code(rawValue: 17) == nil)
        #expect(GRPCStatus.Code(rawValue: 4) == .deadlineExceeded)
    }
}

@Suite struct ServerStreamWriterTests {
    final class Sink: Sendable {
        private let items = NIOLockedValueBox<[ByteBuffer]>([])
        func add(_ buffer: ByteBuffer) { items.withLockedValue { $0.append(buffer) } }
        var count: Int { items.withLockedValue { $0.count } }
    }

    @Test func queueIsBoundedAndDrains() {
        let sink = Sink()
        let writer = ServerStreamWriter(capacity: 2) { sink.add($0) }
        #expect(writer.tryWrite(ByteBuffer(bytes: [1])) == .enqueued)
        #expect(writer.tryWrite(ByteBuffer(bytes: [2])) == .enqueued)
        #expect(writer.tryWrite(ByteBuffer(bytes: [3])) == .full)
        #expect(writer.queuedCount == 2)
        #expect(sink.count == 2)
        writer.didSend()
        #expect(writer.queuedCount == 1)
        #expect(writer.tryWrite(ByteBuffer(bytes: [3])) == .enqueued)
        writer.close()
        #expect(writer.tryWrite(ByteBuffer(bytes: [4])) == .closed)
        #expect(sink.count == 3)
    }

    @Test func blockedWriteResumesWhenSpaceFrees() async throws {
        let sink = Sink()
        let writer = ServerStreamWriter(capacity: 1) { sink.add($0) }
        try await writer.write(ByteBuffer(bytes: [1]))
        let second = Task { try await writer.write(ByteBuffer(bytes: [2])) }
        // The second write cannot complete until the first message is sent.
        for _ in 0..<100 { await Task.yield() }
        #expect(sink.count == 1)
        #expect(writer.queuedCount == 1)
        writer.didSend()
        try await second.value
        #expect(sink.count == 2)
    }

    @Test func blockedWriteFailsWhenTheCallEnds() async {
        let writer = ServerStreamWriter(capacity: 1) { _ in }
        #expect(writer.tryWrite(ByteBuffer(bytes: [1])) == .enqueued)
        let blocked = Task { try await writer.write(ByteBuffer(bytes: [2])) }
        writer.close()
        await #expect(throws: GRPCStatus.self) { try await blocked.value }
    }
}
