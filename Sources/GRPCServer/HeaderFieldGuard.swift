import GRPCProtocol
import NIOCore

/// Keeps one request header field too long for nghttp2's HPACK inflater from ending the whole
/// connection: it becomes a refusal of its own stream.
///
/// nghttp2 refuses a string literal longer than 65536 bytes on the wire (`NGHTTP2_HD_MAX_NV`)
/// as a connection error (GOAWAY COMPRESSION_ERROR), which would end every call multiplexed on
/// the connection. This guard sits in front of `nghttp2_session_mem_recv`: it follows the frames
/// of the client's byte stream, walks the HPACK representations of each request header block
/// (RFC 7541 §6; only their lengths, nothing is decoded) and rewrites a representation whose
/// name or value literal is over the limit into one nghttp2 accepts, with the same effect on the
/// dynamic table, and reports its stream, which is then refused with RESOURCE_EXHAUSTED:
///
/// - A literal *with incremental indexing* would be an entry larger than the dynamic table
///   (4096 bytes, SETTINGS_HEADER_TABLE_SIZE left at its default): the client's encoder emptied
///   its table and added nothing (RFC 7541 §4.4). The replacement literal is 4100 bytes, also
///   larger than the table, so nghttp2's table empties alike.
/// - A literal *without indexing* or *never indexed* leaves the table alone; its replacement is
///   an empty value (or a 5-byte name).
///
/// A literal whose length prefix is cut by a frame boundary keeps the bytes that went out with
/// the earlier frame; the rest of its prefix is rewritten to end it at a length nghttp2 takes
/// (at least 4100 when indexed), with the same filler.
///
/// The replacement is never longer than what it replaces, so every frame keeps or lowers its
/// length and the frames stay as many. The guard holds back only a frame header split across
/// reads and a HEADERS or CONTINUATION frame until it is whole (at most 16 KiB, the
/// SETTINGS_MAX_FRAME_SIZE the server keeps); everything else passes as it comes, and a read
/// with nothing held or rewritten passes as the same buffer.
///
/// It gives up (passes every later byte unchanged, and nghttp2 answers as it would have) on a
/// wrong client preface, a HEADERS or CONTINUATION frame longer than 16 KiB, a header block it
/// cannot follow, and an oversized literal whose length prefix the frame boundary cuts so late
/// that no ending gives a length nghttp2 takes (over 2 MiB, cut after its fourth byte, those
/// four bytes saying more than 65536, or less than 4100 for an indexed literal): those are the
/// client's own connection errors.
struct HeaderFieldGuard {
    /// The longest string literal nghttp2's inflater takes (`NGHTTP2_HD_MAX_NV`).
    static let maxLiteralLength = 65536
    /// SETTINGS_MAX_FRAME_SIZE as the server keeps it (the default).
    static let maxFrameSize = 16384
    /// The most frames one header block may span, its HEADERS frame and its CONTINUATION frames
    /// (nghttp2's `max_continuations` is set one below): with frames of at most ``maxFrameSize``,
    /// 4 MiB of header block on the wire. Within it, header fields too large (a literal over
    /// ``maxLiteralLength``, a list over `max_header_list_bytes`) refuse their own stream; a block
    /// in more frames is the point where the server stops reading the connection (nghttp2 fails
    /// the session: GOAWAY PROTOCOL_ERROR). Nothing of a block is kept but the frame the guard
    /// holds and the fields within `max_header_list_bytes`, so memory does not grow with it.
    static let maxHeaderBlockFrames = 256
    static let clientPreface: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    private static let headersType: UInt8 = 0x1
    private static let continuationType: UInt8 = 0x9
    private static let endHeadersFlag: UInt8 = 0x4
    private static let paddedFlag: UInt8 = 0x8
    private static let priorityFlag: UInt8 = 0x20

