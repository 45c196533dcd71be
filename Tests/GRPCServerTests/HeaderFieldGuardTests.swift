import CNGHTTP2
import NIOCore
import Testing

@testable import GRPCProtocol
@testable import GRPCServer

/// The guard that turns a header field too long for nghttp2's HPACK inflater into a refusal of
/// its stream: what it passes is checked by decoding it with nghttp2's own inflater.
@Suite struct HeaderFieldGuardTests {
    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
    static let settings = frame(type: 0x4, flags: 0, stream: 0, payload: [])

    static func frame(type: UInt8, flags: UInt8, stream: UInt32, payload: [UInt8]) -> [UInt8] {
        let n = payload.count
        return [UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF), type, flags,
                UInt8(stream >> 24 & 0x7F), UInt8(stream >> 16 & 0xFF), UInt8(stream >> 8 & 0xFF), UInt8(stream & 0xFF)] + payload
    }

    /// How a literal field is represented (RFC 7541 §6.2).
    enum Indexing: CaseIterable, Sendable {
        case incremental, without, never

        var first: UInt8 {
            switch self {
            case .incremental: 0x40
            case .without: 0x00
            case .never: 0x10
            }
        }
    }

    /// A literal with a new name; `huffmanValue` only sets the value's H bit (the guard never
    /// decodes, and such a value is replaced before anything does).
    static func literal(_ name: [UInt8], _ value: [UInt8], _ indexing: Indexing, huffmanValue: Bool = false) -> [UInt8] {
        [indexing.first] + HPACKBlockScanner.lengthPrefix(name.count, huffman: false) + name
            + HPACKBlockScanner.lengthPrefix(value.count, huffman: huffmanValue) + value
    }

    static func literal(_ name: String, _ value: String, _ indexing: Indexing = .without) -> [UInt8] {
        literal(Array(name.utf8), Array(value.utf8), indexing)
    }

    static let requestFields = literal(":method", "POST") + literal(":path", "/x.Y/Z") + literal("content-type", "application/grpc")

    /// The block in a HEADERS frame and CONTINUATION frames of at most 16 KiB.
    static func headerFrames(stream: UInt32, block: [UInt8], endStream: Bool = true) -> [[UInt8]] {
        var chunks: [[UInt8]] = stride(from: 0, to: block.count, by: 16384).map { Array(block[$0..<min($0 + 16384, block.count)]) }
        if chunks.isEmpty { chunks = [[]] }
        return chunks.enumerated().map { index, chunk in
            let flags: UInt8 = (index == 0 && endStream ? 0x1 : 0) | (index == chunks.count - 1 ? 0x4 : 0)
            return frame(type: index == 0 ? 0x1 : 0x9, flags: flags, stream: stream, payload: chunk)
        }
    }

    /// Runs `input` through a guard in reads of the given sizes (the rest in one read).
    static func guarded(_ input: [UInt8], reads: [Int] = [], guard headerGuard: inout HeaderFieldGuard) -> (output: [UInt8], oversized: [Int32]) {
        var output: [UInt8] = []
        var oversized: [Int32] = []
        var offset = 0
        for size in reads + [input.count] where offset < input.count {
            let end = min(offset + size, input.count)
            let result = headerGuard.process(ByteBuffer(bytes: input[offset..<end]), allocator: ByteBufferAllocator(), oversized: &oversized)
            output += result.readableBytesView
            offset = end
        }
        return (output, oversized)
    }

    static func guarded(_ input: [UInt8], reads: [Int] = []) -> (output: [UInt8], oversized: [Int32]) {
        var headerGuard = HeaderFieldGuard()
        return guarded(input, reads: reads, guard: &headerGuard)
    }

    /// Splits bytes after the preface into frames (type, flags, stream, payload).
    static func frames(_ bytes: [UInt8]) -> [(type: UInt8, flags: UInt8, stream: UInt32, payload: [UInt8])] {
        var rest = bytes[preface.count...]
        var frames: [(UInt8, UInt8, UInt32, [UInt8])] = []
        while rest.count >= 9 {
            let s = rest.startIndex
            let length = Int(rest[s]) << 16 | Int(rest[s + 1]) << 8 | Int(rest[s + 2])
            let stream = rest[(s + 5)..<(s + 9)].reduce(UInt32(0)) { $0 << 8 | UInt32($1) } & 0x7FFF_FFFF
            frames.append((rest[s + 3], rest[s + 4], stream, Array(rest[(s + 9)..<(s + 9 + length)])))
            rest = rest[(s + 9 + length)...]
        }
        return frames
    }

    /// Decodes every header block of `bytes` with one nghttp2 inflater, as a connection would.
    /// Returns the fields of each block and the inflater's table size (entries, static included).
    static func decode(_ bytes: [UInt8]) throws -> (blocks: [[(String, String)]], tableEntries: Int) {
        var inflater: OpaquePointer?
        try #require(nghttp2_hd_inflate_new(&inflater) == 0)
        defer { nghttp2_hd_inflate_del(inflater) }
        var blocks: [[(String, String)]] = []
        var block: [UInt8] = []
        for frame in frames(bytes) where frame.type == 0x1 || frame.type == 0x9 {
            var payload = frame.payload[...]
            if frame.type == 0x1 {
                if frame.flags & 0x8 != 0 {
                    let padding = Int(payload.removeFirst())
                    payload = payload.dropLast(padding)
                }
                if frame.flags & 0x20 != 0 { payload = payload.dropFirst(5) }
            }
            block += payload
            guard frame.flags & 0x4 != 0 else { continue }
            var fields: [(String, String)] = []
            var input = block[...]
            while true {
                var nv = nghttp2_nv()
                var flags: Int32 = 0
                let consumed = input.withUnsafeBufferPointer { groupd_nghttp2_hd_inflate(inflater, &nv, &flags, $0.baseAddress, $0.count, 1) }
                try #require(consumed >= 0, "nghttp2 refused the block: \(consumed)")
                input = input.dropFirst(Int(consumed))
                if flags & Int32(NGHTTP2_HD_INFLATE_EMIT.rawValue) != 0 {
                    fields.append((String(decoding: UnsafeBufferPointer(start: nv.name, count: nv.namelen), as: UTF8.self),
                                   String(decoding: UnsafeBufferPointer(start: nv.value, count: nv.valuelen), as: UTF8.self)))
                }
                if flags & Int32(NGHTTP2_HD_INFLATE_FINAL.rawValue) != 0 {
                    nghttp2_hd_inflate_end_headers(inflater)
                    break
                }
                if consumed == 0 && flags & Int32(NGHTTP2_HD_INFLATE_EMIT.rawValue) == 0 { break }
            }
            blocks.append(fields)
            block = []
        }
        return (blocks, nghttp2_hd_inflate_get_num_table_entries(inflater))
    }

    // MARK: Tests

    @Test func blocksWithinTheLimitPassAsTheyCame() throws {
        let input = Self.preface + Self.settings
            + Self.headerFrames(stream: 1, block: Self.requestFields + Self.literal("x-medium", String(repeating: "m", count: 40000)), endStream: false).flatMap { $0 }
            + Self.frame(type: 0x0, flags: 0x1, stream: 1, payload: [0, 0, 0, 0, 0])
        for reads in [[], [1, 2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31], Array(repeating: 1000, count: 60)] {
            let (output, oversized) = Self.guarded(input, reads: reads)
            #expect(output == input)
            #expect(oversized.isEmpty)
        }
    }

    @Test(arguments: Indexing.allCases, [false, true])
    func anOversizedValueIsReplacedAndItsStreamReported(indexing: Indexing, huffman: Bool) throws {
        // A small indexed field first: the table holds one entry before the oversized literal.
        let big = Self.literal(Array("x-big".utf8), Array(repeating: UInt8(ascii: "v"), count: 70000), indexing, huffmanValue: huffman)
        let block = Self.literal("x-first", "1", .incremental) + Self.requestFields + big + Self.literal("x-last", "2")
        let input = Self.preface + Self.settings + Self.headerFrames(stream: 3, block: block).flatMap { $0 }
        let (output, oversized) = Self.guarded(input)
        #expect(oversized == [3])
        #expect(Self.frames(output).count == Self.frames(input).count)
        #expect(output.count < input.count)
        let (blocks, entries) = try Self.decode(output)
        let fields = try #require(blocks.first)
        #expect(fields.first! == ("x-first", "1"))
        #expect(fields.last! == ("x-last", "2"))
        let replaced = fields[fields.count - 2]
        #expect(replaced.0 == "x-big")
        switch indexing {
        case .incremental:
            // Larger than the table, as the client's entry was: the table empties (RFC 7541 §4.4).
            #expect(replaced.1.count >= 4100 && replaced.1.allSatisfy { $0 == "0" })
            #expect(entries == 61)
        case .without, .never:
            #expect(replaced.1.isEmpty)
            #expect(entries == 62)
        }
    }

    @Test(arguments: Indexing.allCases)
    func anOversizedNameIsReplaced(indexing: Indexing) throws {
        let big = Self.literal(Array(repeating: UInt8(ascii: "n"), count: 70000), Array("v".utf8), indexing)
        let input = Self.preface + Self.headerFrames(stream: 1, block: Self.requestFields + big).flatMap { $0 }
        let (output, oversized) = Self.guarded(input)
        #expect(oversized == [1])
        let (blocks, entries) = try Self.decode(output)
        let replaced = try #require(blocks.first?.last)
        #expect(replaced.1 == "v")
        #expect(!replaced.0.isEmpty && replaced.0.allSatisfy { $0 == "0" })
        #expect(entries == 61)
    }

    @Test func anyReadSplitGivesTheSameOutput() throws {
        let big = Self.literal(Array("x-big".utf8), Array(repeating: UInt8(ascii: "v"), count: 70000), .incremental)
        let input = Self.preface + Self.settings
            + Self.headerFrames(stream: 1, block: Self.requestFields + big + Self.literal("x-after", "a"), endStream: false).flatMap { $0 }
            + Self.frame(type: 0x0, flags: 0x1, stream: 1, payload: [0, 0, 0, 0, 0])
            + Self.headerFrames(stream: 3, block: Self.requestFields).flatMap { $0 }
        let (whole, reported) = Self.guarded(input)
        #expect(reported == [1])
        var generator = SystemRandomNumberGenerator()
        for reads in [Array(repeating: 1, count: input.count), (0..<200).map { _ in Int.random(in: 1...3000, using: &generator) }] {
            let (output, oversized) = Self.guarded(input, reads: reads)
            #expect(output == whole)
            #expect(oversized == [1])
        }
        let (blocks, _) = try Self.decode(whole)
        #expect(blocks.count == 2)
        #expect(blocks[0].last! == ("x-after", "a"))
    }

    @Test func aPaddedHeadersFrameWithPriorityIsRewrittenWithoutItsPadding() throws {
        let big = Self.literal(Array("x-big".utf8), Array(repeating: UInt8(ascii: "v"), count: 70000), .without)
        let block = Self.requestFields + big
        // HEADERS: PADDED | PRIORITY, 7 bytes of padding, then CONTINUATIONs.
        let firstChunk = Array(block[0..<16000])
        let headers = Self.frame(type: 0x1, flags: 0x8 | 0x20 | 0x1, stream: 5, payload: [7] + [0, 0, 0, 0, 15] + firstChunk + Array(repeating: 0, count: 7))
        let rest = Array(block[16000...])
        let continuations = stride(from: 0, to: rest.count, by: 16384).map { start in
            Self.frame(type: 0x9, flags: start + 16384 >= rest.count ? 0x4 : 0, stream: 5, payload: Array(rest[start..<min(start + 16384, rest.count)]))
        }
        let input = Self.preface + headers + continuations.flatMap { $0 }
        let (output, oversized) = Self.guarded(input)
        #expect(oversized == [5])
        let first = try #require(Self.frames(output).first)
        #expect(first.flags == 0x20 | 0x1)  // PADDED cleared, PRIORITY and END_STREAM kept
        #expect(Array(first.payload.prefix(5)) == [0, 0, 0, 0, 15])
        let (blocks, _) = try Self.decode(output)
        #expect(blocks.first?.last.map { $0 == ("x-big", "") } == true)
    }

    /// A request whose HEADERS frame ends `cut` bytes into the length prefix of its big literal's
    /// value (after an indexed "x-first" field and the request fields), the rest in CONTINUATION
    /// frames of at most 16 KiB, then SETTINGS.
    static func lengthCut(_ cut: Int, length: Int, indexing: Indexing, huffman: Bool) -> [UInt8] {
        let before = literal("x-first", "1", .incremental) + requestFields
        let big = literal(Array("x-big".utf8), Array(repeating: UInt8(ascii: "v"), count: length), indexing, huffmanValue: huffman)
        let block = before + big + literal("x-last", "2")
        let split = before.count + 1 + 1 + 5 + cut  // opcode, name length, name, `cut` bytes of the value's length
        let headers = frame(type: 0x1, flags: 0x1, stream: 1, payload: Array(block[0..<split]))
        let rest = Array(block[split...])
        let continuations = stride(from: 0, to: rest.count, by: 16384).map { start in
            frame(type: 0x9, flags: start + 16384 >= rest.count ? 0x4 : 0, stream: 1, payload: Array(rest[start..<min(start + 16384, rest.count)]))
        }
        return preface + headers + continuations.flatMap { $0 } + settings
    }

    @Test(arguments: [70000, 1 << 20, 3 << 20], Indexing.allCases)
    func aLengthCutByAFrameBoundaryIsCompleted(length: Int, indexing: Indexing) throws {
        // 70000 and 1 MiB take 4 bytes of length, 3 MiB 5; every cut but after the fourth byte of
        // 3 MiB's (below) leaves an ending nghttp2 takes.
        let prefixBytes = HPACKBlockScanner.lengthPrefix(length, huffman: false).count
        for huffman in [false, true] {
            for cut in 1..<min(prefixBytes, 4) {
                let input = Self.lengthCut(cut, length: length, indexing: indexing, huffman: huffman)
                let (output, oversized) = Self.guarded(input)
                #expect(oversized == [1], "cut \(cut)")
                let (inFrames, outFrames) = (Self.frames(input), Self.frames(output))
                #expect(outFrames.count == inFrames.count)
                #expect(zip(outFrames, inFrames).allSatisfy { $0.payload.count <= $1.payload.count })
                // The bytes of the length that went out with the HEADERS frame went out unchanged.
                #expect(outFrames[0].payload == inFrames[0].payload)
                let (blocks, entries) = try Self.decode(output)
                let fields = try #require(blocks.first)
                #expect(fields.first! == ("x-first", "1"))
                #expect(fields.last! == ("x-last", "2"))
                let replaced = fields[fields.count - 2]
                #expect(replaced.0 == "x-big")
                #expect(replaced.1.allSatisfy { $0 == "0" })
                switch indexing {
                case .incremental:
                    #expect(replaced.1.count >= 4100, "cut \(cut), huffman \(huffman)")
                    #expect(entries == 61)  // emptied, as the client's table was
                case .without, .never:
                    #expect(entries == 62)
                }
            }
        }
    }

    @Test func aLengthCutWhereNoEndingFitsIsLeftToNghttp2() throws {
        // 3 MiB: its first four length bytes already say 1 MiB, over what nghttp2 takes.
        let input = Self.lengthCut(4, length: 3 << 20, indexing: .without, huffman: false)
        var headerGuard = HeaderFieldGuard()
        let (output, oversized) = Self.guarded(input, guard: &headerGuard)
        #expect(output == input)
        #expect(oversized.isEmpty)
        #expect(headerGuard.isPassthrough)
    }

    @Test(arguments: [(127, 0, 4100, 4100), (127, 0, 0, 127), (254, 7, 4100, 4222), (16384, 14, 4100, 16384), (16384, 14, 0, 16384),
                      (4000, 21, 4100, -1), (70000, 21, 0, -1), (60000, 21, 0, 60000)])
    func completion(partial: Int, shift: Int, minimum: Int, expected: Int) {
        let result = HPACKBlockScanner.completion(of: partial, shift: shift, atLeast: minimum)
        #expect(result?.length ?? -1 == expected)
        if let result {
            // The bytes end the integer: digits worth (length - partial) >> shift, the last one
            // without the continuation bit.
            let worth = result.bytes.enumerated().reduce(0) { $0 + Int($1.element & 0x7F) << (7 * $1.offset) }
            #expect(partial + worth << shift == result.length)
            #expect(result.bytes.last! & 0x80 == 0 && result.bytes.dropLast().allSatisfy { $0 & 0x80 != 0 })
        }
    }

    @Test func arbitraryFramesPassUnchangedUnlessALiteralWasReplaced() {
        // Random frames of every type, HEADERS and CONTINUATION with random HPACK bytes (sometimes
        // a huge length prefix), cut into random reads: nothing crashes, and whenever no stream is
        // reported the bytes reach nghttp2 exactly as they came.
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<300 {
            var input = Self.preface
            for _ in 0..<Int.random(in: 1...12, using: &generator) {
                let type = UInt8.random(in: 0...10, using: &generator)
                var payload = (0..<Int.random(in: 0...300, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
                if Bool.random(using: &generator) { payload.insert(contentsOf: [0x00, 0x7F, 0xFF, 0xFF, 0x07], at: min(payload.count, 3)) }
                let flags = UInt8.random(in: 0...255, using: &generator)
                input += Self.frame(type: type, flags: flags, stream: UInt32.random(in: 0...9, using: &generator), payload: payload)
            }
            let reads = (0..<20).map { _ in Int.random(in: 1...200, using: &generator) }
            let (output, oversized) = Self.guarded(input, reads: reads)
            if oversized.isEmpty { #expect(output == input) }
            #expect(output.count <= input.count)
        }
    }

    @Test func aWrongPrefaceTurnsTheGuardOff() {
        let input = Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8) + Array(repeating: 0, count: 100)
        var headerGuard = HeaderFieldGuard()
        let (output, oversized) = Self.guarded(input, reads: [3, 4], guard: &headerGuard)
        #expect(output == input)
        #expect(oversized.isEmpty)
        #expect(headerGuard.isPassthrough)
    }

    @Test func aHeaderFrameOverTheFrameSizeIsLeftToNghttp2() {
        let input = Self.preface + Self.frame(type: 0x1, flags: 0x5, stream: 1, payload: Array(repeating: 0x82, count: 20000))
        var headerGuard = HeaderFieldGuard()
        let (output, _) = Self.guarded(input, reads: [30, 100], guard: &headerGuard)
        #expect(output == input)
        #expect(headerGuard.isPassthrough)
    }
}
