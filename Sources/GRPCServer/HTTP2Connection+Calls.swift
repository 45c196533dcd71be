import CNGHTTP2
import GRPCProtocol
import NIOCore

/// Calls: dispatching a request to its handler, the handler's task, completing the call, and
/// the messages streaming calls write.
extension HTTP2Connection {
    // MARK: Calls

    /// Starts the calls made ready during the read that just ended: those still open (not reset,
    /// not refused) go to their handlers. Nothing starts on a connection a defence is ending.
    func startReadyCalls() {
        guard !readyCalls.isEmpty else { return }
        let ready = readyCalls
        readyCalls.removeAll(keepingCapacity: ready.count <= 1024)
        guard !terminating else { return }
        for streamID in ready {
            guard let stream = streams[streamID], let handler = stream.handler, stream.state.startCall() else { continue }
            dispatch(stream, handler: handler)
        }
    }

    /// Hands a call to its handler: the whole request of a unary or server-streaming call, or
    /// the request stream of a bidirectional one.
    func dispatch(_ stream: HTTP2Stream, handler: RPCHandler) {
        guard let context else { return }
        if case .bidirectionalStreaming(let body) = handler {
            startBidirectional(stream, body: body)
            return
        }
        guard let request = stream.request else { return }
        let callContext = ServerContext(
            path: stream.path, metadata: stream.metadata, deadline: stream.contextDeadline, annotations: stream.annotations,
            callProtocol: stream.isConnect ? .connect : .grpc)
        let streamID = stream.id
        releaseUnauthenticatedPlaceAtDispatch(stream)
        switch handler {
        case .inlineUnary(let body):
            complete(stream, with: body(request, callContext))
        case .unary(let body):
            let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
            stream.task = Self.startUnary(
                body, request: request, context: callContext, streamID: streamID, connection: bound,
                eventLoop: context.eventLoop, executor: taskExecutor)
        case .serverStreaming(let body):
            stream.releaseRequestState()
            let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
            let writer = makeWriter(streamID: streamID, eventLoop: context.eventLoop)
            stream.writer = writer
            stream.task = Self.startStreaming(
                { try await body(request, callContext, writer) }, writer: writer, streamID: streamID,
                connection: bound, eventLoop: context.eventLoop, executor: taskExecutor)
        case .bidirectionalStreaming:
            break  // above
        }
    }

    /// Readies a bidirectional-streaming call as soon as its request headers are in: its request
    /// messages are taken from then on; its handler starts at the end of the read.
    func prepareBidirectional(_ stream: HTTP2Stream) {
        guard let context else { return }
        let eventLoop = context.eventLoop
        let streamID = stream.id
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        let (requests, source) = ServerRequestStream.makeStream(onTake: { wireBytes in
            Self.onLoop(eventLoop) { bound.value.requestTaken(streamID: streamID, wireBytes: wireBytes) }
        })
        stream.requests = source
        stream.pendingRequests = requests
        readyCalls.append(streamID)
    }

    /// Starts a readied bidirectional-streaming call's handler.
    private func startBidirectional(
        _ stream: HTTP2Stream,
        body: @escaping @Sendable (ServerRequestStream, ServerContext, ServerStreamWriter) async throws -> Void
    ) {
        guard let context, let requests = stream.pendingRequests else { return }
        stream.pendingRequests = nil
        let eventLoop = context.eventLoop
        let callContext = ServerContext(
            path: stream.path, metadata: stream.metadata, deadline: stream.contextDeadline, annotations: stream.annotations,
            callProtocol: stream.isConnect ? .connect : .grpc)
        let streamID = stream.id
        releaseUnauthenticatedPlaceAtDispatch(stream)
        if stream.observedStart != 0 { stream.observedMetadata = stream.metadata }  // for the access log
        stream.metadata = Metadata()
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        let writer = makeWriter(streamID: streamID, eventLoop: eventLoop)
        stream.writer = writer
        stream.task = Self.startStreaming(
            { try await body(requests, callContext, writer) }, writer: writer, streamID: streamID,
            connection: bound, eventLoop: eventLoop, executor: taskExecutor)
    }

