import GRPCProtocol
import GroupAPI

/// How a call ended when it did not end with OK: the gRPC status, and what its
/// `grpc-status-details-bin` said (the `google.rpc.ErrorInfo` reason, domain and metadata, the
/// field a `google.rpc.BadRequest` or the metadata names).
///
/// Failures the client sees itself (the connection cannot be made or is lost, the deadline passes,
/// the server's bytes break the protocol) are errors of this type too, with the status a gRPC
/// client reports for them (UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL) and no reason.
public struct GRPCCallError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The status code.
    public var code: GRPCStatus.Code
    /// The status message (`grpc-message`, percent-decoded).
    public var message: String
    /// `ErrorInfo.reason`, e.g. `GROUP_NOT_FOUND`; nil without an ErrorInfo.
    public var reason: String?
    /// `ErrorInfo.domain`, e.g. `groupd`.
    public var domain: String?
    /// `ErrorInfo.metadata` (e.g. `field`, `limit`).
    public var metadata: [String: String]
    /// The offending field: the first `BadRequest` violation's, else `metadata["field"]`.
    public var field: String?
    /// The decoded `google.rpc.Status`, when the server sent one.
    public var details: Google_Rpc_Status?

    /// Creates an error.
    /// - Parameters:
    ///   - code: The status code.
    ///   - message: The message.
    ///   - details: The `google.rpc.Status` of `grpc-status-details-bin`, if any; its ErrorInfo and
    ///     BadRequest fill `reason`, `domain`, `metadata` and `field`.
    public init(_ code: GRPCStatus.Code, _ message: String, details: Google_Rpc_Status? = nil) {
        self.code = code
        self.message = message
        self.metadata = [:]
        self.details = details
        guard let details else { return }
        for any in details.details {
            if let info = try? any.unpack(Google_Rpc_ErrorInfo.self) {
                reason = info.reason
                domain = info.domain
                metadata = info.metadata
            } else if let badRequest = try? any.unpack(Google_Rpc_BadRequest.self),
                      let violation = badRequest.fieldViolations.first {
                field = violation.field
            }
        }
        if field == nil { field = metadata["field"] }
    }

    /// `CODE: message (reason REASON, field FIELD)`.
    public var description: String {
        var text = "\(code)"
        if !message.isEmpty { text += ": \(message)" }
        var extras: [String] = []
        if let reason, !reason.isEmpty { extras.append("reason \(reason)") }
        if let field, !field.isEmpty { extras.append("field \(field)") }
        if !extras.isEmpty { text += " (\(extras.joined(separator: ", ")))" }
        return text
    }

    /// Reads the status a response ended with from its trailers (or a Trailers-Only response's
    /// headers): `grpc-status`, `grpc-message` and `grpc-status-details-bin`.
    ///
    /// - Parameter trailers: The header fields, names lowercase.
    /// - Returns: nil for OK, else the error. A missing or malformed `grpc-status` is INTERNAL (as
    ///   the gRPC spec asks); undecodable details are ignored (the code and message still stand).
    public static func fromTrailers(_ trailers: [(name: String, value: String)]) -> GRPCCallError? {
        func value(_ name: String) -> String? { trailers.first { $0.name == name }?.value }
        guard let raw = value("grpc-status") else {
            return GRPCCallError(.internal, "the response ended without a grpc-status")
        }
        guard let number = Int(raw), let code = GRPCStatus.Code(rawValue: number) else {
            return GRPCCallError(.internal, "malformed grpc-status \(raw)")
        }
        if code == .ok { return nil }
        let message = value("grpc-message").map { GRPCPercentEncoding.decode(Array($0.utf8)) } ?? ""
        var details: Google_Rpc_Status?
        if let encoded = value("grpc-status-details-bin"), let bytes = Base64Decoding.decode(encoded) {
            details = try? Google_Rpc_Status(serializedBytes: bytes)
        }
        return GRPCCallError(code, message, details: details)
    }

    /// The status a response without `grpc-status` gets from its HTTP status, as the gRPC spec
    /// maps them (`doc/http-grpc-status-mapping.md`).
    /// - Parameter httpStatus: The `:status`.
    /// - Returns: The error.
    public static func fromHTTPStatus(_ httpStatus: Int) -> GRPCCallError {
        let code: GRPCStatus.Code
        switch httpStatus {
        case 400: code = .internal
        case 401: code = .unauthenticated
        case 403: code = .permissionDenied
        case 404: code = .unimplemented
        case 429, 502, 503, 504: code = .unavailable
        default: code = .unknown
        }
        return GRPCCallError(code, "HTTP status \(httpStatus)")
    }

    /// The status of a stream the server reset (RST_STREAM) before its trailers, as gRPC clients
    /// map HTTP/2 error codes.
    /// - Parameter http2ErrorCode: The RST_STREAM or GOAWAY error code.
    /// - Returns: The error.
    public static func fromReset(_ http2ErrorCode: UInt32) -> GRPCCallError {
        switch http2ErrorCode {
        case 0x7: return GRPCCallError(.unavailable, "the server refused the stream (REFUSED_STREAM)")
        case 0x8: return GRPCCallError(.cancelled, "the server cancelled the stream (CANCEL)")
        case 0xB: return GRPCCallError(.resourceExhausted, "the server reset the stream (ENHANCE_YOUR_CALM)")
        case 0xC: return GRPCCallError(.permissionDenied, "the server reset the stream (INADEQUATE_SECURITY)")
        case 0x0: return GRPCCallError(.internal, "the stream ended without trailers")
        default: return GRPCCallError(.internal, "the server reset the stream (HTTP/2 error 0x\(String(http2ErrorCode, radix: 16)))")
        }
    }
}

/// Base64 decoding for `-bin` headers: the standard alphabet, padding optional (gRPC senders may
/// leave it out).
enum Base64Decoding {
    /// The bytes of `text`, or nil when it is not base64.
    static func decode(_ text: String) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        var padding = 0
        for byte in text.utf8 {
            let value: UInt8
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = byte - UInt8(ascii: "A")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): value = byte - UInt8(ascii: "a") + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = byte - UInt8(ascii: "0") + 52
            case UInt8(ascii: "+"): value = 62
            case UInt8(ascii: "/"): value = 63
            case UInt8(ascii: "="):
                padding += 1
                continue
            default: return nil
            }
            guard padding == 0 else { return nil }  // data after padding
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        // A lone 6-bit group cannot encode a byte.
        guard bits < 6, padding <= 2 else { return nil }
        return out
    }
}
