import GRPCProtocol
import NIOCore

/// A file served as it is to `GET` and `HEAD` requests over HTTP/1.1 (the operator console's
/// pages and scripts).
public struct StaticFile: Sendable {
    /// The `Content-Type` it is served with.
    public var contentType: String
    /// Its bytes.
    public var body: [UInt8]
    /// Its strong ETag, quoted (`"0123abcd"`): a request whose `If-None-Match` names it gets 304.
    public var etag: String

    /// A file.
    /// - Parameters:
    ///   - contentType: The `Content-Type` it is served with.
    ///   - body: Its bytes.
    ///   - etag: Its strong ETag, quoted.
    public init(contentType: String, body: [UInt8], etag: String) {
        self.contentType = contentType
        self.body = body
        self.etag = etag
    }
}

/// Static files a server answers `GET` and `HEAD` requests with over HTTP/1.1, before Connect sees
/// them (``ServerConfiguration/staticFiles``): the file at the path with its ETag (304 when the
/// request's `If-None-Match` names it), or 404 in plain text. Every answer carries the security
/// headers of ``securityHeaders``. Other methods go to Connect as on any port.
///
/// These requests are not calls: they reach neither the access log nor the call metrics.
public struct StaticFiles: Sendable {
    private let lookup: @Sendable (String) -> StaticFile?

    /// The headers every static answer carries: the page may load scripts, styles and images of its
    /// own origin only and call its own origin only (`Content-Security-Policy`), a file is never
    /// sniffed as another type, no `Referer` leaves the page, and a cached copy is revalidated
    /// (by its ETag) before each use.
    public static let securityHeaders: [(String, String)] = [
        ("content-security-policy", "default-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"),
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "no-referrer"),
        ("x-frame-options", "DENY"),
        ("cache-control", "no-cache"),
    ]

    /// Files looked up by request path.
    /// - Parameter lookup: The file at a request path (without its query), or nil for 404.
    public init(lookup: @escaping @Sendable (String) -> StaticFile?) {
        self.lookup = lookup
    }

    /// The answer to a request, or nil when it is not one of these (a method other than `GET` or
    /// `HEAD`: a Connect call).
    /// - Parameters:
    ///   - method: The HTTP method.
    ///   - path: The request target's path, without its query.
    ///   - headers: The request headers, names in lowercase.
    /// - Returns: The whole response: for `HEAD`, its `content-length` is the file's and its body empty.
    public func response(method: String, path: String, headers: [(name: String, value: String)]) -> ConnectResponse? {
        guard method == "GET" || method == "HEAD" else { return nil }
        guard let file = lookup(path) else {
            let text = "404 not found: \(path)\n"
            return ConnectResponse(
                head: ConnectResponseHead(status: 404, headers: [("content-type", "text/plain; charset=utf-8")] + Self.securityHeaders),
                body: method == "HEAD" ? ByteBuffer() : ByteBuffer(string: text),
                status: GRPCStatus(.notFound, "no static file at \(path)"),
                contentLength: text.utf8.count)
        }
        let validators = headers.filter { $0.name == "if-none-match" }.map(\.value)
        if validators.contains(where: { Self.matches($0, etag: file.etag) }) {
            return ConnectResponse(
                head: ConnectResponseHead(status: 304, headers: [("etag", file.etag)] + Self.securityHeaders),
                body: ByteBuffer(), status: .ok, contentLength: file.body.count)
        }
        return ConnectResponse(
            head: ConnectResponseHead(
                status: 200, headers: [("content-type", file.contentType), ("etag", file.etag)] + Self.securityHeaders),
            body: method == "HEAD" ? ByteBuffer() : ByteBuffer(bytes: file.body),
            status: .ok, contentLength: file.body.count)
    }

    /// Whether an `If-None-Match` value (`*`, or a list of entity tags, weak ones included: the weak
    /// comparison RFC 9110 asks for) names `etag`.
    static func matches(_ value: String, etag: String) -> Bool {
        let bare = etag.hasPrefix("W/") ? String(etag.dropFirst(2)) : etag
        for part in value.split(separator: ",") {
            var tag = part.trimmingSpaces
            if tag == "*" { return true }
            if tag.hasPrefix("W/") { tag = String(tag.dropFirst(2)) }
            if tag == bare { return true }
        }
        return false
    }
}

extension ConnectResponse {
    /// A response with a `content-length` header of its own: the file's length, also for `HEAD`
    /// and 304, whose body is empty.
    fileprivate init(head: ConnectResponseHead, body: ByteBuffer, status: GRPCStatus, contentLength length: Int) {
        var head = head
        head.headers.append(.init(name: "content-length", value: String(length)))
        self.init(head: head, body: body, status: status)
    }
}

extension Substring {
    fileprivate var trimmingSpaces: String {
        String(drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed())
    }
}
