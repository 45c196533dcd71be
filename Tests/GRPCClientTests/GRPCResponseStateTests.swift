@testable import GRPCClient
import GRPCProtocol
@testable import GroupAPI
import GroupModel
import GroupService
import NIOCore
import Testing

/// The response state machine fed by hand: what nghttp2 would report for each shape of response.
@Suite("A client call's response, event by event")
struct GRPCResponseStateTests {
    static let okHeaders = [(":status", "200"), ("content-type", "application/grpc")]

    static func feed(_ state: inout GRPCResponseState, _ fields: [(String, String)], endStream: Bool) -> GRPCResponseState.Action {
        for (name, value) in fields { state.receiveHeaderField(name: name, value: value) }
        return state.endOfHeaders(endStream: endStream)
    }

    static func data(_ state: inout GRPCResponseState, _ bytes: [UInt8]) -> GRPCResponseState.Action {
        bytes.withUnsafeBytes { state.receiveData($0) }
    }

    static func framed(_ message: [UInt8], flags: UInt8 = 0) -> [UInt8] {
        let length = UInt32(message.count)
        return [flags, UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)] + message
    }

    @Test("headers, messages split across DATA frames, OK trailers")
    func okResponse() {
        var state = GRPCResponseState(maxMessageBytes: 1024)
        #expect(Self.feed(&state, Self.okHeaders, endStream: false) == .none)
        let bytes = Self.framed([1, 2, 3]) + Self.framed([4])
        #expect(Self.data(&state, Array(bytes[..<4])) == .none)
        #expect(Self.data(&state, Array(bytes[4..<9])) == .deliver([ByteBuffer(bytes: [1, 2, 3])]))
        #expect(Self.data(&state, Array(bytes[9...])) == .deliver([ByteBuffer(bytes: [4])]))
        #expect(Self.feed(&state, [("grpc-status", "0")], endStream: true) == .finish([], nil))
        #expect(state.isFinished)
        #expect(state.streamClosed(http2ErrorCode: 0) == .none)
    }

    @Test("a Trailers-Only error carries the reason, domain, metadata and field of its details")
    func trailersOnlyWithDetails() throws {
        let status = GroupError.invalidArgument(field: "keyword", "keyword must be 1 to 30 bytes", limit: 30).grpcStatus
        let details = String(decoding: base64(status.details!), as: UTF8.self)
        var state = GRPCResponseState(maxMessageBytes: 1024)
        let action = Self.feed(&state, Self.okHeaders + [
            ("grpc-status", "3"), ("grpc-message", "keyword must be 1 to 30 bytes%20%E2%9C%93"),
            // Senders may leave the padding out.
            ("grpc-status-details-bin", String(details.prefix { $0 != "=" })),
        ], endStream: true)
        guard case .finish(let messages, let error?) = action else {
            Issue.record("expected a failure, got \(action)")
            return
        }
        #expect(messages.isEmpty)
        #expect(error.code == .invalidArgument)
        #expect(error.message == "keyword must be 1 to 30 bytes ✓")
        #expect(error.reason == "INVALID_ARGUMENT")
        #expect(error.domain == "groupd")
        #expect(error.metadata["limit"] == "30")
        #expect(error.field == "keyword")
        #expect(error.description.hasPrefix("INVALID_ARGUMENT: keyword must be 1 to 30 bytes ✓ (reason "))
        #expect(error.description.hasSuffix(", field keyword)"))
    }

    @Test("undecodable details leave the code and message")
    func badDetails() {
        var state = GRPCResponseState(maxMessageBytes: 1024)
        let action = Self.feed(&state, Self.okHeaders + [("grpc-status", "5"), ("grpc-status-details-bin", "!!not base64")], endStream: true)
        #expect(action == .finish([], GRPCCallError(.notFound, "")))
    }

    @Test("responses that are not gRPC", arguments: [
        ([(":status", "503")], true, GRPCStatus.Code.unavailable),
        ([(":status", "404"), ("content-type", "text/html")], false, .unimplemented),
        ([(":status", "200"), ("content-type", "text/html")], false, .unknown),
        ([(":status", "200")], false, .unknown),
        ([(":status", "401")], false, .unauthenticated),
        ([(":status", "418")], false, .unknown),
    ])
    func notGRPC(fields: [(String, String)], endStream: Bool, code: GRPCStatus.Code) {
        var state = GRPCResponseState(maxMessageBytes: 1024)
        guard case .finish(_, let error?) = Self.feed(&state, fields, endStream: endStream) else {
            Issue.record("expected a failure")
            return
        }
        #expect(error.code == code)
    }

    @Test("trailers without grpc-status, or with a malformed one, are INTERNAL")
    func missingStatus() {
        for trailers in [[("grpc-message", "x")], [("grpc-status", "seventeen")], [("grpc-status", "17")]] {
            var state = GRPCResponseState(maxMessageBytes: 1024)
            _ = Self.feed(&state, Self.okHeaders, endStream: false)
            guard case .finish(_, let error?) = Self.feed(&state, trailers, endStream: true) else {
                Issue.record("expected a failure for \(trailers)")
                continue
            }
            #expect(error.code == .internal)
        }
    }

    @Test("a compressed message, an oversized one, invalid flags, DATA before headers, trailers inside a message")
    func brokenBodies() {
        func failure(_ steps: (inout GRPCResponseState) -> GRPCResponseState.Action) -> GRPCCallError? {
            var state = GRPCResponseState(maxMessageBytes: 8)
            if case .finish(_, let error) = steps(&state) { return error }
            return nil
        }
        #expect(failure { state in
            _ = Self.feed(&state, Self.okHeaders, endStream: false)
            return Self.data(&state, Self.framed([1], flags: 1))
        }?.code == .internal)
        #expect(failure { state in
            _ = Self.feed(&state, Self.okHeaders, endStream: false)
            return Self.data(&state, Array(Self.framed(Array(repeating: 0, count: 9)).prefix(5)))
        }?.code == .resourceExhausted)
        #expect(failure { state in
            _ = Self.feed(&state, Self.okHeaders, endStream: false)
            return Self.data(&state, Self.framed([1], flags: 4))
        }?.code == .internal)
        #expect(failure { state in Self.data(&state, Self.framed([1])) }?.code == .internal)
        #expect(failure { state in
            _ = Self.feed(&state, Self.okHeaders, endStream: false)
            _ = Self.data(&state, Array(Self.framed([1, 2, 3]).prefix(6)))
            return Self.feed(&state, [("grpc-status", "0")], endStream: true)
        }?.code == .internal)
    }

    @Test("a stream reset before its trailers", arguments: [
        (UInt32(0x7), GRPCStatus.Code.unavailable), (0x8, .cancelled), (0xB, .resourceExhausted), (0x2, .internal), (0x0, .internal),
    ])
    func reset(errorCode: UInt32, code: GRPCStatus.Code) {
        var state = GRPCResponseState(maxMessageBytes: 1024)
        _ = Self.feed(&state, Self.okHeaders, endStream: false)
        guard case .finish(_, let error?) = state.streamClosed(http2ErrorCode: errorCode) else {
            Issue.record("expected a failure")
            return
        }
        #expect(error.code == code)
    }

    @Test("grpc-timeout: at most 8 digits, rounded up, parsed back to at least the timeout")
    func timeouts() {
        for nanoseconds: Int64 in [1, 999, 1_000_001, 10_000_000_000, 123_456_789_012, 3_600_000_000_000_000, .max / 2] {
            let text = HTTP2ClientHandler.encodeTimeout(.nanoseconds(nanoseconds))
            #expect(text.count <= 9)
            let parsed = GRPCTimeout.parse(Array(text.utf8))
            #expect(parsed != nil && parsed! >= nanoseconds, "\(text)")
        }
        #expect(HTTP2ClientHandler.encodeTimeout(.seconds(10)) == "10000000u")
    }

    @Test("base64 with and without padding; other text is refused")
    func base64Decoding() {
        #expect(Base64Decoding.decode("AQID") == [1, 2, 3])
        #expect(Base64Decoding.decode("AQ==") == [1])
        #expect(Base64Decoding.decode("AQ") == [1])
        #expect(Base64Decoding.decode("AQI") == [1, 2])
        #expect(Base64Decoding.decode("A") == nil)
        #expect(Base64Decoding.decode("A=Q") == nil)
        #expect(Base64Decoding.decode("a b") == nil)
    }

    private func base64(_ bytes: [UInt8]) -> [UInt8] {
        Array(bytes.withUnsafeBufferPointer { ProtoJSON.base64($0) }.utf8)
    }
}
