import NIOCore
import Testing

@testable import GRPCServer

@Suite("HTTP/1.1 request parser: framing, limits and refusals")
struct HTTP1RequestParserTests {
    /// What a parser makes of `input` fed in pieces of `piece` bytes: the heads, bodies and ends,
    /// or the error it stopped at.
    struct Outcome: Equatable {
        var heads: [String] = []
        var bodies: [String] = []
        var ends = 0
        var error: Int?
    }

    static func parse(_ input: String, piece: Int = .max, limits: HTTP1RequestParser.Limits = .defaults) -> (Outcome, [HTTP1RequestHead]) {
        parse(Array(input.utf8), piece: piece, limits: limits)
    }

    static func parse(_ input: [UInt8], piece: Int = .max, limits: HTTP1RequestParser.Limits = .defaults) -> (Outcome, [HTTP1RequestHead]) {
        var parser = HTTP1RequestParser(limits: limits)
        var outcome = Outcome()
        var heads: [HTTP1RequestHead] = []
        var buffer = ByteBuffer()
        var body = ""
        var offset = 0
        repeat {
            let end = piece >= input.count - offset ? input.count : offset + piece
            buffer.writeBytes(input[offset..<end])
            offset = end
            do throws(HTTP1RequestError) {
                while let event = try parser.next(&buffer) {
                    switch event {
                    case .head(let head):
                        heads.append(head)
                        outcome.heads.append("\(head.method) \(head.target)")
                    case .body(let part):
                        #expect(part.readableBytes > 0)
                        body += String(buffer: part)
                    case .end:
                        outcome.bodies.append(body)
                        body = ""
                        outcome.ends += 1
                    }
                }
            } catch {
                outcome.error = error.code.httpStatus
                return (outcome, heads)
            }
        } while offset < input.count
        return (outcome, heads)
    }

    @Test("a Content-Length body, then a pipelined request: the same events in any pieces", arguments: [1, 2, 7, 1000])
    func contentLengthAndPipelining(_ piece: Int) throws {
        let input = "POST /a?x=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello"
            + "GET /b HTTP/1.1\r\nHost: h\r\n\r\n"
        let (outcome, heads) = Self.parse(input, piece: piece)
        #expect(outcome == Outcome(heads: ["POST /a?x=1", "GET /b"], bodies: ["hello", ""], ends: 2))
        #expect(heads[0].path == "/a" && heads[1].path == "/b")
        #expect(heads[0].framing == .length(5) && heads[1].framing == .none)
    }

    @Test("a chunked body with extensions and trailers", arguments: [1, 3, 1000])
    func chunked(_ piece: Int) {
        let input = "POST /c HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n"
            + "5;name=value\r\nhello\r\n1 ; ext\r\n \r\n6\r\nworld!\r\n0\r\nX-Trailer: t\r\n\r\n"
            + "GET /d HTTP/1.1\r\n\r\n"
        let (outcome, heads) = Self.parse(input, piece: piece)
        #expect(outcome == Outcome(heads: ["POST /c", "GET /d"], bodies: ["hello world!", ""], ends: 2))
        #expect(heads.first?.framing == .chunked)
    }

    @Test("header names are lowercased, values trimmed, every field kept in order")
    func fields() throws {
        let (outcome, heads) = Self.parse("POST / HTTP/1.1\r\nContent-Type:  application/json \r\nX-A: 1\r\nx-a:\t2\r\nEmpty:\r\n\r\n")
        #expect(outcome.error == nil)
        let head = try #require(heads.first)
        #expect(head.headers.map(\.name) == ["content-type", "x-a", "x-a", "empty"])
        #expect(head.headers.map(\.value) == ["application/json", "1", "2", ""])
    }

    @Test("keep-alive: HTTP/1.1 unless Connection: close; HTTP/1.0 only with Connection: keep-alive",
          arguments: [("HTTP/1.1", "", true), ("HTTP/1.1", "Connection: close\r\n", false),
                      ("HTTP/1.1", "Connection: Keep-Alive, Close\r\n", false), ("HTTP/1.0", "", false),
                      ("HTTP/1.0", "Connection: keep-alive\r\n", true), ("HTTP/1.0", "Connection: upgrade\r\n", false)])
    func keepAlive(_ version: String, _ field: String, _ expected: Bool) throws {
        let (_, heads) = Self.parse("GET / \(version)\r\n\(field)\r\n")
        #expect(try #require(heads.first).keepAlive == expected)
    }

    @Test("Expect: 100-continue on HTTP/1.1 (ignored on HTTP/1.0); another expectation is 417")
    func expect() throws {
        #expect(try #require(Self.parse("POST / HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 1\r\n\r\n").1.first).expectsContinue)
        #expect(try #require(Self.parse("POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n").1.first).expectsContinue == false)
        #expect(Self.parse("POST / HTTP/1.1\r\nExpect: 200-ok\r\n\r\n").0.error == 417)
    }