    private enum Phase {
        /// The first bytes: the client preface, this many matched.
        case preface(matched: Int)
        /// Between frames: the next bytes are a frame header.
        case frameHeader
        /// Inside the payload of a frame that passes as it is.
        case skipping(remaining: Int)
        /// Collecting a HEADERS or CONTINUATION frame, header included, into `held`.
        case headerFrame(total: Int)
        /// Gave up: everything passes.
        case passthrough
    }

    private var phase = Phase.preface(matched: 0)
    /// Bytes held back across reads: a partial frame header, or a partial header frame.
    private var held: [UInt8] = []
    /// The header block in progress.
    private var block: HPACKBlockScanner?

    /// A guard for a new connection.
    init() {}

    /// Whether the guard passes everything from now on.
    var isPassthrough: Bool {
        if case .passthrough = phase { return true }
        return false
    }

    /// The bytes to hand to nghttp2 for `input`: `input` itself unless something is held back or
    /// rewritten. The streams whose headers had a field rewritten are appended to `oversized`.
    mutating func process(_ input: ByteBuffer, allocator: ByteBufferAllocator, oversized: inout [Int32]) -> ByteBuffer {
        if case .passthrough = phase, held.isEmpty { return input }
        var output = Output(input: input, allocator: allocator)
        input.withUnsafeReadableBytes { bytes in
            var index = 0
            while index < bytes.count {
                index = step(bytes, at: index, output: &output, oversized: &oversized)
            }
        }
        return output.result
    }

    /// Consumes what it can from `index` on; returns where it stopped.
    private mutating func step(_ bytes: UnsafeRawBufferPointer, at index: Int, output: inout Output, oversized: inout [Int32]) -> Int {
        switch phase {
        case .passthrough:
            if !held.isEmpty {
                output.emit(held)
                held = []
            }
            output.pass(index..<bytes.count)
            return bytes.count

        case .preface(let matched):
            let take = min(Self.clientPreface.count - matched, bytes.count - index)
            for offset in 0..<take where bytes[index + offset] != Self.clientPreface[matched + offset] {
                phase = .passthrough
                output.pass(index..<index + offset)
                return index + offset
            }
            output.pass(index..<index + take)
            phase = matched + take == Self.clientPreface.count ? .frameHeader : .preface(matched: matched + take)
            return index + take

        case .skipping(let remaining):
            let take = min(remaining, bytes.count - index)
            output.pass(index..<index + take)
            phase = remaining == take ? .frameHeader : .skipping(remaining: remaining - take)
            return index + take

        case .frameHeader:
            let fromHeld = held.count
            let take = min(9 - fromHeld, bytes.count - index)
            if fromHeld + take < 9 {
                held += UnsafeRawBufferPointer(rebasing: bytes[index..<index + take])
                return index + take
            }
            // The header's bytes: from the input alone (no copy), or completing the held part.
            func headerByte(_ i: Int) -> UInt8 { i < fromHeld ? held[i] : bytes[index + i - fromHeld] }
            let length = Int(headerByte(0)) << 16 | Int(headerByte(1)) << 8 | Int(headerByte(2))
            let type = headerByte(3)
            let header = fromHeld == 0 ? [] : (0..<9).map(headerByte)
            if type == Self.headersType || type == Self.continuationType {
                guard length <= Self.maxFrameSize else {
                    phase = .passthrough
                    emitHeader(header, fromHeld: fromHeld, headerStart: index, output: &output)
                    return index + take
                }
                if index + take + length <= bytes.count && fromHeld == 0 {
                    // The whole frame is in this read: scan it in place.
                    let frame = UnsafeRawBufferPointer(rebasing: bytes[index..<index + 9 + length])
                    phase = .frameHeader  // or .passthrough, when the scan gives up
                    if let rewritten = scanHeaderFrame(frame, oversized: &oversized) {
                        output.emit(rewritten)
                    } else {
                        output.pass(index..<index + 9 + length)
                    }
                    return index + 9 + length
                }
                held = fromHeld == 0 ? Array(UnsafeRawBufferPointer(rebasing: bytes[index..<index + 9])) : header
                phase = .headerFrame(total: 9 + length)
                return index + take
            }
            emitHeader(header, fromHeld: fromHeld, headerStart: index, output: &output)
            phase = length == 0 ? .frameHeader : .skipping(remaining: length)
            return index + take

        case .headerFrame(let total):
            let take = min(total - held.count, bytes.count - index)
            held += UnsafeRawBufferPointer(rebasing: bytes[index..<index + take])
            guard held.count == total else { return index + take }
            let frame = held
            held = []
            phase = .frameHeader
            let rewritten = frame.withUnsafeBytes { scanHeaderFrame($0, oversized: &oversized) }
            output.emit(rewritten ?? frame)
            return index + take
        }
    }

