import NIOCore

/// The Connect protocol (connectrpc.com/docs/protocol) as a second protocol over the same router
/// and handlers as gRPC: what a transport asks of it and what it answers, with no I/O.
///
/// A transport (HTTP/1.1 or HTTP/2) hands over the request head (`start`): the answer is either
/// a refusal to send at once (``ConnectResponse``) or a ``ConnectCall``. The transport gathers
/// the body, asks the call for the request message (`request(from:allocator:)`), runs the route's
/// handler as it runs a gRPC call's, and writes what the call makes of the outcome: a unary
/// response (`unaryResponse`) or, for a server stream, the head (`streamHead`), each message in
/// its envelope (`streamMessage`) and the end-of-stream envelope (`endOfStream`).
///
/// What a request may be:
/// - unary: `POST` with `Content-Type: application/json` (`; charset=utf-8` allowed) or
///   `application/proto`, the message as the whole body, `Content-Encoding: gzip` or `deflate`
///   for a compressed one, `Accept-Encoding` for a compressed response;
/// - server stream: `POST` with `application/connect+json` or `application/connect+proto`, one
///   enveloped message, `Connect-Content-Encoding` and `Connect-Accept-Encoding`;
/// - `Connect-Protocol-Version: 1` when present (any other value is refused), and
///   `Connect-Timeout-Ms` for a deadline.
///
/// Every other header reaches the handler as metadata, as a gRPC call's does.
public struct ConnectProtocol: Sendable {
    /// The methods served.
    public let router: ServerRouter
    /// JSON for the messages; nil: JSON requests are refused (`application/proto` only).
    public let codec: (any ConnectCodec)?
    /// The largest request message, compressed or inflated, and the largest request body.
    public let maxMessageBytes: Int
    /// When responses are compressed (for a client that accepts an encoding).
    public let responseCompression: ResponseCompression

    /// - Parameters:
    ///   - router: The methods served.
    ///   - codec: JSON for the messages.
    ///   - maxMessageBytes: The largest request message.
    ///   - responseCompression: When responses are compressed.
    public init(router: ServerRouter, codec: (any ConnectCodec)?, maxMessageBytes: Int, responseCompression: ResponseCompression = .defaults) {
        self.router = router
        self.codec = codec
        self.maxMessageBytes = maxMessageBytes
        self.responseCompression = responseCompression
    }

    /// Whether a `content-type` is one of Connect's (and so not gRPC's).
    public static func isConnectContentType(_ value: String) -> Bool {
        ContentType(value) != nil
    }

    /// What a request head calls for.
    public enum Start: Sendable {
        /// A call to serve.
        case call(ConnectCall)
        /// A refusal to send as it is.
        case refuse(ConnectResponse)
    }

