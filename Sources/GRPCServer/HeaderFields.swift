import CNGHTTP2
import GRPCProtocol

/// Header fields that never change, in memory that lives as long as the process, so nghttp2
/// may reference them without copying (`NGHTTP2_NV_FLAG_NO_COPY_*`).
final class StaticHeaders: @unchecked Sendable {
    // @unchecked Sendable: every pointer is allocated in init, never written again, never freed.
    static let shared = StaticHeaders()

    /// `:status: 200`, `content-type: application/grpc`, `grpc-accept-encoding`.
    let responseHeaders: [nghttp2_nv]
    /// ``responseHeaders`` and `grpc-encoding: gzip`.
    let gzipResponseHeaders: [nghttp2_nv]
    /// ``responseHeaders`` and `grpc-encoding: deflate`.
    let deflateResponseHeaders: [nghttp2_nv]
    /// `grpc-accept-encoding: identity,deflate,gzip`: the encodings requests may use.
    let acceptEncoding: nghttp2_nv
    /// `grpc-status: 0`.
    let okTrailers: [nghttp2_nv]
    /// `content-type: application/grpc`.
    let contentType: nghttp2_nv
    private let statusValues: [nghttp2_nv]
    private let httpStatuses: [Int: nghttp2_nv]

    private init() {
        contentType = Self.field("content-type", "application/grpc")
        acceptEncoding = Self.field("grpc-accept-encoding", GRPCCompression.acceptEncoding)
        responseHeaders = [Self.field(":status", "200"), contentType, acceptEncoding]
        gzipResponseHeaders = responseHeaders + [Self.field("grpc-encoding", GRPCCompression.gzip.name)]
        deflateResponseHeaders = responseHeaders + [Self.field("grpc-encoding", GRPCCompression.deflate.name)]
        statusValues = (0...16).map { Self.field("grpc-status", String($0)) }
        okTrailers = [statusValues[0]]
        httpStatuses = Dictionary(uniqueKeysWithValues: [200, 405, 415].map { ($0, Self.field(":status", String($0))) })
    }

    /// `:status` with a code this server sends.
    func status(_ code: Int) -> nghttp2_nv { httpStatuses[code] ?? httpStatuses[200]! }

    /// The response headers of a call whose messages use `compression` (nil: identity).
    func responseHeaders(_ compression: GRPCCompression?) -> [nghttp2_nv] {
        switch compression {
        case nil: responseHeaders
        case .gzip: gzipResponseHeaders
        case .deflate: deflateResponseHeaders
        }
    }

    /// `grpc-status` with `code`.
    func grpcStatus(_ code: GRPCStatus.Code) -> nghttp2_nv { statusValues[code.rawValue] }

    private static func field(_ name: String, _ value: String) -> nghttp2_nv {
        nghttp2_nv(
            name: immortal(name), value: immortal(value),
            namelen: name.utf8.count, valuelen: value.utf8.count,
            flags: UInt8(NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue | NGHTTP2_NV_FLAG_NO_COPY_VALUE.rawValue)
        )
    }

    private static func immortal(_ string: String) -> UnsafeMutablePointer<UInt8> {
        let bytes = Array(string.utf8)
        let pointer = UnsafeMutablePointer<UInt8>.allocate(capacity: max(bytes.count, 1))
        pointer.initialize(from: bytes, count: bytes.count)
        return pointer
    }
}

/// A list of header fields mixing static ones and values made for one response; nghttp2 copies
/// the latter during the `withNVArray` call.
struct HeaderFields {
    private enum Field {
        case fixed(nghttp2_nv)
        case owned(name: [UInt8], value: [UInt8])
    }

    private var fields: [Field] = []

    mutating func append(_ field: nghttp2_nv) {
        fields.append(.fixed(field))
    }

    mutating func append(name: String, value: [UInt8]) {
        fields.append(.owned(name: Array(name.utf8), value: value))
    }

    /// `grpc-status`, and `grpc-message` / `grpc-status-details-bin` when the status has them.
    mutating func appendStatus(_ status: GRPCStatus) {
        append(StaticHeaders.shared.grpcStatus(status.code))
        if !status.message.isEmpty {
            append(name: "grpc-message", value: GRPCPercentEncoding.encode(status.message))
        }
        if let details = status.details {
            append(name: "grpc-status-details-bin", value: Base64.encode(details))
        }
    }

    /// Calls `body` with an nghttp2 header array valid for the duration of the call.
    func withNVArray(_ body: (UnsafePointer<nghttp2_nv>, Int) -> Void) {
        var owned: [UnsafeMutablePointer<UInt8>] = []
        defer { owned.forEach { $0.deallocate() } }
        func copy(_ bytes: [UInt8]) -> UnsafeMutablePointer<UInt8> {
            let pointer = UnsafeMutablePointer<UInt8>.allocate(capacity: max(bytes.count, 1))
            pointer.initialize(from: bytes, count: bytes.count)
            owned.append(pointer)
            return pointer
        }
        let array = fields.map { field -> nghttp2_nv in
            switch field {
            case .fixed(let nv):
                return nv
            case .owned(let name, let value):
                return nghttp2_nv(name: copy(name), value: copy(value), namelen: name.count, valuelen: value.count, flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue))
            }
        }
        array.withUnsafeBufferPointer { body($0.baseAddress!, $0.count) }
    }
}
