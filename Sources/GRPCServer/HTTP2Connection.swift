import CNGHTTP2
import GRPCProtocol
import Logging
import NIOCore
import NIOTLS

/// One HTTP/2 connection: an nghttp2 server session used as a sans-I/O codec, driven by the
/// channel's bytes, turning requests into calls of the router's handlers.
///
/// Everything here runs on the channel's event loop; the session is never touched elsewhere.
/// Handlers run as tasks on the loop's own `EventLoopTaskExecutor` and finish their calls
/// through `NIOLoopBound` (off the loop, they hop back).
final class HTTP2Connection: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// Asks a connection to stop taking new calls and close once its calls are done.
    struct GracefulShutdownEvent: Sendable {}
    /// Asks a connection without an open stream to leave: `maxConnections` are open and a new
    /// one takes its place (`HTTP2Connection+Limits.swift`).
    struct EvictionEvent: Sendable {}

    let router: ServerRouter
    let configuration: ServerConfiguration
    let logger: Logger
    var session: OpaquePointer?
    /// A session whose channel closed while nghttp2 was inside `mem_recv`/`mem_send` (a callback
    /// closed it): nghttp2 still uses it until that call returns, then it is deleted.
    var retiredSession: OpaquePointer?
    var context: ChannelHandlerContext?
    var streams: [Int32: HTTP2Stream] = [:]
    /// True while nghttp2 is calling back into us; `flush()` must not run then.
    var inSession = false
    var flushScheduled = false
    var draining = false
    /// Set once the GOAWAY naming the last stream processed is queued; only then may a draining
    /// connection close when it has no streams (a request racing the first GOAWAY is served).
    var finalGoAwaySubmitted = false
    var closing = false
    /// Messages written by the streaming calls' tasks, taken in one hop per burst.
    let outbox = ConnectionOutbox()
    /// The array the last drain emptied, kept for its capacity.
    var outboxBatch: [ConnectionOutbox.Entry] = []
    /// Where the calls' tasks run: this connection's event loop.
    var taskExecutor: EventLoopTaskExecutor?
    /// Keepalive, idle, age and PING policing (`HTTP2Connection+Keepalive.swift`), and its timers.
    var management: ConnectionManagement
    var timers = ManagementTimers()
    /// Set when the connection must close as soon as its queued frames are written, calls in
    /// flight or not (GOAWAY for too many PINGs).
    var terminating = false
    /// The client's address for the call observer (`ip:port`); empty when nobody observes.
    var peer = ""
    /// Whether the call observer was told this connection opened (and so must hear it closed).
    var observedOpen = false
    /// What this connection is doing, for the server's eviction choice at `maxConnections`.
    let activity: ConnectionActivity?
    /// The server's budget of calls without a verified token, shared by every connection.
    let unauthenticatedBudget: UnauthenticatedCallBudget
    /// Whether a call refused for that budget was logged (once per connection).
    var loggedUnauthenticatedRefusal = false
    /// The bytes queued for the client, against `configuration.limits` (`HTTP2Connection+Backlog.swift`).
    var backlog = Backlog()
    /// The server's count of queued bytes, shared by its connections.
    let budget: QueuedBytesBudget
    /// Rewrites a request header field too long for nghttp2's HPACK inflater, so that only its
    /// stream is refused (`HeaderFieldGuard.swift`).
    var headerGuard = HeaderFieldGuard()
    /// The streams the guard reported in the last read (kept for its capacity).
    var guardReported: [Int32] = []
    /// Streams reported by the guard before nghttp2 began them.
    var oversizedHeaderStreams: Set<Int32> = []
    /// The debug data of the GOAWAY sent for a header block in more than
    /// ``HeaderFieldGuard/maxHeaderBlockFrames`` frames.
    static let headerBlockTooLargeDebugData: [UInt8] = Array("header_block_too_large".utf8)

    /// Streams reset by the client or refused for its fault take a token each; empty ends the
    /// connection (rapid reset, `HTTP2Connection+ResetFlood.swift`).
    var resetBucket: TokenBucket
    /// Calls whose request became complete (or, bidirectional, whose headers arrived) during the
    /// current read; they start when the read is over, so a stream reset in the same read never
    /// reaches its handler.
    var readyCalls: [Int32] = []
    /// Where the connections a defence ended are logged (shared by the server's connections).
    let defenceLog: DefenceLog
    /// The Connect protocol, served beside gRPC on this connection's streams, and over HTTP/1.1
    /// when the client's first bytes are not the HTTP/2 preface; nil: gRPC only.
    let connect: ConnectProtocol?
    /// Whether the client's first bytes are still awaited to tell HTTP/2 from HTTP/1.1 (only when
    /// Connect is served): nothing is sent before, not even the server's SETTINGS, which an
    /// HTTP/1.1 client would take for a broken response.
    var awaitingFirstBytes: Bool
    /// The first bytes while fewer than ``HTTP2Connection/prefaceProbe`` have come.
    var heldFirstBytes: ByteBuffer?


    /// - Parameters:
    ///   - router: The routes the connection's requests are matched against, with their handlers
    ///     (and the token verifier of the calls that need one).
    ///   - configuration: The server's configuration: its HTTP/2 settings, keepalive and connection
    ///     limits.
    ///   - logger: Where the connection logs its errors and the reasons it closes.
    ///   - activity: Where the connection publishes its stage and open streams (the server's).
    ///   - unauthenticatedBudget: The server's budget of calls without a verified token; `nil`:
    ///     one of this connection's own, of `configuration.limits.maxUnauthenticatedCalls`.
    ///   - queuedBytesBudget: The server's count of queued bytes, shared by its connections; `nil`:
    ///     one of this connection's own, of `configuration.limits.maxQueuedBytes`.
    ///   - defenceLog: Where the connections a defence ended are logged (the server's); `nil`: one
    ///     of this connection's own.
    ///   - connect: The Connect protocol to serve beside gRPC (and over HTTP/1.1); `nil`: gRPC only,
    ///     and the server's SETTINGS go out at once.
    init(
        router: ServerRouter, configuration: ServerConfiguration, logger: Logger, activity: ConnectionActivity? = nil,
        unauthenticatedBudget: UnauthenticatedCallBudget? = nil, queuedBytesBudget: QueuedBytesBudget? = nil,
        defenceLog: DefenceLog? = nil, connect: ConnectProtocol? = nil
    ) {
        self.connect = connect
        self.awaitingFirstBytes = connect != nil
        self.router = router
        self.configuration = configuration
        self.logger = logger
        self.activity = activity
        self.unauthenticatedBudget =
            unauthenticatedBudget ?? UnauthenticatedCallBudget(limit: configuration.limits.maxUnauthenticatedCalls)
        self.budget = queuedBytesBudget ?? QueuedBytesBudget(limit: configuration.limits.maxQueuedBytes)
        self.management = ConnectionManagement(settings: configuration.keepalive, limits: configuration.limits, now: .now())
        self.resetBucket = Self.makeResetBucket(configuration.limits, now: .now())
        self.defenceLog = defenceLog ?? DefenceLog(logger: logger)
    }

    deinit {
        // nghttp2 holds this object unretained as the session's user data: the session must be
        // deleted (handlerRemoved, channelInactive) before the last reference goes.
        assert(session == nil && retiredSession == nil, "HTTP2Connection freed while its nghttp2 session is alive")
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
        resetBucket = Self.makeResetBucket(configuration.limits, now: context.eventLoop.now)
        var session: OpaquePointer?
        let userData = Unmanaged.passUnretained(self).toOpaque()
        let rv = NGHTTP2Callbacks.shared.withOptions { options in
            nghttp2_session_server_new2(&session, NGHTTP2Callbacks.shared.callbacks, userData, options)
        }
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
        startConnectionManagement(context: context)
        if context.channel.isActive { flush() }
    }

    func channelActive(context: ChannelHandlerContext) {
        flush()
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let session, !closing, !terminating else { return }
        var input = unwrapInboundIn(data)
        if awaitingFirstBytes {
            if var held = heldFirstBytes {
                heldFirstBytes = nil
                held.writeBuffer(&input)
                input = held
            }
            switch Self.sniff(input) {
            case .undecided:
                heldFirstBytes = input
                return
            case .http1:
                handOffToHTTP1(context: context, bytes: input)
                return
            case .http2:
                awaitingFirstBytes = false
            }
        }
        var buffer = headerGuard.process(input, allocator: context.channel.allocator, oversized: &guardReported)
        if !guardReported.isEmpty {
            for streamID in guardReported { oversizedHeaderField(streamID: streamID) }
            guardReported.removeAll(keepingCapacity: true)
        }
        managementRead(context: context)
        // Fed in slices, so that a connection a defence ends mid-read (rapid reset) costs nothing
        // more: the rest of the read is dropped unparsed.
        var rv: Int64 = 0
        while buffer.readableBytes > 0, !terminating {
            let count = min(buffer.readableBytes, Self.inputSliceBytes)
            inSession = true
            rv = buffer.withUnsafeReadableBytes { bytes -> Int64 in
                groupd_nghttp2_mem_recv(session, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), count)
            }
            inSession = false
            // A handler closed the channel from inside nghttp2: the session is gone with this read.
            if deleteRetiredSession() { return }
            if rv < 0 { break }
            if management.preface == .awaitingMagic {
                management.accepted(bytes: Int(rv))
            }
            buffer.moveReaderIndex(forwardBy: count)
        }
        if terminating {
            // A defence ended the connection: its GOAWAY goes out now and the connection closes
            // once it is written; nothing more is read or started.
            readyCalls.removeAll()
            flush()
            return
        }
        if rv < 0 {
            // A fatal protocol error (bad preface, flooding, a broken frame). Some of these return
            // without a GOAWAY queued (a bad client magic, too many CONTINUATIONs); queue one with
            // PROTOCOL_ERROR (a no-op when nghttp2 already did), send it, then close.
            logger.debug("closing connection after nghttp2 error", metadata: ["error": "\(String(cString: nghttp2_strerror(Int32(rv))))"])
            if rv == Int64(NGHTTP2_ERR_TOO_MANY_CONTINUATIONS.rawValue) {
                // A header block in more than HeaderFieldGuard.maxHeaderBlockFrames frames: said
                // so in the GOAWAY's debug data, naming the stream whose block it was.
                Self.headerBlockTooLargeDebugData.withUnsafeBufferPointer { debug in
                    _ = nghttp2_submit_goaway(
                        session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nghttp2_session_get_last_proc_stream_id(session),
                        UInt32(NGHTTP2_PROTOCOL_ERROR.rawValue), debug.baseAddress, debug.count)
                }
            } else {
                nghttp2_session_terminate_session(session, UInt32(NGHTTP2_PROTOCOL_ERROR.rawValue))
            }
            finalGoAwaySubmitted = true
            draining = true
            flush()
            closeConnection()
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        startReadyCalls()
        flush()
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            backlog.progressed = true
            flush()
        }
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is GracefulShutdownEvent {
            beginDraining()
        } else if event is EvictionEvent {
            evict()
        } else if case .handshakeCompleted = event as? TLSUserEvent {
            // The preface clock starts when HTTP/2 can start: after the handshake (its own
            // timeout covered the time before).
            startHTTP2Clock(context: context)
            context.fireUserInboundEventTriggered(event)
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

    func tearDown() {
        timers.cancelAll()
        for stream in streams.values {
            releaseUnauthenticatedPlace(stream)
            stream.abandon()
            observeStreamGone(stream)
        }
        streams.removeAll()
        releaseBacklog()
        if observedOpen {
            observedOpen = false
            configuration.callObserver?.connectionClosed()
        }
        if let session {
            self.session = nil
            if inSession {
                retiredSession = session
            } else {
                nghttp2_session_del(session)
            }
        }
    }

    /// Deletes the session `tearDown` retired while nghttp2 was inside a call, now that the call
    /// returned. - Returns: whether there was one (the connection is then gone).
    func deleteRetiredSession() -> Bool {
        guard let retired = retiredSession else { return false }
        retiredSession = nil
        nghttp2_session_del(retired)
        return true
    }

    func closeConnection() {
        guard !closing, let context else { return }
        closing = true
        context.close(promise: nil)
    }

    // MARK: Output

    /// Serialises every frame nghttp2 has queued and writes it in one buffer.
    func flush() {
        precondition(!inSession, "flush() re-entered from an nghttp2 callback")
        guard let session, let context, !closing, !awaitingFirstBytes else { return }
        guard context.channel.isWritable else {
            // Resumed by channelWritabilityChanged; a client that never reads meets the stall timer.
            if backlog.stallCheck == nil { armStallCheck() }
            return
        }
        var out: ByteBuffer?
        var chunkWritten: EventLoopFuture<Void>?
        inSession = true
        while true {
            if let full = out, full.readableBytes >= Self.flushChunkBytes {
                // What the socket has not taken stays in nghttp2 and the streams, where it is
                // counted, instead of piling up in the channel: write this much, go on only while
                // the channel stays writable.
                out = nil
                inSession = false
                chunkWritten = context.writeAndFlush(wrapOutboundOut(full))
                guard context.channel.isWritable, !closing else {
                    if backlog.stallCheck == nil { armStallCheck() }
                    return
                }
                inSession = true
            }
            var chunk: UnsafePointer<UInt8>?
            let count = groupd_nghttp2_mem_send(session, &chunk)
            if count < 0 {
                inSession = false
                if deleteRetiredSession() { return }
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
        if deleteRetiredSession() { return }
        let done = (nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0)
            || (finalGoAwaySubmitted && streams.isEmpty) || terminating
        guard let written = out.map({ context.writeAndFlush(wrapOutboundOut($0)) }) ?? chunkWritten else {
            if done { closeConnection() }
            return
        }
        if done {
            // Close once the last frames (GOAWAY, final trailers) are on the wire, not before.
            let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
            written.whenComplete { _ in bound.value.closeConnection() }
        }
    }

    /// The most one write of `flush()` gathers before checking that the channel still takes more.
    static let flushChunkBytes = 256 << 10

    /// Flushes soon, once for a burst of completions arriving from handler tasks.
    func scheduleFlush() {
        guard !flushScheduled, let context else { return }
        flushScheduled = true
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        context.eventLoop.execute {
            bound.value.flushScheduled = false
            bound.value.flush()
        }
    }

    // MARK: nghttp2 callbacks (called only from inside mem_recv / mem_send)

    func onBeginHeaders(streamID: Int32) {
        guard let context, !terminating else { return }
        if refusesNewStream() {
            refuseStream(streamID)
            return
        }
        let stream = HTTP2Stream(id: streamID, maxMessageBytes: configuration.maxMessageBytes, allocator: context.channel.allocator)
        if !oversizedHeaderStreams.isEmpty, oversizedHeaderStreams.remove(streamID) != nil { stream.headerFieldTooLarge = true }
        streams[streamID] = stream
        managementStreamOpened()
        configuration.callObserver?.streamOpened()
    }

    /// The guard replaced a header field of `streamID` that nghttp2 could not have taken: the
    /// stream is refused with RESOURCE_EXHAUSTED once its headers are in.
    /// Such a stream is refused for the client's fault, so it takes a token of the reset budget:
    /// a client sending them in a loop is ended like a reset flood.
    func oversizedHeaderField(streamID: Int32) {
        configuration.callObserver?.defenceTriggered(.oversizedHeaderFieldRefused)
        logger.debug("request header field over the HPACK limit replaced; refusing its stream", metadata: ["stream": "\(streamID)"])
        onStreamRefused()
        if let stream = streams[streamID] {
            stream.headerFieldTooLarge = true
            return
        }
        // Bounded: a client can only name streams it opens next.
        if oversizedHeaderStreams.count >= 64 { oversizedHeaderStreams.removeAll() }
        oversizedHeaderStreams.insert(streamID)
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
        // A content type other than gRPC's is Connect's to judge, when Connect is served (none: gRPC's refusal).
        stream.isConnect = connect != nil && stream.otherContentType != nil
        observeCallStart(stream)
        if let refusal = stream.refusalAfterHeaders(maxHeaderListSize: configuration.http2.maxHeaderListSize, connect: stream.isConnect) {
            respond(stream, refusal)
            return
        }
        let route: ServerRouter.Route
        if stream.isConnect {
            guard let connectRoute = startConnect(stream, allocator: context.channel.allocator) else { return }
            route = connectRoute
        } else {
            guard let grpcRoute = router.route(for: stream.path) else {
                respond(stream, .status(.methodNotFound(stream.path)))
                return
            }
            route = grpcRoute
        }
        let handler = route.handler
        guard admitUnauthenticated(stream, route: route) else { return }
        stream.handler = handler
        let compression = configuration.responseCompression
        if compression.enabled, let encoding = stream.requestCompression, stream.acceptedEncodings & encoding.bit != 0 {
            // The usual server behaviour: answer in the request's encoding when the client reads it.
            stream.responseCompression = encoding
            stream.responseCompressionMinBytes = compression.minBytes
        }
        if let timeout = stream.timeoutNanos {
            let deadline = NIODeadline.now() + .nanoseconds(timeout)
            stream.deadline = deadline
            stream.contextDeadline = .now + .nanoseconds(timeout)
            let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
            stream.deadlineTask = context.eventLoop.scheduleTask(deadline: deadline) {
                bound.value.deadlineExpired(streamID: streamID)
            }
        }
        if case .bidirectionalStreaming = handler {
            // Its requests stream to the handler: it starts at the end of this read, not at the
            // end of the request.
            if stream.state.routed(streaming: true) == .prepareRequestStream { prepareBidirectional(stream) }
        } else {
            _ = stream.state.routed(streaming: false)
        }
        if endStream { onEndOfRequest(streamID: streamID) }
    }

    func onDataChunk(streamID: Int32, data: UnsafeRawBufferPointer) {
        guard let session else { return }
        let stream = streams[streamID]
        let action = stream?.state.dataReceived() ?? .discard
        if action == .deliverToHandler, let stream, let requests = stream.requests {
            receiveStreamingRequest(stream, requests: requests, data: data)
            return
        }
        // Taking the bytes into the stream's deframer is what reopens the window: the deframer's
        // memory is bounded by the message limit, which it enforces from each length prefix.
        nghttp2_session_consume(session, streamID, data.count)
        guard action == .readRequest, let stream else { return }
        if let call = stream.connectCall {
            // A Connect body is gathered whole, up to the message limit.
            guard (stream.connectBody?.readableBytes ?? 0) + data.count <= call.maxBodyBytes else {
                respond(stream, .status(call.bodyTooLarge))
                return
            }
            stream.connectBody?.writeBytes(data)
            return
        }
        stream.deframer.append(data)
        do {
            while let message = try stream.deframer.next() {
                stream.messageCount += 1
                if stream.messageCount > 1 {
                    respond(stream, .status(.moreThanOneRequest))
                    return
                }
                switch requestMessage(message, on: stream) {
                case .success(let bytes): stream.request = bytes
                case .failure(let refusal):
                    respond(stream, refusal)
                    return
                }
            }
        } catch {
            respond(stream, .status(Self.status(for: error)))
        }
    }

    /// The bytes of a request message, inflated when it is compressed, or why it is refused.
    func requestMessage(_ message: GRPCMessageDeframer.Message, on stream: HTTP2Stream) -> Result<ByteBuffer, ImmediateResponse> {
        guard message.compressed else { return .success(message.bytes) }
        guard let compression = stream.requestCompression else {
            if let encoding = stream.encoding { return .failure(.unsupportedEncoding(encoding)) }
            return .failure(.status(GRPCStatus(.internal, "compressed flag set but no grpc-encoding header")))
        }
        let allocator = context?.channel.allocator ?? ByteBufferAllocator()
        do {
            return .success(try compression.inflate(message.bytes, limit: configuration.maxMessageBytes, allocator: allocator))
        } catch {
            switch error {
            case .tooLarge(let limit):
                return .failure(.status(GRPCStatus(
                    .resourceExhausted, "request message inflates to more than the limit of \(limit) bytes (\(compression.name))")))
            case .corrupt(let reason):
                return .failure(.status(GRPCStatus(.internal, "request message could not be decompressed (\(compression.name)): \(reason)")))
            }
        }
    }

    /// The status of a request stream the deframer refuses.
    static func status(for error: GRPCMessageDeframer.Failure) -> GRPCStatus {
        switch error {
        case .messageTooLarge(let length, let limit):
            GRPCStatus(.resourceExhausted, "request message of \(length) bytes exceeds the limit of \(limit) bytes")
        case .invalidFlags(let flags):
            GRPCStatus(.internal, "invalid message flags 0x\(String(flags, radix: 16))")
        }
    }

    func onEndOfRequest(streamID: Int32) {
        guard let stream = streams[streamID] else { return }
        if let call = stream.connectCall, stream.state.dataReceived() == .readRequest, let body = stream.connectBody {
            stream.connectBody = nil
            do {
                stream.request = try call.request(from: body, allocator: context?.channel.allocator ?? ByteBufferAllocator())
            } catch {
                respond(stream, .status(error))
                return
            }
        }
        switch stream.state.requestEnded(partialMessage: stream.deframer.hasPartialMessage, hasRequest: stream.request != nil) {
        case .finishRequestStream:
            // The client half-closed a streaming call: the handler's sequence ends.
            stream.deframer.release()
            stream.requests?.finish()
        case .endStreamingCall(let status):
            endStreamingCall(stream, status: status)
        case .refuse(let status):
            respond(stream, .status(status))
        case .startAtEndOfRead:
            // Started at the end of this read (startReadyCalls), unless the client resets it first.
            readyCalls.append(streamID)
        case .none:
            break
        }
    }

    func onFrameSent(streamID: Int32, endStream: Bool) {
        management.responseFrameSent()
        // A response ended before the client finished sending: RST_STREAM(NO_ERROR) tells the
        // client to stop, as RFC 9113 §8.1 asks.
        guard endStream, streamID > 0, let session else { return }
        if nghttp2_session_get_stream_remote_close(session, streamID) == 0 {
            nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, UInt32(NGHTTP2_NO_ERROR.rawValue))
        }
    }

    func onStreamClose(streamID: Int32) {
        guard let stream = streams.removeValue(forKey: streamID) else { return }
        accountQueued(-stream.queuedBytes)
        if stream.receivedBytes > stream.consumedBytes, let session {
            // Request bytes a streaming handler never took: the stream is gone, the connection's
            // window must not stay short of them.
            nghttp2_session_consume_connection(session, stream.receivedBytes - stream.consumedBytes)
        }
        releaseUnauthenticatedPlace(stream)
        stream.abandon()
        managementStreamClosed()
        observeStreamGone(stream)
        if finalGoAwaySubmitted && streams.isEmpty { scheduleFlush() }
    }

    /// Fills one DATA frame's payload from the stream's queued messages.
    func readData(streamID: Int32, into buffer: UnsafeMutableRawBufferPointer, flags: UnsafeMutablePointer<UInt32>) -> Int {
        guard let stream = streams[streamID], let session else { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
        let queuedBefore = stream.queuedBytes
        let written = stream.drainOutbound(into: buffer)
        accountQueued(stream.queuedBytes - queuedBefore)
        if written > 0 { backlog.progressed = true }
        switch stream.state.dataRead(written: written, outboundEmpty: stream.outbound.isEmpty) {
        case .send:
            return written
        case .sendTrailers(let trailers):
            if stream.isConnect {
                // Connect ends with the body: END_STREAM on this DATA, no trailers.
                flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            } else {
                flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue | NGHTTP2_DATA_FLAG_NO_END_STREAM.rawValue
                submitTrailers(session: session, streamID: streamID, status: trailers)
            }
            stream.deadlineTask?.cancel()
            return written
        case .deferred:
            return Int(NGHTTP2_ERR_DEFERRED.rawValue)
        }
    }
}

// MARK: HTTP/1.1 beside HTTP/2

extension HTTP2Connection {
    /// The first bytes of the HTTP/2 client preface that tell it from an HTTP/1.1 request line
    /// (no HTTP/1.1 method is `PRI`).
    static let prefaceProbe: [UInt8] = Array("PRI".utf8)

    enum FirstBytes: Equatable {
        case http2, http1, undecided
    }

    /// What the client's first bytes are.
    static func sniff(_ bytes: ByteBuffer) -> FirstBytes {
        let count = min(bytes.readableBytes, prefaceProbe.count)
        let matches = bytes.withUnsafeReadableBytes { raw in raw.prefix(count).elementsEqual(prefaceProbe.prefix(count)) }
        if !matches { return .http1 }
        return count == prefaceProbe.count ? .http2 : .undecided
    }

    /// Hands the connection to HTTP/1.1 (``HTTP1Connection``, which parses and writes HTTP/1.1
    /// itself): the bytes read so far go to it, and this handler leaves the pipeline with its
    /// session.
    func handOffToHTTP1(context: ChannelHandlerContext, bytes: ByteBuffer) {
        guard let connect else { return }
        // awaitingFirstBytes stays set: nothing of HTTP/2 is ever sent on this connection.
        let pipeline = context.pipeline.syncOperations
        do {
            try pipeline.addHandler(
                HTTP1Connection(connect: connect, configuration: configuration, logger: logger, activity: activity), position: .last)
        } catch {
            logger.error("could not set up HTTP/1.1", metadata: ["error": "\(error)"])
            closeConnection()
            return
        }
        context.fireChannelRead(NIOAny(bytes))
        pipeline.removeHandler(context: context, promise: nil)
    }
}
