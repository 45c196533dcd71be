import GRPCProtocol
import GroupAPI
import NIOCore

/// Decoding requests from and encoding responses into the transport's buffers.
enum MessageCoding {
    /// Decodes a request with protobuf-c.
    /// - Throws: `INTERNAL` when the bytes are not a valid message, the status grpc-go and
    ///   grpc-java give for an unparseable request.
    static func decode<Message: ProtoMessage>(_ type: Message.Type, from buffer: ByteBuffer) throws(GRPCStatus) -> Message {
        let result = buffer.withUnsafeReadableBytes { bytes -> Result<Message, ProtoDecodingError> in
            Result { () throws(ProtoDecodingError) in try Message(serializedBytes: bytes) }
        }
        switch result {
        case .success(let message):
            return message
        case .failure(let error):
            throw GRPCStatus(.internal, "error unmarshalling request \(Message.protoMessageName): \(error)")
        }
    }

    /// Packs a message straight into a new buffer.
    static func encode<Message: ProtoMessage>(_ message: Message, allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        message.withPackedBytes { size, pack in
            var buffer = allocator.buffer(capacity: size)
            if size > 0 {
                buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: size) { pack($0.baseAddress!) }
            }
            return buffer
        }
    }
}
