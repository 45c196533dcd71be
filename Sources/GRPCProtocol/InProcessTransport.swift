import NIOCore
import Synchronization

/// Serves a router's handlers to callers in the same process: no socket, no HTTP/2, no framing,
/// and the call semantics of the HTTP/2 transport (`GRPCServer`), so that one test body can run
/// against the router alone and live over HTTP/2.
///
/// What it keeps of the transport:
/// - a path with no route answers `UNIMPLEMENTED` ("Method not found: …");
/// - a unary or server-streaming method takes exactly one request message (`INTERNAL`
///   otherwise); a bidirectional one reads the request messages given, then the half-close;
/// - a handler's thrown error ends the call with its status (``GRPCStatus/init(for:)``);
/// - the timeout ends the call with `DEADLINE_EXCEEDED` and cancels the handler's task; a caller
///   that stops iterating the responses cancels it too;
/// - a streaming handler writes through a ``ServerStreamWriter`` of `streamQueueCapacity`
///   messages, whose slots free as the caller takes the messages (a caller that does not read
///   holds the handler at a full queue, as HTTP/2 flow control does);
/// - a detached writer keeps the call open until its ``ServerStreamWriter/finish(_:)``.
///
/// What it leaves out: compression, message size limits, metadata validation and the defences
/// against hostile clients are the transport's, tested there. Calls are not observed
/// (``ServerContext/annotations`` is nil).
public struct InProcessTransport: Sendable {
    /// The methods served.
    public let router: ServerRouter
    /// The queue bound of each streaming call's writer.
    public let streamQueueCapacity: Int

    /// - Parameters:
    ///   - router: The methods served.
    ///   - streamQueueCapacity: The queue bound of each streaming call's writer (the transport's
    ///     default, 128).
    public init(router: ServerRouter, streamQueueCapacity: Int = 128) {
        self.router = router
        self.streamQueueCapacity = streamQueueCapacity
    }

    /// Starts a call.
    /// - Parameters:
    ///   - path: The method path, `/package.Service/Method`.
    ///   - requests: The serialized request messages, all sent before the half-close.
    ///   - metadata: The request metadata.
    ///   - timeout: The call's deadline from now; nil for none.
    /// - Returns: The response messages; the sequence ends after an OK status and throws the
    ///   ``GRPCStatus`` of any other.
    public func call(
        path: String, requests: [ByteBuffer], metadata: Metadata = Metadata(), timeout: Duration? = nil
    ) -> InProcessResponses {
        let call = InProcessResponses.Call()
        guard let handler = router.handler(for: path) else {
            call.end(.methodNotFound(path))
            return InProcessResponses(call: call)
        }
        let context = ServerContext(path: path, metadata: metadata, deadline: timeout.map { .now + $0 })
        let capacity = streamQueueCapacity
        let task = Task {
            let status: GRPCStatus?
            do {
                status = try await Self.serve(handler, requests: requests, context: context, call: call, capacity: capacity)
            } catch {
                status = GRPCStatus(for: error)
            }
            if let status { call.end(status) }
        }
        call.onEnd { task.cancel() }
        if let timeout {
            let deadline = Task {
                try await Task.sleep(for: timeout)
                call.end(.deadlineExceeded)
            }
            call.onEnd { deadline.cancel() }
        }
        return InProcessResponses(call: call)
    }

    /// A call with one request message.
    public func call(
        path: String, request: ByteBuffer, metadata: Metadata = Metadata(), timeout: Duration? = nil
    ) -> InProcessResponses {
        call(path: path, requests: [request], metadata: metadata, timeout: timeout)
    }

    /// Runs the handler; returns the status the call ends with, or nil when a detached writer
    /// ends it later.
    private static func serve(
        _ handler: RPCHandler, requests: [ByteBuffer], context: ServerContext, call: InProcessResponses.Call, capacity: Int
    ) async throws -> GRPCStatus? {
        switch handler {
        case .inlineUnary(let body):
            call.deliver(try body(try single(requests), context).get())
            return .ok
        case .unary(let body):
            call.deliver(try await body(try single(requests), context))
            return .ok
        case .serverStreaming(let body):
            let request = try single(requests)
            let writer = call.makeWriter(capacity: capacity)
            try await body(request, context, writer)
            return writer.isDetached ? nil : .ok
        case .bidirectionalStreaming(let body):
            let (stream, source) = ServerRequestStream.makeStream(onTake: { _ in })
            for request in requests { source.yield(request, wireBytes: 5 + request.readableBytes) }
            source.finish()
            call.onEnd { source.cancel() }
            let writer = call.makeWriter(capacity: capacity)
            try await body(stream, context, writer)
            return writer.isDetached ? nil : .ok
        }
    }

    /// The one request message of a unary or server-streaming call.
    private static func single(_ requests: [ByteBuffer]) throws(GRPCStatus) -> ByteBuffer {
        guard requests.count <= 1 else { throw .moreThanOneRequest }
        guard let request = requests.first else { throw .noRequestMessage }
        return request
    }
}

