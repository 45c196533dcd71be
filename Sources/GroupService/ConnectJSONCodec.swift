import GRPCProtocol
import GroupAPI
import GroupModel
import NIOCore

/// The Connect protocol's JSON for every method of `Protos/`: proto3 JSON from and to the
/// messages, by the request and response types of each method path (`ProtoJSON`).
///
/// A request body that is not JSON ends the call with `INVALID_ARGUMENT` / `INVALID_JSON`; one
/// that names an unknown field, gives a field a value of the wrong type, or sets a field twice
/// ends it with `INVALID_ARGUMENT` / `INVALID_ARGUMENT`, metadata `field` naming the field (and a
/// `google.rpc.BadRequest` with it), as a bad value of a decoded request does.
public struct ConnectJSONCodec: ConnectCodec {
    /// Each method path's request and response types, looked up in ProtoJSON's registry once (nil
    /// for a type it does not hold: the reflection services').
    private let messages: [String: (request: ProtoJSON.Message?, requestName: String, response: ProtoJSON.Message?)]

    /// A codec for `methods` (every method of `Protos/` by default).
    /// - Parameter methods: The methods whose messages it converts.
    public init(methods: [AnyProtoMethod] = GroupAPI.allMethods) {
        var messages: [String: (request: ProtoJSON.Message?, requestName: String, response: ProtoJSON.Message?)] = [:]
        for method in methods {
            let requestName = method.requestType.protoMessageName
            messages[method.path] = (
                ProtoJSON.Message(named: requestName), requestName, ProtoJSON.Message(named: method.responseType.protoMessageName))
        }
        self.messages = messages
    }

    /// The reason of a request body that is not JSON at all.
    public static let invalidJSON = GroupError.Reason(rawValue: "INVALID_JSON")

    public func request(fromJSON json: ByteBuffer, path: String) throws(GRPCStatus) -> ByteBuffer {
        guard let types = messages[path] else { throw GRPCStatus(.unimplemented, "Method not found: \(path)") }
        let result = json.withUnsafeReadableBytes { bytes -> Result<[UInt8], ProtoJSONError> in
            Result { () throws(ProtoJSONError) in
                guard let request = types.request else {
                    // Not in the registry: the look-up by name fails, with the error it gives.
                    return try ProtoJSON.decode(json: bytes, messageName: types.requestName)
                }
                return try request.decode(json: bytes)
            }
        }
        switch result {
        case .success(let bytes):
            return ByteBuffer(bytes: bytes)
        case .failure(let error):
            throw Self.error(error).grpcStatus
        }
    }

    /// The domain error a JSON decoding failure stands for.
    static func error(_ error: ProtoJSONError) -> GroupError {
        if error.code == .syntax {
            return GroupError(
                code: .invalidArgument, reason: invalidJSON, message: "the request body is not JSON: \(error.message)",
                metadata: error.field.isEmpty ? [:] : ["field": error.field])
        }
        return .invalidArgument(field: error.field, error.message)
    }

    public func responseJSON(_ message: ByteBuffer, path: String) -> ByteBuffer {
        guard let response = messages[path]?.response,
              let json = message.withUnsafeReadableBytes({ try? response.encode(serializedBytes: $0) })
        else {
            // The handler's own bytes always decode as its response type.
            return ByteBuffer(string: "{}")
        }
        return ByteBuffer(bytes: json)
    }

    public func detailJSON(typeName: String, value: [UInt8]) -> String? {
        guard let json = try? ProtoJSON.encodeBytes(serializedBytes: value, messageName: typeName) else { return nil }
        return String(decoding: json, as: UTF8.self)
    }
}