    @Test("empty lines before a request line are ignored")
    func leadingEmptyLines() {
        #expect(Self.parse("\r\n\r\nGET / HTTP/1.1\r\n\r\n", piece: 1).0 == Outcome(heads: ["GET /"], bodies: [""], ends: 1))
    }

    @Test("refused with their status", arguments: [
        // Smuggling: two framings, or one framing given twice or ill-formed.
        ("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        ("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 400),
        ("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", 400),
        ("POST / HTTP/1.1\r\nContent-Length: 3, 3\r\n\r\nabc", 400),
        ("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400),
        ("POST / HTTP/1.1\r\nContent-Length: nope\r\n\r\n", 400),
        ("POST / HTTP/1.1\r\nContent-Length: \r\n\r\n", 400),
        ("POST / HTTP/1.1\r\nContent-Length : 3\r\n\r\nabc", 400),
        ("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        ("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        ("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501),
        ("POST / HTTP/1.1\r\nTransfer-Encoding: identity\r\n\r\n", 501),
        // Lines and fields.
        ("GET / HTTP/1.1\nHost: h\n\n", 400),
        ("GET / HTTP/1.1\r\nHost: h\rX: y\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: h\r\n folded\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\n: novalue\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nNo colon\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nX: a\u{01}b\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nX\u{7F}: a\r\n\r\n", 400),
        // Request lines.
        ("GARBAGE\r\n\r\n", 400),
        ("GET /  HTTP/1.1\r\n\r\n", 400),
        ("GET  / HTTP/1.1\r\n\r\n", 400),
        ("GET / HTTP/1.1 \r\n\r\n", 400),
        ("GET /\u{7F} HTTP/1.1\r\n\r\n", 400),
        ("GET / http/1.1\r\n\r\n", 400),
        ("GET / HTTP/1.10\r\n\r\n", 400),
        ("GET / HTTP/2.0\r\n\r\n", 505),
        ("GET / HTTP/1.2\r\n\r\n", 505),
        ("GET / HTTP/0.9\r\n\r\n", 505),
        // Chunks.
        ("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
        ("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX", 400),
        ("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1000000000000000\r\n", 400),
        ("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5 x\r\n", 400),
        ("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;\u{01}\r\n", 400),
        ("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nbad trailer\r\n\r\n", 400),
        ("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n", 400),
    ])
    func refused(_ input: String, _ status: Int) {
        for piece in [1, 1000] {
            let (outcome, _) = Self.parse(input, piece: piece)
            #expect(outcome.error == status, "\(input.debugDescription) in pieces of \(piece)")
        }
    }

    @Test("a method that is not a token is refused before any line end (a TLS ClientHello, binary bytes)")
    func earlyRefusal() {
        #expect(Self.parse([0x16, 0x03, 0x01, 0x02, 0x00]).0.error == 400)
        #expect(Self.parse(Array("POST".utf8) + [0x00]).0.error == 400)
        #expect(Self.parse(Array(repeating: UInt8(ascii: "A"), count: 40)).0.error == 400)
        // A request line still arriving is not judged early.
        #expect(Self.parse("POST /groupd.v1.GroupService/GetGr").0 == Outcome())
    }

    @Test("a head over the size limit, or with too many fields, is 431; so are trailers")
    func headLimits() {
        var limits = HTTP1RequestParser.Limits.defaults
        limits.maxHeadBytes = 256
        limits.maxHeaderFields = 3
        let big = "GET / HTTP/1.1\r\nX: " + String(repeating: "a", count: 300) + "\r\n\r\n"
        #expect(Self.parse(big, limits: limits).0.error == 431)
        // Without a line end at all: refused once the limit is passed, not when it ends.
        #expect(Self.parse(String(big.prefix(280)), piece: 10, limits: limits).0.error == 431)
        #expect(Self.parse("GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", limits: limits).0.error == nil)
        #expect(Self.parse("GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n", limits: limits).0.error == 431)
        let trailers = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n"
        #expect(Self.parse(trailers, limits: limits).0.error == 431)
        var chunkLine = HTTP1RequestParser.Limits.defaults
        chunkLine.maxChunkLineBytes = 16
        let longExtension = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1;" + String(repeating: "e", count: 20) + "\r\n"
        #expect(Self.parse(longExtension, limits: chunkLine).0.error == 400)
    }

    @Test("a Content-Length longer than an Int is saturated (a length no limit allows)")
    func hugeLength() throws {
        let (_, heads) = Self.parse("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n")
        #expect(try #require(heads.first).framing == .length(.max))
    }

    @Test("after a refusal the parser is poisoned")
    func poisoned() {
        var parser = HTTP1RequestParser()
        var buffer = ByteBuffer(string: "BAD\u{01} / HTTP/1.1\r\n\r\n")
        #expect(throws: HTTP1RequestError.self) { try parser.next(&buffer) }
        var good = ByteBuffer(string: "GET / HTTP/1.1\r\n\r\n")
        #expect(throws: HTTP1RequestError.self) { try parser.next(&good) }
    }
}
