/// A protobuf message of the groupd API: a plain Swift value generated from `Protos/` by
/// `scripts/genproto.py`, encoded and decoded through the protoc-c code of `GroupProtoC`.
///
/// Fields follow proto3: scalars, strings, bytes, repeated fields and maps default to their zero
/// values; a singular message field is an optional (`nil` = absent); a oneof is an optional enum.
/// Unknown fields are accepted when decoding and dropped from the Swift value.
///
/// - Important: protobuf-c carries strings as NUL-terminated `char *`: a string containing a NUL
///   byte is cut at the first NUL when encoded, and a received one arrives cut the same way.
public protocol ProtoMessage: Sendable, Equatable {
    /// The message's full protobuf name, e.g. `groupd.v1.Group`.
    static var protoMessageName: String { get }

    /// A message with every field at its default value.
    init()

    /// Decodes one message in the protobuf wire format (no gRPC length prefix).
    ///
    /// - Parameter bytes: The serialized message. An empty buffer decodes to the default message.
    /// - Throws: ``ProtoDecodingError`` when the bytes are not a valid encoding of this message
    ///   (truncated, wrong wire type, length past the end, ...) or a string field is not UTF-8.
    init(serializedBytes bytes: UnsafeRawBufferPointer) throws(ProtoDecodingError)

    /// Encodes the message without an intermediate copy: `body` receives the encoded size and a
    /// function that writes the encoding into memory of at least that size and returns the number
    /// of bytes written (always `size`).
    ///
    /// Use it to pack straight into an outgoing buffer; both arguments are valid only during `body`.
    ///
    /// - Parameter body: Gets the size, reserves room, calls `pack` on it.
    /// - Returns: What `body` returns.
    func withPackedBytes<R>(
        _ body: (_ size: Int, _ pack: (UnsafeMutableRawPointer) -> Int) throws -> R
    ) rethrows -> R
}

extension ProtoMessage {
    /// Decodes one message in the protobuf wire format from an array.
    ///
    /// - Parameter bytes: The serialized message. An empty array decodes to the default message.
    /// - Throws: ``ProtoDecodingError`` as ``init(serializedBytes:)-(UnsafeRawBufferPointer)``.
    public init(serializedBytes bytes: [UInt8]) throws(ProtoDecodingError) {
        let result: Result<Self, ProtoDecodingError> = bytes.withUnsafeBytes { raw in
            Result { () throws(ProtoDecodingError) in try Self(serializedBytes: raw) }
        }
        self = try result.get()
    }

    /// The message in the protobuf wire format.
    ///
    /// - Returns: The encoded bytes (empty for a message with every field at its default).
    public func serializedBytes() -> [UInt8] {
        withPackedBytes { size, pack in
            guard size > 0 else { return [] }
            return [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
                count = pack(UnsafeMutableRawPointer(buffer.baseAddress!))
            }
        }
    }

    /// The size of the encoded message in bytes.
    ///
    /// - Important: This builds the protobuf-c structure to measure it; when the bytes are needed
    ///   too, use ``withPackedBytes(_:)``, which measures and packs from one build.
    public var serializedSize: Int {
        withPackedBytes { size, _ in size }
    }

    /// Makes a message by mutating a default one: `Groupd_V1_GroupProfile.with { $0.name = "x" }`.
    ///
    /// - Parameter populator: Sets the fields.
    /// - Returns: The populated message.
    public static func with(_ populator: (inout Self) throws -> Void) rethrows -> Self {
        var message = Self()
        try populator(&message)
        return message
    }
}

/// A protobuf enum of the groupd API.
///
/// Cases are named like swift-protobuf's (`GROUP_TYPE_AV_CHAT_ROOM` → `.avChatRoom`); values this
/// version does not know survive decoding and re-encoding as `.UNRECOGNIZED(value)`; proto aliases
/// are `static let`s naming their main case.
public protocol ProtoEnum: RawRepresentable, CaseIterable, Hashable, Sendable where RawValue == Int32 {
    /// The proto3 default, the value numbered 0.
    init()
}