    /// Passes a frame header that is not rewritten: from the input when it is all there, else
    /// with the part held from the previous read.
    private mutating func emitHeader(_ header: [UInt8], fromHeld: Int, headerStart: Int, output: inout Output) {
        if fromHeld == 0 {
            output.pass(headerStart..<headerStart + 9)
        } else {
            output.emit(header)
        }
        held = []
    }

    /// Scans one whole HEADERS or CONTINUATION frame; returns the frame rewritten, or nil when it
    /// passes as it is.
    private mutating func scanHeaderFrame(_ frame: UnsafeRawBufferPointer, oversized: inout [Int32]) -> [UInt8]? {
        let type = frame[3]
        var flags = frame[4]
        let streamID = Int32(bitPattern: UInt32(frame[5] & 0x7F) << 24 | UInt32(frame[6]) << 16 | UInt32(frame[7]) << 8 | UInt32(frame[8]))
        var start = 9
        var end = frame.count
        if type == Self.headersType {
            if flags & Self.paddedFlag != 0 {
                guard end > start else { return giveUp() }
                let padding = Int(frame[start])
                start += 1
                guard end - start >= padding else { return giveUp() }
                end -= padding
            }
            var prioritySpec: [UInt8] = []
            if flags & Self.priorityFlag != 0 {
                guard end - start >= 5 else { return giveUp() }
                prioritySpec = Array(UnsafeRawBufferPointer(rebasing: frame[start..<start + 5]))
                start += 5
            }
            block = HPACKBlockScanner()
            guard let fragment = scan(UnsafeRawBufferPointer(rebasing: frame[start..<end]), flags: flags, streamID: streamID, oversized: &oversized) else { return nil }
            flags &= ~Self.paddedFlag
            return Self.frame(type: type, flags: flags, header: frame, payload: prioritySpec + fragment)
        }
        guard block != nil else { return giveUp() }
        guard let fragment = scan(UnsafeRawBufferPointer(rebasing: frame[start..<end]), flags: flags, streamID: streamID, oversized: &oversized) else { return nil }
        return Self.frame(type: type, flags: flags, header: frame, payload: fragment)
    }

    /// Runs the block scanner over one fragment; nil when it passes unchanged.
    private mutating func scan(_ fragment: UnsafeRawBufferPointer, flags: UInt8, streamID: Int32, oversized: inout [Int32]) -> [UInt8]? {
        guard var scanner = block else { return nil }
        let result = scanner.scan(fragment)
        if scanner.gaveUp {
            phase = .passthrough
            block = nil
            return nil
        }
        if result.replaced, !oversized.contains(streamID) { oversized.append(streamID) }
        block = flags & Self.endHeadersFlag != 0 ? nil : scanner
        return result.fragment
    }

    private mutating func giveUp() -> [UInt8]? {
        phase = .passthrough
        block = nil
        return nil
    }

