import CNGHTTP2
import NIOCore

/// Calls: dispatching a request to its handler, the handler's task, completing the call, and
/// the messages streaming calls write.
extension HTTP2Connection {
    // MARK: Calls

    func dispatch(_ stream: HTTP2Stream, handler: RPCHandler, request: ByteBuffer) {
        guard let context else { return }
        let callContext = ServerContext(path: stream.path, metadata: stream.metadata, deadline: stream.deadline, eventLoop: context.eventLoop)
        let streamID = stream.id
        stream.dispatched = true
        switch handler {
        case .inlineUnary(let body):
            complete(stream, with: body(request, callContext))
        case .unary(let body):
            let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
            stream.task = Self.startUnary(
                body, request: request, context: callContext, streamID: streamID, connection: bound, executor: taskExecutor)
        case .serverStreaming(let body):
            stream.releaseRequestState()
            let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
            let eventLoop = context.eventLoop
            let outbox = self.outbox
            let writer = ServerStreamWriter(capacity: configuration.streamQueueCapacity, finish: { status in
                eventLoop.execute { bound.value.finishDetached(streamID: streamID, status: status) }
            }, deliver: { message in
                if outbox.post(message, toStream: streamID) {
                    eventLoop.execute { bound.value.drainOutbox() }
                }
            })
            stream.writer = writer
            stream.task = Self.startServerStreaming(
                body, request: request, context: callContext, writer: writer, streamID: streamID, connection: bound,
                executor: taskExecutor)
        }
    }

    private static func startUnary(
        _ body: @escaping @Sendable (ByteBuffer, ServerContext) async throws -> ByteBuffer,
        request: ByteBuffer, context: ServerContext, streamID: Int32, connection: NIOLoopBound<HTTP2Connection>,
        executor: EventLoopTaskExecutor?
    ) -> Task<Void, Never> {
        Task(executorPreference: executor) {
            let result: Result<ByteBuffer, GRPCStatus>
            do {
                result = .success(try await body(request, context))
            } catch {
                result = .failure(status(for: error))
            }
            onLoop(context.eventLoop) {
                let connection = connection.value
                guard let stream = connection.streams[streamID] else { return }
                connection.complete(stream, with: result)
                connection.scheduleFlush()
            }
        }
    }

    /// Runs `body` on `eventLoop`: at once when already there (a task on the loop's executor),
    /// else in the loop's next tick.
    private static func onLoop(_ eventLoop: any EventLoop, _ body: @escaping @Sendable () -> Void) {
        if eventLoop.inEventLoop { body() } else { eventLoop.execute(body) }
    }

    private static func startServerStreaming(
        _ body: @escaping @Sendable (ByteBuffer, ServerContext, ServerStreamWriter) async throws -> Void,
        request: ByteBuffer, context: ServerContext, writer: ServerStreamWriter, streamID: Int32,
        connection: NIOLoopBound<HTTP2Connection>, executor: EventLoopTaskExecutor?
    ) -> Task<Void, Never> {
        Task(executorPreference: executor) {
            let status: GRPCStatus?
            do {
                try await body(request, context, writer)
                // A detached call stays open; it ends through the writer.
                status = writer.isDetached ? nil : .ok
            } catch {
                status = self.status(for: error)
            }
            onLoop(context.eventLoop) {
                let connection = connection.value
                guard let stream = connection.streams[streamID] else { return }
                guard let status else {
                    // The task is over: drop it, so that an idle detached stream keeps none.
                    stream.task = nil
                    return
                }
                // Messages the handler wrote may still wait in the outbox: they go before the trailers.
                connection.handOverOutbox()
                connection.finish(stream, status: status)
                connection.scheduleFlush()
            }
        }
    }

    static func status(for error: any Error) -> GRPCStatus {
        if let convertible = error as? any GRPCStatusConvertible { return convertible.grpcStatus }
        if error is CancellationError { return GRPCStatus(.cancelled, "the call was cancelled") }
        return GRPCStatus(.internal, "internal error")
    }

    func complete(_ stream: HTTP2Stream, with result: Result<ByteBuffer, GRPCStatus>) {
        guard stream.trailers == nil else { return }
        switch result {
        case .success(let response):
            stream.appendMessage(response, fromWriter: false)
            stream.trailers = .ok
            submitResponseHeaders(stream)
        case .failure(let status):
            respond(stream, .status(status))
        }
    }

    /// Hands every message the streaming calls wrote since the last drain to its stream, then
    /// flushes the connection once (one hop and one write for a whole fan-out burst).
    func drainOutbox() {
        handOverOutbox()
        flush()
    }

    /// Hands every message the streaming calls wrote since the last drain to its stream.
    func handOverOutbox() {
        outbox.takeAll(into: &outboxBatch)
        for entry in outboxBatch { enqueue(entry.message, onStream: entry.streamID) }
        // A burst far above the usual keeps no large array alive.
        if outboxBatch.capacity > 4096 { outboxBatch = [] } else { outboxBatch.removeAll(keepingCapacity: true) }
    }

    func enqueue(_ message: ByteBuffer, onStream streamID: Int32) {
        guard let stream = streams[streamID], stream.trailers == nil else { return }
        stream.appendMessage(message, fromWriter: true)
        if !stream.responseHeadersSent {
            submitResponseHeaders(stream)
        } else if stream.dataDeferred, let session {
            stream.dataDeferred = false
            nghttp2_session_resume_data(session, streamID)
        }
    }

    /// Ends a detached call from its writer: its queued messages first, then the trailers.
    func finishDetached(streamID: Int32, status: GRPCStatus) {
        handOverOutbox()
        if let stream = streams[streamID] { finish(stream, status: status) }
        flush()
    }

    func finish(_ stream: HTTP2Stream, status: GRPCStatus) {
        guard stream.trailers == nil else { return }
        // No write is taken once the outcome is known; a detached call's owner learns it here.
        defer { stream.writer?.close() }
        guard stream.responseHeadersSent else {
            respond(stream, .status(status))
            return
        }
        stream.trailers = status
        if stream.dataDeferred, let session {
            stream.dataDeferred = false
            nghttp2_session_resume_data(session, stream.id)
        }
    }

    func deadlineExpired(streamID: Int32) {
        guard let stream = streams[streamID], stream.trailers == nil else { return }
        stream.task?.cancel()
        finish(stream, status: GRPCStatus(.deadlineExceeded, "deadline exceeded"))
        scheduleFlush()
    }
}
