import NIOCore

/// Reassembles gRPC length-prefixed messages from DATA frame payloads.
///
/// Every message on a gRPC stream is a 1-byte compressed flag, a 4-byte big-endian length
/// and that many bytes. DATA frames split and join messages arbitrarily; the deframer keeps
/// whatever is incomplete and hands out whole messages. A length above the limit is refused
/// as soon as its prefix is complete, so an oversized message is never buffered.
public struct GRPCMessageDeframer: Sendable {
    /// One complete message taken off the stream.
    public struct Message: Sendable, Equatable {
        /// Whether the compressed flag was set.
        public var compressed: Bool
        /// The message bytes, without the 5-byte prefix.
        public var bytes: ByteBuffer
    }

    /// Why the stream's bytes cannot be deframed.
    public enum Failure: Error, Sendable, Equatable {
        /// The length prefix announced more bytes than `limit`.
        case messageTooLarge(length: Int, limit: Int)
        /// The flags byte had bits other than the compressed bit.
        case invalidFlags(UInt8)
    }

    /// The largest message accepted, in bytes.
    public let maxMessageBytes: Int
    private var buffer: ByteBuffer

    /// Creates a deframer.
    /// - Parameters:
    ///   - maxMessageBytes: The largest message accepted.
    ///   - allocator: Allocates the reassembly buffer.
    public init(maxMessageBytes: Int, allocator: ByteBufferAllocator = ByteBufferAllocator()) {
        self.maxMessageBytes = maxMessageBytes
        self.buffer = allocator.buffer(capacity: 0)
    }

    /// Whether bytes of an incomplete message are held.
    public var hasPartialMessage: Bool { buffer.readableBytes > 0 }

    /// Drops the reassembly buffer's storage (the stream takes no more messages); a later
    /// append allocates again.
    public mutating func release() {
        buffer = ByteBuffer()
    }

    /// Appends the payload of a DATA frame.
    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        compact()
        buffer.writeBytes(bytes)
    }

    /// Appends bytes from a buffer.
    public mutating func append(_ bytes: ByteBuffer) {
        compact()
        var bytes = bytes
        buffer.writeBuffer(&bytes)
    }

    /// Nothing partial held: the next bytes start at the front of the storage. Done here rather
    /// than when the last message is taken, so a call whose one message was taken (its slice
    /// still shares the storage) never pays for a fresh storage it will not use.
    private mutating func compact() {
        if buffer.readableBytes == 0, buffer.readerIndex > 0 { buffer.clear() }
    }

    /// Takes the next complete message, if one is there.
    /// - Returns: The message, or nil when more bytes are needed.
    /// - Throws: `Failure` when the prefix is invalid or announces too large a message.
    public mutating func next() throws(Failure) -> Message? {
        guard buffer.readableBytes >= 5 else { return nil }
        let start = buffer.readerIndex
        let flags = buffer.getInteger(at: start, as: UInt8.self)!
        let length = Int(buffer.getInteger(at: start + 1, endianness: .big, as: UInt32.self)!)
        guard flags & 0xFE == 0 else { throw .invalidFlags(flags) }
        guard length <= maxMessageBytes else {
            throw .messageTooLarge(length: length, limit: maxMessageBytes)
        }
        guard buffer.readableBytes >= 5 + length else { return nil }
        buffer.moveReaderIndex(forwardBy: 5)
        let bytes = buffer.readSlice(length: length)!
        return Message(compressed: flags & 1 == 1, bytes: bytes)
    }
}

/// Writes gRPC length-prefixed messages.
public enum GRPCMessageFramer {
    /// Appends one uncompressed message with its 5-byte prefix.
    /// - Parameters:
    ///   - message: The serialized message.
    ///   - buffer: The buffer to append to.
    public static func append(_ message: ByteBuffer, to buffer: inout ByteBuffer) {
        buffer.reserveCapacity(minimumWritableBytes: 5 + message.readableBytes)
        buffer.writeInteger(UInt8(0))
        buffer.writeInteger(UInt32(message.readableBytes), endianness: .big)
        var message = message
        buffer.writeBuffer(&message)
    }

    /// Byte `index` (0–4) of the 5-byte prefix of a message of `length` bytes: the compressed
    /// flag, then the length, big-endian. For writers that fill the prefix into a frame byte by
    /// byte instead of copying the message behind it.
    @inlinable
    package static func prefixByte(_ index: Int, length: UInt32, compressed: Bool = false) -> UInt8 {
        index == 0 ? (compressed ? 1 : 0) : UInt8(truncatingIfNeeded: length >> (8 * (4 - index)))
    }
}
