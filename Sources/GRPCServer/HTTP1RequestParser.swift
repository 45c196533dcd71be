import NIOCore

/// A request head as ``HTTP1RequestParser`` reads it.
struct HTTP1RequestHead {
    /// How the request's body is delimited.
    enum Framing: Equatable {
        /// No body (neither `Content-Length` nor `Transfer-Encoding`).
        case none
        /// `Content-Length` bytes (saturated at `Int.max` for a longer number).
        case length(Int)
        /// `Transfer-Encoding: chunked`.
        case chunked
    }

    /// The method, as sent (methods are case-sensitive).
    var method: String
    /// The request target, as sent.
    var target: String
    /// The request target's path, without its query.
    var path: String
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    var minorVersion: Int
    /// Every header field, names in lowercase, values without surrounding whitespace, in order.
    var headers: [(name: String, value: String)]
    /// How the body is delimited.
    var framing: Framing
    /// Whether the connection may carry another request after this one's response: HTTP/1.1
    /// without `Connection: close`, HTTP/1.0 with `Connection: keep-alive`.
    var keepAlive: Bool
    /// `Expect: 100-continue` on an HTTP/1.1 request (HTTP/1.0 knows no interim responses).
    var expectsContinue: Bool
}

/// Why ``HTTP1RequestParser`` refused a request: the connection answers the status and closes.
struct HTTP1RequestError: Error, Equatable, CustomStringConvertible {
    /// What went wrong, by the HTTP status it is answered with.
    struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: Hashable, Sendable {
            case badRequest, headTooLarge, expectationFailed, notImplemented, versionNotSupported
        }

        private let value: Value

        /// Malformed syntax, or framing that could be read two ways (request smuggling): 400.
        static let badRequest = Code(value: .badRequest)
        /// A head over the size limit, or with too many fields: 431.
        static let headTooLarge = Code(value: .headTooLarge)
        /// An `Expect` other than `100-continue`: 417.
        static let expectationFailed = Code(value: .expectationFailed)
        /// A transfer coding other than `chunked`: 501.
        static let notImplemented = Code(value: .notImplemented)
        /// An HTTP version other than 1.0 and 1.1: 505.
        static let versionNotSupported = Code(value: .versionNotSupported)

        /// The HTTP status the refusal is answered with.
        var httpStatus: Int {
            switch value {
            case .badRequest: 400
            case .headTooLarge: 431
            case .expectationFailed: 417
            case .notImplemented: 501
            case .versionNotSupported: 505
            }
        }

        var description: String { "\(httpStatus)" }
    }

    /// What went wrong.
    var code: Code
    /// Says what, for the answer's body and the debug log.
    var message: String

    var description: String { "\(code.httpStatus) \(message)" }

    static func badRequest(_ message: String) -> HTTP1RequestError { .init(code: .badRequest, message: message) }
}

/// An HTTP/1.1 request parser (RFC 9112) for ``HTTP1Connection``: bytes in, a head, body slices
/// and an end out, one request after another, with no I/O and no C.
///
/// It reads strictly what a correct client sends and refuses the rest, so that groupd and any
/// proxy in front of it cannot disagree on where a request ends:
/// - lines end with CRLF (a bare CR or LF is refused), no field is folded, no whitespace stands
///   between a field name and its colon, names are tokens and values hold no control characters;
/// - `Content-Length` is digits, given once; `Transfer-Encoding` is `chunked`, given once, never
///   beside `Content-Length` and never on HTTP/1.0; any other transfer coding is 501;
/// - the head is at most ``Limits/maxHeadBytes`` with at most ``Limits/maxHeaderFields`` fields
///   (431), and so are a chunked body's trailers; a chunk-size line is at most
///   ``Limits/maxChunkLineBytes``;
/// - the version is `HTTP/1.0` or `HTTP/1.1` (another `HTTP/x.y` is 505).
///
/// Once it has thrown it is poisoned: every later call throws the same error.
struct HTTP1RequestParser {
    /// Bounds on what one request may make the parser hold.
    struct Limits: Sendable {
        /// The largest head: request line and header fields, with their line ends (also the
        /// largest trailer section).
        var maxHeadBytes: Int
        /// The most header fields in a head (and trailer fields after a chunked body).
        var maxHeaderFields: Int
        /// The longest chunk-size line (with any chunk extensions).
        var maxChunkLineBytes: Int
        /// The longest method.
        var maxMethodBytes: Int

