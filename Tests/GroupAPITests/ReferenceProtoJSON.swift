@testable import GroupAPI
import CProtobufC
import GroupProtoC

/// The encoder ProtoJSON had before it wrote bytes directly: a tree of `JSONValue`s of Swift
/// strings, serialized character by character. Kept verbatim as the reference the byte encoder
/// must match exactly (ProtoJSONEncoderParityTests).
enum ReferenceProtoJSON {
    /// The message's JSON as the old encoder wrote it, nil for an unknown name.
    static func encode(serializedBytes bytes: [UInt8], messageName: String, pretty: Bool = false) throws(ProtoDecodingError) -> String? {
        guard let descriptor = DescriptorRegistry.shared.descriptors[messageName] else { return nil }
        return ReferenceJSONValue.serialize(try value(of: bytes, descriptor: descriptor), pretty: pretty)
    }

    private static func value(of bytes: [UInt8], descriptor: UnsafePointer<ProtobufCMessageDescriptor>) throws(ProtoDecodingError) -> ReferenceJSONValue {
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

    private static func object(_ message: UnsafeRawPointer, _ descriptor: UnsafePointer<ProtobufCMessageDescriptor>) -> ReferenceJSONValue {
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
                    .map { ProtoJSON.jsonName(String($0)) }.joined(separator: ".")
            }
            return .string(paths.joined(separator: ","))
        case "google.protobuf.Any":
            let any = message.assumingMemoryBound(to: Google__Protobuf__Any.self).pointee
            return anyValue(typeURL: any.type_url.map { String(cString: $0) } ?? "", value: any.value)
        default:
            break
        }
        var members: [(String, ReferenceJSONValue)] = []
        // A message without fields (CaughtUp) has no field array at all.
        guard descriptor.pointee.n_fields > 0, let fields = descriptor.pointee.fields else { return .object([]) }
        for index in 0..<Int(descriptor.pointee.n_fields) {
            let field = fields[index]
            let name = ProtoJSON.jsonName(String(cString: field.name))
            let address = message + Int(field.offset)
            if field.label == PROTOBUF_C_LABEL_REPEATED {
                let count = message.load(fromByteOffset: Int(field.quantifier_offset), as: Int.self)
                guard count > 0, let elements = address.load(as: UnsafeRawPointer?.self) else { continue }
                if let entry = ProtoJSON.mapEntry(field) {
                    var entries: [(String, ReferenceJSONValue)] = []
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
    private static func scalar(_ address: UnsafeRawPointer, _ field: ProtobufCFieldDescriptor) -> ReferenceJSONValue {
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

    private static func floating(_ value: Double) -> ReferenceJSONValue {
        if value.isNaN { return .string("NaN") }
        if value.isInfinite { return .string(value > 0 ? "Infinity" : "-Infinity") }
        if value == value.rounded(), abs(value) < 1e15 { return .number(String(Int64(value))) }
        return .number("\(value)")
    }

    private static func anyValue(typeURL: String, value: ProtobufCBinaryData) -> ReferenceJSONValue {
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

/// A JSON value with its members in order, and its serializer.
enum ReferenceJSONValue: Equatable {
    case object([(String, ReferenceJSONValue)])
    case array([ReferenceJSONValue])
    case string(String)
    /// A number's JSON text.
    case number(String)
    case bool(Bool)
    case null

    static func == (lhs: ReferenceJSONValue, rhs: ReferenceJSONValue) -> Bool {
        serialize(lhs, pretty: false) == serialize(rhs, pretty: false)
    }

    static func serialize(_ value: ReferenceJSONValue, pretty: Bool) -> String {
        var out = ""
        write(value, into: &out, pretty: pretty, indent: 0)
        return out
    }

    private static func write(_ value: ReferenceJSONValue, into out: inout String, pretty: Bool, indent: Int) {
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

