import GRPCProtocol
import NIOCore
import Testing

/// The Connect protocol without a transport: what a request head is judged to be, the request
/// message taken out of a body, and each response shape (unary, error object, stream envelopes).
@Suite struct ConnectProtocolTests {
    /// Upper-cases JSON text, so a test can tell the codec ran on the way in and out.
    private struct UppercaseCodec: ConnectCodec {
        func request(fromJSON json: ByteBuffer, path: String) throws(GRPCStatus) -> ByteBuffer {
            let text = String(buffer: json)
            if text == "bad" { throw GRPCStatus(.invalidArgument, "not JSON") }
            return ByteBuffer(string: "proto:" + text)
        }

        func responseJSON(_ message: ByteBuffer, path: String) -> ByteBuffer {
            ByteBuffer(string: "{\"m\":\"\(String(buffer: message))\"}")
        }

        func detailJSON(typeName: String, value: [UInt8]) -> String? {
            typeName == "t.Detail" ? "{\"bytes\":\(value.count)}" : nil
        }
    }

    private static let allocator = ByteBufferAllocator()

    private static func connect(codec: (any ConnectCodec)? = UppercaseCodec(), maxMessageBytes: Int = 64) -> ConnectProtocol {
        var router = ServerRouter()
        router.register("/t.T/Unary", .unary { request, _ in request })
        router.register("/t.T/Stream", .serverStreaming { _, _, _ in })
        router.register("/t.T/Bidi", .bidirectionalStreaming { _, _, _ in })
        router.register("/t.T/Open", .unary { request, _ in request }, needsToken: false)
        var compression = ResponseCompression()
        compression.minBytes = 16
        return ConnectProtocol(router: router, codec: codec, maxMessageBytes: maxMessageBytes, responseCompression: compression)
    }

    private static func start(
        _ headers: [(name: String, value: String)], connect: ConnectProtocol = connect(), method: String = "POST",
        path: String = "/t.T/Unary"
    ) -> ConnectProtocol.Start {
        connect.start(method: method, path: path, headers: headers)
    }

    private static func call(_ start: ConnectProtocol.Start) throws -> ConnectCall {
        guard case .call(let call) = start else {
            Issue.record("refused: \(start)")
            throw GRPCStatus(.internal)
        }
        return call
    }

    private static func refusal(_ start: ConnectProtocol.Start) -> ConnectResponse? {
        if case .refuse(let response) = start { return response }
        return nil
    }

    private static func header(_ head: ConnectResponseHead, _ name: String) -> String? {
        head.headers.first { $0.name == name }?.value
    }

    @Test("a JSON unary call: metadata without Connect's own headers, the deadline, the codec both ways")
    func jsonUnary() throws {
        let call = try Self.call(Self.start([
            ("content-type", "application/json; charset=utf-8"), ("connect-protocol-version", "1"),
            ("connect-timeout-ms", "1500"), ("authorization", "Bearer t"), ("x-request-id", "r1"), ("user-agent", "curl"),
        ]))
        #expect(!call.streaming && call.json && call.needsToken)
        #expect(call.timeoutNanos == 1_500_000_000)
        #expect(call.metadata.entries.map(\.name) == ["authorization", "x-request-id"])
        let request = try call.request(from: ByteBuffer(string: "{}"), allocator: Self.allocator)
        #expect(String(buffer: request) == "proto:{}")
        let response = call.unaryResponse(.success(ByteBuffer(string: "x")), allocator: Self.allocator)
        #expect(response.head.status == 200 && response.status.code == .ok)
        #expect(Self.header(response.head, "content-type") == "application/json")
        #expect(String(buffer: response.body) == #"{"m":"x"}"#)
    }

    @Test("a binary unary call passes the bytes through untouched")
    func protoUnary() throws {
        let call = try Self.call(Self.start([("content-type", "application/proto")]))
        #expect(!call.json)
        #expect(String(buffer: try call.request(from: ByteBuffer(string: "raw"), allocator: Self.allocator)) == "raw")
        let response = call.unaryResponse(.success(ByteBuffer(bytes: [8, 1])), allocator: Self.allocator)
        #expect(Self.header(response.head, "content-type") == "application/proto")
        #expect(Array(response.body.readableBytesView) == [8, 1])
    }