/// The response messages of an ``InProcessTransport`` call, in order; the sequence ends after an
/// OK status and throws the ``GRPCStatus`` of any other. Stopping the iteration early (or
/// cancelling the task that iterates) cancels the call. One task iterates it.
public struct InProcessResponses: AsyncSequence, Sendable {
    public typealias Element = ByteBuffer

    let call: Call

    /// Iterates the messages.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let call: Call
        /// The caller took the last message or stopped: the call's end on the caller's side.
        let stop: Stop

        /// The next message; nil once the call ended OK.
        /// - Throws: The call's status when it is not OK; `CancellationError` when the task is.
        public mutating func next() async throws -> ByteBuffer? {
            try await withTaskCancellationHandler {
                try await call.next()
            } onCancel: { [call] in
                call.end(GRPCStatus(.cancelled, "the call was cancelled"))
            }
        }
    }

    /// Ends the call when the last iterator goes: a caller that stops reading cancels it.
    final class Stop: Sendable {
        let call: Call
        init(call: Call) { self.call = call }
        deinit { call.end(GRPCStatus(.cancelled, "the caller stopped reading")) }
    }

    /// Makes the iterator (one per call).
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(call: call, stop: Stop(call: call))
    }

    /// The state of one call: the messages not yet taken, the status once known, the caller's
    /// wait, and what runs when the call ends (the handler's cancellation, the writer's close).
    final class Call: Sendable {
        private struct State {
            var messages: [(message: ByteBuffer, fromWriter: Bool)] = []
            var status: GRPCStatus?
            var waiter: CheckedContinuation<ByteBuffer?, any Error>?
            var onEnd: [@Sendable () -> Void] = []
            var writer: ServerStreamWriter?
        }

        private let state = Mutex(State())

        /// Hands a response message to the caller (dropped once the call ended, as the
        /// transport drops messages of an ended stream).
        func deliver(_ message: ByteBuffer, fromWriter: Bool = false) {
            enum Outcome { case queued, taken(CheckedContinuation<ByteBuffer?, any Error>), dropped }
            let (outcome, writer) = state.withLock { state -> (Outcome, ServerStreamWriter?) in
                guard state.status == nil else { return (.dropped, state.writer) }
                if let waiter = state.waiter {
                    state.waiter = nil
                    return (.taken(waiter), state.writer)
                }
                state.messages.append((message, fromWriter))
                return (.queued, nil)
            }
            if case .taken(let waiter) = outcome { waiter.resume(returning: message) }
            // A message taken at once, or dropped, frees its writer slot now.
            if fromWriter, let writer { writer.didSend() }
        }

        /// A writer whose messages go to the caller and whose slots free as the caller takes them.
        func makeWriter(capacity: Int) -> ServerStreamWriter {
            let writer = ServerStreamWriter(capacity: capacity, finish: { [self] status in end(status) }, deliver: { [self] message in
                deliver(message, fromWriter: true)
            })
            let ended = state.withLock { state -> Bool in
                state.writer = writer
                return state.status != nil
            }
            if ended { writer.close() }
            return writer
        }

        /// Runs `action` when the call ends (at once if it has).
        func onEnd(_ action: @escaping @Sendable () -> Void) {
            let now = state.withLock { state -> Bool in
                if state.status != nil { return true }
                state.onEnd.append(action)
                return false
            }
            if now { action() }
        }

        /// Ends the call with `status` (the first end wins): the caller sees it after the
        /// messages already delivered; the handler is cancelled and its writer closed.
        func end(_ status: GRPCStatus) {
            let (actions, writer, waiter) = state.withLock { state -> ([@Sendable () -> Void], ServerStreamWriter?, CheckedContinuation<ByteBuffer?, any Error>?) in
                guard state.status == nil else { return ([], nil, nil) }
                state.status = status
                defer {
                    state.onEnd = []
                    state.waiter = nil
                }
                return (state.onEnd, state.writer, state.messages.isEmpty ? state.waiter : nil)
            }
            writer?.close()
            for action in actions { action() }
            if let waiter {
                if status.code == .ok { waiter.resume(returning: nil) } else { waiter.resume(throwing: status) }
            }
        }

        /// The next message, nil after OK, or the status thrown.
        func next() async throws -> ByteBuffer? {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<ByteBuffer?, any Error>) in
                let (result, writer): (Result<ByteBuffer?, any Error>?, ServerStreamWriter?) = state.withLock { state in
                    if !state.messages.isEmpty {
                        let first = state.messages.removeFirst()
                        return (.success(first.message), first.fromWriter ? state.writer : nil)
                    }
                    if let status = state.status {
                        return (status.code == .ok ? .success(nil) : .failure(status), nil)
                    }
                    state.waiter = continuation
                    return (nil, nil)
                }
                if let result { continuation.resume(with: result) }
                writer?.didSend()
            }
        }
    }
}