    /// DATA of a bidirectional-streaming call: whole messages go to the handler's sequence. The
    /// bytes of a message go back to flow control only when the handler takes it; the bytes of a
    /// message still incomplete go back at once (the deframer bounds them by the message limit),
    /// so a client can always complete the message the handler waits for.
    func receiveStreamingRequest(_ stream: HTTP2Stream, requests: ServerRequestStream.Source, data: UnsafeRawBufferPointer) {
        stream.receivedBytes += data.count
        stream.deframer.append(data)
        do {
            while let message = try stream.deframer.next() {
                switch requestMessage(message, on: stream) {
                case .success(let bytes):
                    let wireBytes = 5 + message.bytes.readableBytes
                    stream.untakenBytes += wireBytes
                    requests.yield(bytes, wireBytes: wireBytes)
                case .failure(let refusal):
                    endStreamingCall(stream, status: refusal.status)
                    return
                }
            }
        } catch {
            endStreamingCall(stream, status: Self.status(for: error))
            return
        }
        reopenWindow(stream)
    }

    /// Ends a streaming call the transport refuses to continue (a bad request message): its
    /// handler is cancelled, its unread request bytes go back to flow control, and the status
    /// follows the messages already queued (or is Trailers-Only when none went out).
    func endStreamingCall(_ stream: HTTP2Stream, status: GRPCStatus) {
        stream.task?.cancel()
        stream.requests?.cancel()
        stream.untakenBytes = 0
        stream.deframer.release()
        reopenWindow(stream)
        finish(stream, status: status)
    }

    /// The handler took a request message: its bytes reopen the stream's window.
    func requestTaken(streamID: Int32, wireBytes: Int) {
        guard let stream = streams[streamID], let context else { return }
        stream.untakenBytes = max(0, stream.untakenBytes - wireBytes)
        guard !inSession else {
            // Never from inside nghttp2; the next loop tick will do.
            let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
            context.eventLoop.execute { bound.value.requestTaken(streamID: streamID, wireBytes: 0) }
            return
        }
        reopenWindow(stream)
        scheduleFlush()
    }

    /// Hands back to flow control every received byte that is not part of a message waiting for
    /// the handler.
    func reopenWindow(_ stream: HTTP2Stream) {
        guard let session else { return }
        let target = stream.receivedBytes - stream.untakenBytes
        if target > stream.consumedBytes {
            nghttp2_session_consume(session, stream.id, target - stream.consumedBytes)
            stream.consumedBytes = target
        }
    }

    /// The writer of a streaming call: messages go through the connection's outbox; `finish`
    /// ends a detached call.
    private func makeWriter(streamID: Int32, eventLoop: any EventLoop) -> ServerStreamWriter {
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        let outbox = self.outbox
        // A Connect stream's messages go out in Connect's envelopes (JSON when the call is).
        let connectCall = streams[streamID]?.connectCall
        let allocator = context?.channel.allocator ?? ByteBufferAllocator()
        return ServerStreamWriter(capacity: configuration.streamQueueCapacity, finish: { status in
            eventLoop.execute { bound.value.finishDetached(streamID: streamID, status: status) }
        }, deliver: { message in
            let message = connectCall?.streamMessage(message, allocator: allocator) ?? message
            if outbox.post(message, toStream: streamID) {
                eventLoop.execute { bound.value.drainOutbox() }
            }
        })
    }

    private static func startUnary(
        _ body: @escaping @Sendable (ByteBuffer, ServerContext) async throws -> ByteBuffer,
        request: ByteBuffer, context: ServerContext, streamID: Int32, connection: NIOLoopBound<HTTP2Connection>,
        eventLoop: any EventLoop, executor: EventLoopTaskExecutor?
    ) -> Task<Void, Never> {
        Task(executorPreference: executor) {
            let result: Result<ByteBuffer, GRPCStatus>
            do {
                result = .success(try await body(request, context))
            } catch {
                result = .failure(GRPCStatus(for: error))
            }
            onLoop(eventLoop) {
                let connection = connection.value
                guard let stream = connection.streams[streamID] else { return }
                connection.complete(stream, with: result)
                connection.scheduleFlush()
            }
        }
    }

