/// A status as Connect's error object: `{"code": "not_found", "message": "…", "details": […]}`.
///
/// `code` is the status code's Connect name; each entry of `details` is one `google.protobuf.Any`
/// of the status's `google.rpc.Status` (the bytes gRPC sends as `grpc-status-details-bin`):
/// `type` is its message name, `value` its bytes in base64 (unpadded, as Connect writes it), and
/// `debug` the same message as JSON when the codec knows it.
public enum ConnectError {
    /// The Connect name of a code (`canceled`, `invalid_argument`, …).
    public static func name(_ code: GRPCStatus.Code) -> String {
        names[code.rawValue]
    }

    /// The code a Connect name stands for.
    public static func code(named name: String) -> GRPCStatus.Code? {
        names.firstIndex(of: name).flatMap { GRPCStatus.Code(rawValue: $0) }
    }

    private static let names = [
        "ok", "canceled", "unknown", "invalid_argument", "deadline_exceeded", "not_found", "already_exists",
        "permission_denied", "resource_exhausted", "failed_precondition", "aborted", "out_of_range",
        "unimplemented", "internal", "unavailable", "data_loss", "unauthenticated",
    ]

    /// The HTTP status of a unary call that ends with `code`, as the Connect specification maps it.
    public static func httpStatus(_ code: GRPCStatus.Code) -> Int {
        httpStatuses[code.rawValue]
    }

    private static let httpStatuses = [
        200, 499, 500, 400, 504, 404, 409, 403, 429, 400, 409, 400, 501, 500, 503, 500, 401,
    ]

    /// The error object's JSON text.
    /// - Parameters:
    ///   - status: The status (not OK).
    ///   - codec: Writes each detail's `debug` JSON; nil: none.
    /// - Returns: One line of JSON.
    public static func json(_ status: GRPCStatus, codec: (any ConnectCodec)?) -> String {
        var out = "{\"code\":\"\(name(status.code == .ok ? .unknown : status.code))\""
        if !status.message.isEmpty {
            out += ",\"message\":"
            appendString(status.message, to: &out)
        }
        let details = status.details.map(anyMessages) ?? []
        if !details.isEmpty {
            out += ",\"details\":["
            for (index, detail) in details.enumerated() {
                if index > 0 { out += "," }
                let typeName = detail.typeURL.split(separator: "/").last.map(String.init) ?? detail.typeURL
                out += "{\"type\":"
                appendString(typeName, to: &out)
                out += ",\"value\":\""
                out += String(decoding: Base64.encodeUnpadded(detail.value), as: UTF8.self)
                out += "\""
                if let debug = codec?.detailJSON(typeName: typeName, value: detail.value) {
                    out += ",\"debug\":" + debug
                }
                out += "}"
            }
            out += "]"
        }
        return out + "}"
    }

    /// The `details` (field 3, `google.protobuf.Any`: `type_url` 1, `value` 2) of a serialized
    /// `google.rpc.Status`; what does not parse is left out.
    static func anyMessages(_ status: [UInt8]) -> [(typeURL: String, value: [UInt8])] {
        var reader = WireReader(status)
        var out: [(String, [UInt8])] = []
        while let (field, bytes) = reader.next() {
            guard field == 3, let bytes else { continue }
            var any = WireReader(bytes)
            var typeURL = ""
            var value: [UInt8] = []
            while let (inner, innerBytes) = any.next() {
                if inner == 1, let innerBytes { typeURL = String(decoding: innerBytes, as: UTF8.self) }
                if inner == 2, let innerBytes { value = innerBytes }
            }
            if !typeURL.isEmpty { out.append((typeURL, value)) }
        }
        return out
    }

    /// A JSON string literal of `text`.
    static func appendString(_ text: String, to out: inout String) {
        out += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        out += "\""
    }
}

/// Reads the fields of a protobuf message: numbers, and the bytes of length-delimited ones.
struct WireReader {
    private let bytes: [UInt8]
    private var index = 0

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// The next field: its number, and its bytes when length-delimited; nil at the end or at
    /// bytes that do not parse.
    mutating func next() -> (field: Int, bytes: [UInt8]?)? {
        guard let key = varint() else { return nil }
        let field = Int(key >> 3)
        switch key & 7 {
        case 0:
            guard varint() != nil else { return nil }
            return (field, nil)
        case 1, 5:
            let width = key & 7 == 1 ? 8 : 4
            guard index + width <= bytes.count else { return nil }
            index += width
            return (field, nil)
        case 2:
            guard let length = varint(), length <= UInt64(bytes.count - index) else { return nil }
            let start = index
            index += Int(length)
            return (field, Array(bytes[start..<index]))
        default:
            return nil
        }
    }

    private mutating func varint() -> UInt64? {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while index < bytes.count, shift < 64 {
            let byte = bytes[index]
            index += 1
            value |= UInt64(byte & 0x7f) << shift
            if byte & 0x80 == 0 { return value }
            shift += 7
        }
        return nil
    }
}