    /// A frame with `header`'s type, stream and the given flags and payload.
    private static func frame(type: UInt8, flags: UInt8, header: UnsafeRawBufferPointer, payload: [UInt8]) -> [UInt8] {
        let length = payload.count
        return [UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF), type, flags, header[5], header[6], header[7], header[8]]
            + payload
    }

    /// What goes to nghttp2: the input's own bytes while nothing differs, else a new buffer.
    private struct Output {
        let input: ByteBuffer
        let allocator: ByteBufferAllocator
        /// While `built` is nil, the output is the input's first `identityEnd` readable bytes.
        var identityEnd = 0
        var built: ByteBuffer?

        init(input: ByteBuffer, allocator: ByteBufferAllocator) {
            self.input = input
            self.allocator = allocator
        }

        /// The input's bytes in `range` go out.
        mutating func pass(_ range: Range<Int>) {
            guard !range.isEmpty else { return }
            if built == nil && range.lowerBound == identityEnd {
                identityEnd = range.upperBound
                return
            }
            materialize()
            built!.writeImmutableBuffer(input.getSlice(at: input.readerIndex + range.lowerBound, length: range.count)!)
        }

        /// Bytes of the guard's own go out.
        mutating func emit(_ bytes: [UInt8]) {
            guard !bytes.isEmpty else { return }
            materialize()
            built!.writeBytes(bytes)
        }

        private mutating func materialize() {
            guard built == nil else { return }
            var buffer = allocator.buffer(capacity: input.readableBytes + 64)
            buffer.writeImmutableBuffer(input.getSlice(at: input.readerIndex, length: identityEnd)!)
            built = buffer
        }

        var result: ByteBuffer {
            built ?? input.getSlice(at: input.readerIndex, length: identityEnd)!
        }
    }
}

/// Walks the representations of one HPACK header block by their lengths, across the fragments
/// of its frames, and replaces a string literal longer than ``HeaderFieldGuard/maxLiteralLength``
/// (see ``HeaderFieldGuard``).
struct HPACKBlockScanner {
    /// Whether a literal is added to the dynamic table.
    enum Indexing { case incremental, none }

    /// What an integer being read is.
    enum Role: Equatable {
        case index, tableSize
        case nameIndex(Indexing)
        case nameLength(Indexing)
        case valueLength(Indexing)
    }

    enum State: Equatable {
        /// The next byte starts a representation.
        case opcode
        /// The next byte starts a string literal's length (H bit and 7-bit prefix).
        case lengthStart(Role)
        /// Reading an integer's continuation bytes; `startedInFragment` says whether its first
        /// byte is in the fragment being scanned (at `start`).
        case integer(role: Role, value: Int, shift: Int, huffman: Bool, startedInFragment: Bool, start: Int)
        /// Inside a string literal, this many bytes to go; then `next`.
        case literal(remaining: Int, next: Next)
        /// Replacing an oversized literal: `fill` filler bytes still to write in place of the
        /// client's (the last of them `last`), `remaining` of the client's bytes still to drop.
        case replacing(fill: Int, filler: UInt8, last: UInt8, remaining: Int, next: Next)
    }

    /// What follows a literal.
    enum Next: Equatable {
        case value(Indexing)
        case opcode
    }

    private(set) var state = State.opcode
    /// Set when the block cannot be followed (a malformed integer, an oversized literal whose
    /// length, split across fragments, cannot be completed to one nghttp2 takes).
    private(set) var gaveUp = false
    /// An integer the fragment starts inside: its value and the shift of its next byte after the
    /// bytes that went out with earlier fragments.
    private var carriedValue = 0
    private var carriedShift = 0

    /// A scanner at the start of a block.
    init() {}