    /// Classifies a request from its head.
    /// - Parameters:
    ///   - method: The HTTP method.
    ///   - path: The request target's path (without a query).
    ///   - headers: Every request header, names in lowercase, in order.
    /// - Returns: The call, or the response refusing it.
    public func start(method: String, path: String, headers: [(name: String, value: String)]) -> Start {
        var contentType: String?
        var protocolVersion: String?
        var timeout: String?
        var contentEncoding: String?
        var acceptEncoding = ""
        var metadata = Metadata()
        for (name, value) in headers {
            switch name {
            case "content-type": contentType = value
            case "connect-protocol-version": protocolVersion = value
            case "connect-timeout-ms": timeout = value
            case "content-encoding", "connect-content-encoding": contentEncoding = value
            case "accept-encoding", "connect-accept-encoding": acceptEncoding += acceptEncoding.isEmpty ? value : "," + value
            case "content-length", "host", "connection", "keep-alive", "transfer-encoding", "te", "upgrade",
                 "proxy-connection", "user-agent", "accept", "expect":
                break
            default: metadata.append(name: name, value: value)
            }
        }
        // The format decides the shape of an error: JSON unless the call is binary.
        let type = contentType.flatMap(ContentType.init)
        func refuse(_ status: GRPCStatus, http: Int? = nil, extra: [(String, String)] = []) -> Start {
            .refuse(ConnectResponse.error(status, httpStatus: http, extraHeaders: extra, codec: codec))
        }
        guard method == "POST" else {
            return refuse(GRPCStatus(.unimplemented, "Connect calls use POST, not \(method)"), http: 405, extra: [("allow", "POST")])
        }
        guard let route = router.route(for: path) else {
            return refuse(.methodNotFound(path), http: 404)
        }
        guard let type else {
            let named = contentType.map { "content-type \($0) is" } ?? "no content-type is"
            return refuse(
                GRPCStatus(.invalidArgument, "\(named) not one of application/json, application/proto, application/connect+json, application/connect+proto"),
                http: 415, extra: [("accept-post", "application/json, application/proto")])
        }
        let streaming: Bool
        switch route.handler {
        case .inlineUnary, .unary: streaming = false
        case .serverStreaming: streaming = true
        case .bidirectionalStreaming:
            return refuse(GRPCStatus(.unimplemented, "\(path) streams requests: call it over gRPC (HTTP/2)"))
        }
        guard type.streaming == streaming else {
            let expected = streaming ? "application/connect+json or application/connect+proto" : "application/json or application/proto"
            return refuse(GRPCStatus(.invalidArgument, "\(path) takes content-type \(expected)"), http: 415)
        }
        if type.json && codec == nil {
            return refuse(GRPCStatus(.invalidArgument, "JSON is not served here; use application/proto"), http: 415)
        }
        if let protocolVersion, protocolVersion != "1" {
            return refuse(GRPCStatus(.invalidArgument, "connect-protocol-version must be 1, not \(protocolVersion)"))
        }
        var timeoutNanos: Int64?
        if let timeout {
            guard let millis = Self.timeoutMillis(timeout) else {
                return refuse(GRPCStatus(.invalidArgument, "connect-timeout-ms must be a positive integer of at most 10 digits, not \(timeout)"))
            }
            timeoutNanos = millis.multipliedReportingOverflow(by: 1_000_000).overflow ? Int64.max : millis * 1_000_000
        }
        var requestCompression: GRPCCompression?
        if let contentEncoding, contentEncoding != "identity" {
            guard let known = contentEncoding.utf8.withContiguousStorageIfAvailable({ GRPCCompression(name: $0) }) ?? nil else {
                return refuse(
                    GRPCStatus(.unimplemented, "content encoding \(contentEncoding) is not supported; use gzip, deflate or identity"),
                    extra: [(streaming ? "connect-accept-encoding" : "accept-encoding", "gzip, deflate")])
            }
            requestCompression = known
        }
        var responseEncoding: GRPCCompression?
        if responseCompression.enabled, !acceptEncoding.isEmpty {
            var value = acceptEncoding
            let accepted = value.withUTF8 { GRPCCompression.acceptedSet($0) }
            // gzip first: what browsers and curl ask for.
            responseEncoding = accepted & GRPCCompression.gzip.bit != 0 ? .gzip : accepted & GRPCCompression.deflate.bit != 0 ? .deflate : nil
        }
        return .call(ConnectCall(
            path: path, handler: route.handler, needsToken: route.needsToken, streaming: streaming, json: type.json,
            metadata: metadata, timeoutNanos: timeoutNanos, requestCompression: requestCompression,
            responseCompression: responseEncoding, responseCompressionMinBytes: responseCompression.minBytes,
            maxMessageBytes: maxMessageBytes, codec: codec))
    }

    /// `Connect-Timeout-Ms`: 1 to 10 ASCII digits.
    static func timeoutMillis(_ value: String) -> Int64? {
        guard !value.isEmpty, value.utf8.count <= 10, value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int64(value)
    }

    /// A Connect content type.
    struct ContentType {
        var json: Bool
        var streaming: Bool

        init?(_ value: String) {
            // The common spellings exactly, without splitting or lowercasing a copy.
            switch value {
            case "application/json": (json, streaming) = (true, false); return
            case "application/proto": (json, streaming) = (false, false); return
            default: break
            }
            // Parameters (`; charset=utf-8`) are allowed; the media type decides.
            let media = value.split(separator: ";", maxSplits: 1).first.map { $0.trimmingSpaces().lowercased() } ?? ""
            switch media {
            case "application/json": (json, streaming) = (true, false)
            case "application/proto": (json, streaming) = (false, false)
            case "application/connect+json": (json, streaming) = (true, true)
            case "application/connect+proto": (json, streaming) = (false, true)
            default: return nil
            }
        }
    }
}

extension Substring {
    func trimmingSpaces() -> Substring {
        var trimmed = self
        while let first = trimmed.first, first == " " || first == "\t" { trimmed = trimmed.dropFirst() }
        while let last = trimmed.last, last == " " || last == "\t" { trimmed = trimmed.dropLast() }
        return trimmed
    }
}

