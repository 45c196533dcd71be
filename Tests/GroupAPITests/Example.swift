import GroupAPI
import Testing

/// One fully-set example message (from the generated `Examples.all`), with the bytes python's
/// google.protobuf produced for the same value.
struct Example: Sendable, CustomTestStringConvertible {
    /// The message's full protobuf name.
    let name: String
    /// Which oneof members are set (0 = the first of each oneof).
    let variant: Int
    /// How many fields the message declares (0 for empty messages such as `DismissGroupResponse`).
    let fieldCount: Int
    /// The example value.
    let message: any ProtoMessage

    var testDescription: String { "\(name)#\(variant)" }

    /// The python serialization of the same value, from `PythonFixtures`.
    func pythonBytes() throws -> [UInt8] {
        let hex = try #require(PythonFixtures.hex["\(name)#\(variant)"], "no python fixture for \(testDescription)")
        return try #require(Hex.decode(hex), "bad hex for \(testDescription)")
    }
}

/// Decodes `bytes` as the example's own type and compares with it.
func decodedEquals<M: ProtoMessage>(_ expected: M, _ bytes: [UInt8]) throws -> Bool {
    try M(serializedBytes: bytes) == expected
}

/// Decodes `bytes` as `M`, returning the error if any.
func decodeError<M: ProtoMessage>(_ type: M.Type, _ bytes: [UInt8]) -> ProtoDecodingError? {
    do {
        _ = try M(serializedBytes: bytes)
        return nil
    } catch {
        return error
    }
}

/// The default value of the example's type.
func defaultValue<M: ProtoMessage>(of example: M) -> M {
    M()
}

enum Hex {
    static func decode(_ hex: String) -> [UInt8]? {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let high = value(digits[index]), let low = value(digits[index + 1]) else { return nil }
            out.append(high << 4 | low)
            index += 2
        }
        return out
    }

    static func encode(_ bytes: [UInt8]) -> String {
        let table = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(table[Int(byte >> 4)])
            out.append(table[Int(byte & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func value(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
