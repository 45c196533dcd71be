import GRPCProtocol
import Logging
import NIOCore

/// One HTTP/1.1 connection serving Connect calls (`ConnectProtocol`): its bytes read by
/// ``HTTP1RequestParser``, its responses written by ``HTTP1ResponseEncoder``, one request at a
/// time (a pipelined request waits, unparsed, until the response before it is out), each body
/// gathered up to the message limit, each call run by the route's handler as its gRPC twin is, on
/// a task that prefers the connection's event loop.
///
/// The connection starts as HTTP/2 (``HTTP2Connection``) and is handed over here when its first
/// bytes are not the HTTP/2 preface.
///
/// Its defences: a connection with no request in progress is closed after
/// ``TransportLimits/unusedConnectionTimeout`` (the preface timeout before its first request); a
/// request whose head and body do not arrive within ``TransportLimits/prefaceTimeout`` is closed;
/// a request the parser refuses (malformed, ambiguous framing, too large a head, an unknown
/// version or transfer coding, an expectation other than `100-continue`) is answered with its
/// status in plain text and the connection closed; a body over the limit is answered at once and
/// the connection closed; pipelined bytes past ``maxBufferedBytes`` stop the reading until the
/// response before them is out; a server stream's messages wait in its writer's bounded queue
/// until the socket takes them.
final class HTTP1Connection: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// Unparsed bytes held while a response is pending before reading stops (pipelining).
    static let maxBufferedBytes = 64 * 1024

    private let connect: ConnectProtocol
    private let configuration: ServerConfiguration
    private let logger: Logger
    private let activity: ConnectionActivity?
    private var context: ChannelHandlerContext?
    private var taskExecutor: EventLoopTaskExecutor?
    private var peer = ""
    private var observedOpen = false

    private var parser = HTTP1RequestParser()
    /// Bytes read and not parsed yet (a pipelined request's, or a partial one's).
    private var inbound: ByteBuffer?

    /// The request in progress, from its head to its response's end.
    private final class Exchange {
        /// Tells this exchange from the connection's later ones, in closures that run after a hop.
        let id: UInt64
        /// 0 for HTTP/1.0, 1 for HTTP/1.1.
        let minorVersion: Int
        /// Whether an HTTP/1.0 request asked to keep the connection (said again in the response).
        let keepAliveHeader: Bool
        /// The request target's path, without its query.
        let path: String
        let call: ConnectCall?
        var refusal: ConnectResponse?
        var body: ByteBuffer?
        /// The request's end was read: the call runs (or its refusal is answered).
        var requestComplete = false
        var task: Task<Void, Never>?
        var writer: ServerStreamWriter?
        var deadlineTask: Scheduled<Void>?
        /// The response head was written (a stream's, before its messages).
        var headWritten = false
        /// The response is complete (or the connection is closing under it).
        var ended = false
        let started: UInt64
        let annotations: CallAnnotations?

        init(id: UInt64, head: HTTP1RequestHead, call: ConnectCall?, refusal: ConnectResponse?, observed: Bool) {
            self.id = id
            self.minorVersion = head.minorVersion
            self.keepAliveHeader = head.minorVersion == 0 && head.keepAlive
            self.path = head.path
            self.call = call
            self.refusal = refusal
            self.started = observed ? DispatchTimeNanos.now() : 0
            self.annotations = observed ? CallAnnotations() : nil
        }
    }

    private var exchange: Exchange?
    private var exchangeCount: UInt64 = 0
    /// The one scheduled task of ``armTimer(_:reason:)``, and when it fires.
    private var timer: Scheduled<Void>?
    private var timerScheduledFor: NIODeadline?
    /// When the connection closes unless it progresses (nil: never), and why.
    private var timerDeadline: NIODeadline?
    private var timerReason: StaticString = ""
    private var closeAfterResponse = false
    private var closing = false
    /// Inside a read: responses completed now are flushed once at its end (pipelined requests
    /// answered at once share one write to the socket).
    private var reading = false
    /// Inside ``processInbound(context:)``: a response completed now lets its loop go on.
    private var processing = false
    private var flushPending = false
    private var flushScheduled = false
    /// A read the channel asked for while pipelined bytes were over ``maxBufferedBytes``.
    private var readHeld = false

    /// - Parameters:
    ///   - connect: The protocol the requests are judged and answered by.
    ///   - configuration: The server's limits, timeouts and observer.
    ///   - logger: Where connection problems are logged (at debug).
    ///   - activity: The connection's stage and open streams, for eviction under `maxConnections`.
    init(connect: ConnectProtocol, configuration: ServerConfiguration, logger: Logger, activity: ConnectionActivity?) {
        self.connect = connect
        self.configuration = configuration
        self.logger = logger
        self.activity = activity
    }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        self.taskExecutor = EventLoopTaskExecutor(eventLoop: context.eventLoop)
        if let observer = configuration.callObserver {
            peer = context.channel.remoteAddress?.peerDescription ?? ""
            observedOpen = true
            observer.connectionOpened()
        }
        activity?.prefaceCompleted()
        armTimer(configuration.limits.prefaceTimeout, reason: "no complete HTTP/1.1 request within preface_timeout_seconds")
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        tearDown()
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        tearDown()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("HTTP/1.1 connection error", metadata: ["error": "\(error)"])
        close()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is HTTP2Connection.GracefulShutdownEvent || event is HTTP2Connection.EvictionEvent {
            // Between requests: close now; during one: after its response.
            if exchange == nil { close() } else { closeAfterResponse = true }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        reading = false
        if flushPending { scheduleFlush(context: context) }
        context.fireChannelReadComplete()
    }

    /// Flushes once the loop has run what is queued on it now: the responses the loop's other
    /// connections complete in the same turn go out right after this one's, so a client waiting on
    /// several connections is woken once for them rather than once per response (each wake-up of a
    /// peer on loopback costs the writer more than the write).
    private func scheduleFlush(context: ChannelHandlerContext) {
        guard !flushScheduled else { return }
        flushScheduled = true
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        context.eventLoop.execute {
            let connection = bound.value
            connection.flushScheduled = false
            guard connection.flushPending, let context = connection.context else { return }
            connection.flushPending = false
            context.flush()
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        reading = true
        guard !closing else { return }
        var bytes = unwrapInboundIn(data)
        if var held = inbound, held.readableBytes > 0 {
            inbound = nil  // uniquely referenced again: the append does not copy the whole buffer
            if held.readerIndex > 0 { held.discardReadBytes() }
            held.writeBuffer(&bytes)
            inbound = held
        } else {
            inbound = bytes
        }
        processInbound(context: context)
    }

    func read(context: ChannelHandlerContext) {
        // Pipelined bytes past the bound wait for the response before them: no more are read.
        if let exchange, exchange.requestComplete, (inbound?.readableBytes ?? 0) >= Self.maxBufferedBytes {
            readHeld = true
            return
        }
        context.read()
    }

    // MARK: Requests

    /// Parses and acts on the bytes read, up to a request whose response is pending (the bytes
    /// after it wait), then flushes what was answered when no read will.
    private func processInbound(context: ChannelHandlerContext) {
        guard !processing else { return }
        processing = true
        while !closing, var bytes = inbound {
            if let exchange, exchange.requestComplete { break }
            inbound = nil  // the parser's reads take from a uniquely referenced buffer
            let event: HTTP1RequestParser.Event?
            do throws(HTTP1RequestError) {
                event = try parser.next(&bytes)
            } catch {
                inbound = bytes
                refuseUnreadable(error, context: context)
                break
            }
            inbound = bytes
            guard let event else { break }
            switch event {
            case .head(let head):
                begin(head, context: context)
            case .body(let part):
                receiveBody(part)
            case .end:
                endRequest(context: context)
            }
        }
        processing = false
        if let bytes = inbound, bytes.readableBytes == 0 { inbound = nil }
        if !reading, flushPending { scheduleFlush(context: context) }
        if readHeld, !closing, (inbound?.readableBytes ?? 0) < Self.maxBufferedBytes || exchange == nil {
            readHeld = false
            context.read()
        }
    }

    private func begin(_ head: HTTP1RequestHead, context: ChannelHandlerContext) {
        activity?.streamOpened(openStreams: 1)
        configuration.callObserver?.streamOpened()
        // A static file (the console's listener) is answered as a refusal is, and is not a call.
        let file = configuration.staticFiles?.response(method: head.method, path: head.path, headers: head.headers)
        let observer = configuration.callObserver
        let observed = file == nil && (observer?.observesCalls ?? false)
        if !head.keepAlive { closeAfterResponse = true }
        exchangeCount += 1
        let exchange: Exchange
        switch file.map(ConnectProtocol.Start.refuse) ?? connect.start(method: head.method, path: head.path, headers: head.headers) {
        case .call(let call):
            exchange = Exchange(id: exchangeCount, head: head, call: call, refusal: nil, observed: observed)
        case .refuse(let response):
            exchange = Exchange(id: exchangeCount, head: head, call: nil, refusal: response, observed: observed)
        }
        self.exchange = exchange
        if observed { observer?.callStarted(path: head.path) }
        armTimer(configuration.limits.prefaceTimeout, reason: "HTTP/1.1 request body incomplete within preface_timeout_seconds")
        if let call = exchange.call, case .length(let length) = head.framing, length > call.maxBodyBytes {
            // Declared too large: answered at once, and the body is not read.
            refuseBody(exchange, call: call)
            return
        }
        if head.expectsContinue {
            if let refusal = exchange.refusal {
                // The client waits for a word before sending its body: the refusal is that word,
                // and the body, sent or not, is never read.
                closeAfterResponse = true
                respond(exchange, refusal)
                return
            }
            context.write(wrapOutboundOut(context.channel.allocator.buffer(staticString: HTTP1ResponseEncoder.continueResponse)), promise: nil)
            context.flush()
        }
    }

    private func receiveBody(_ part: ByteBuffer) {
        guard let exchange, exchange.refusal == nil, let call = exchange.call, !exchange.ended else { return }
        guard var body = exchange.body else {
            exchange.body = part
            if part.readableBytes > call.maxBodyBytes { refuseBody(exchange, call: call) }
            return
        }
        guard body.readableBytes + part.readableBytes <= call.maxBodyBytes else {
            refuseBody(exchange, call: call)
            return
        }
        exchange.body = nil
        var part = part
        body.writeBuffer(&part)
        exchange.body = body
    }

    /// A body over the limit: answered at once; the rest of it is not read.
    private func refuseBody(_ exchange: Exchange, call: ConnectCall) {
        closeAfterResponse = true
        exchange.body = nil
        exchange.refusal = ConnectResponse.error(call.bodyTooLarge, codec: connect.codec)
        respond(exchange, exchange.refusal!)
    }

    private func endRequest(context: ChannelHandlerContext) {
        guard let exchange, !exchange.ended else { return }
        exchange.requestComplete = true
        disarmTimer()  // the call runs as long as it takes (a stream, under its deadline)
        if let refusal = exchange.refusal {
            respond(exchange, refusal)
        } else if let call = exchange.call {
            run(call, exchange: exchange, context: context)
        }
    }

    /// A request the parser could not read: its status in plain text, then the close (what
    /// follows it on the connection cannot be told apart from it).
    private func refuseUnreadable(_ error: HTTP1RequestError, context: ChannelHandlerContext) {
        logger.debug("refusing an HTTP/1.1 request", metadata: ["error": "\(error)"])
        if let exchange, !exchange.ended {
            // A body that broke off in a way the parser refuses (a bad chunk): the call never runs.
            exchange.ended = true
            exchange.task?.cancel()
            observeEnd(exchange, status: GRPCStatus(.invalidArgument, "unreadable request body: \(error.message)"))
            self.exchange = nil
            activity?.streamClosed(openStreams: 0, at: context.eventLoop.now)
            configuration.callObserver?.streamClosed()
        }
        disarmTimer()
        closeAfterResponse = true
        let response = HTTP1ResponseEncoder.plainRefusal(
            status: error.code.httpStatus, message: error.message, allocator: context.channel.allocator)
        closeAfterWriting(response, context: context)
    }

    private func run(_ call: ConnectCall, exchange: Exchange, context: ChannelHandlerContext) {
        let allocator = context.channel.allocator
        let request: ByteBuffer
        do {
            request = try call.request(from: exchange.body ?? ByteBuffer(), allocator: allocator)
        } catch {
            respond(exchange, call.unaryResponse(.failure(error), allocator: allocator))
            return
        }
        exchange.body = nil
        var deadline: ContinuousClock.Instant?
        if let nanos = call.timeoutNanos {
            deadline = .now + .nanoseconds(nanos)
            let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
            exchange.deadlineTask = context.eventLoop.scheduleTask(in: .nanoseconds(nanos)) { [id = exchange.id] in
                bound.value.end(id, with: .failure(.deadlineExceeded))
            }
        }
        let serverContext = ServerContext(path: call.path, metadata: call.metadata, deadline: deadline, annotations: exchange.annotations,
            callProtocol: .connect)
        let eventLoop = context.eventLoop
        switch call.handler {
        case .inlineUnary(let body):
            end(exchange, with: body(request, serverContext))
        case .unary(let body):
            let bound = NIOLoopBound(self, eventLoop: eventLoop)
            let operation: @Sendable () async -> Void = { [id = exchange.id] in
                let result: Result<ByteBuffer, GRPCStatus>
                do {
                    result = .success(try await body(request, serverContext))
                } catch {
                    result = .failure(GRPCStatus(for: error))
                }
                HTTP2Connection.onLoop(eventLoop) { bound.value.end(id, with: result) }
            }
            // Started here, on the loop, and run until it first suspends: a handler that answers
            // without waiting (a read the group cache answers) completes within this read, its
            // response flushed with the read's others, with no hop through the loop's queue. What
            // suspends resumes on the loop's executor, as a task started the usual way would.
            let task: Task<Void, Never>
            if #available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *) {
                task = Task.immediate(executorPreference: taskExecutor, operation: operation)
            } else {
                task = Task(executorPreference: taskExecutor, operation: operation)
            }
            if !exchange.ended { exchange.task = task }
        case .serverStreaming(let body):
            let bound = NIOLoopBound(self, eventLoop: eventLoop)
            writeStreamHead(exchange, call: call, context: context)
            let id = exchange.id
            let writer = ServerStreamWriter(capacity: configuration.streamQueueCapacity, finish: { status in
                eventLoop.execute { bound.value.end(id, with: .failure(status)) }
            }, deliver: { message in
                eventLoop.execute { bound.value.send(message, on: id) }
            })
            exchange.writer = writer
            exchange.task = Task(executorPreference: taskExecutor) {
                let status: GRPCStatus?
                do {
                    try await body(request, serverContext, writer)
                    status = writer.isDetached ? nil : .ok
                } catch {
                    status = GRPCStatus(for: error)
                }
                guard let status else { return }
                HTTP2Connection.onLoop(eventLoop) { bound.value.end(id, with: .failure(status)) }
            }
        case .bidirectionalStreaming:
            // ConnectProtocol refuses these at the head.
            respond(exchange, call.unaryResponse(.failure(.methodNotFound(call.path)), allocator: allocator))
        }
    }

    /// Whether a stream's body is chunked: on HTTP/1.1; an HTTP/1.0 client's ends with the
    /// connection.
    private func streamIsChunked(_ exchange: Exchange) -> Bool { exchange.minorVersion == 1 }

    private func writeStreamHead(_ exchange: Exchange, call: ConnectCall, context: ChannelHandlerContext) {
        exchange.headWritten = true
        if !streamIsChunked(exchange) { closeAfterResponse = true }
        var buffer = context.channel.allocator.buffer(capacity: 160)
        HTTP1ResponseEncoder.writeHead(
            call.streamHead,
            framing: .init(contentLength: nil, chunked: streamIsChunked(exchange), close: closeAfterResponse, keepAlive: false),
            into: &buffer)
        // A stream's head goes out at once.
        context.writeAndFlush(wrapOutboundOut(buffer), promise: nil)
    }

    /// A message a stream's handler wrote: in its envelope, out, and its writer slot freed once
    /// the socket took it.
    private func send(_ message: ByteBuffer, on id: UInt64) {
        guard let context, let exchange, exchange.id == id, !exchange.ended, let call = exchange.call else {
            // The stream is over: the message is dropped (its writer was closed with it).
            return
        }
        var envelope = call.streamMessage(message, allocator: context.channel.allocator)
        if streamIsChunked(exchange) { envelope = HTTP1ResponseEncoder.chunk(envelope, allocator: context.channel.allocator) }
        let promise = context.eventLoop.makePromise(of: Void.self)
        let writer = exchange.writer
        promise.futureResult.whenComplete { _ in writer?.didSend() }
        context.writeAndFlush(wrapOutboundOut(envelope), promise: promise)
    }

    /// Ends a call with its outcome: a unary response, or a stream's end-of-stream envelope (a
    /// stream's success comes as `.failure(.ok)`); nothing when the exchange is over.
    private func end(_ id: UInt64, with result: Result<ByteBuffer, GRPCStatus>) {
        guard let exchange, exchange.id == id else { return }
        end(exchange, with: result)
    }

    private func end(_ exchange: Exchange, with result: Result<ByteBuffer, GRPCStatus>) {
        guard let context, !exchange.ended, let call = exchange.call else { return }
        exchange.task?.cancel()
        if call.streaming {
            let status: GRPCStatus
            switch result {
            case .success: status = .ok
            case .failure(let failure): status = failure
            }
            exchange.writer?.close()
            if !exchange.headWritten { writeStreamHead(exchange, call: call, context: context) }
            let end = call.endOfStream(status, allocator: context.channel.allocator)
            var buffer = context.channel.allocator.buffer(capacity: end.readableBytes + 20)
            if streamIsChunked(exchange) {
                HTTP1ResponseEncoder.writeChunk(end, into: &buffer)
                buffer.writeStaticString(HTTP1ResponseEncoder.lastChunk)
            } else {
                var end = end
                buffer.writeBuffer(&end)
            }
            finishResponse(exchange, bytes: buffer, status: status, context: context)
            return
        }
        respond(exchange, call.unaryResponse(result, allocator: context.channel.allocator))
    }

    /// Writes a whole response (a unary call's, or a refusal) and ends the exchange.
    private func respond(_ exchange: Exchange, _ response: ConnectResponse) {
        guard let context, !exchange.ended else { return }
        exchange.headWritten = true
        let bytes = HTTP1ResponseEncoder.response(
            response.head, body: response.body, close: closeAfterResponse, keepAlive: exchange.keepAliveHeader,
            allocator: context.channel.allocator)
        finishResponse(exchange, bytes: bytes, status: response.status, context: context)
    }

    /// Writes a response's last bytes and ends the exchange; the next pipelined request, if any,
    /// is read now.
    private func finishResponse(_ exchange: Exchange, bytes: ByteBuffer, status: GRPCStatus, context: ChannelHandlerContext) {
        exchange.ended = true
        exchange.deadlineTask?.cancel()
        let closeAfter = closeAfterResponse
        if closeAfter {
            closeAfterWriting(bytes, context: context)
        } else {
            context.write(wrapOutboundOut(bytes), promise: nil)
            flushPending = true
        }
        observeEnd(exchange, status: status)
        if self.exchange === exchange { self.exchange = nil }
        activity?.streamClosed(openStreams: 0, at: context.eventLoop.now)
        configuration.callObserver?.streamClosed()
        if !closeAfter, let idle = configuration.limits.unusedConnectionTimeout {
            armTimer(idle, reason: "HTTP/1.1 connection unused for unused_connection_timeout_seconds")
        } else {
            disarmTimer()
        }
        // From a call's task: the requests pipelined behind this one go on, and the response goes
        // out (with theirs, when they are answered at once). From inside a read, its loop does it.
        if !closeAfter { processInbound(context: context) }
    }

    /// Writes `bytes`, then ends the connection once they are out: its output is closed at once,
    /// and what the client still sends is read and dropped until it closes its side or
    /// ``lingerTimeout`` passes. (Closing a socket with unread bytes in it resets the connection,
    /// and the reset can destroy the answer before the client has read it: a refusal sent in reply
    /// to a request whose body is still arriving would be lost.)
    private func closeAfterWriting(_ bytes: ByteBuffer, context: ChannelHandlerContext) {
        guard !closing else { return }
        closing = true
        flushPending = false
        inbound = nil
        let done = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(bytes), promise: done)
        let channel = context.channel
        let eventLoop = context.eventLoop
        done.futureResult.whenComplete { written in
            guard case .success = written else {
                channel.close(promise: nil)
                return
            }
            channel.close(mode: .output).whenComplete { halfClosed in
                guard case .success = halfClosed else {
                    channel.close(promise: nil)
                    return
                }
                let linger = eventLoop.scheduleTask(in: Self.lingerTimeout) { channel.close(promise: nil) }
                channel.closeFuture.whenComplete { _ in linger.cancel() }
            }
        }
    }

    /// How long a connection ended after a response still reads (and drops) what its client sends.
    static let lingerTimeout = TimeAmount.seconds(2)

    private func observeEnd(_ exchange: Exchange, status: GRPCStatus) {
        guard exchange.started != 0, let observer = configuration.callObserver else { return }
        let elapsed = DispatchTimeNanos.now() &- exchange.started
        observer.callFinished(FinishedCall(
            path: exchange.path, status: status, durationNanoseconds: Int64(truncatingIfNeeded: elapsed), peer: peer,
            metadata: exchange.call?.metadata ?? Metadata(), annotations: exchange.annotations, callProtocol: .connect))
    }

    // MARK: Timers and closing

    /// Sets when the connection closes unless it progresses, and why. Two moves per request
    /// (its head, its response's end) cost no timer each: one scheduled task stands, and when it
    /// fires before the current deadline it is scheduled again for it.
    private func armTimer(_ timeout: TimeAmount, reason: StaticString) {
        guard let context else { return }
        let deadline = context.eventLoop.now + timeout
        timerDeadline = deadline
        timerReason = reason
        if let scheduledAt = timerScheduledFor, scheduledAt <= deadline { return }
        schedule(at: deadline, context: context)
    }

    private func disarmTimer() {
        timerDeadline = nil
    }

    private func schedule(at deadline: NIODeadline, context: ChannelHandlerContext) {
        timer?.cancel()
        timerScheduledFor = deadline
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(deadline: deadline) { bound.value.timerFired() }
    }

    private func timerFired() {
        timer = nil
        timerScheduledFor = nil
        guard let deadline = timerDeadline, let context else { return }
        if deadline > context.eventLoop.now {
            schedule(at: deadline, context: context)
            return
        }
        logger.debug("closing HTTP/1.1 connection", metadata: ["reason": "\(timerReason)"])
        close()
    }

    private func close() {
        guard !closing, let context else { return }
        closing = true
        context.close(promise: nil)
    }

    private func tearDown() {
        timer?.cancel()
        timer = nil
        timerDeadline = nil
        inbound = nil
        if let exchange {
            self.exchange = nil
            exchange.deadlineTask?.cancel()
            exchange.task?.cancel()
            exchange.writer?.close()
            if !exchange.ended {
                exchange.ended = true
                observeEnd(exchange, status: GRPCStatus(.cancelled, "the connection was lost"))
                configuration.callObserver?.streamClosed()
            }
        }
        if observedOpen {
            observedOpen = false
            configuration.callObserver?.connectionClosed()
        }
    }
}
