import NIOCore

/// What the Connect protocol needs to know of the messages: JSON in and out, by method.
///
/// The protocol layer (``ConnectProtocol``) moves protobuf bytes between the transport and the
/// handlers; a call in `application/json` (or `application/connect+json`) goes through the codec
/// on its way in and out. The server's API module implements it from its descriptors.
public protocol ConnectCodec: Sendable {
    /// The request message of the method at `path`, from its JSON.
    /// - Parameters:
    ///   - json: The request body (inflated), UTF-8 JSON text.
    ///   - path: The method path, `/package.Service/Method`.
    /// - Returns: The message in the protobuf wire format.
    /// - Throws: The status the call ends with: `INVALID_ARGUMENT` naming the field at fault.
    func request(fromJSON json: ByteBuffer, path: String) throws(GRPCStatus) -> ByteBuffer

    /// A response message of the method at `path` as JSON.
    /// - Parameters:
    ///   - message: The message in the protobuf wire format, as the handler wrote it.
    ///   - path: The method path.
    /// - Returns: The UTF-8 JSON text.
    func responseJSON(_ message: ByteBuffer, path: String) -> ByteBuffer

    /// An error detail as a JSON object, for the `debug` member Connect allows beside its bytes.
    /// - Parameters:
    ///   - typeName: The detail's full message name, e.g. `google.rpc.ErrorInfo`.
    ///   - value: The detail in the protobuf wire format.
    /// - Returns: The JSON object's text, or nil when the type is not known.
    func detailJSON(typeName: String, value: [UInt8]) -> String?
}