    @Test("refusals before a call: method, path, content type, shape, version, timeout, encoding")
    func refusals() throws {
        let json: [(name: String, value: String)] = [(name: "content-type", value: "application/json")]
        let cases: [(ConnectProtocol.Start, Int, GRPCStatus.Code)] = [
            (Self.start(json, method: "GET"), 405, .unimplemented),
            (Self.start(json, path: "/t.T/Nope"), 404, .unimplemented),
            (Self.start([("content-type", "text/plain")]), 415, .invalidArgument),
            (Self.start([]), 415, .invalidArgument),
            (Self.start([("content-type", "application/connect+json")]), 415, .invalidArgument),
            (Self.start(json, path: "/t.T/Stream"), 415, .invalidArgument),
            (Self.start(json, path: "/t.T/Bidi"), 501, .unimplemented),
            (Self.start(json, connect: Self.connect(codec: nil)), 415, .invalidArgument),
            (Self.start(json + [("connect-protocol-version", "2")]), 400, .invalidArgument),
            (Self.start(json + [("connect-timeout-ms", "12345678901")]), 400, .invalidArgument),
            (Self.start(json + [("connect-timeout-ms", "-1")]), 400, .invalidArgument),
            (Self.start(json + [("content-encoding", "br")]), 501, .unimplemented),
        ]
        for (start, http, code) in cases {
            let response = try #require(Self.refusal(start))
            #expect(response.head.status == http, "\(response.status)")
            #expect(response.status.code == code)
            #expect(Self.header(response.head, "content-type") == "application/json")
            #expect(String(buffer: response.body).hasPrefix("{\"code\":\"\(ConnectError.name(code))\""))
        }
        #expect(Self.header(try #require(Self.refusal(Self.start(json, method: "GET"))).head, "allow") == "POST")
        #expect(Self.header(try #require(Self.refusal(Self.start(json + [("content-encoding", "br")]))).head, "accept-encoding") == "gzip, deflate")
    }

    @Test("every code has Connect's name and HTTP status")
    func codes() {
        let expected: [(GRPCStatus.Code, String, Int)] = [
            (.cancelled, "canceled", 499), (.unknown, "unknown", 500), (.invalidArgument, "invalid_argument", 400),
            (.deadlineExceeded, "deadline_exceeded", 504), (.notFound, "not_found", 404), (.alreadyExists, "already_exists", 409),
            (.permissionDenied, "permission_denied", 403), (.resourceExhausted, "resource_exhausted", 429),
            (.failedPrecondition, "failed_precondition", 400), (.aborted, "aborted", 409), (.outOfRange, "out_of_range", 400),
            (.unimplemented, "unimplemented", 501), (.internal, "internal", 500), (.unavailable, "unavailable", 503),
            (.dataLoss, "data_loss", 500), (.unauthenticated, "unauthenticated", 401),
        ]
        for (code, name, http) in expected {
            #expect(ConnectError.name(code) == name)
            #expect(ConnectError.code(named: name) == code)
            #expect(ConnectError.httpStatus(code) == http)
        }
    }

    @Test("the error object: message escaped, each detail with its type, unpadded base64 and debug JSON")
    func errorObject() throws {
        // google.rpc.Status{code: 5, message: "m", details: [Any{type_url: "type.googleapis.com/t.Detail", value: [1, 2]}, Any{"x/t.Other", []}]}
        func any(_ url: String, _ value: [UInt8]) -> [UInt8] {
            var bytes: [UInt8] = [0x0a, UInt8(url.utf8.count)] + Array(url.utf8)
            if !value.isEmpty { bytes += [0x12, UInt8(value.count)] + value }
            return [0x1a, UInt8(bytes.count)] + bytes
        }
        let details: [UInt8] = [0x08, 5, 0x12, 1, 0x6d] + any("type.googleapis.com/t.Detail", [1, 2]) + any("x/t.Other", [])
        let status = GRPCStatus(.notFound, "group \"g\"\nnot found", details: details)
        let text = ConnectError.json(status, codec: UppercaseCodec())
        #expect(text == #"{"code":"not_found","message":"group \"g\"\nnot found","details":[{"type":"t.Detail","value":"AQI","debug":{"bytes":2}},{"type":"t.Other","value":""}]}"#)
        #expect(ConnectError.json(GRPCStatus(.internal), codec: nil) == #"{"code":"internal"}"#)
    }