        /// 80 KiB of head in at most 100 fields (NIO's parser allowed 80 KiB and any count), 4 KiB
        /// chunk-size lines, 32-byte methods.
        static var defaults: Limits {
            Limits(maxHeadBytes: 80 * 1024, maxHeaderFields: 100, maxChunkLineBytes: 4096, maxMethodBytes: 32)
        }
    }

    /// What the bytes read so far make.
    enum Event {
        /// A request's head.
        case head(HTTP1RequestHead)
        /// Some of its body (any number of these, none empty).
        case body(ByteBuffer)
        /// Its end; the next bytes are the next request's.
        case end
    }

    private enum State {
        case requestLine
        case headerLines
        case fixedBody(remaining: Int)
        case chunkSize
        case chunkData(remaining: Int)
        case chunkDataEnd
        case trailers
        case ended
        case poisoned(HTTP1RequestError)
    }

    let limits: Limits
    private var state = State.requestLine
    /// Bytes of the current line already searched for its LF (a line arriving in pieces is not
    /// searched again from its start).
    private var scanned = 0
    /// Bytes of head (or trailers) taken so far, and their fields.
    private var headBytes = 0
    private var fieldCount = 0
    private var head = HTTP1RequestHead(
        method: "", target: "", path: "", minorVersion: 1, headers: [], framing: .none, keepAlive: true, expectsContinue: false)
    private var sawContentLength = false
    private var sawTransferEncoding = false
    private var connectionClose = false
    private var connectionKeepAlive = false
    private var expectation: String?

    /// A parser waiting for a request line.
    init(limits: Limits = .defaults) {
        self.limits = limits
    }

    /// Reads the next event from `buffer`, taking the bytes it used.
    /// - Parameter buffer: The connection's unread bytes.
    /// - Returns: The event, or nil when more bytes are needed.
    /// - Throws: ``HTTP1RequestError``: the request is refused; so is everything after it.
    mutating func next(_ buffer: inout ByteBuffer) throws(HTTP1RequestError) -> Event? {
        switch state {
        case .poisoned(let error):
            throw error
        case .requestLine, .headerLines:
            do throws(HTTP1RequestError) {
                return try readHead(&buffer)
            } catch {
                state = .poisoned(error)
                throw error
            }
        case .fixedBody(let remaining):
            if remaining == 0 {
                endRequest()
                return .end
            }
            guard buffer.readableBytes > 0 else { return nil }
            let count = min(remaining, buffer.readableBytes)
            state = .fixedBody(remaining: remaining - count)
            return .body(buffer.readSlice(length: count)!)
        case .chunkSize, .chunkData, .chunkDataEnd, .trailers:
            do throws(HTTP1RequestError) {
                return try readChunked(&buffer)
            } catch {
                state = .poisoned(error)
                throw error
            }
        case .ended:
            endRequest()
            return .end
        }
    }

    private mutating func endRequest() {
        state = .requestLine
        scanned = 0
        headBytes = 0
        fieldCount = 0
    }

    // MARK: Lines

    /// The next whole line (without its CRLF), taken from `buffer`; nil when it has not all
    /// arrived. `limit` bounds the line with its CRLF.
    private mutating func line(_ buffer: inout ByteBuffer, limit: Int, tooLong: HTTP1RequestError) throws(HTTP1RequestError) -> ByteBuffer? {
        let readable = buffer.readableBytes
        let from = scanned
        let found: Int? = buffer.withUnsafeReadableBytes { bytes in
            var index = from
            while index < bytes.count {
                if bytes[index] == 0x0A { return index }
                index += 1
            }
            return nil
        }
        guard let lf = found else {
            scanned = readable
            if readable > limit { throw tooLong }
            return nil
        }
        scanned = 0
        guard lf + 1 <= limit else { throw tooLong }
        guard lf > 0, buffer.getInteger(at: buffer.readerIndex + lf - 1, as: UInt8.self) == 0x0D else {
            throw .badRequest("a line ends with a bare LF")
        }
        let line = buffer.readSlice(length: lf - 1)!
        buffer.moveReaderIndex(forwardBy: 2)
        return line
    }

    // MARK: The head

