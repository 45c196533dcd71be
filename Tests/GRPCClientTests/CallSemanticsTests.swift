import GRPCClient
import GRPCProtocol
import GroupAPI
import GroupTestSupport
import NIOCore
import Testing

/// How a test body reaches the router: in process (`InProcessTransport`, no socket) or live (the
/// HTTP/2 transport on port 0 and `GRPCClientConnection`).
enum CallMode: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case inProcess = "in process"
    case live = "live over HTTP/2"

    var testDescription: String { rawValue }
}

/// One way to make calls, whatever the mode: the response messages, or the call's status thrown
/// as `GRPCStatus` (the live client's `GRPCCallError` turned back into one).
struct Caller: Sendable {
    let call: @Sendable (_ path: String, _ request: [UInt8], _ metadata: Metadata, _ timeout: Duration?) -> AsyncThrowingStream<ByteBuffer, any Error>

    func call(_ path: String, _ request: [UInt8], metadata: Metadata = Metadata(), timeout: Duration? = nil)
        -> AsyncThrowingStream<ByteBuffer, any Error>
    {
        call(path, request, metadata, timeout)
    }

    /// A unary call's one response.
    func unary(_ path: String, _ request: [UInt8], metadata: Metadata = Metadata()) async throws -> ByteBuffer {
        var responses: [ByteBuffer] = []
        for try await response in call(path, request, metadata: metadata) { responses.append(response) }
        guard responses.count == 1 else { throw GRPCStatus(.internal, "\(responses.count) responses") }
        return responses[0]
    }

    /// Runs `body` with a caller of `mode` over `router`, then ends the live server and connection.
    static func with(_ mode: CallMode, router: ServerRouter, _ body: (Caller) async throws -> Void) async throws {
        switch mode {
        case .inProcess:
            let transport = InProcessTransport(router: router)
            try await body(Caller { path, request, metadata, timeout in
                Self.relay(transport.call(path: path, request: ByteBuffer(bytes: request), metadata: metadata, timeout: timeout))
            })
        case .live:
            try await LiveEndpoint.with(router) { connection in
                try await body(Caller { path, request, metadata, timeout in
                    Self.relay(connection.call(path: path, request: request, metadata: metadata.entries, timeout: timeout))
                })
            }
        }
    }

    /// `responses` as one stream type, the live client's errors as `GRPCStatus`; stopping the
    /// iteration stops the call's. (Nothing here tests back-pressure: the relay reads ahead.)
    private static func relay<Responses: AsyncSequence & Sendable>(_ responses: Responses) -> AsyncThrowingStream<ByteBuffer, any Error>
    where Responses.Element == ByteBuffer {
        let (stream, continuation) = AsyncThrowingStream<ByteBuffer, any Error>.makeStream()
        let task = Task {
            do {
                for try await response in responses { continuation.yield(response) }
                continuation.finish()
            } catch let error as GRPCCallError {
                continuation.finish(throwing: GRPCStatus(error.code, error.message, details: error.details?.serializedBytes()))
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}

/// What a call does, whichever way it is made: each test body runs in process and live over
/// HTTP/2 with the same router (`GRPCClientConnectionTests.router(events:)`).
@Suite("Call semantics, in process and live")
struct CallSemanticsTests {
    private static let token: Metadata = Metadata([("authorization", "Bearer t0ken")])

    private static func health(_ bytes: ByteBuffer) throws -> Grpc_Health_V1_HealthCheckResponse {
        try bytes.withUnsafeReadableBytes { try Grpc_Health_V1_HealthCheckResponse(serializedBytes: $0) }
    }

    @Test("a unary call with metadata, many at once", arguments: CallMode.allCases)
    func unary(mode: CallMode) async throws {
        let events = GRPCClientConnectionTests.Events()
        try await Caller.with(mode, router: GRPCClientConnectionTests.router(events: events)) { caller in
            let path = Grpc_Health_V1_Health.Method.check.path
            #expect(try Self.health(try await caller.unary(path, [], metadata: Self.token)).status == .serving)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<20 {
                    group.addTask {
                        let response = try Self.health(try await caller.unary(path, [], metadata: Self.token))
                        #expect(response.status == .serving)
                    }
                }
                try await group.waitForAll()
            }
        }
    }

    @Test("a failed call ends with its status, message and details; an unknown path is UNIMPLEMENTED", arguments: CallMode.allCases)
    func failure(mode: CallMode) async throws {
        let events = GRPCClientConnectionTests.Events()
        try await Caller.with(mode, router: GRPCClientConnectionTests.router(events: events)) { caller in
            let path = Grpc_Health_V1_Health.Method.check.path
            let request = Grpc_Health_V1_HealthCheckRequest.with { $0.service = "nope" }.serializedBytes()
            await #expect {
                _ = try await caller.unary(path, request)
            } throws: { error in
                guard let status = error as? GRPCStatus, let details = status.details,
                    let decoded = try? Google_Rpc_Status(serializedBytes: details)
                else { return false }
                // Read as the client reads a status on the wire.
                let read = GRPCCallError(status.code, status.message, details: decoded)
                return read.code == .invalidArgument && read.message == "unknown service nope" && read.reason == "INVALID_ARGUMENT"
                    && read.domain == "groupd" && read.field == "service"
            }
            await #expect(throws: GRPCStatus(.unauthenticated, "no token")) {
                _ = try await caller.unary(path, [])
            }
            await #expect(throws: GRPCStatus(.unimplemented, "Method not found: /no.Such/Method")) {
                for try await _ in caller.call("/no.Such/Method", []) {}
            }
        }
    }

    @Test("a server stream delivers every message in order, then ends OK", arguments: CallMode.allCases)
    func stream(mode: CallMode) async throws {
        let events = GRPCClientConnectionTests.Events()
        try await Caller.with(mode, router: GRPCClientConnectionTests.router(events: events)) { caller in
            var received: [UInt8] = []
            for try await message in caller.call("/test.Echo/Stream", [200]) {
                received.append(message.getInteger(at: message.readerIndex)!)
            }
            #expect(received == Array(0..<200))
        }
    }

    @Test("the deadline ends a call the server does not answer, and cancels its handler", arguments: CallMode.allCases)
    func deadline(mode: CallMode) async throws {
        let events = GRPCClientConnectionTests.Events()
        try await Caller.with(mode, router: GRPCClientConnectionTests.router(events: events)) { caller in
            await #expect {
                for try await _ in caller.call("/test.Echo/Hang", [], timeout: .milliseconds(200)) {}
            } throws: { error in
                (error as? GRPCStatus)?.code == .deadlineExceeded
            }
        }
    }

    @Test("leaving a stream early cancels the call on the server, which serves on", arguments: CallMode.allCases)
    func cancel(mode: CallMode) async throws {
        let events = GRPCClientConnectionTests.Events()
        try await Caller.with(mode, router: GRPCClientConnectionTests.router(events: events)) { caller in
            for try await message in caller.call("/test.Echo/Stream", [255]) {
                if message.getInteger(at: message.readerIndex, as: UInt8.self) == 254 { break }
            }
            await events.waitClosed()
            let response = try await caller.unary(Grpc_Health_V1_Health.Method.check.path, [], metadata: Self.token)
            #expect(try Self.health(response).status == .serving)
        }
    }
}