    @Test("a failed unary call answers the error object under its HTTP status")
    func unaryError() throws {
        let call = try Self.call(Self.start([("content-type", "application/json")]))
        let response = call.unaryResponse(.failure(GRPCStatus(.permissionDenied, "no")), allocator: Self.allocator)
        #expect(response.head.status == 403 && response.status.code == .permissionDenied)
        #expect(String(buffer: response.body) == #"{"code":"permission_denied","message":"no"}"#)
        // A codec refusal is the call's status.
        #expect(throws: GRPCStatus(.invalidArgument, "not JSON")) {
            try call.request(from: ByteBuffer(string: "bad"), allocator: Self.allocator)
        }
    }

    @Test("gzip both ways: a compressed request body inflates, a large response deflates when accepted")
    func compression() throws {
        let call = try Self.call(Self.start([
            ("content-type", "application/proto"), ("content-encoding", "gzip"), ("accept-encoding", "br, gzip"),
        ]))
        let plain = ByteBuffer(string: String(repeating: "abc", count: 10))
        let compressed = try #require(GRPCCompression.gzip.deflate(plain, allocator: Self.allocator))
        #expect(try call.request(from: compressed, allocator: Self.allocator) == plain)
        #expect(throws: GRPCStatus.self) { try call.request(from: ByteBuffer(string: "not gzip"), allocator: Self.allocator) }
        let large = call.unaryResponse(.success(plain), allocator: Self.allocator)
        #expect(Self.header(large.head, "content-encoding") == "gzip")
        #expect(try GRPCCompression.gzip.inflate(large.body, limit: 1000, allocator: Self.allocator) == plain)
        let small = call.unaryResponse(.success(ByteBuffer(string: "tiny")), allocator: Self.allocator)
        #expect(Self.header(small.head, "content-encoding") == nil)
        // A body that inflates past the limit.
        let big = try #require(GRPCCompression.gzip.deflate(ByteBuffer(repeating: 0, count: 1000), allocator: Self.allocator))
        let inflated = Result { () throws(GRPCStatus) in try call.request(from: big, allocator: Self.allocator) }
        #expect(throws: GRPCStatus.self) { try inflated.get() }
        if case .failure(let status) = inflated { #expect(status.code == .resourceExhausted) }
    }

    @Test("a stream: one enveloped request, enveloped responses, the end-of-stream envelope")
    func stream() throws {
        let call = try Self.call(Self.start([("content-type", "application/connect+json")], path: "/t.T/Stream"))
        #expect(call.streaming && call.maxBodyBytes == 64 + 5)
        #expect(Self.header(call.streamHead, "content-type") == "application/connect+json")
        var envelope = ByteBuffer(bytes: [0, 0, 0, 0, 2])
        envelope.writeString("{}")
        #expect(String(buffer: try call.request(from: envelope, allocator: Self.allocator)) == "proto:{}")
        for broken: [UInt8] in [[], [0, 0, 0], [0, 0, 0, 0, 3, 0x7b, 0x7d], [0, 0, 0, 0, 1, 0x7b, 0x7d], [4, 0, 0, 0, 2, 0x7b, 0x7d]] {
            #expect(throws: GRPCStatus.self) { try call.request(from: ByteBuffer(bytes: broken), allocator: Self.allocator) }
        }
        let message = call.streamMessage(ByteBuffer(string: "e"), allocator: Self.allocator)
        #expect(Array(message.readableBytesView) == [0, 0, 0, 0, 9] + Array(#"{"m":"e"}"#.utf8))
        let ok = call.endOfStream(.ok, allocator: Self.allocator)
        #expect(Array(ok.readableBytesView) == [2, 0, 0, 0, 2] + Array("{}".utf8))
        let failed = call.endOfStream(GRPCStatus(.unavailable, "slow"), allocator: Self.allocator)
        #expect(String(buffer: ByteBuffer(failed.readableBytesView.dropFirst(5))) == #"{"error":{"code":"unavailable","message":"slow"}}"#)
    }

    @Test("the route's token need and Connect's content types")
    func routeAndTypes() throws {
        #expect(try !Self.call(Self.start([("content-type", "application/json")], path: "/t.T/Open")).needsToken)
        for type in ["application/json", "Application/JSON", "application/proto", "application/connect+json", "application/connect+proto;x=1"] {
            #expect(ConnectProtocol.isConnectContentType(type), "\(type)")
        }
        for type in ["application/grpc", "text/plain", "application/jsonx", ""] {
            #expect(!ConnectProtocol.isConnectContentType(type), "\(type)")
        }
    }
}