    private mutating func readHead(_ buffer: inout ByteBuffer) throws(HTTP1RequestError) -> Event? {
        while true {
            if case .requestLine = state { try checkMethodPrefix(buffer) }
            let limit = limits.maxHeadBytes - headBytes
            let tooLarge = HTTP1RequestError(code: .headTooLarge, message: "the request head exceeds \(limits.maxHeadBytes) bytes")
            guard let line = try line(&buffer, limit: limit, tooLong: tooLarge) else { return nil }
            headBytes += line.readableBytes + 2
            switch state {
            case .requestLine:
                // RFC 9112 §2.2: empty lines before a request line are ignored (some clients
                // send a CRLF after a body); they count against the head's limit.
                if line.readableBytes == 0 { continue }
                try readRequestLine(line)
                state = .headerLines
            default:
                if line.readableBytes == 0 { return try finishHead() }
                try readField(line)
            }
        }
    }

    /// Refuses at once what cannot become a request line: a method that is not a token, or too
    /// long (a TLS ClientHello or binary bytes get their 400 without waiting for a line end).
    /// Judged before every request line, whole or not, so that how the bytes arrive never changes
    /// which refusal a request gets.
    private func checkMethodPrefix(_ buffer: ByteBuffer) throws(HTTP1RequestError) {
        let max = limits.maxMethodBytes
        let verdict: Int = buffer.withUnsafeReadableBytes { bytes in
            guard let first = bytes.first else { return 0 }
            // An empty line (or its first half) before the request line: the line reader judges it.
            if first == 0x0D { return bytes.count == 1 || bytes[1] == 0x0A ? 0 : 1 }
            var index = 0
            while index < bytes.count, index <= max {
                let byte = bytes[index]
                if byte == 0x20 { return index == 0 ? 1 : 0 }
                if !Self.isTokenByte(byte) { return 1 }
                index += 1
            }
            return index > max ? 2 : 0
        }
        switch verdict {
        case 1: throw .badRequest("the request line does not start with a method")
        case 2: throw .badRequest("the method is longer than \(max) bytes")
        default: break
        }
    }

