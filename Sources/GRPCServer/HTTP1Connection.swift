import GRPCProtocol
import Logging
import NIOCore
import NIOHTTP1

/// One HTTP/1.1 connection serving Connect calls (`ConnectProtocol`): the requests come one at
/// a time (NIO's pipelining helper holds back a pipelined one until the response before it is
/// out), each body gathered up to the message limit, each call run by the route's handler as its
/// gRPC twin is, on a task that prefers the connection's event loop.
///
/// The connection starts as HTTP/2 (``HTTP2Connection``) and is handed over here when its first
/// bytes are not the HTTP/2 preface.
///
/// Its defences: a connection with no request in progress is closed after
/// ``TransportLimits/unusedConnectionTimeout`` (the preface timeout before its first request); a
/// request whose head and body do not arrive within ``TransportLimits/prefaceTimeout`` is closed;
/// a body over the limit is answered at once and the connection closed; a server stream's
/// messages wait in its writer's bounded queue until the socket takes them.
final class HTTP1Connection: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let connect: ConnectProtocol
    private let configuration: ServerConfiguration
    private let logger: Logger
    private let activity: ConnectionActivity?
    private var context: ChannelHandlerContext?
    private var taskExecutor: EventLoopTaskExecutor?
    private var peer = ""
    private var observedOpen = false

    /// The request in progress, from its head to its response's end.
    private final class Exchange {
        /// Tells this exchange from the connection's later ones, in closures that run after a hop.
        let id: UInt64
        let head: HTTPRequestHead
        /// The request target's path, without its query.
        let path: String
        let call: ConnectCall?
        var refusal: ConnectResponse?
        var body: ByteBuffer
        var task: Task<Void, Never>?
        var writer: ServerStreamWriter?
        var deadlineTask: Scheduled<Void>?
        /// The response head was written (a stream's, before its messages).
        var headWritten = false
        /// The response is complete (or the connection is closing under it).
        var ended = false
        let started: UInt64
        let annotations: CallAnnotations?

        init(
            id: UInt64, head: HTTPRequestHead, path: String, call: ConnectCall?, refusal: ConnectResponse?,
            allocator: ByteBufferAllocator, observed: Bool
        ) {
            self.id = id
            self.head = head
            self.path = path
            self.call = call
            self.refusal = refusal
            self.body = allocator.buffer(capacity: 0)
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
    private var flushPending = false

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
        // A request NIO's parser refuses: its error handler answered 400; nothing more is read.
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
        if flushPending {
            flushPending = false
            context.flush()
        }
        context.fireChannelReadComplete()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        reading = true
        guard !closing else { return }
        switch unwrapInboundIn(data) {
        case .head(let head):
            begin(head, context: context)
        case .body(var bytes):
            guard let exchange, exchange.refusal == nil, let call = exchange.call, !exchange.ended else { return }
            guard exchange.body.readableBytes + bytes.readableBytes <= call.maxBodyBytes else {
                // Answered at once; the rest of the body is not read.
                closeAfterResponse = true
                exchange.refusal = ConnectResponse.error(call.bodyTooLarge, codec: connect.codec)
                respond(exchange, exchange.refusal!)
                return
            }
            exchange.body.writeBuffer(&bytes)
        case .end:
            guard let exchange, !exchange.ended else { return }
            disarmTimer()  // the call runs as long as it takes (a stream, under its deadline)
            if let refusal = exchange.refusal {
                respond(exchange, refusal)
            } else if let call = exchange.call {
                run(call, exchange: exchange, context: context)
            }
        }
    }

    // MARK: Requests

    private func begin(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
        activity?.streamOpened(openStreams: 1)
        configuration.callObserver?.streamOpened()
        let path = head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? head.uri
        var headers: [(name: String, value: String)] = []
        headers.reserveCapacity(head.headers.count)
        for (name, value) in head.headers { headers.append((name.lowercased(), value)) }
        // A static file (the console's listener) is answered as a refusal is, and is not a call.
        let file = configuration.staticFiles?.response(method: head.method.rawValue, path: path, headers: headers)
        let observer = configuration.callObserver
        let observed = file == nil && (observer?.observesCalls ?? false)
        if !head.isKeepAlive { closeAfterResponse = true }
        let exchange: Exchange
        exchangeCount += 1
        switch file.map(ConnectProtocol.Start.refuse) ?? connect.start(method: head.method.rawValue, path: path, headers: headers) {
        case .call(let call):
            exchange = Exchange(id: exchangeCount, head: head, path: path, call: call, refusal: nil, allocator: context.channel.allocator, observed: observed)
            if head.headers["expect"].contains(where: { $0.lowercased() == "100-continue" }) {
                context.writeAndFlush(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .continue))), promise: nil)
            }
        case .refuse(let response):
            exchange = Exchange(id: exchangeCount, head: head, path: path, call: nil, refusal: response, allocator: context.channel.allocator, observed: observed)
        }
        self.exchange = exchange
        if observed { observer?.callStarted(path: path) }
        armTimer(configuration.limits.prefaceTimeout, reason: "HTTP/1.1 request body incomplete within preface_timeout_seconds")
    }

    private func run(_ call: ConnectCall, exchange: Exchange, context: ChannelHandlerContext) {
        let allocator = context.channel.allocator
        let request: ByteBuffer
        do {
            request = try call.request(from: exchange.body, allocator: allocator)
        } catch {
            respond(exchange, call.unaryResponse(.failure(error), allocator: allocator))
            return
        }
        exchange.body = allocator.buffer(capacity: 0)
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
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        switch call.handler {
        case .inlineUnary(let body):
            end(exchange, with: body(request, serverContext))
        case .unary(let body):
            exchange.task = Task(executorPreference: taskExecutor) { [id = exchange.id] in
                let result: Result<ByteBuffer, GRPCStatus>
                do {
                    result = .success(try await body(request, serverContext))
                } catch {
                    result = .failure(GRPCStatus(for: error))
                }
                HTTP2Connection.onLoop(eventLoop) { bound.value.end(id, with: result) }
            }
        case .serverStreaming(let body):
            writeHead(exchange, call.streamHead, context: context)
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

    /// A message a stream's handler wrote: in its envelope, out, and its writer slot freed once
    /// the socket took it.
    private func send(_ message: ByteBuffer, on id: UInt64) {
        guard let context, let exchange, exchange.id == id, !exchange.ended, let call = exchange.call else {
            // The stream is over: the message is dropped (its writer was closed with it).
            return
        }
        let envelope = call.streamMessage(message, allocator: context.channel.allocator)
        let promise = context.eventLoop.makePromise(of: Void.self)
        let writer = exchange.writer
        promise.futureResult.whenComplete { _ in writer?.didSend() }
        context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(envelope))), promise: promise)
    }

    /// Ends a call with its outcome: a unary response, or a stream's end-of-stream envelope (a
    /// stream's success comes as `.failure(.ok)`); nothing when the exchange is over.
    private func end(_ id: UInt64, with result: Result<ByteBuffer, GRPCStatus>) {
        guard let exchange, exchange.id == id else { return }
        end(exchange, with: result)
    }

    private func end(_ exchange: Exchange, with result: Result<ByteBuffer, GRPCStatus>) {
        guard let context, !exchange.ended, let call = exchange.call else { return }
        if call.streaming {
            let status: GRPCStatus
            switch result {
            case .success: status = .ok
            case .failure(let failure): status = failure
            }
            exchange.task?.cancel()
            exchange.writer?.close()
            let end = call.endOfStream(status, allocator: context.channel.allocator)
            if !exchange.headWritten { writeHead(exchange, call.streamHead, context: context) }
            context.write(wrapOutboundOut(.body(.byteBuffer(end))), promise: nil)
            finishResponse(exchange, status: status, context: context)
            return
        }
        exchange.task?.cancel()
        respond(exchange, call.unaryResponse(result, allocator: context.channel.allocator))
    }

    /// Writes a whole response (a unary call's, or a refusal) and ends the exchange.
    private func respond(_ exchange: Exchange, _ response: ConnectResponse) {
        guard let context, !exchange.ended else { return }
        var head = response.head
        if !head.headers.contains(where: { $0.name == "content-length" }) {
            head.headers.append(.init(name: "content-length", value: String(response.body.readableBytes)))
        }
        writeHead(exchange, head, context: context)
        if response.body.readableBytes > 0 {
            context.write(wrapOutboundOut(.body(.byteBuffer(response.body))), promise: nil)
        }
        finishResponse(exchange, status: response.status, context: context)
    }

    private func writeHead(_ exchange: Exchange, _ head: ConnectResponseHead, context: ChannelHandlerContext) {
        exchange.headWritten = true
        var headers = HTTPHeaders()
        for header in head.headers { headers.add(name: header.name, value: header.value) }
        if closeAfterResponse { headers.replaceOrAdd(name: "connection", value: "close") }
        let responseHead = HTTPResponseHead(version: exchange.head.version, status: .init(statusCode: head.status), headers: headers)
        context.write(wrapOutboundOut(.head(responseHead)), promise: nil)
        // A stream's head goes out at once; a whole response is flushed once, with its end.
        if exchange.call?.streaming == true { context.flush() }
    }

    private func finishResponse(_ exchange: Exchange, status: GRPCStatus, context: ChannelHandlerContext) {
        exchange.ended = true
        exchange.deadlineTask?.cancel()
        let closeAfter = closeAfterResponse
        if closeAfter {
            let done = context.eventLoop.makePromise(of: Void.self)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: done)
            let channel = context.channel
            done.futureResult.whenComplete { _ in channel.close(promise: nil) }
        } else if reading {
            context.write(wrapOutboundOut(.end(nil)), promise: nil)
            flushPending = true
        } else {
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
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
    }

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
