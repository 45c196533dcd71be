/// Parsing of the `grpc-timeout` header: an ASCII integer of at most 8 digits and a unit
/// (`H` hours, `M` minutes, `S` seconds, `m` milliseconds, `u` microseconds, `n` nanoseconds).
public enum GRPCTimeout {
    /// Parses a `grpc-timeout` value.
    /// - Parameter bytes: The header value.
    /// - Returns: The timeout in nanoseconds, or nil when the value is malformed.
    public static func parse<Bytes: BidirectionalCollection<UInt8>>(_ bytes: Bytes) -> Int64? {
        guard let unit = bytes.last, bytes.count >= 2, bytes.count <= 9 else { return nil }
        var value: Int64 = 0
        for byte in bytes.dropLast() {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int64(byte - UInt8(ascii: "0"))
        }
        let nanosPerUnit: Int64
        switch unit {
        case UInt8(ascii: "H"): nanosPerUnit = 3_600_000_000_000
        case UInt8(ascii: "M"): nanosPerUnit = 60_000_000_000
        case UInt8(ascii: "S"): nanosPerUnit = 1_000_000_000
        case UInt8(ascii: "m"): nanosPerUnit = 1_000_000
        case UInt8(ascii: "u"): nanosPerUnit = 1_000
        case UInt8(ascii: "n"): nanosPerUnit = 1
        default: return nil
        }
        // 8 digits of hours overflow Int64 nanoseconds; saturate, the deadline is "never" then.
        let (product, overflow) = value.multipliedReportingOverflow(by: nanosPerUnit)
        return overflow ? Int64.max : product
    }
}
