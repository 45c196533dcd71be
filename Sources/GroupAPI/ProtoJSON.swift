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
        guard let descriptor = DescriptorRegistry.shared.descriptors[M.protoMessageName] else {
            preconditionFailure("\(M.protoMessageName) is not in the descriptor registry")
        }
        // Re-encoding a Swift value always yields bytes its own descriptor accepts.
        let value = try! value(of: message.serializedBytes(), descriptor: descriptor)
        return JSONValue.serialize(value, pretty: pretty)
    }

    /// A serialized message as JSON.
    /// - Parameters:
    ///   - bytes: The message in the protobuf wire format.
    ///   - messageName: Its full name, e.g. `groupd.v1.Group`.
    ///   - pretty: Two-space indentation over several lines.
    /// - Returns: The JSON text, or nil when no descriptor of that name is known.
    /// - Throws: ``ProtoDecodingError`` when the bytes are not a valid encoding of the message.
    public static func encode(serializedBytes bytes: [UInt8], messageName: String, pretty: Bool = false) throws(ProtoDecodingError) -> String? {
        guard let descriptor = DescriptorRegistry.shared.descriptors[messageName] else { return nil }
        return JSONValue.serialize(try value(of: bytes, descriptor: descriptor), pretty: pretty)
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

    private static func value(of bytes: [UInt8], descriptor: UnsafePointer<ProtobufCMessageDescriptor>) throws(ProtoDecodingError) -> JSONValue {
        let message = bytes.withUnsafeBufferPointer { buffer in
            protobuf_c_message_unpack(descriptor, nil, buffer.count, buffer.baseAddress)
        }
        guard let message else {
            let name = String(cString: descriptor.pointee.name)
            throw ProtoDecodingError(code: .malformed, subject: name, message: "\(bytes.count) bytes are not a valid \(name)")
        }
        defer { protobuf_c_message_free_unpacked(message, nil) }
        return object(UnsafeRawPointer(message), descriptor)
    }

    // MARK: Walking protobuf-c structures

    private static func object(_ message: UnsafeRawPointer, _ descriptor: UnsafePointer<ProtobufCMessageDescriptor>) -> JSONValue {
        switch String(cString: descriptor.pointee.name) {
        case "google.protobuf.Timestamp":
            let timestamp = message.assumingMemoryBound(to: Google__Protobuf__Timestamp.self).pointee
            return .string(rfc3339(seconds: timestamp.seconds, nanos: timestamp.nanos))
        case "google.protobuf.Duration":
            let duration = message.assumingMemoryBound(to: Google__Protobuf__Duration.self).pointee
            return .string(durationText(seconds: duration.seconds, nanos: duration.nanos))
        case "google.protobuf.FieldMask":
            let mask = message.assumingMemoryBound(to: Google__Protobuf__FieldMask.self).pointee
            let paths = (0..<mask.n_paths).map { index -> String in
                guard let path = mask.paths[index] else { return "" }
                return String(cString: path).split(separator: ".", omittingEmptySubsequences: false)
                    .map { jsonName(String($0)) }.joined(separator: ".")
            }
            return .string(paths.joined(separator: ","))
        case "google.protobuf.Any":
            let any = message.assumingMemoryBound(to: Google__Protobuf__Any.self).pointee
            return anyValue(typeURL: any.type_url.map { String(cString: $0) } ?? "", value: any.value)
        default:
            break
        }
        var members: [(String, JSONValue)] = []
        // A message without fields (CaughtUp) has no field array at all.
        guard descriptor.pointee.n_fields > 0, let fields = descriptor.pointee.fields else { return .object([]) }
        for index in 0..<Int(descriptor.pointee.n_fields) {
            let field = fields[index]
            let name = jsonName(String(cString: field.name))
            let address = message + Int(field.offset)
            if field.label == PROTOBUF_C_LABEL_REPEATED {
                let count = message.load(fromByteOffset: Int(field.quantifier_offset), as: Int.self)
                guard count > 0, let elements = address.load(as: UnsafeRawPointer?.self) else { continue }
                if let entry = mapEntry(field) {
                    var entries: [(String, JSONValue)] = []
                    for element in 0..<count {
                        let pair = elements.load(fromByteOffset: element * MemoryLayout<UnsafeRawPointer>.stride, as: UnsafeRawPointer.self)
                        let key = pair + Int(entry.key.offset)
                        let keyText: String
                        switch scalar(key, entry.key) {
                        case .string(let text): keyText = text
                        case .number(let text): keyText = text
                        case .bool(let flag): keyText = flag ? "true" : "false"
                        default: keyText = ""
                        }
                        entries.append((keyText, scalar(pair + Int(entry.value.offset), entry.value)))
                    }
                    members.append((name, .object(entries)))
                } else {
                    let stride = elementStride(field.type)
                    members.append((name, .array((0..<count).map { scalar(elements + $0 * stride, field) })))
                }
                continue
            }
            if field.flags & PROTOBUF_C_FIELD_FLAG_ONEOF.rawValue != 0 {
                let selected = message.load(fromByteOffset: Int(field.quantifier_offset), as: UInt32.self)
                guard selected == field.id else { continue }
                members.append((name, scalar(address, field)))
                continue
            }
            if field.label == PROTOBUF_C_LABEL_OPTIONAL && field.type != PROTOBUF_C_TYPE_MESSAGE && field.type != PROTOBUF_C_TYPE_STRING {
                guard message.load(fromByteOffset: Int(field.quantifier_offset), as: Int32.self) != 0 else { continue }
                members.append((name, scalar(address, field)))
                continue
            }
            guard !isDefault(address, field) else { continue }
            members.append((name, scalar(address, field)))
        }
        return .object(members)
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

    private static func elementStride(_ type: ProtobufCType) -> Int {
        switch type {
        case PROTOBUF_C_TYPE_INT64, PROTOBUF_C_TYPE_SINT64, PROTOBUF_C_TYPE_SFIXED64,
             PROTOBUF_C_TYPE_UINT64, PROTOBUF_C_TYPE_FIXED64, PROTOBUF_C_TYPE_DOUBLE:
            return 8
        case PROTOBUF_C_TYPE_STRING, PROTOBUF_C_TYPE_MESSAGE:
            return MemoryLayout<UnsafeRawPointer>.stride
        case PROTOBUF_C_TYPE_BYTES:
            return MemoryLayout<ProtobufCBinaryData>.stride
        default:
            return 4
        }
    }

    private static func isDefault(_ address: UnsafeRawPointer, _ field: ProtobufCFieldDescriptor) -> Bool {
        switch field.type {
        case PROTOBUF_C_TYPE_INT64, PROTOBUF_C_TYPE_SINT64, PROTOBUF_C_TYPE_SFIXED64,
             PROTOBUF_C_TYPE_UINT64, PROTOBUF_C_TYPE_FIXED64:
            return address.load(as: UInt64.self) == 0
        case PROTOBUF_C_TYPE_DOUBLE:
            return address.load(as: Double.self) == 0
        case PROTOBUF_C_TYPE_FLOAT:
            return address.load(as: Float.self) == 0
        case PROTOBUF_C_TYPE_STRING:
            guard let text = address.load(as: UnsafePointer<CChar>?.self) else { return true }
            return text.pointee == 0
        case PROTOBUF_C_TYPE_BYTES:
            return address.load(as: ProtobufCBinaryData.self).len == 0
        case PROTOBUF_C_TYPE_MESSAGE:
            return address.load(as: UnsafeRawPointer?.self) == nil
        default:
            return address.load(as: UInt32.self) == 0
        }
    }

    /// One value (a singular field, or an element of a repeated one) at `address`.
    private static func scalar(_ address: UnsafeRawPointer, _ field: ProtobufCFieldDescriptor) -> JSONValue {
        switch field.type {
        case PROTOBUF_C_TYPE_INT32, PROTOBUF_C_TYPE_SINT32, PROTOBUF_C_TYPE_SFIXED32:
            return .number(String(address.load(as: Int32.self)))
        case PROTOBUF_C_TYPE_UINT32, PROTOBUF_C_TYPE_FIXED32:
            return .number(String(address.load(as: UInt32.self)))
        case PROTOBUF_C_TYPE_INT64, PROTOBUF_C_TYPE_SINT64, PROTOBUF_C_TYPE_SFIXED64:
            return .string(String(address.load(as: Int64.self)))
        case PROTOBUF_C_TYPE_UINT64, PROTOBUF_C_TYPE_FIXED64:
            return .string(String(address.load(as: UInt64.self)))
        case PROTOBUF_C_TYPE_FLOAT:
            return floating(Double(address.load(as: Float.self)))
        case PROTOBUF_C_TYPE_DOUBLE:
            return floating(address.load(as: Double.self))
        case PROTOBUF_C_TYPE_BOOL:
            return .bool(address.load(as: Int32.self) != 0)
        case PROTOBUF_C_TYPE_ENUM:
            let number = address.load(as: Int32.self)
            if let raw = field.descriptor,
               let value = protobuf_c_enum_descriptor_get_value(raw.assumingMemoryBound(to: ProtobufCEnumDescriptor.self), number) {
                return .string(String(cString: value.pointee.name))
            }
            return .number(String(number))
        case PROTOBUF_C_TYPE_STRING:
            guard let text = address.load(as: UnsafePointer<CChar>?.self) else { return .string("") }
            return .string(String(cString: text))
        case PROTOBUF_C_TYPE_BYTES:
            let data = address.load(as: ProtobufCBinaryData.self)
            guard data.len > 0, let bytes = data.data else { return .string("") }
            return .string(base64(UnsafeBufferPointer(start: bytes, count: data.len)))
        case PROTOBUF_C_TYPE_MESSAGE:
            guard let nested = address.load(as: UnsafeRawPointer?.self), let raw = field.descriptor else { return .object([]) }
            return object(nested, raw.assumingMemoryBound(to: ProtobufCMessageDescriptor.self))
        default:
            return .null
        }
    }

    private static func floating(_ value: Double) -> JSONValue {
        if value.isNaN { return .string("NaN") }
        if value.isInfinite { return .string(value > 0 ? "Infinity" : "-Infinity") }
        if value == value.rounded(), abs(value) < 1e15 { return .number(String(Int64(value))) }
        return .number("\(value)")
    }

    private static func anyValue(typeURL: String, value: ProtobufCBinaryData) -> JSONValue {
        let name = typeURL.split(separator: "/").last.map(String.init) ?? typeURL
        let bytes = value.len > 0 && value.data != nil ? Array(UnsafeBufferPointer(start: value.data, count: value.len)) : []
        guard let descriptor = DescriptorRegistry.shared.descriptors[name],
              let packed = try? Self.value(of: bytes, descriptor: descriptor) else {
            // A type this build does not know: its bytes, so nothing is lost.
            return .object([("@type", .string(typeURL)), ("value", .string(bytes.withUnsafeBufferPointer { base64($0) }))])
        }
        if case .object(let members) = packed, !name.hasPrefix("google.protobuf.") {
            return .object([("@type", .string(typeURL))] + members)
        }
        return .object([("@type", .string(typeURL)), ("value", packed)])
    }

    // MARK: Well-known type text

    /// RFC 3339 in UTC with 0, 3, 6 or 9 fractional digits, as proto3 JSON writes a Timestamp.
    static func rfc3339(seconds: Int64, nanos: Int32) -> String {
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        // Civil date from days since 1970-01-01 (Howard Hinnant's days_from_civil, inverted).
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        func pad(_ value: Int64, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        let time = "\(pad(secondOfDay / 3600, 2)):\(pad(secondOfDay / 60 % 60, 2)):\(pad(secondOfDay % 60, 2))"
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(time)\(fraction(nanos))Z"
    }

    /// A Duration as proto3 JSON writes it: seconds with 0, 3, 6 or 9 fractional digits and `s`.
    static func durationText(seconds: Int64, nanos: Int32) -> String {
        let negative = seconds < 0 || nanos < 0
        return "\(negative ? "-" : "")\(abs(seconds))\(fraction(abs(nanos)))s"
    }

    private static func fraction(_ nanos: Int32) -> String {
        guard nanos > 0 else { return "" }
        let digits = String(nanos)
        let nine = String(repeating: "0", count: 9 - digits.count) + digits
        if nanos % 1_000_000 == 0 { return "." + nine.prefix(3) }
        if nanos % 1_000 == 0 { return "." + nine.prefix(6) }
        return "." + nine
    }

    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Standard base64 with padding, as proto3 JSON writes bytes.
    static func base64(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index < bytes.count {
            let b0 = UInt32(bytes[index])
            let b1 = index + 1 < bytes.count ? UInt32(bytes[index + 1]) : 0
            let b2 = index + 2 < bytes.count ? UInt32(bytes[index + 2]) : 0
            let value = b0 << 16 | b1 << 8 | b2
            out.append(alphabet[Int(value >> 18 & 63)])
            out.append(alphabet[Int(value >> 12 & 63)])
            out.append(index + 1 < bytes.count ? alphabet[Int(value >> 6 & 63)] : UInt8(ascii: "="))
            out.append(index + 2 < bytes.count ? alphabet[Int(value & 63)] : UInt8(ascii: "="))
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
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

/// A JSON value with its members in order, and its serializer.
enum JSONValue: Equatable {
    case object([(String, JSONValue)])
    case array([JSONValue])
    case string(String)
    /// A number's JSON text.
    case number(String)
    case bool(Bool)
    case null

    static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        serialize(lhs, pretty: false) == serialize(rhs, pretty: false)
    }

    static func serialize(_ value: JSONValue, pretty: Bool) -> String {
        var out = ""
        write(value, into: &out, pretty: pretty, indent: 0)
        return out
    }

    private static func write(_ value: JSONValue, into out: inout String, pretty: Bool, indent: Int) {
        let newline = pretty ? "\n" + String(repeating: "  ", count: indent + 1) : ""
        let closing = pretty ? "\n" + String(repeating: "  ", count: indent) : ""
        switch value {
        case .object(let members):
            guard !members.isEmpty else { out += "{}"; return }
            out += "{"
            for (index, member) in members.enumerated() {
                if index > 0 { out += "," }
                out += newline
                JSONString.append(member.0, to: &out)
                out += pretty ? ": " : ":"
                write(member.1, into: &out, pretty: pretty, indent: indent + 1)
            }
            out += closing + "}"
        case .array(let elements):
            guard !elements.isEmpty else { out += "[]"; return }
            out += "["
            for (index, element) in elements.enumerated() {
                if index > 0 { out += "," }
                out += newline
                write(element, into: &out, pretty: pretty, indent: indent + 1)
            }
            out += closing + "]"
        case .string(let text):
            JSONString.append(text, to: &out)
        case .number(let text):
            out += text
        case .bool(let flag):
            out += flag ? "true" : "false"
        case .null:
            out += "null"
        }
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
