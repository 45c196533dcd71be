/// Base64 encoding: standard with padding for `grpc-status-details-bin`, and base64url without
/// padding (RFC 4648 §5) for the signatures of bearer tokens.
public enum Base64 {
    private static let standard: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let url: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Encodes bytes as standard base64 with padding.
    package static func encode(_ bytes: [UInt8]) -> [UInt8] {
        encode(bytes, alphabet: standard, padded: true)
    }

    /// Encodes bytes as standard base64 without padding (Connect's error details).
    package static func encodeUnpadded(_ bytes: [UInt8]) -> [UInt8] {
        encode(bytes, alphabet: standard, padded: false)
    }

    /// Encodes bytes as base64url without padding.
    public static func encodeURL(_ bytes: [UInt8]) -> [UInt8] {
        encode(bytes, alphabet: url, padded: false)
    }

    private static func encode(_ bytes: [UInt8], alphabet: [UInt8], padded: Bool) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index + 3 <= bytes.count {
            let value = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            out.append(alphabet[Int(value >> 18 & 63)])
            out.append(alphabet[Int(value >> 12 & 63)])
            out.append(alphabet[Int(value >> 6 & 63)])
            out.append(alphabet[Int(value & 63)])
            index += 3
        }
        let rest = bytes.count - index
        if rest > 0 {
            var value = UInt32(bytes[index]) << 16
            if rest == 2 { value |= UInt32(bytes[index + 1]) << 8 }
            out.append(alphabet[Int(value >> 18 & 63)])
            out.append(alphabet[Int(value >> 12 & 63)])
            if rest == 2 {
                out.append(alphabet[Int(value >> 6 & 63)])
            } else if padded {
                out.append(UInt8(ascii: "="))
            }
            if padded { out.append(UInt8(ascii: "=")) }
        }
        return out
    }
}
