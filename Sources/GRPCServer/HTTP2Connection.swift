import CNGHTTP2
import Logging
import NIOCore

/// One HTTP/2 connection: an nghttp2 server session used as a sans-I/O codec, driven by the
/// channel's bytes, turning requests into calls of the router's handlers.
///
/// Everything here runs on the channel's event loop; the session is never touched elsewhere.
/// Handlers that run as tasks hop back through `NIOLoopBound` to finish their calls.
final class HTTP2Connection: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// Asks a connection to stop taking new calls and close once its calls are done.
    struct GracefulShutdownEvent: Sendable {}

    private let router: ServerRouter
    private let configuration: ServerConfiguration
    private let logger: Logger
    private var session: OpaquePointer?
    private var context: ChannelHandlerContext?
    private var streams: [Int32: HTTP2Stream] = [:]
    /// True while nghttp2 is calling back into us; `flush()` must not run then.
    private var inSession = false
    private var flushScheduled = false
    private var draining = false
    /// Set once the GOAWAY naming the last stream processed is queued; only then may a draining
    /// connection close when it has no streams (a request racing the first GOAWAY is served).
    private var finalGoAwaySubmitted = false
    private var closing = false
    /// Messages written by the streaming calls' tasks, taken in one hop per burst.
    private let outbox = ConnectionOutbox()
    /// The array the last drain emptied, kept for its capacity.
    private var outboxBatch: [ConnectionOutbox.Entry] = []

    init(router: ServerRouter, configuration: ServerConfiguration, logger: Logger) {
        self.router = router
        self.configuration = configuration
        self.logger = logger
    }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        var session: OpaquePointer?
        let userData = Unmanaged.passUnretained(self).toOpaque()
        let rv = nghttp2_session_server_new2(&session, NGHTTP2Callbacks.shared.callbacks, userData, NGHTTP2Callbacks.shared.options)
        guard rv == 0, let session else {
            logger.error("nghttp2_session_server_new2 failed", metadata: ["code": "\(rv)"])
            context.close(promise: nil)
            return
        }
        self.session = session
        let http2 = configuration.http2
        var settings = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: UInt32(http2.maxConcurrentStreams)),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: UInt32(http2.initialStreamWindowSize)),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue), value: UInt32(http2.maxHeaderListSize)),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0),
        ]
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count)
        nghttp2_session_set_local_window_size(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, Int32(http2.connectionWindowSize))
        if context.channel.isActive { flush() }
    }

    func channelActive(context: ChannelHandlerContext) {
        flush()
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let session, !closing else { return }
        let buffer = unwrapInboundIn(data)
        inSession = true
        let rv = buffer.withUnsafeReadableBytes { bytes -> Int64 in
            groupd_nghttp2_mem_recv(session, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count)
        }
        inSession = false
        if rv < 0 {
            // A fatal protocol error (bad preface, flooding, a broken frame). Some of these return
            // without a GOAWAY queued (a bad client magic, too many CONTINUATIONs); queue one with
            // PROTOCOL_ERROR (a no-op when nghttp2 already did), send it, then close.
            logger.debug("closing connection after nghttp2 error", metadata: ["error": "\(String(cString: nghttp2_strerror(Int32(rv))))"])
            nghttp2_session_terminate_session(session, UInt32(NGHTTP2_PROTOCOL_ERROR.rawValue))
            finalGoAwaySubmitted = true
            draining = true
            flush()
            closeConnection()
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        flush()
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { flush() }
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is GracefulShutdownEvent {
            beginDraining()
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("connection error", metadata: ["error": "\(error)"])
        closeConnection()
    }

    func channelInactive(context: ChannelHandlerContext) {
        tearDown()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        tearDown()
        self.context = nil
    }

    private func tearDown() {
        for stream in streams.values { stream.abandon() }
        streams.removeAll()
        if let session {
            nghttp2_session_del(session)
            self.session = nil
        }
    }

    private func closeConnection() {
        guard !closing, let context else { return }
        closing = true
        context.close(promise: nil)
    }

    // MARK: Output

    /// Serialises every frame nghttp2 has queued and writes it in one buffer.
    private func flush() {
        precondition(!inSession, "flush() re-entered from an nghttp2 callback")
        guard let session, let context, !closing else { return }
        guard context.channel.isWritable else { return }  // resumed by channelWritabilityChanged
        var out: ByteBuffer?
        inSession = true
        while true {
            var chunk: UnsafePointer<UInt8>?
            let count = groupd_nghttp2_mem_send(session, &chunk)
            if count < 0 {
                inSession = false
                logger.debug("nghttp2_session_mem_send failed", metadata: ["code": "\(count)"])
                closeConnection()
                return
            }
            if count == 0 { break }
            let bytes = UnsafeRawBufferPointer(start: chunk, count: Int(count))
            if out == nil { out = context.channel.allocator.buffer(capacity: max(Int(count), 4096)) }
            out!.writeBytes(bytes)
        }
        inSession = false
        let done = (nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0)
            || (finalGoAwaySubmitted && streams.isEmpty)
        guard let out else {
            if done { closeConnection() }
            return
        }
        let written = context.writeAndFlush(wrapOutboundOut(out))
        if done {
            // Close once the last frames (GOAWAY, final trailers) are on the wire, not before.
            let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
            written.whenComplete { _ in bound.value.closeConnection() }
        }
    }

    /// Flushes soon, once for a burst of completions arriving from handler tasks.
    private func scheduleFlush() {
        guard !flushScheduled, let context else { return }
        flushScheduled = true
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        context.eventLoop.execute {
            bound.value.flushScheduled = false
            bound.value.flush()
        }
    }

    // MARK: Graceful shutdown

    private func beginDraining() {
        guard let session, let context, !draining else { return }
        draining = true
        // First GOAWAY with the maximum stream id: clients stop opening streams, and the ones
        // already in flight to us are still served.
        nghttp2_submit_shutdown_notice(session)
        flush()
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        context.eventLoop.scheduleTask(in: .milliseconds(200)) {
            let connection = bound.value
            guard let session = connection.session else { return }
            nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nghttp2_session_get_last_proc_stream_id(session), UInt32(NGHTTP2_NO_ERROR.rawValue), nil, 0)
            connection.finalGoAwaySubmitted = true
            connection.flush()
        }
    }

    // MARK: nghttp2 callbacks (called only from inside mem_recv / mem_send)

    func onBeginHeaders(streamID: Int32) {
        guard let context else { return }
        streams[streamID] = HTTP2Stream(id: streamID, maxMessageBytes: configuration.maxMessageBytes, allocator: context.channel.allocator)
    }

    func onHeader(streamID: Int32, isRequestHeaders: Bool, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        guard isRequestHeaders, let stream = streams[streamID] else { return }
        stream.headerListBytes += name.count + value.count + 32
        if stream.headerListBytes > configuration.http2.maxHeaderListSize {
            stream.headersTooLarge = true
            return
        }
        stream.acceptHeader(name: name, value: value)
    }

    func onRequestHeadersComplete(streamID: Int32, endStream: Bool) {
        guard let stream = streams[streamID], let context else { return }
        if let refusal = stream.refusalAfterHeaders(maxHeaderListSize: configuration.http2.maxHeaderListSize) {
            respond(stream, refusal)
            return
        }
        guard let handler = router.handler(for: stream.path) else {
            respond(stream, .status(GRPCStatus(.unimplemented, "Method not found: \(stream.path)")))
            return
        }
        stream.handler = handler
        if let timeout = stream.timeoutNanos {
            let deadline = NIODeadline.now() + .nanoseconds(timeout)
            stream.deadline = deadline
            let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
            stream.deadlineTask = context.eventLoop.scheduleTask(deadline: deadline) {
                bound.value.deadlineExpired(streamID: streamID)
            }
        }
        if endStream { onEndOfRequest(streamID: streamID) }
    }

    func onDataChunk(streamID: Int32, data: UnsafeRawBufferPointer) {
        guard let session else { return }
        // Taking the bytes into the stream's deframer is what reopens the window: the deframer's
        // memory is bounded by the message limit, which it enforces from each length prefix.
        nghttp2_session_consume(session, streamID, data.count)
        guard let stream = streams[streamID], stream.trailers == nil, !stream.dispatched else { return }
        stream.deframer.append(data)
        do {
            while let message = try stream.deframer.next() {
                stream.messageCount += 1
                if stream.messageCount > 1 {
                    respond(stream, .status(GRPCStatus(.internal, "more than one request message for a method that takes one")))
                    return
                }
                if message.compressed {
                    guard let encoding = stream.encoding else {
                        respond(stream, .status(GRPCStatus(.internal, "compressed flag set but no grpc-encoding header")))
                        return
                    }
                    respond(stream, .unsupportedEncoding(encoding))
                    return
                }
                stream.request = message.bytes
            }
        } catch {
            switch error {
            case .messageTooLarge(let length, let limit):
                respond(stream, .status(GRPCStatus(.resourceExhausted, "request message of \(length) bytes exceeds the limit of \(limit) bytes")))
            case .invalidFlags(let flags):
                respond(stream, .status(GRPCStatus(.internal, "invalid message flags 0x\(String(flags, radix: 16))")))
            }
        }
    }

    func onEndOfRequest(streamID: Int32) {
        guard let stream = streams[streamID], stream.trailers == nil, !stream.dispatched, let handler = stream.handler else { return }
        if stream.deframer.hasPartialMessage {
            respond(stream, .status(GRPCStatus(.internal, "request ended inside a message")))
            return
        }
        guard let request = stream.request else {
            respond(stream, .status(GRPCStatus(.internal, "request stream ended without a message")))
            return
        }
        dispatch(stream, handler: handler, request: request)
    }

    func onFrameSent(streamID: Int32, endStream: Bool) {
        // A response ended before the client finished sending: RST_STREAM(NO_ERROR) tells the
        // client to stop, as RFC 9113 §8.1 asks.
        guard endStream, streamID > 0, let session else { return }
        if nghttp2_session_get_stream_remote_close(session, streamID) == 0 {
            nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, UInt32(NGHTTP2_NO_ERROR.rawValue))
        }
    }

    func onStreamClose(streamID: Int32) {
        guard let stream = streams.removeValue(forKey: streamID) else { return }
        stream.abandon()
        if finalGoAwaySubmitted && streams.isEmpty { scheduleFlush() }
    }

    /// Fills one DATA frame's payload from the stream's queued messages.
    func readData(streamID: Int32, into buffer: UnsafeMutableRawBufferPointer, flags: UnsafeMutablePointer<UInt32>) -> Int {
        guard let stream = streams[streamID], let session else { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
        let written = stream.drainOutbound(into: buffer)
        if stream.outbound.isEmpty, let trailers = stream.trailers {
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue | NGHTTP2_DATA_FLAG_NO_END_STREAM.rawValue
            submitTrailers(session: session, streamID: streamID, status: trailers)
            stream.deadlineTask?.cancel()
            return written
        }
        if written == 0 {
            stream.dataDeferred = true
            return Int(NGHTTP2_ERR_DEFERRED.rawValue)
        }
        return written
    }

    // MARK: Calls

    private func dispatch(_ stream: HTTP2Stream, handler: RPCHandler, request: ByteBuffer) {
        guard let context else { return }
        let callContext = ServerContext(path: stream.path, metadata: stream.metadata, deadline: stream.deadline, eventLoop: context.eventLoop)
        let streamID = stream.id
        stream.dispatched = true
        switch handler {
        case .inlineUnary(let body):
            complete(stream, with: body(request, callContext))
        case .unary(let body):
            let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
            stream.task = Self.startUnary(body, request: request, context: callContext, streamID: streamID, connection: bound)
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
            stream.task = Self.startServerStreaming(body, request: request, context: callContext, writer: writer, streamID: streamID, connection: bound)
        }
    }

    private static func startUnary(
        _ body: @escaping @Sendable (ByteBuffer, ServerContext) async throws -> ByteBuffer,
        request: ByteBuffer, context: ServerContext, streamID: Int32, connection: NIOLoopBound<HTTP2Connection>
    ) -> Task<Void, Never> {
        Task {
            let result: Result<ByteBuffer, GRPCStatus>
            do {
                result = .success(try await body(request, context))
            } catch {
                result = .failure(status(for: error))
            }
            context.eventLoop.execute {
                let connection = connection.value
                guard let stream = connection.streams[streamID] else { return }
                connection.complete(stream, with: result)
                connection.scheduleFlush()
            }
        }
    }

    private static func startServerStreaming(
        _ body: @escaping @Sendable (ByteBuffer, ServerContext, ServerStreamWriter) async throws -> Void,
        request: ByteBuffer, context: ServerContext, writer: ServerStreamWriter, streamID: Int32,
        connection: NIOLoopBound<HTTP2Connection>
    ) -> Task<Void, Never> {
        Task {
            let status: GRPCStatus?
            do {
                try await body(request, context, writer)
                // A detached call stays open; it ends through the writer.
                status = writer.isDetached ? nil : .ok
            } catch {
                status = self.status(for: error)
            }
            context.eventLoop.execute {
                let connection = connection.value
                guard let stream = connection.streams[streamID] else { return }
                guard let status else {
                    // The task is over: drop it, so that an idle detached stream keeps none.
                    stream.task = nil
                    return
                }
                connection.finish(stream, status: status)
                connection.scheduleFlush()
            }
        }
    }

    private static func status(for error: any Error) -> GRPCStatus {
        if let convertible = error as? any GRPCStatusConvertible { return convertible.grpcStatus }
        if error is CancellationError { return GRPCStatus(.cancelled, "the call was cancelled") }
        return GRPCStatus(.internal, "internal error")
    }

    private func complete(_ stream: HTTP2Stream, with result: Result<ByteBuffer, GRPCStatus>) {
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
    private func drainOutbox() {
        handOverOutbox()
        flush()
    }

    /// Hands every message the streaming calls wrote since the last drain to its stream.
    private func handOverOutbox() {
        outbox.takeAll(into: &outboxBatch)
        for entry in outboxBatch { enqueue(entry.message, onStream: entry.streamID) }
        // A burst far above the usual keeps no large array alive.
        if outboxBatch.capacity > 4096 { outboxBatch = [] } else { outboxBatch.removeAll(keepingCapacity: true) }
    }

    private func enqueue(_ message: ByteBuffer, onStream streamID: Int32) {
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
    private func finishDetached(streamID: Int32, status: GRPCStatus) {
        handOverOutbox()
        if let stream = streams[streamID] { finish(stream, status: status) }
        flush()
    }

    private func finish(_ stream: HTTP2Stream, status: GRPCStatus) {
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

    private func deadlineExpired(streamID: Int32) {
        guard let stream = streams[streamID], stream.trailers == nil else { return }
        stream.task?.cancel()
        finish(stream, status: GRPCStatus(.deadlineExceeded, "deadline exceeded"))
        scheduleFlush()
    }

    // MARK: Submitting responses

    /// A response that ends the call at once, as a Trailers-Only HEADERS frame.
    enum ImmediateResponse {
        case status(GRPCStatus)
        case unsupportedEncoding([UInt8])
        case httpStatus(Int, GRPCStatus)
    }

    private func respond(_ stream: HTTP2Stream, _ response: ImmediateResponse) {
        guard let session, stream.trailers == nil else { return }
        stream.deadlineTask?.cancel()
        stream.task?.cancel()
        defer { stream.writer?.close() }
        let status: GRPCStatus
        var httpStatus = 200
        var extra: [(String, [UInt8])] = []
        switch response {
        case .status(let s):
            status = s
        case .unsupportedEncoding(let encoding):
            status = GRPCStatus(.unimplemented, "grpc-encoding \(String(decoding: encoding, as: UTF8.self)) is not supported; use identity")
            extra.append(("grpc-accept-encoding", Array("identity".utf8)))
        case .httpStatus(let code, let s):
            httpStatus = code
            status = s
        }
        stream.trailers = status
        stream.responseHeadersSent = true
        var fields = HeaderFields()
        fields.append(StaticHeaders.shared.status(httpStatus))
        fields.append(StaticHeaders.shared.contentType)
        for (name, value) in extra { fields.append(name: name, value: value) }
        fields.appendStatus(status)
        fields.withNVArray { nva, count in
            _ = nghttp2_submit_response(session, stream.id, nva, count, nil)
        }
    }

    private func submitResponseHeaders(_ stream: HTTP2Stream) {
        guard let session, !stream.responseHeadersSent else { return }
        stream.responseHeadersSent = true
        var provider = nghttp2_data_provider()
        provider.read_callback = NGHTTP2Callbacks.readCallback
        let headers = StaticHeaders.shared.responseHeaders
        _ = headers.withUnsafeBufferPointer { nva in
            nghttp2_submit_response(session, stream.id, nva.baseAddress, nva.count, &provider)
        }
    }

    private func submitTrailers(session: OpaquePointer, streamID: Int32, status: GRPCStatus) {
        if status.code == .ok && status.message.isEmpty && status.details == nil {
            let trailers = StaticHeaders.shared.okTrailers
            _ = trailers.withUnsafeBufferPointer { nva in
                nghttp2_submit_trailer(session, streamID, nva.baseAddress, nva.count)
            }
            return
        }
        var fields = HeaderFields()
        fields.appendStatus(status)
        fields.withNVArray { nva, count in
            _ = nghttp2_submit_trailer(session, streamID, nva, count)
        }
    }
}

/// The state of one request stream, owned by its connection's event loop.
final class HTTP2Stream {
    let id: Int32
    var path = ""
    var isPost = false
    var contentTypeIsGRPC = false
    var malformedTimeout = false
    var timeoutNanos: Int64?
    var deadline: NIODeadline?
    /// The value of `grpc-encoding` when it is not `identity`.
    var encoding: [UInt8]?
    var metadata = Metadata()
    var headerListBytes = 0
    var headersTooLarge = false
    var handler: RPCHandler?
    var deframer: GRPCMessageDeframer
    var messageCount = 0
    var request: ByteBuffer?
    var task: Task<Void, Never>?
    /// Set once the request went to its handler; later DATA and END_STREAM are ignored.
    var dispatched = false
    var deadlineTask: Scheduled<Void>?
    var writer: ServerStreamWriter?
    var responseHeadersSent = false
    /// Set once the call's outcome is known; the trailers go out after the queued messages.
    var trailers: GRPCStatus?
    var dataDeferred = false
    /// Messages waiting for DATA frames, unframed: the 5-byte gRPC prefix is written as the
    /// frame is filled, so a message shared by many streams is never copied per stream.
    var outbound = CircularBuffer<OutboundMessage>(initialCapacity: 2)
    /// One queued message.
    struct OutboundMessage {
        /// The serialized message; its reader index advances as it is sent.
        var bytes: ByteBuffer
        /// How many bytes of the 5-byte prefix have been sent.
        var prefixSent: Int
        /// Whether it counts against the writer's queue.
        var fromWriter: Bool
    }

    init(id: Int32, maxMessageBytes: Int, allocator: ByteBufferAllocator) {
        self.id = id
        self.deframer = GRPCMessageDeframer(maxMessageBytes: maxMessageBytes, allocator: allocator)
    }

    func acceptHeader(name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        if name.first == UInt8(ascii: ":") {
            if name.elementsEqual(HeaderName.path) {
                path = String(decoding: value, as: UTF8.self)
            } else if name.elementsEqual(HeaderName.method) {
                isPost = value.elementsEqual(HeaderName.post)
            }
            return
        }
        if name.elementsEqual(HeaderName.contentType) {
            contentTypeIsGRPC = Self.isGRPCContentType(value)
        } else if name.elementsEqual(HeaderName.te) || name.elementsEqual(HeaderName.userAgent)
            || name.elementsEqual(HeaderName.grpcAcceptEncoding) {
            return
        } else if name.elementsEqual(HeaderName.grpcTimeout) {
            if let nanos = GRPCTimeout.parse(value) { timeoutNanos = nanos } else { malformedTimeout = true }
        } else if name.elementsEqual(HeaderName.grpcEncoding) {
            encoding = value.elementsEqual(HeaderName.identity) ? nil : Array(value)
        } else {
            metadata.append(name: String(decoding: name, as: UTF8.self), value: String(decoding: value, as: UTF8.self))
        }
    }

    /// `application/grpc`, optionally followed by `+format` or `;parameters`.
    static func isGRPCContentType(_ value: UnsafeBufferPointer<UInt8>) -> Bool {
        let prefix = HeaderName.applicationGRPC
        guard value.count >= prefix.count, value.prefix(prefix.count).elementsEqual(prefix) else { return false }
        if value.count == prefix.count { return true }
        let next = value[prefix.count]
        return next == UInt8(ascii: "+") || next == UInt8(ascii: ";")
    }

    /// Why the request must be refused as soon as its headers are in, if it must.
    func refusalAfterHeaders(maxHeaderListSize: Int) -> HTTP2Connection.ImmediateResponse? {
        if headersTooLarge {
            return .status(GRPCStatus(.resourceExhausted, "request headers exceed \(maxHeaderListSize) bytes"))
        }
        if !isPost {
            return .httpStatus(405, GRPCStatus(.internal, "gRPC requests use POST"))
        }
        if !contentTypeIsGRPC {
            return .httpStatus(415, GRPCStatus(.internal, "content-type must be application/grpc"))
        }
        if malformedTimeout {
            return .status(GRPCStatus(.internal, "malformed grpc-timeout"))
        }
        return nil
    }

    /// Queues a message (its prefix is added as it is sent).
    func appendMessage(_ message: ByteBuffer, fromWriter: Bool) {
        outbound.append(OutboundMessage(bytes: message, prefixSent: 0, fromWriter: fromWriter))
    }

    /// Copies queued bytes, gRPC prefixes included, into a DATA payload; returns how many.
    func drainOutbound(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        var written = 0
        while written < buffer.count, !outbound.isEmpty {
            let index = outbound.startIndex
            if outbound[index].prefixSent < 5 {
                let length = UInt32(outbound[index].bytes.readableBytes)
                while outbound[index].prefixSent < 5, written < buffer.count {
                    buffer[written] = GRPCMessageFramer.prefixByte(outbound[index].prefixSent, length: length)
                    outbound[index].prefixSent += 1
                    written += 1
                }
                if outbound[index].prefixSent < 5 { break }
            }
            let take = min(buffer.count - written, outbound[index].bytes.readableBytes)
            if take > 0 {
                outbound[index].bytes.withUnsafeReadableBytes { source in
                    UnsafeMutableRawBufferPointer(rebasing: buffer[written..<(written + take)])
                        .copyMemory(from: UnsafeRawBufferPointer(rebasing: source[0..<take]))
                }
                outbound[index].bytes.moveReaderIndex(forwardBy: take)
                written += take
            }
            if outbound[index].bytes.readableBytes == 0 {
                let sent = outbound.removeFirst()
                if sent.fromWriter { writer?.didSend() }
            }
        }
        return written
    }

    /// Drops what only the request needed, once the call is dispatched: an idle stream keeps
    /// only its response state.
    func releaseRequestState() {
        metadata = Metadata()
        request = nil
        deframer.release()
    }

    /// The stream is gone (closed, reset, or its connection lost): stop its work.
    func abandon() {
        deadlineTask?.cancel()
        task?.cancel()
        writer?.close()
    }
}

/// Header names and values compared byte-wise on the hot path.
enum HeaderName {
    static let path: [UInt8] = Array(":path".utf8)
    static let method: [UInt8] = Array(":method".utf8)
    static let post: [UInt8] = Array("POST".utf8)
    static let contentType: [UInt8] = Array("content-type".utf8)
    static let applicationGRPC: [UInt8] = Array("application/grpc".utf8)
    static let te: [UInt8] = Array("te".utf8)
    static let userAgent: [UInt8] = Array("user-agent".utf8)
    static let grpcTimeout: [UInt8] = Array("grpc-timeout".utf8)
    static let grpcEncoding: [UInt8] = Array("grpc-encoding".utf8)
    static let grpcAcceptEncoding: [UInt8] = Array("grpc-accept-encoding".utf8)
    static let identity: [UInt8] = Array("identity".utf8)
}
