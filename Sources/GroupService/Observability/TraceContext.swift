/// A W3C Trace Context `traceparent` header (https://www.w3.org/TR/trace-context/#traceparent-header):
/// `version-traceid-parentid-flags`, e.g. `00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01`.
public struct TraceParent: Sendable, Hashable {
    /// The 32 lowercase hex digits of the trace id (not all zero).
    public var traceID: String
    /// The 16 lowercase hex digits of the caller's span id (not all zero).
    public var parentID: String
    /// The trace flags, two hex digits (`01`: sampled).
    public var flags: String

    /// Whether the caller sampled the trace (the flags' lowest bit).
    public var sampled: Bool { (UInt8(flags, radix: 16) ?? 0) & 1 == 1 }

    /// Parses a header value; nil when it is not a valid `traceparent`.
    ///
    /// Version `00` is exactly four fields; a later version (not `ff`) may carry more fields
    /// after the flags, which are ignored, as the specification asks.
    public init?(_ header: String) {
        let bytes = Array(header.utf8)
        guard bytes.count >= 55 else { return nil }
        func isHex(_ range: Range<Int>) -> Bool {
            bytes[range].allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
        }
        func allZero(_ range: Range<Int>) -> Bool { bytes[range].allSatisfy { $0 == 0x30 } }
        let dash = UInt8(ascii: "-")
        guard isHex(0..<2), bytes[2] == dash, isHex(3..<35), bytes[35] == dash, isHex(36..<52), bytes[52] == dash,
            isHex(53..<55)
        else { return nil }
        let version = String(decoding: bytes[0..<2], as: UTF8.self)
        guard version != "ff" else { return nil }
        if version == "00" {
            guard bytes.count == 55 else { return nil }
        } else if bytes.count > 55 {
            guard bytes[55] == dash else { return nil }
        }
        guard !allZero(3..<35), !allZero(36..<52) else { return nil }
        self.traceID = String(decoding: bytes[3..<35], as: UTF8.self)
        self.parentID = String(decoding: bytes[36..<52], as: UTF8.self)
        self.flags = String(decoding: bytes[53..<55], as: UTF8.self)
    }
}