    /// Runs `body` on `eventLoop`: at once when already there (a task on the loop's executor),
    /// else in the loop's next tick.
    static func onLoop(_ eventLoop: any EventLoop, _ body: @escaping @Sendable () -> Void) {
        if eventLoop.inEventLoop { body() } else { eventLoop.execute(body) }
    }

    private static func startStreaming(
        _ body: @escaping @Sendable () async throws -> Void,
        writer: ServerStreamWriter, streamID: Int32,
        connection: NIOLoopBound<HTTP2Connection>, eventLoop: any EventLoop, executor: EventLoopTaskExecutor?
    ) -> Task<Void, Never> {
        Task(executorPreference: executor) {
            let status: GRPCStatus?
            do {
                try await body()
                // A detached call stays open; it ends through the writer.
                status = writer.isDetached ? nil : .ok
            } catch {
                status = GRPCStatus(for: error)
            }
            onLoop(eventLoop) {
                let connection = connection.value
                guard let stream = connection.streams[streamID] else { return }
                guard let status else {
                    // The task is over: drop it, so that an idle detached stream keeps none.
                    stream.task = nil
                    return
                }
                // The messages the handler wrote just before returning may still wait in the
                // outbox (their drain is a later loop tick): they go before the trailers.
                connection.handOverOutbox()
                connection.finish(stream, status: status)
                connection.scheduleFlush()
            }
        }
    }

    func complete(_ stream: HTTP2Stream, with result: Result<ByteBuffer, GRPCStatus>) {
        guard !stream.state.outcomeKnown else { return }
        if let call = stream.connectCall {
            completeConnect(stream, call: call, with: result)
            return
        }
        switch result {
        case .success(let response):
            let queuedBefore = stream.queuedBytes
            stream.appendMessage(response, fromWriter: false)
            accountQueued(stream.queuedBytes - queuedBefore)
            perform(stream.state.messageQueued(), on: stream)
            finish(stream, status: .ok)
            // The request is answered: a response the client does not read keeps only itself
            // (not the request, nor the finished task's handle).
            stream.releaseRequestState()
            stream.task = nil
            checkQueuedBytes()
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
        guard let stream = streams[streamID], !stream.state.outcomeKnown else { return }
        let queuedBefore = stream.queuedBytes
        stream.appendMessage(message, fromWriter: true)
        accountQueued(stream.queuedBytes - queuedBefore)
        perform(stream.state.messageQueued(), on: stream)
        checkQueuedBytes()
    }

    /// Does what a queued response message calls for.
    func perform(_ action: HTTP2StreamState.MessageQueuedAction, on stream: HTTP2Stream) {
        switch action {
        case .submitHeaders:
            submitResponseHeaders(stream)
        case .resumeData:
            if let session { nghttp2_session_resume_data(session, stream.id) }
        case .none, .drop:
            break
        }
    }

    /// Ends a detached call from its writer: its queued messages first, then the trailers.
    func finishDetached(streamID: Int32, status: GRPCStatus) {
        handOverOutbox()
        if let stream = streams[streamID] { finish(stream, status: status) }
        flush()
    }

    /// Decides the call's outcome (once): the trailers follow the queued messages, or go as a
    /// Trailers-Only response when nothing went out.
    func finish(_ stream: HTTP2Stream, status: GRPCStatus) {
        end(stream, status: status, httpStatus: 200)
    }

    func deadlineExpired(streamID: Int32) {
        guard let stream = streams[streamID], !stream.state.outcomeKnown else { return }
        stream.task?.cancel()
        finish(stream, status: .deadlineExceeded)
        scheduleFlush()
    }
}
