import CZlib
import NIOCore
import Testing

@testable import GRPCProtocol
@testable import GRPCServer

/// gzip and deflate at the message level: the inflate bound, corrupt bodies, the accepted set.
@Suite struct GRPCCompressionTests {
    let allocator = ByteBufferAllocator()

    /// `count` bytes that compress well but not trivially.
    private func text(_ count: Int) -> ByteBuffer {
        let sentence = Array("groupd answers in the encoding the request used. ".utf8)
        return ByteBuffer(bytes: (0..<count).map { sentence[$0 % sentence.count] })
    }

    @Test("deflate then inflate gives the message back", arguments: GRPCCompression.allCases)
    func roundTrip(_ compression: GRPCCompression) throws {
        let message = text(10_000)
        let compressed = try #require(compression.deflate(message, allocator: allocator))
        #expect(compressed.readableBytes < message.readableBytes / 5)
        #expect(try compression.inflate(compressed, limit: 10_000, allocator: allocator) == message)
    }

    @Test("the formats are zlib's: gzip has the gzip magic, deflate the zlib header")
    func formats() throws {
        let gzip = try #require(GRPCCompression.gzip.deflate(text(2000), allocator: allocator))
        #expect(Array(gzip.readableBytesView.prefix(2)) == [0x1F, 0x8B])
        let deflate = try #require(GRPCCompression.deflate.deflate(text(2000), allocator: allocator))
        #expect(deflate.readableBytesView.first == 0x78)
    }

    @Test("a message that inflates past the limit stops at it: a bomb is never inflated whole", arguments: GRPCCompression.allCases)
    func bomb(_ compression: GRPCCompression) throws {
        // 64 MiB of zeros compress to about 64 KiB.
        let zeros = ByteBuffer(repeating: 0, count: 64 << 20)
        let bomb = try #require(compression.deflate(zeros, allocator: allocator))
        #expect(bomb.readableBytes < 100_000)
        #expect(throws: GRPCCompression.InflateFailure.tooLarge(limit: 1 << 20)) {
            try compression.inflate(bomb, limit: 1 << 20, allocator: allocator)
        }
    }

    @Test("a message exactly at the limit is accepted; one byte more is not")
    func limitIsInclusive() throws {
        let message = text(4096)
        let compressed = try #require(GRPCCompression.gzip.deflate(message, allocator: allocator))
        #expect(try GRPCCompression.gzip.inflate(compressed, limit: 4096, allocator: allocator) == message)
        #expect(throws: GRPCCompression.InflateFailure.tooLarge(limit: 4095)) {
            try GRPCCompression.gzip.inflate(compressed, limit: 4095, allocator: allocator)
        }
    }

    @Test("corrupt, truncated, empty, trailing and mismatched bodies are refused as corrupt")
    func corrupt() throws {
        let good = try #require(GRPCCompression.gzip.deflate(text(5000), allocator: allocator))
        var flipped = Array(good.readableBytesView)
        flipped[flipped.count / 2] ^= 0xFF
        flipped[flipped.count / 2 + 1] ^= 0x55
        var trailing = good
        trailing.writeBytes([1, 2, 3])
        let cases: [(String, GRPCCompression, ByteBuffer)] = [
            ("not gzip at all", .gzip, ByteBuffer(bytes: Array("this is not compressed".utf8))),
            ("flipped bytes", .gzip, ByteBuffer(bytes: flipped)),
            ("truncated", .gzip, good.getSlice(at: good.readerIndex, length: good.readableBytes - 10)!),
            ("empty", .gzip, ByteBuffer()),
            ("bytes after the end", .gzip, trailing),
            ("gzip read as deflate", .deflate, good),
        ]
        for (name, compression, body) in cases {
            do {
                _ = try compression.inflate(body, limit: 1 << 20, allocator: allocator)
                Issue.record("\(name): accepted")
            } catch {
                guard case .corrupt(let reason) = error else {
                    Issue.record("\(name): \(error)")
                    continue
                }
                #expect(!reason.isEmpty, "\(name)")
            }
        }
    }

    @Test("messages compression would not shrink stay uncompressed")
    func incompressible() {
        #expect(GRPCCompression.gzip.deflate(ByteBuffer(bytes: [1, 2, 3, 4, 5, 6, 7, 8]), allocator: allocator) == nil)
    }

    @Test("grpc-accept-encoding lists are read with spaces and unknown names", arguments: [
        ("identity,deflate,gzip", UInt8(3)), ("identity, deflate, gzip", 3), ("gzip", 1), (" deflate ", 2),
        ("snappy,br", 0), ("", 0), ("gzip,,identity", 1), ("GZIP", 0),
    ])
    func acceptedSet(_ value: String, _ expected: UInt8) {
        let bytes = Array(value.utf8)
        #expect(bytes.withUnsafeBufferPointer { GRPCCompression.acceptedSet($0) } == expected)
    }

    @Test("grpc-accept-encoding on several lines is one list (RFC 9110 §5.3)", arguments: [
        (["deflate", "gzip"], 3), (["gzip", "deflate"], 3), (["identity", "deflate"], 2),
        (["deflate", "identity"], 2), (["deflate,gzip"], 3), (["snappy", "gzip"], 1),
    ] as [([String], UInt8)])
    func acceptedOverLines(_ lines: [String], _ expected: UInt8) {
        let stream = HTTP2Stream(id: 1, maxMessageBytes: 1024, allocator: allocator)
        let name = Array("grpc-accept-encoding".utf8)
        for line in lines {
            let value = Array(line.utf8)
            name.withUnsafeBufferPointer { name in value.withUnsafeBufferPointer { stream.acceptHeader(name: name, value: $0) } }
        }
        #expect(stream.acceptedEncodings == expected)
    }
}