/// A response head: the HTTP status and the headers (names in lowercase).
public struct ConnectResponseHead: Sendable, Equatable {
    /// The HTTP status.
    public var status: Int
    /// The headers, in order.
    public var headers: [Header]

    /// One header.
    public struct Header: Sendable, Equatable {
        /// The lowercase name.
        public var name: String
        /// The value.
        public var value: String

        /// A header (`name` in lowercase).
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// A head.
    /// - Parameters:
    ///   - status: The HTTP status.
    ///   - headers: Name (lowercase) and value pairs.
    public init(status: Int, headers: [(String, String)]) {
        self.status = status
        self.headers = headers.map { Header(name: $0.0, value: $0.1) }
    }
}

/// A whole response: the head and the body.
public struct ConnectResponse: Sendable {
    /// The status and headers.
    public var head: ConnectResponseHead
    /// The body (`content-length` is the transport's to add).
    public var body: ByteBuffer
    /// The call's outcome, for the access log and the metrics (not sent as such).
    public var status: GRPCStatus

    /// A response.
    /// - Parameters:
    ///   - head: The status and headers.
    ///   - body: The body.
    ///   - status: The outcome, for the access log and the metrics.
    public init(head: ConnectResponseHead, body: ByteBuffer, status: GRPCStatus) {
        self.head = head
        self.body = body
        self.status = status
    }

    /// The response of a unary call that failed: the Connect error object as JSON, under the HTTP
    /// status Connect maps the code to (or `httpStatus`).
    /// - Parameters:
    ///   - status: The call's status (not OK).
    ///   - httpStatus: The HTTP status, when not the one the code maps to.
    ///   - extraHeaders: Headers beside `content-type`.
    ///   - codec: Writes the details' `debug` JSON.
    /// - Returns: The response.
    public static func error(
        _ status: GRPCStatus, httpStatus: Int? = nil, extraHeaders: [(String, String)] = [], codec: (any ConnectCodec)?
    ) -> ConnectResponse {
        let body = ByteBuffer(string: ConnectError.json(status, codec: codec))
        return ConnectResponse(
            head: ConnectResponseHead(
                status: httpStatus ?? ConnectError.httpStatus(status.code),
                headers: [("content-type", "application/json")] + extraHeaders),
            body: body, status: status)
    }
}

/// One Connect call, from its request head on: what its request, responses and end look like on
/// the wire.
public struct ConnectCall: Sendable {
    /// The method path.
    public let path: String
    /// The route's handler.
    public let handler: RPCHandler
    /// Whether the route's handler checks a token.
    public let needsToken: Bool
    /// A server stream (enveloped messages, an end-of-stream envelope) rather than a unary call.
    public let streaming: Bool
    /// Messages in JSON rather than binary protobuf.
    public let json: Bool
    /// The request headers the handler sees.
    public let metadata: Metadata
    /// `Connect-Timeout-Ms`, in nanoseconds.
    public let timeoutNanos: Int64?
    /// How the request body (unary) or message (stream) is compressed.
    public let requestCompression: GRPCCompression?
    /// How responses are compressed, when large enough; nil: not at all.
    public let responseCompression: GRPCCompression?
    let responseCompressionMinBytes: Int
    let maxMessageBytes: Int
    let codec: (any ConnectCodec)?

    /// The largest request body a transport gathers: the message and, for a stream, its envelope.
    public var maxBodyBytes: Int { maxMessageBytes + (streaming ? 5 : 0) }

    /// The status a request body over ``maxBodyBytes`` ends the call with.
    public var bodyTooLarge: GRPCStatus {
        GRPCStatus(.resourceExhausted, "request body exceeds the limit of \(maxBodyBytes) bytes")
    }

    private var contentType: String {
        switch (streaming, json) {
        case (false, true): "application/json"
        case (false, false): "application/proto"
        case (true, true): "application/connect+json"
        case (true, false): "application/connect+proto"
        }
    }