    private mutating func readRequestLine(_ line: ByteBuffer) throws(HTTP1RequestError) {
        // Judged without throwing inside the closure (ByteBuffer's closures rethrow untyped).
        enum Verdict { case malformed, version(UInt8, UInt8), parsed(String, String, String, Int) }
        let maxMethodBytes = limits.maxMethodBytes
        let verdict: Verdict = line.withUnsafeReadableBytes { bytes in
            let count = bytes.count
            var index = 0
            while index < count, Self.isTokenByte(bytes[index]) { index += 1 }
            let methodEnd = index
            guard methodEnd > 0, methodEnd <= maxMethodBytes, index < count, bytes[index] == 0x20 else { return .malformed }
            index += 1
            let targetStart = index
            var query = -1
            while index < count, bytes[index] > 0x20, bytes[index] < 0x7F {
                if bytes[index] == 0x3F, query < 0 { query = index }
                index += 1
            }
            let targetEnd = index
            guard targetEnd > targetStart, index < count, bytes[index] == 0x20 else { return .malformed }
            index += 1
            // HTTP-version = "HTTP/" DIGIT "." DIGIT, and nothing after it.
            guard count - index == 8, bytes[index] == 0x48, bytes[index + 1] == 0x54, bytes[index + 2] == 0x54,
                  bytes[index + 3] == 0x50, bytes[index + 4] == 0x2F, bytes[index + 6] == 0x2E,
                  Self.isDigit(bytes[index + 5]), Self.isDigit(bytes[index + 7]) else { return .malformed }
            let major = bytes[index + 5] - 0x30, minor = bytes[index + 7] - 0x30
            guard major == 1, minor <= 1 else { return .version(major, minor) }
            let method = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[0..<methodEnd]), as: UTF8.self)
            let target = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[targetStart..<targetEnd]), as: UTF8.self)
            let path = query < 0 ? target : String(decoding: UnsafeRawBufferPointer(rebasing: bytes[targetStart..<query]), as: UTF8.self)
            return .parsed(method, target, path, Int(minor))
        }
        switch verdict {
        case .malformed:
            throw .badRequest("the request line is not METHOD SP TARGET SP HTTP/1.x")
        case .version(let major, let minor):
            throw HTTP1RequestError(code: .versionNotSupported, message: "HTTP/\(major).\(minor) is not served: use HTTP/1.1 or HTTP/2")
        case .parsed(let method, let target, let path, let minor):
            head = HTTP1RequestHead(
                method: method, target: target, path: path, minorVersion: minor, headers: [],
                framing: .none, keepAlive: true, expectsContinue: false)
        }
        head.headers.reserveCapacity(12)
        sawContentLength = false
        sawTransferEncoding = false
        connectionClose = false
        connectionKeepAlive = false
        expectation = nil
        fieldCount = 0
    }

    private mutating func readField(_ line: ByteBuffer) throws(HTTP1RequestError) {
        fieldCount += 1
        guard fieldCount <= limits.maxHeaderFields else {
            throw HTTP1RequestError(code: .headTooLarge, message: "the request has more than \(limits.maxHeaderFields) header fields")
        }
        guard let (name, value) = Self.field(line) else {
            throw .badRequest("a header field is not NAME: VALUE (a token, a colon, no control characters, no folding)")
        }
        switch name {
        case "content-length":
            guard !sawContentLength else { throw .badRequest("content-length is given more than once") }
            guard !value.isEmpty, value.utf8.allSatisfy(Self.isDigit) else { throw .badRequest("content-length is not a number") }
            sawContentLength = true
            // More digits than an Int holds: a length no limit allows, answered as too large.
            head.framing = .length(Int(value) ?? .max)
        case "transfer-encoding":
            guard !sawTransferEncoding else { throw .badRequest("transfer-encoding is given more than once") }
            sawTransferEncoding = true
            guard value.lowercased() == "chunked" else {
                throw HTTP1RequestError(code: .notImplemented, message: "transfer-encoding \(value) is not supported; use chunked")
            }
        case "connection":
            for token in value.split(separator: ",") {
                switch Self.trimmed(token).lowercased() {
                case "close": connectionClose = true
                case "keep-alive": connectionKeepAlive = true
                default: break
                }
            }
        case "expect":
            expectation = value
        default:
            break
        }
        head.headers.append((name, value))
    }

    private mutating func finishHead() throws(HTTP1RequestError) -> Event {
        if sawTransferEncoding {
            guard !sawContentLength else {
                throw .badRequest("the request has both content-length and transfer-encoding")
            }
            guard head.minorVersion == 1 else { throw .badRequest("transfer-encoding on an HTTP/1.0 request") }
            head.framing = .chunked
        }
        head.keepAlive = head.minorVersion == 1 ? !connectionClose : connectionKeepAlive && !connectionClose
        if let expectation, head.minorVersion == 1 {
            guard expectation.lowercased() == "100-continue" else {
                throw HTTP1RequestError(code: .expectationFailed, message: "expect: \(expectation) is not supported")
            }
            head.expectsContinue = true
        }
        switch head.framing {
        case .none: state = .ended
        case .length(let length): state = .fixedBody(remaining: length)
        case .chunked: state = .chunkSize
        }
        let done = head
        head.headers = []
        return .head(done)
    }

    /// A field line's lowercase name and trimmed value; nil when it is malformed.
    static func field(_ line: ByteBuffer) -> (String, String)? {
        line.withUnsafeReadableBytes { bytes -> (String, String)? in
            let count = bytes.count
            var colon = 0
            while colon < count, isTokenByte(bytes[colon]) { colon += 1 }
            // No name, or a byte that is not a token's before the colon (whitespace there is refused:
            // RFC 9112 §5.1; a leading space is a folded line).
            guard colon > 0, colon < count, bytes[colon] == 0x3A else { return nil }
            var start = colon + 1
            var end = count
            while start < end, bytes[start] == 0x20 || bytes[start] == 0x09 { start += 1 }
            while end > start, bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09 { end -= 1 }
            for index in start..<end where !isFieldValueByte(bytes[index]) { return nil }
            let name = lowercaseName(UnsafeRawBufferPointer(rebasing: bytes[0..<colon]))
            let value = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
            return (name, value)
        }
    }

    private static func lowercaseName(_ bytes: UnsafeRawBufferPointer) -> String {
        // Most names arrive in lowercase already (HTTP/2 habits) or need no copy to check.
        if !bytes.contains(where: { $0 >= 0x41 && $0 <= 0x5A }) {
            return String(decoding: bytes, as: UTF8.self)
        }
        return String(unsafeUninitializedCapacity: bytes.count) { out in
            for (index, byte) in bytes.enumerated() {
                out[index] = byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
            }
            return bytes.count
        }
    }

    // MARK: Chunked bodies

    private mutating func readChunked(_ buffer: inout ByteBuffer) throws(HTTP1RequestError) -> Event? {
        while true {
            switch state {
            case .chunkSize:
                let tooLong = HTTP1RequestError.badRequest("a chunk-size line exceeds \(limits.maxChunkLineBytes) bytes")
                guard let line = try line(&buffer, limit: limits.maxChunkLineBytes, tooLong: tooLong) else { return nil }
                guard let size = Self.chunkSize(line) else { throw .badRequest("a chunk-size line is not a hexadecimal size") }
                if size == 0 {
                    state = .trailers
                    headBytes = 0
                    fieldCount = 0
                } else {
                    state = .chunkData(remaining: size)
                }
            case .chunkData(let remaining):
                guard buffer.readableBytes > 0 else { return nil }
                let count = min(remaining, buffer.readableBytes)
                state = count == remaining ? .chunkDataEnd : .chunkData(remaining: remaining - count)
                return .body(buffer.readSlice(length: count)!)
            case .chunkDataEnd:
                guard buffer.readableBytes >= 2 else {
                    if buffer.readableBytes == 1, buffer.getInteger(at: buffer.readerIndex, as: UInt8.self) != 0x0D {
                        throw .badRequest("a chunk's data is not followed by CRLF")
                    }
                    return nil
                }
                guard buffer.readInteger(as: UInt16.self) == 0x0D0A else { throw .badRequest("a chunk's data is not followed by CRLF") }
                state = .chunkSize
            case .trailers:
                let tooLarge = HTTP1RequestError(code: .headTooLarge, message: "the trailer section exceeds \(limits.maxHeadBytes) bytes")
                guard let line = try line(&buffer, limit: limits.maxHeadBytes - headBytes, tooLong: tooLarge) else { return nil }
                headBytes += line.readableBytes + 2
                if line.readableBytes == 0 {
                    endRequest()
                    return .end
                }
                fieldCount += 1
                guard fieldCount <= limits.maxHeaderFields else {
                    throw HTTP1RequestError(code: .headTooLarge, message: "the trailer section has more than \(limits.maxHeaderFields) fields")
                }
                // Trailers are read and dropped: a call's metadata is its head's.
                guard Self.field(line) != nil else { throw .badRequest("a trailer field is not NAME: VALUE") }
            default:
                return nil
            }
        }
    }

    /// `chunk-size [ chunk-ext ]`: at most 15 hexadecimal digits (extensions are ignored).
    static func chunkSize(_ line: ByteBuffer) -> Int? {
        line.withUnsafeReadableBytes { bytes -> Int? in
            var size = 0
            var index = 0
            while index < bytes.count, let digit = hexValue(bytes[index]) {
                guard index < 15 else { return nil }
                size = size << 4 | digit
                index += 1
            }
            guard index > 0 else { return nil }
            if index == bytes.count { return size }
            // chunk-ext = *( BWS ";" BWS name [ BWS "=" BWS value ] ): after optional whitespace a
            // ";" must come; what follows must hold no control characters.
            var rest = index
            while rest < bytes.count, bytes[rest] == 0x20 || bytes[rest] == 0x09 { rest += 1 }
            guard rest < bytes.count, bytes[rest] == 0x3B else { return nil }
            for byte in bytes[rest...] where !isFieldValueByte(byte) { return nil }
            return size
        }
    }

    // MARK: Bytes

    private static func trimmed(_ text: Substring) -> Substring {
        var text = text
        while let first = text.first, first == " " || first == "\t" { text = text.dropFirst() }
        while let last = text.last, last == " " || last == "\t" { text = text.dropLast() }
        return text
    }

    @inline(__always)
    static func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }

    @inline(__always)
    static func hexValue(_ byte: UInt8) -> Int? {
        switch byte {
        case 0x30...0x39: Int(byte - 0x30)
        case 0x41...0x46: Int(byte - 0x41 + 10)
        case 0x61...0x66: Int(byte - 0x61 + 10)
        default: nil
        }
    }

    /// tchar (RFC 9110 §5.6.2).
    @inline(__always)
    static func isTokenByte(_ byte: UInt8) -> Bool {
        tokenTable[Int(byte)]
    }

    /// A field value's byte: HTAB, SP, VCHAR, obs-text (no other control character).
    @inline(__always)
    static func isFieldValueByte(_ byte: UInt8) -> Bool {
        byte == 0x09 || (byte >= 0x20 && byte != 0x7F)
    }

    private static let tokenTable: [Bool] = (0..<256).map { byte in
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
        default: "!#$%&'*+-.^_`|~".utf8.contains(UInt8(byte))
        }
    }
}
