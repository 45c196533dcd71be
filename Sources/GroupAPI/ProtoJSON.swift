import CProtobufC
import GroupProtoC

/// Messages of the groupd API as proto3 JSON, written from protobuf-c's descriptors: field names
/// in lowerCamelCase (`group_id` → `groupId`), enums by their value names
/// (`GROUP_TYPE_PUBLIC`), 64-bit integers as strings, bytes in base64, maps as objects,
/// `Timestamp` as RFC 3339 in UTC, `Duration` as `"1.5s"`, `FieldMask` as a comma-separated string,
/// `Any` with its `@type`. Fields at their proto3 default are left out, as proto3 JSON does
/// (a oneof member that is set is always written).
///
/// ```swift
/// print(ProtoJSON.encode(group))   // {"groupId":"@TGS#1","type":"GROUP_TYPE_PUBLIC",...}
/// ```
public enum ProtoJSON {
    /// The message as one line of JSON, or indented with `pretty`.
    /// - Parameters:
    ///   - message: Any message of `Protos/` reachable from a service, or a `google.rpc` detail.
    ///   - pretty: Two-space indentation over several lines.
    /// - Returns: The JSON text (no trailing newline).
    public static func encode<M: ProtoMessage>(_ message: M, pretty: Bool = false) -> String {
        guard let handle = Message(named: M.protoMessageName) else {
            preconditionFailure("\(M.protoMessageName) is not in the descriptor registry")
        }
        // Re-encoding a Swift value always yields bytes its own descriptor accepts.
        return String(decoding: try! handle.encode(serializedBytes: message.serializedBytes(), pretty: pretty), as: UTF8.self)
    }

    /// A serialized message as JSON (``encodeBytes(serializedBytes:messageName:pretty:)-([UInt8],_,_)``
    /// as a string).
    /// - Parameters:
    ///   - bytes: The message in the protobuf wire format.
    ///   - messageName: Its full name, e.g. `groupd.v1.Group`.
    ///   - pretty: Two-space indentation over several lines.
    /// - Returns: The JSON text, or nil when no descriptor of that name is known.
    /// - Throws: ``ProtoDecodingError`` when the bytes are not a valid encoding of the message.
    public static func encode(serializedBytes bytes: [UInt8], messageName: String, pretty: Bool = false) throws(ProtoDecodingError) -> String? {
        try encodeBytes(serializedBytes: bytes, messageName: messageName, pretty: pretty).map { String(decoding: $0, as: UTF8.self) }
    }

    /// The proto3 JSON name of a field: underscores dropped, the letter after each upper-cased.
    static func jsonName(_ protoName: String) -> String {
        var out = ""
        var upperNext = false
        for character in protoName {
            if character == "_" {
                upperNext = true
            } else if upperNext {
                out += character.uppercased()
                upperNext = false
            } else {
                out.append(character)
            }
        }
        return out
    }

    /// The key and value fields of a map's entry message (protoc-c generates maps as repeated
    /// `<Name>Entry` messages with `key = 1` and `value = 2`).
    static func mapEntry(_ field: ProtobufCFieldDescriptor) -> (key: ProtobufCFieldDescriptor, value: ProtobufCFieldDescriptor)? {
        guard field.type == PROTOBUF_C_TYPE_MESSAGE, let raw = field.descriptor else { return nil }
        let entry = raw.assumingMemoryBound(to: ProtobufCMessageDescriptor.self).pointee
        guard entry.n_fields == 2, String(cString: entry.short_name).hasSuffix("Entry") else { return nil }
        let key = entry.fields[0], value = entry.fields[1]
        guard key.id == 1, value.id == 2, String(cString: key.name) == "key", String(cString: value.name) == "value" else { return nil }
        return (key, value)
    }

    // MARK: Well-known type text

