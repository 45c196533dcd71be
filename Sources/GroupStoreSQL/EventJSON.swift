/// The JSON of an event's `targets` (an array of strings) and `changes` (an object of strings),
/// written and read by hand: the same text `JSONEncoder` with sorted keys writes (slashes
/// escaped), read back whatever escapes a stored row holds. Foundation's coders cost several
/// microseconds per event on the write path; these cost a copy.
public enum EventJSON {
    /// `["a","b"]`.
    package static func encode(_ strings: [String]) -> String {
        if strings.isEmpty { return "[]" }
        var out = "["
        for (index, string) in strings.enumerated() {
            if index > 0 { out.append(",") }
            append(string, to: &out)
        }
        out.append("]")
        return out
    }

    /// `{"k":"v"}`, keys in ascending order.
    package static func encode(_ object: [String: String]) -> String {
        if object.isEmpty { return "{}" }
        var out = "{"
        for (index, key) in object.keys.sorted().enumerated() {
            if index > 0 { out.append(",") }
            append(key, to: &out)
            out.append(":")
            append(object[key]!, to: &out)
        }
        out.append("}")
        return out
    }

    private static func append(_ string: String, to out: inout String) {
        out.append("\"")
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": out.append("\\\"")
            case "\\": out.append("\\\\")
            case "/": out.append("\\/")
            case "\n": out.append("\\n")
            case "\r": out.append("\\r")
            case "\t": out.append("\\t")
            case "\u{08}": out.append("\\b")
            case "\u{0C}": out.append("\\f")
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out.append("\\u" + String(repeating: "0", count: 4 - hex.count) + hex)
            default: out.unicodeScalars.append(scalar)
            }
        }
        out.append("\"")
    }

    /// The strings of a JSON array of strings.
    /// - Throws: ``Malformed`` when `text` is not one.
    public static func strings(_ text: String) throws -> [String] {
        var reader = Reader(text)
        var result: [String] = []
        try reader.expect(UInt8(ascii: "["))
        if try reader.peek() == UInt8(ascii: "]") {
            reader.index += 1
        } else {
            while true {
                result.append(try reader.string())
                let next = try reader.next()
                if next == UInt8(ascii: "]") { break }
                guard next == UInt8(ascii: ",") else { throw Malformed() }
            }
        }
        try reader.end()
        return result
    }

    /// The entries of a JSON object of strings.
    /// - Throws: ``Malformed`` when `text` is not one.
    public static func object(_ text: String) throws -> [String: String] {
        var reader = Reader(text)
        var result: [String: String] = [:]
        try reader.expect(UInt8(ascii: "{"))
        if try reader.peek() == UInt8(ascii: "}") {
            reader.index += 1
        } else {
            while true {
                let key = try reader.string()
                try reader.expect(UInt8(ascii: ":"))
                result[key] = try reader.string()
                let next = try reader.next()
                if next == UInt8(ascii: "}") { break }
                guard next == UInt8(ascii: ",") else { throw Malformed() }
            }
        }
        try reader.end()
        return result
    }

    /// Stored JSON that is not what an event row holds.
    package struct Malformed: Error {}

    private struct Reader {
        let bytes: [UInt8]
        var index = 0

        init(_ text: String) {
            bytes = Array(text.utf8)
        }

        mutating func skipSpace() {
            while index < bytes.count, [0x20, 0x0A, 0x0D, 0x09].contains(bytes[index]) { index += 1 }
        }

        mutating func peek() throws -> UInt8 {
            skipSpace()
            guard index < bytes.count else { throw Malformed() }
            return bytes[index]
        }

        mutating func next() throws -> UInt8 {
            let byte = try peek()
            index += 1
            return byte
        }

        mutating func expect(_ byte: UInt8) throws {
            guard try next() == byte else { throw Malformed() }
        }

        mutating func end() throws {
            skipSpace()
            guard index == bytes.count else { throw Malformed() }
        }

        /// A string literal, escapes decoded.
        mutating func string() throws -> String {
            try expect(UInt8(ascii: "\""))
            var out: [UInt8] = []
            while true {
                guard index < bytes.count else { throw Malformed() }
                let byte = bytes[index]
                index += 1
                switch byte {
                case UInt8(ascii: "\""):
                    return String(decoding: out, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    guard index < bytes.count else { throw Malformed() }
                    let escape = bytes[index]
                    index += 1
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
                    case UInt8(ascii: "b"): out.append(0x08)
                    case UInt8(ascii: "f"): out.append(0x0C)
                    case UInt8(ascii: "n"): out.append(0x0A)
                    case UInt8(ascii: "r"): out.append(0x0D)
                    case UInt8(ascii: "t"): out.append(0x09)
                    case UInt8(ascii: "u"):
                        var value = try hex4()
                        if (0xD800..<0xDC00).contains(value) {
                            // A surrogate pair: the low half follows as another \u escape.
                            guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
                            else { throw Malformed() }
                            index += 2
                            let low = try hex4()
                            guard (0xDC00..<0xE000).contains(low) else { throw Malformed() }
                            value = 0x10000 + ((value - 0xD800) << 10) + (low - 0xDC00)
                        }
                        guard let scalar = Unicode.Scalar(value) else { throw Malformed() }
                        out.append(contentsOf: Array(String(Character(scalar)).utf8))
                    default:
                        throw Malformed()
                    }
                default:
                    out.append(byte)
                }
            }
        }

        mutating func hex4() throws -> UInt32 {
            guard index + 4 <= bytes.count else { throw Malformed() }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[index]
                index += 1
                value <<= 4
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): value |= UInt32(byte - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): value |= UInt32(byte - UInt8(ascii: "a") + 10)
                case UInt8(ascii: "A")...UInt8(ascii: "F"): value |= UInt32(byte - UInt8(ascii: "A") + 10)
                default: throw Malformed()
                }
            }
            return value
        }
    }
}
