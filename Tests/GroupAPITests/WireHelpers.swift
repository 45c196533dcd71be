/// Hand-written protobuf wire fragments for the malformed- and unknown-input tests.
enum Wire {
    static func varint(_ value: UInt64) -> [UInt8] {
        var value = value
        var out: [UInt8] = []
        while value >= 0x80 {
            out.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        out.append(UInt8(value))
        return out
    }

    static func tag(_ field: UInt64, _ wireType: UInt64) -> [UInt8] {
        varint(field << 3 | wireType)
    }

    /// A length-delimited field.
    static func bytesField(_ field: UInt64, _ payload: [UInt8]) -> [UInt8] {
        tag(field, 2) + varint(UInt64(payload.count)) + payload
    }

    /// A varint field.
    static func varintField(_ field: UInt64, _ value: UInt64) -> [UInt8] {
        tag(field, 0) + varint(value)
    }

    /// One unknown field of every wire type (varint, fixed64, length-delimited, fixed32), numbered
    /// above anything in Protos/.
    static let unknownFields: [UInt8] =
        varintField(1000, 12345)
        + tag(1001, 1) + [1, 2, 3, 4, 5, 6, 7, 8]
        + bytesField(1002, Array("unknown".utf8) + [0, 0xFF])
        + tag(1003, 5) + [9, 8, 7, 6]
        + varintField(536_870_911, 1)  // the highest field number
}

/// A small deterministic PRNG (SplitMix64) so the random-input test is reproducible.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