    /// RFC 3339 in UTC with 0, 3, 6 or 9 fractional digits, as proto3 JSON writes a Timestamp.
    static func rfc3339(seconds: Int64, nanos: Int32) -> String {
        text { writeRFC3339(seconds: seconds, nanos: nanos, into: &$0) }
    }

    /// A Duration as proto3 JSON writes it: seconds with 0, 3, 6 or 9 fractional digits and `s`.
    static func durationText(seconds: Int64, nanos: Int32) -> String {
        text { writeDuration(seconds: seconds, nanos: nanos, into: &$0) }
    }

    /// Standard base64 with padding, as proto3 JSON writes bytes.
    static func base64(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        text { writeBase64(bytes, into: &$0) }
    }
}

/// Every message descriptor of the API by full name: the messages of every service's methods and
/// everything they contain, plus the `google.rpc` error details and `StreamResumeInfo` (which
/// travel inside `Any`).
struct DescriptorRegistry: @unchecked Sendable {
    // @unchecked Sendable: the pointers are to protoc-c's static, immutable descriptors.
    let descriptors: [String: UnsafePointer<ProtobufCMessageDescriptor>]

    static let shared = DescriptorRegistry()

    private init() {
        var found: [String: UnsafePointer<ProtobufCMessageDescriptor>] = [:]
        func visit(_ descriptor: UnsafePointer<ProtobufCMessageDescriptor>) {
            let name = String(cString: descriptor.pointee.name)
            guard found[name] == nil else { return }
            found[name] = descriptor
            guard let fields = descriptor.pointee.fields else { return }
            for index in 0..<Int(descriptor.pointee.n_fields) {
                let field = fields[index]
                if field.type == PROTOBUF_C_TYPE_MESSAGE, let nested = field.descriptor {
                    visit(nested.assumingMemoryBound(to: ProtobufCMessageDescriptor.self))
                }
            }
        }
        let services = [
            groupd__v1__application_service__descriptor, groupd__v1__event_service__descriptor,
            groupd__v1__group_service__descriptor, groupd__v1__member_service__descriptor,
            groupd__v1__message_service__descriptor, grpc__health__v1__health__descriptor,
        ]
        for service in services {
            for index in 0..<Int(service.n_methods) {
                visit(service.methods[index].input)
                visit(service.methods[index].output)
            }
        }
        for detail in [
            GroupProtoC_descriptor__google__rpc__status(), GroupProtoC_descriptor__google__rpc__error_info(),
            GroupProtoC_descriptor__google__rpc__bad_request(), GroupProtoC_descriptor__google__rpc__retry_info(),
            GroupProtoC_descriptor__google__rpc__debug_info(), GroupProtoC_descriptor__google__rpc__quota_failure(),
            GroupProtoC_descriptor__google__rpc__precondition_failure(), GroupProtoC_descriptor__google__rpc__request_info(),
            GroupProtoC_descriptor__google__rpc__resource_info(), GroupProtoC_descriptor__google__rpc__help(),
            GroupProtoC_descriptor__google__rpc__localized_message(), GroupProtoC_descriptor__groupd__v1__stream_resume_info(),
            GroupProtoC_descriptor__google__protobuf__timestamp(), GroupProtoC_descriptor__google__protobuf__duration(),
            GroupProtoC_descriptor__google__protobuf__field_mask(), GroupProtoC_descriptor__google__protobuf__any(),
        ] {
            visit(detail)
        }
        self.descriptors = found
    }
}

/// JSON string literals (RFC 8259): quote, backslash and control characters escaped, and U+2028
/// and U+2029 too, so a line stays one line for JavaScript readers. Shared by the proto3 JSON
/// output, the JSON log lines and the policy plugins' JSON configuration.
public enum JSONString {
    /// Appends `text` as a JSON string literal, quotes included.
    public static func append(_ text: String, to out: inout String) {
        out += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{08}": out += "\\b"
            case "\u{0C}": out += "\\f"
            case _ where scalar.value < 0x20 || scalar.value == 0x2028 || scalar.value == 0x2029:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default:
                out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}