    /// The request message in the protobuf wire format, from the whole request body.
    /// - Parameters:
    ///   - body: The body as received.
    ///   - allocator: Allocates inflated and transcoded bytes.
    /// - Throws: The status the call ends with: a body that is not one envelope, that does not
    ///   inflate, that inflates past the limit, or whose JSON the codec refuses.
    public func request(from body: ByteBuffer, allocator: ByteBufferAllocator) throws(GRPCStatus) -> ByteBuffer {
        var message = body
        var compressed = requestCompression != nil
        if streaming {
            var envelope = body
            guard let flags = envelope.readInteger(as: UInt8.self), let length = envelope.readInteger(endianness: .big, as: UInt32.self) else {
                throw GRPCStatus(.invalidArgument, "request stream ended before its first message")
            }
            guard flags & ~1 == 0 else {
                throw GRPCStatus(.invalidArgument, "invalid envelope flags 0x\(String(flags, radix: 16)) on a request message")
            }
            guard Int(length) == envelope.readableBytes else {
                throw GRPCStatus(.invalidArgument, Int(length) < envelope.readableBytes
                    ? "a server-streaming method takes one request message"
                    : "request stream ended inside a message")
            }
            guard flags & 1 == 0 || requestCompression != nil else {
                throw GRPCStatus(.internal, "compressed flag set but no connect-content-encoding header")
            }
            compressed = flags & 1 != 0
            message = envelope
        }
        if compressed, let compression = requestCompression {
            do {
                message = try compression.inflate(message, limit: maxMessageBytes, allocator: allocator)
            } catch {
                switch error {
                case .tooLarge(let limit):
                    throw GRPCStatus(.resourceExhausted, "request message inflates to more than the limit of \(limit) bytes (\(compression.name))")
                case .corrupt(let reason):
                    throw GRPCStatus(.invalidArgument, "request could not be decompressed (\(compression.name)): \(reason)")
                }
            }
        }
        guard json, let codec else { return message }
        return try codec.request(fromJSON: message, path: path)
    }

    /// The response of a unary call: the message, or the error object.
    /// - Parameters:
    ///   - result: The handler's response message or status.
    ///   - allocator: Allocates the transcoded and compressed body.
    /// - Returns: The status, headers and body to send.
    public func unaryResponse(_ result: Result<ByteBuffer, GRPCStatus>, allocator: ByteBufferAllocator) -> ConnectResponse {
        switch result {
        case .success(let message):
            var body = transcoded(message)
            var headers = [("content-type", contentType)]
            if let compression = responseCompression, body.readableBytes >= responseCompressionMinBytes,
               let compressed = compression.deflate(body, allocator: allocator) {
                body = compressed
                headers.append(("content-encoding", compression.name))
            }
            return ConnectResponse(head: ConnectResponseHead(status: 200, headers: headers), body: body, status: .ok)
        case .failure(let status):
            return .error(status, codec: codec)
        }
    }

    /// A response message as the call's format has it: JSON, or the bytes as they are.
    private func transcoded(_ message: ByteBuffer) -> ByteBuffer {
        guard json, let codec else { return message }
        return codec.responseJSON(message, path: path)
    }

    /// The head of a server stream's response (its errors come in the end-of-stream envelope).
    public var streamHead: ConnectResponseHead {
        var headers = [("content-type", contentType)]
        if let compression = responseCompression { headers.append(("connect-content-encoding", compression.name)) }
        return ConnectResponseHead(status: 200, headers: headers)
    }

    /// One response message of a stream in its envelope: transcoded, and compressed when large
    /// enough.
    /// - Parameters:
    ///   - message: The message in the protobuf wire format.
    ///   - allocator: Allocates the envelope.
    /// - Returns: The envelope's bytes.
    public func streamMessage(_ message: ByteBuffer, allocator: ByteBufferAllocator) -> ByteBuffer {
        var payload = transcoded(message)
        var flags: UInt8 = 0
        if let compression = responseCompression, payload.readableBytes >= responseCompressionMinBytes,
           let compressed = compression.deflate(payload, allocator: allocator) {
            payload = compressed
            flags = 1
        }
        return Self.envelope(flags: flags, payload: &payload, allocator: allocator)
    }

    /// The end-of-stream envelope: `{}` after a call that succeeded, else the error object under
    /// `error` (JSON in either format, as Connect has it).
    /// - Parameters:
    ///   - status: How the call ended.
    ///   - allocator: Allocates the envelope.
    /// - Returns: The envelope's bytes.
    public func endOfStream(_ status: GRPCStatus, allocator: ByteBufferAllocator) -> ByteBuffer {
        var payload = ByteBuffer(string: status.code == .ok ? "{}" : "{\"error\":\(ConnectError.json(status, codec: codec))}")
        return Self.envelope(flags: 2, payload: &payload, allocator: allocator)
    }

    private static func envelope(flags: UInt8, payload: inout ByteBuffer, allocator: ByteBufferAllocator) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: 5 + payload.readableBytes)
        buffer.writeInteger(flags)
        buffer.writeInteger(UInt32(payload.readableBytes), endianness: .big)
        buffer.writeBuffer(&payload)
        return buffer
    }
}