    /// Scans one fragment; returns the fragment rewritten (nil: unchanged) and whether a literal
    /// was replaced in it.
    mutating func scan(_ bytes: UnsafeRawBufferPointer) -> (fragment: [UInt8]?, replaced: Bool) {
        var out: [UInt8]?
        var replaced = false
        switch state {
        case .replacing:
            out = []
        case .integer(let role, let value, let shift, let huffman, _, _):
            // Its first bytes went out with the previous fragment.
            carriedValue = value
            carriedShift = shift
            state = .integer(role: role, value: value, shift: shift, huffman: huffman, startedInFragment: false, start: 0)
        default:
            break
        }
        var index = 0
        // The bytes from `copyFrom` to `index` are the client's and go out unchanged.
        var copyFrom = 0
        func flushCopy(to end: Int) {
            if out != nil, end > copyFrom { out! += UnsafeRawBufferPointer(rebasing: bytes[copyFrom..<end]) }
            copyFrom = end
        }
        while index < bytes.count, !gaveUp {
            switch state {
            case .opcode:
                let byte = bytes[index]
                if byte & 0x80 != 0 {
                    startInteger(.index, byte: byte, prefixBits: 7, at: index)
                } else if byte & 0xC0 == 0x40 {
                    startInteger(.nameIndex(.incremental), byte: byte, prefixBits: 6, at: index)
                } else if byte & 0xE0 == 0x20 {
                    startInteger(.tableSize, byte: byte, prefixBits: 5, at: index)
                } else {
                    startInteger(.nameIndex(.none), byte: byte, prefixBits: 4, at: index)
                }
                index += 1
            case .lengthStart(let role):
                let byte = bytes[index]
                startInteger(role, byte: byte, prefixBits: 7, at: index, huffman: byte & 0x80 != 0)
                index += 1
            case .integer(let role, let value, let shift, let huffman, let startedInFragment, let start):
                let byte = bytes[index]
                index += 1
                guard shift <= 28 else {
                    gaveUp = true
                    break
                }
                let next = value + Int(byte & 0x7F) << shift
                if byte & 0x80 != 0 {
                    state = .integer(role: role, value: next, shift: shift + 7, huffman: huffman, startedInFragment: startedInFragment, start: start)
                } else {
                    state = .integer(role: role, value: next, shift: shift, huffman: huffman, startedInFragment: startedInFragment, start: start)
                    if let rewrite = integerDone(), rewrite {
                        // Everything before this integer goes out as it was; the integer and the
                        // literal after it are replaced.
                        flushCopy(to: start)
                        if out == nil { out = Array(UnsafeRawBufferPointer(rebasing: bytes[0..<start])) }
                        out! += replacementPrefix
                        copyFrom = index
                        replaced = true
                    }
                }
            case .literal(let remaining, let next):
                let take = min(remaining, bytes.count - index)
                index += take
                if take == remaining { afterLiteral(next) } else { state = .literal(remaining: remaining - take, next: next) }
            case .replacing(let fill, let filler, let last, let remaining, let next):
                let take = min(remaining, bytes.count - index)
                let written = min(fill, take)
                if written == fill, written > 0 {
                    out! += repeatElement(filler, count: written - 1)
                    out!.append(last)
                } else {
                    out! += repeatElement(filler, count: written)
                }
                index += take
                copyFrom = index
                if take == remaining {
                    afterLiteral(next)
                } else {
                    state = .replacing(fill: fill - written, filler: filler, last: last, remaining: remaining - take, next: next)
                }
            }
        }
        if gaveUp { return (nil, replaced) }
        flushCopy(to: bytes.count)
        return (out, replaced)
    }

    /// The length prefix of the replacement literal, set by `integerDone()`.
    private var replacementPrefix: [UInt8] = []

    private mutating func startInteger(_ role: Role, byte: UInt8, prefixBits: Int, at index: Int, huffman: Bool = false) {
        let mask = UInt8((1 << prefixBits) - 1)
        let value = Int(byte & mask)
        // With the prefix full, continuation bytes follow (their shift starts at 0).
        state = .integer(role: role, value: value, shift: 0, huffman: huffman, startedInFragment: true, start: index)
        if byte & mask != mask { _ = integerDone() }
    }

