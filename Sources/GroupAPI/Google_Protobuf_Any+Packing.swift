extension Google_Protobuf_Any {
    /// The type URL prefix protobuf uses by default.
    public static let defaultTypeURLPrefix = "type.googleapis.com"

    /// Packs a message into an `Any` (for `google.rpc.Status.details`, for instance).
    ///
    /// - Parameters:
    ///   - message: The message to pack.
    ///   - typeURLPrefix: The prefix of the type URL; `type.googleapis.com` by default.
    public init<M: ProtoMessage>(packing message: M, typeURLPrefix: String = Self.defaultTypeURLPrefix) {
        self.init()
        self.typeURL = "\(typeURLPrefix)/\(M.protoMessageName)"
        self.value = message.serializedBytes()
    }

    /// The full name of the packed message type: the part of the type URL after its last `/`.
    public var packedMessageName: Substring {
        guard let slash = typeURL.lastIndex(of: "/") else { return typeURL[...] }
        return typeURL[typeURL.index(after: slash)...]
    }

    /// Whether the packed message is an `M`.
    public func isA<M: ProtoMessage>(_ type: M.Type) -> Bool {
        packedMessageName == M.protoMessageName
    }

    /// The packed message decoded as an `M`, or nil when it holds another type.
    ///
    /// - Parameter type: The expected message type.
    /// - Returns: The message, or nil if the type URL names another message.
    /// - Throws: ``ProtoDecodingError`` when the type matches but the bytes do not decode.
    public func unpack<M: ProtoMessage>(_ type: M.Type) throws(ProtoDecodingError) -> M? {
        guard isA(type) else { return nil }
        return try M(serializedBytes: value)
    }
}
