import GRPCProtocol
import NIOCore

/// Writes HTTP/1.1 responses for ``HTTP1Connection``: a whole response (status line, fields and
/// body) in one buffer, a stream's head and its chunks. Always `HTTP/1.1` in the status line
/// (RFC 9110 §6.2: the highest version the server speaks, also to an HTTP/1.0 client).
enum HTTP1ResponseEncoder {
    /// How the connection's framing shows in a head.
    struct Framing {
        /// `content-length` to add (when the head has none), or nil for a stream.
        var contentLength: Int?
        /// The stream's body is chunked (HTTP/1.1); false: it ends with the connection.
        var chunked: Bool
        /// `connection: close`: the connection closes after this response.
        var close: Bool
        /// `connection: keep-alive`: an HTTP/1.0 client's connection stays open.
        var keepAlive: Bool
    }

    /// A whole response: head and body, in one buffer.
    /// - Parameters:
    ///   - head: The status and fields.
    ///   - body: The body (a `HEAD` or `304` answer's is empty, its `content-length` given).
    ///   - close: Whether the connection closes after it.
    ///   - keepAlive: Whether to say `connection: keep-alive` (HTTP/1.0).
    ///   - allocator: Allocates the buffer.
    /// - Returns: The bytes to write.
    static func response(
        _ head: ConnectResponseHead, body: ByteBuffer, close: Bool, keepAlive: Bool, allocator: ByteBufferAllocator
    ) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: 96 + 48 * head.headers.count + body.readableBytes)
        writeHead(
            head, framing: Framing(contentLength: body.readableBytes, chunked: false, close: close, keepAlive: keepAlive),
            into: &buffer)
        var body = body
        buffer.writeBuffer(&body)
        return buffer
    }

    /// A response head.
    /// - Parameters:
    ///   - head: The status and fields.
    ///   - framing: What the connection adds: the length, chunking, `connection`.
    ///   - buffer: Where it is written.
    static func writeHead(_ head: ConnectResponseHead, framing: Framing, into buffer: inout ByteBuffer) {
        buffer.writeStaticString("HTTP/1.1 ")
        if let tail = statusLineTail(head.status) {
            buffer.writeStaticString(tail)
        } else {
            // A status without a phrase here: the code alone (the reason phrase may be empty).
            writeDecimal(min(max(head.status, 100), 999), into: &buffer)
            buffer.writeStaticString(" \r\n")
        }
        var hasLength = false
        for field in head.headers {
            // The fields are the server's own; one that could split the head is dropped, not sent.
            guard isSafe(field.name), isSafe(field.value) else { continue }
            if field.name == "content-length" { hasLength = true }
            buffer.writeString(field.name)
            buffer.writeStaticString(": ")
            buffer.writeString(field.value)
            buffer.writeStaticString("\r\n")
        }
        if let length = framing.contentLength, !hasLength {
            buffer.writeStaticString("content-length: ")
            writeDecimal(length, into: &buffer)
            buffer.writeStaticString("\r\n")
        } else if framing.contentLength == nil, framing.chunked {
            buffer.writeStaticString("transfer-encoding: chunked\r\n")
        }
        if framing.close {
            buffer.writeStaticString("connection: close\r\n")
        } else if framing.keepAlive {
            buffer.writeStaticString("connection: keep-alive\r\n")
        }
        buffer.writeStaticString("\r\n")
    }

    /// One chunk of a chunked body.
    /// - Parameters:
    ///   - payload: Its bytes (not empty: an empty chunk would end the body).
    ///   - allocator: Allocates the buffer.
    /// - Returns: Its size line, the bytes and the CRLF.
    static func chunk(_ payload: ByteBuffer, allocator: ByteBufferAllocator) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: payload.readableBytes + 12)
        writeChunk(payload, into: &buffer)
        return buffer
    }

    /// Appends one chunk of a chunked body to `buffer`.
    static func writeChunk(_ payload: ByteBuffer, into buffer: inout ByteBuffer) {
        guard payload.readableBytes > 0 else { return }
        buffer.writeString(String(payload.readableBytes, radix: 16))
        buffer.writeStaticString("\r\n")
        var payload = payload
        buffer.writeBuffer(&payload)
        buffer.writeStaticString("\r\n")
    }

    /// The last chunk, with no trailers.
    static let lastChunk: StaticString = "0\r\n\r\n"

    /// `100 Continue`, the interim answer to `Expect: 100-continue`.
    static let continueResponse: StaticString = "HTTP/1.1 100 Continue\r\n\r\n"

    /// A refusal the connection answers itself (a request it could not read): plain text, and the
    /// connection closes.
    /// - Parameters:
    ///   - status: The HTTP status.
    ///   - message: Says why.
    ///   - allocator: Allocates the buffer.
    /// - Returns: The bytes to write.
    static func plainRefusal(status: Int, message: String, allocator: ByteBufferAllocator) -> ByteBuffer {
        let body = ByteBuffer(string: message + "\n")
        let head = ConnectResponseHead(status: status, headers: [("content-type", "text/plain; charset=utf-8")])
        return response(head, body: body, close: true, keepAlive: false, allocator: allocator)
    }

    private static func isSafe(_ text: String) -> Bool {
        !text.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 })
    }

    private static func writeDecimal(_ value: Int, into buffer: inout ByteBuffer) {
        if value < 10 {
            buffer.writeInteger(UInt8(0x30 + value))
            return
        }
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                     UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &digits) { raw in
            var index = raw.count
            var rest = value
            while rest > 0 {
                index -= 1
                raw[index] = UInt8(0x30 + rest % 10)
                rest /= 10
            }
            buffer.writeBytes(UnsafeRawBufferPointer(rebasing: raw[index...]))
        }
    }

    /// The status line after `HTTP/1.1 `: the code, its reason phrase, CRLF.
    static func statusLineTail(_ status: Int) -> StaticString? {
        switch status {
        case 100: "100 Continue\r\n"
        case 200: "200 OK\r\n"
        case 204: "204 No Content\r\n"
        case 304: "304 Not Modified\r\n"
        case 400: "400 Bad Request\r\n"
        case 401: "401 Unauthorized\r\n"
        case 403: "403 Forbidden\r\n"
        case 404: "404 Not Found\r\n"
        case 405: "405 Method Not Allowed\r\n"
        case 408: "408 Request Timeout\r\n"
        case 409: "409 Conflict\r\n"
        case 412: "412 Precondition Failed\r\n"
        case 413: "413 Content Too Large\r\n"
        case 415: "415 Unsupported Media Type\r\n"
        case 417: "417 Expectation Failed\r\n"
        case 429: "429 Too Many Requests\r\n"
        case 431: "431 Request Header Fields Too Large\r\n"
        case 499: "499 Client Closed Request\r\n"
        case 500: "500 Internal Server Error\r\n"
        case 501: "501 Not Implemented\r\n"
        case 502: "502 Bad Gateway\r\n"
        case 503: "503 Service Unavailable\r\n"
        case 504: "504 Gateway Timeout\r\n"
        case 505: "505 HTTP Version Not Supported\r\n"
        default: nil
        }
    }
}
