import CZlib
import NIOCore

/// A gRPC message encoding other than `identity`: what `grpc-encoding` names and the compressed
/// flag of a message announces. Both are zlib's (grpc-core's choices): `gzip` is the gzip
/// format (RFC 1952), `deflate` the zlib format (RFC 1950).
public enum GRPCCompression: Sendable, Hashable, CaseIterable {
    /// `gzip`.
    case gzip
    /// `deflate`.
    case deflate

    /// The name in `grpc-encoding`.
    public var name: String {
        switch self {
        case .gzip: "gzip"
        case .deflate: "deflate"
        }
    }

    /// The value of `grpc-accept-encoding` on every response: the encodings requests may use.
    public static let acceptEncoding = "identity,deflate,gzip"

    /// The encoding named by a `grpc-encoding` value; nil for one this server does not know.
    package init?(name: UnsafeBufferPointer<UInt8>) {
        if name.elementsEqual(Self.gzipName) {
            self = .gzip
        } else if name.elementsEqual(Self.deflateName) {
            self = .deflate
        } else {
            return nil
        }
    }

    private static let gzipName: [UInt8] = Array("gzip".utf8)
    private static let deflateName: [UInt8] = Array("deflate".utf8)

    /// This encoding's bit in a set of accepted encodings (``acceptedSet(_:)``).
    package var bit: UInt8 {
        switch self {
        case .gzip: 1
        case .deflate: 2
        }
    }

    /// zlib's window bits for the format: 15, plus 16 for the gzip wrapper.
    private var windowBits: Int32 {
        switch self {
        case .gzip: 15 + 16
        case .deflate: 15
        }
    }

    /// The encodings a `grpc-accept-encoding` value lists (comma-separated names, spaces allowed),
    /// as a set of ``bit``s; names this server does not write are skipped.
    package static func acceptedSet(_ value: UnsafeBufferPointer<UInt8>) -> UInt8 {
        var set: UInt8 = 0
        var start = value.startIndex
        while start < value.endIndex {
            var end = start
            while end < value.endIndex, value[end] != UInt8(ascii: ",") { end += 1 }
            var lower = start
            var upper = end
            while lower < upper, value[lower] == UInt8(ascii: " ") || value[lower] == UInt8(ascii: "\t") { lower += 1 }
            while upper > lower, value[upper - 1] == UInt8(ascii: " ") || value[upper - 1] == UInt8(ascii: "\t") { upper -= 1 }
            if let encoding = GRPCCompression(name: UnsafeBufferPointer(rebasing: value[lower..<upper])) {
                set |= encoding.bit
            }
            start = end + 1
        }
        return set
    }

    /// Why a compressed message could not be inflated.
    public enum InflateFailure: Error, Sendable, Equatable {
        /// The message inflates to more than `limit` bytes; inflating stopped there.
        case tooLarge(limit: Int)
        /// The bytes are not valid data of the encoding (zlib's reason).
        case corrupt(String)
    }

    /// Inflates one compressed message, never holding more than `limit` + 1 inflated bytes: a
    /// small message that would inflate far past the limit (a compression bomb) stops there.
    /// - Parameters:
    ///   - input: The compressed message (without the 5-byte gRPC prefix).
    ///   - limit: The largest inflated size accepted (`max_message_bytes`).
    ///   - allocator: Allocates the inflated buffer.
    /// - Returns: The inflated message.
    /// - Throws: `InflateFailure.tooLarge` past `limit`, `.corrupt` for anything zlib refuses,
    ///   a truncated stream or bytes after its end.
    public func inflate(_ input: ByteBuffer, limit: Int, allocator: ByteBufferAllocator) throws(InflateFailure) -> ByteBuffer {
        var stream = z_stream()
        guard groupd_inflate_init(&stream, windowBits) == Z_OK else { throw .corrupt("zlib could not start inflating") }
        defer { inflateEnd(&stream) }
        // A first guess for the usual ratios; grown by doubling, never past limit + 1.
        var output = allocator.buffer(capacity: min(limit + 1, max(input.readableBytes * 4, 256)))
        let result: Result<Void, InflateFailure> = input.withUnsafeReadableBytes { compressed in
            stream.next_in = UnsafeMutablePointer(mutating: compressed.baseAddress?.assumingMemoryBound(to: Bytef.self))
            stream.avail_in = uInt(compressed.count)
            while true {
                if output.writableBytes == 0 {
                    output.reserveCapacity(min(limit + 1, max(output.capacity * 2, 4096)))
                }
                var code: Int32 = Z_OK
                let room = limit + 1 - output.readableBytes
                output.writeWithUnsafeMutableBytes(minimumWritableBytes: 0) { out in
                    let count = min(out.count, room)
                    stream.next_out = out.baseAddress?.assumingMemoryBound(to: Bytef.self)
                    stream.avail_out = uInt(count)
                    code = CZlib.inflate(&stream, Z_NO_FLUSH)
                    return count - Int(stream.avail_out)
                }
                if output.readableBytes > limit { return .failure(.tooLarge(limit: limit)) }
                switch code {
                case Z_STREAM_END:
                    return stream.avail_in == 0 ? .success(()) : .failure(.corrupt("bytes after the end of the compressed data"))
                case Z_OK:
                    continue
                case Z_BUF_ERROR where stream.avail_in == 0:
                    return .failure(.corrupt("the compressed data is truncated"))
                case Z_BUF_ERROR:
                    continue  // the output was full; it grows above
                default:
                    let reason = stream.msg.map { String(cString: $0) } ?? "zlib error \(code)"
                    return .failure(.corrupt(reason))
                }
            }
        }
        try result.get()
        return output
    }

    /// Compresses one message; nil when the result would not be smaller (the message then goes
    /// uncompressed, as the compressed flag is per message).
    /// - Parameters:
    ///   - input: The serialized message.
    ///   - allocator: Allocates the compressed buffer.
    /// - Returns: The compressed message, or nil.
    public func deflate(_ input: ByteBuffer, allocator: ByteBufferAllocator) -> ByteBuffer? {
        var stream = z_stream()
        guard groupd_deflate_init(&stream, Z_DEFAULT_COMPRESSION, windowBits) == Z_OK else { return nil }
        defer { deflateEnd(&stream) }
        let bound = Int(deflateBound(&stream, uLong(input.readableBytes)))
        var output = allocator.buffer(capacity: bound)
        var code: Int32 = Z_OK
        input.withUnsafeReadableBytes { plain in
            stream.next_in = UnsafeMutablePointer(mutating: plain.baseAddress?.assumingMemoryBound(to: Bytef.self))
            stream.avail_in = uInt(plain.count)
            output.writeWithUnsafeMutableBytes(minimumWritableBytes: bound) { out in
                stream.next_out = out.baseAddress?.assumingMemoryBound(to: Bytef.self)
                stream.avail_out = uInt(out.count)
                code = CZlib.deflate(&stream, Z_FINISH)
                return out.count - Int(stream.avail_out)
            }
        }
        guard code == Z_STREAM_END, output.readableBytes < input.readableBytes else { return nil }
        return output
    }
}

/// How responses are compressed.
public struct ResponseCompression: Sendable, Equatable {
    /// Whether responses are compressed at all: with the request's encoding, when the client's
    /// `grpc-accept-encoding` lists it. Default true.
    public var enabled: Bool = true
    /// Messages smaller than this go uncompressed (the gzip framing alone is 18 bytes, and
    /// small protobufs barely shrink). Default 1024.
    public var minBytes: Int = 1024

    /// The defaults above.
    public static var defaults: ResponseCompression { ResponseCompression() }

    /// Creates the defaults.
    public init() {}
}