    /// An integer is complete: moves on. Returns true when it is the length of an oversized
    /// literal that is being replaced (`replacementPrefix` holds the new length prefix).
    private mutating func integerDone() -> Bool? {
        guard case .integer(let role, let value, let shift, let huffman, let startedInFragment, _) = state else { return nil }
        switch role {
        case .index, .tableSize:
            state = .opcode
        case .nameIndex(let indexing):
            state = .lengthStart(value == 0 ? .nameLength(indexing) : .valueLength(indexing))
        case .nameLength(let indexing), .valueLength(let indexing):
            let next: Next
            if case .nameLength = role { next = .value(indexing) } else { next = .opcode }
            guard value > HeaderFieldGuard.maxLiteralLength else {
                if value == 0 { afterLiteral(next) } else { state = .literal(remaining: value, next: next) }
                return false
            }
            // Larger than the 4096-byte table (with any name), a multiple of 5.
            let indexedFill = 4100
            let fill: Int
            if startedInFragment {
                switch (indexing, role) {
                case (.incremental, _): fill = indexedFill
                case (.none, .nameLength): fill = 5  // a name of 5 bytes (8 '0's in Huffman)
                default: fill = 0  // an empty value
                }
                replacementPrefix = Self.lengthPrefix(fill, huffman: huffman)
            } else {
                // Its first bytes went out with an earlier frame and stay: the integer is
                // completed to a length nghttp2 takes, in no more bytes than the client's rest.
                let tail = (shift - carriedShift) / 7 + 1
                guard
                    let completion = Self.completion(
                        of: carriedValue, shift: carriedShift, atLeast: indexing == .incremental ? indexedFill : 0),
                    completion.bytes.count <= tail
                else {
                    gaveUp = true
                    return false
                }
                fill = completion.length
                replacementPrefix = completion.bytes
            }
            // Raw: '0's. Huffman: zero bytes are '0's (5 bits each), the last byte padded with
            // the 1 bits of EOS when 8 × fill is not a multiple of 5 (RFC 7541 §5.2).
            let filler = huffman ? 0x00 : UInt8(ascii: "0")
            let last = huffman ? UInt8((1 << (fill * 8 % 5)) - 1) : filler
            state = .replacing(fill: fill, filler: filler, last: last, remaining: value, next: next)
            return true
        }
        return false
    }

    private mutating func afterLiteral(_ next: Next) {
        switch next {
        case .value(let indexing): state = .lengthStart(.valueLength(indexing))
        case .opcode: state = .opcode
        }
    }

    /// The last bytes of a length integer whose first bytes (worth `partial`, the next byte at
    /// `shift`) are already out, ending it at the smallest length of at least `minimum` they can
    /// say (HPACK integers may carry zero digits, nghttp2 reads them), and that length; nil when
    /// it would be over ``HeaderFieldGuard/maxLiteralLength``.
    static func completion(of partial: Int, shift: Int, atLeast minimum: Int) -> (length: Int, bytes: [UInt8])? {
        let step = 1 << shift
        let digits = partial >= minimum ? 0 : (minimum - partial + step - 1) / step
        let length = partial + digits * step
        guard length <= HeaderFieldGuard.maxLiteralLength else { return nil }
        var bytes: [UInt8] = []
        var rest = digits
        while rest >= 128 {
            bytes.append(UInt8(rest & 0x7F) | 0x80)
            rest >>= 7
        }
        bytes.append(UInt8(rest))
        return (length, bytes)
    }

    /// A string literal's length prefix: H bit, 7-bit prefix integer (RFC 7541 §5.1).
    static func lengthPrefix(_ length: Int, huffman: Bool) -> [UInt8] {
        let h: UInt8 = huffman ? 0x80 : 0
        if length < 127 { return [h | UInt8(length)] }
        var bytes: [UInt8] = [h | 0x7F]
        var rest = length - 127
        while rest >= 128 {
            bytes.append(UInt8(rest & 0x7F) | 0x80)
            rest >>= 7
        }
        bytes.append(UInt8(rest))
        return bytes
    }
}
