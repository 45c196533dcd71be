import NIOCore
import Testing

@testable import GRPCProtocol
@testable import GRPCServer

@Suite("Static files: GET and HEAD before Connect")
struct StaticFilesTests {
    static let page = StaticFile(contentType: "text/html; charset=utf-8", body: Array("<p>hi</p>".utf8), etag: "\"abc123\"")
    let files = StaticFiles { path in path == "/" || path == "/index.html" ? StaticFilesTests.page : nil }

    func header(_ response: ConnectResponse, _ name: String) -> String? {
        response.head.headers.first { $0.name == name }?.value
    }

    @Test("GET answers the file with its type, ETag, length and the security headers")
    func get() throws {
        let response = try #require(files.response(method: "GET", path: "/", headers: []))
        #expect(response.head.status == 200)
        #expect(response.body == ByteBuffer(string: "<p>hi</p>"))
        #expect(header(response, "content-type") == "text/html; charset=utf-8")
        #expect(header(response, "etag") == "\"abc123\"")
        #expect(header(response, "content-length") == "9")
        #expect(header(response, "content-security-policy")?.contains("default-src 'self'") == true)
        #expect(header(response, "content-security-policy")?.contains("connect-src 'self'") == true)
        #expect(header(response, "x-content-type-options") == "nosniff")
        #expect(header(response, "referrer-policy") == "no-referrer")
        #expect(header(response, "cache-control") == "no-cache")
    }

    @Test("HEAD: the GET's headers and length, no body")
    func head() throws {
        let response = try #require(files.response(method: "HEAD", path: "/index.html", headers: []))
        #expect(response.head.status == 200)
        #expect(response.body.readableBytes == 0)
        #expect(header(response, "content-length") == "9")
    }

    @Test("If-None-Match naming the ETag (in a list, weak, or *) answers 304 without a body",
          arguments: ["\"abc123\"", "\"x\", \"abc123\"", "W/\"abc123\"", "*"])
    func notModified(_ validator: String) throws {
        let response = try #require(files.response(method: "GET", path: "/", headers: [("if-none-match", validator)]))
        #expect(response.head.status == 304)
        #expect(response.body.readableBytes == 0)
        #expect(header(response, "etag") == "\"abc123\"")
    }

    @Test("an If-None-Match of another ETag answers the file")
    func modified() throws {
        let response = try #require(files.response(method: "GET", path: "/", headers: [("if-none-match", "\"old\"")]))
        #expect(response.head.status == 200)
    }

    @Test("an unknown path is 404 in plain text, with the security headers")
    func missing() throws {
        let response = try #require(files.response(method: "GET", path: "/nope.js", headers: []))
        #expect(response.head.status == 404)
        #expect(header(response, "content-type") == "text/plain; charset=utf-8")
        #expect(header(response, "x-content-type-options") == "nosniff")
        #expect(String(buffer: response.body).contains("/nope.js"))
    }

    @Test("other methods are left to Connect", arguments: ["POST", "PUT", "DELETE", "OPTIONS"])
    func otherMethods(_ method: String) {
        #expect(files.response(method: method, path: "/", headers: []) == nil)
    }
}
