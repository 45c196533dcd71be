import CNGHTTP2
import GRPCProtocol
import NIOCore
import Synchronization

/// One client HTTP/2 connection: an nghttp2 client session used as a sans-I/O codec on the
/// channel's event loop. Calls are started, cancelled and timed out on the loop; their messages
/// and outcome go to each call's `AsyncThrowingStream` continuation.
///
/// Everything here runs on the channel's event loop; the session is never touched elsewhere.
final class HTTP2ClientHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// What a call needs to start: everything `Sendable`, handed to the loop.
    struct CallRequest: Sendable {
        /// The method path, `/package.Service/Method`.
        var path: String
        /// Extra request headers (lowercase names), e.g. `authorization`.
        var metadata: [(name: String, value: String)]
        /// The serialized request message (without the gRPC prefix).
        var message: [UInt8]
        /// The call's timeout, sent as `grpc-timeout` and enforced here too.
        var timeout: TimeAmount?
        /// The largest response message accepted.
        var maxMessageBytes: Int
        /// Identifies the call to `cancel(_:)`.
        var token: CallToken
        /// Where its response messages and its end go.
        var continuation: AsyncThrowingStream<ByteBuffer, any Error>.Continuation
    }

    /// A call in flight.
    private final class Call {
        let token: CallToken
        var state: GRPCResponseState
        /// The framed request; emptied once sent.
        var request: [UInt8]
        var requestOffset = 0
        let continuation: AsyncThrowingStream<ByteBuffer, any Error>.Continuation
        var deadlineTask: Scheduled<Void>?
        /// Bytes of messages handed to the caller and not yet taken by it.
        var pendingBytes = 0
        /// DATA bytes received and not yet given back to the windows.
        var unconsumedBytes = 0

        init(_ request: CallRequest) {
            self.token = request.token
            self.state = GRPCResponseState(maxMessageBytes: request.maxMessageBytes)
            var framed: [UInt8] = [0]
            framed.reserveCapacity(5 + request.message.count)
            let length = UInt32(request.message.count)
            framed += [UInt8(truncatingIfNeeded: length >> 24), UInt8(truncatingIfNeeded: length >> 16),
                       UInt8(truncatingIfNeeded: length >> 8), UInt8(truncatingIfNeeded: length)]
            framed += request.message
            self.request = framed
            self.continuation = request.continuation
        }
    }

    private let authority: String
    private let scheme: String
    private let userAgent: String
    private var session: OpaquePointer?
    private var context: ChannelHandlerContext?
    private var calls: [Int32: Call] = [:]
    private var streamIDs: [ObjectIdentifier: Int32] = [:]
    /// True while nghttp2 is calling back into us; `flush()` must not run then.
    private var inSession = false
    private var closed = false
    private var goAwayReceived = false
    /// Whether the server has sent a byte yet (a plaintext client closed at once, before any byte,
    /// has most likely reached a TLS listener).
    private var receivedAny = false
    /// Why the connection failed, for calls started after it did (a failed TLS handshake ends
    /// the connection before the first call may start).
    private var failure: GRPCCallError?
    /// The same first failure, readable off the event loop: a connection that fails before
    /// `connect` has found this handler in the pipeline (a TLS alert answering the preface, the
    /// server closing at once) still reports why.
    let firstFailure = FirstFailure()

    /// Creates the handler of one connection.
    /// - Parameters:
    ///   - authority: The `:authority` of every request (`host:port`).
    ///   - scheme: `http` (h2c) or `https` (TLS).
    ///   - userAgent: The `user-agent` header.
    init(authority: String, scheme: String, userAgent: String) {
        self.authority = authority
        self.scheme = scheme
        self.userAgent = userAgent
    }

    deinit {
        // nghttp2 holds this object unretained as the session's user data: the session must be
        // deleted (handlerRemoved, channelInactive) before the last reference goes.
        assert(session == nil, "HTTP2ClientHandler freed while its nghttp2 session is alive")
    }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        var session: OpaquePointer?
        let userData = Unmanaged.passUnretained(self).toOpaque()
        let shared = NGHTTP2ClientCallbacks.shared
        guard nghttp2_session_client_new2(&session, shared.callbacks, userData, shared.options) == 0, let session else {
            context.close(promise: nil)
            return
        }
        self.session = session
        var settings = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0),
            // Response messages up to the limit fit in one stream window round trip.
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: 1 << 20),
        ]
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count)
        nghttp2_session_set_local_window_size(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, 4 << 20)
        if context.channel.isActive { flush() }
    }

    func channelActive(context: ChannelHandlerContext) {
        flush()
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let session, !closed else { return }
        let buffer = unwrapInboundIn(data)
        if !receivedAny, scheme == "http", let first = buffer.readableBytesView.first, first == 0x15 || first == 0x16 {
            // A TLS record (an alert or a handshake) where HTTP/2 frames were due.
            failAll(GRPCCallError(.unavailable, "\(authority) answered in TLS: the server expects a TLS connection"))
            close()
            return
        }
        receivedAny = true
        inSession = true
        let rv = buffer.withUnsafeReadableBytes { bytes -> Int64 in
            groupd_nghttp2_mem_recv(session, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count)
        }
        inSession = false
        if rv < 0 {
            let reason = String(cString: nghttp2_strerror(Int32(rv)))
            failAll(GRPCCallError(.internal, "HTTP/2 protocol error from the server: \(reason)"))
            nghttp2_session_terminate_session(session, UInt32(NGHTTP2_PROTOCOL_ERROR.rawValue))
            flush()
            close()
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        flush()
        context.fireChannelReadComplete()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        failAll(GRPCCallError(.unavailable, "connection to \(authority) failed: \(GRPCClientConnection.describe(error))"))
        close()
    }

    func channelInactive(context: ChannelHandlerContext) {
        failAll(GRPCCallError(.unavailable, receivedAny || scheme != "http"
            ? "connection to \(authority) closed"
            : "connection to \(authority) closed before the server sent anything: the server may expect TLS"))
        tearDown()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        failAll(GRPCCallError(.unavailable, "connection to \(authority) closed"))
        tearDown()
        self.context = nil
    }

    private func tearDown() {
        if let session {
            nghttp2_session_del(session)
            self.session = nil
        }
    }

    private func close() {
        guard !closed, let context else { return }
        closed = true
        context.close(promise: nil)
    }

    // MARK: Calls

    /// Starts a call: submits its HEADERS and request DATA and arms its deadline.
    func start(_ request: CallRequest) {
        guard let session, let context, !closed, !goAwayReceived else {
            request.continuation.finish(throwing: failure ?? GRPCCallError(.unavailable, "connection to \(authority) is closed"))
            return
        }
        let call = Call(request)
        var headers: [(String, String)] = [
            (":method", "POST"), (":scheme", scheme), (":path", request.path), (":authority", authority),
            ("content-type", "application/grpc"), ("te", "trailers"), ("user-agent", userAgent),
        ]
        if let timeout = request.timeout { headers.append(("grpc-timeout", Self.encodeTimeout(timeout))) }
        for (name, value) in request.metadata { headers.append((name.lowercased(), value)) }
        var provider = nghttp2_data_provider()
        provider.read_callback = NGHTTP2ClientCallbacks.readCallback
        let streamID = Self.withNameValues(headers) { nva, count in
            nghttp2_submit_request(session, nil, nva, count, &provider, nil)
        }
        guard streamID > 0 else {
            let reason = String(cString: nghttp2_strerror(streamID))
            request.continuation.finish(throwing: GRPCCallError(.unavailable, "cannot start a call on \(authority): \(reason)"))
            return
        }
        calls[streamID] = call
        streamIDs[ObjectIdentifier(call.token)] = streamID
        if let timeout = request.timeout {
            let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
            call.deadlineTask = context.eventLoop.scheduleTask(in: timeout) {
                bound.value.end(streamID: streamID, GRPCCallError(.deadlineExceeded, "the deadline passed before the server answered"))
            }
        }
        flush()
    }

    /// The caller took a message of `bytes` (its gRPC prefix included): once fewer than
    /// ``highWaterBytes`` wait for it, the stream's window reopens.
    func consumed(_ token: CallToken, bytes: Int) {
        guard let streamID = streamIDs[ObjectIdentifier(token)], let call = calls[streamID] else { return }
        call.pendingBytes -= bytes
        releaseWindow(call, streamID: streamID)
        flush()
    }

    /// How many bytes of delivered messages may wait for the caller before the stream's window
    /// stays shut (the server then holds the rest, and its queue applies back-pressure).
    static let highWaterBytes = 1 << 20

    private func releaseWindow(_ call: Call, streamID: Int32) {
        guard let session, call.unconsumedBytes > 0, call.pendingBytes < Self.highWaterBytes else { return }
        nghttp2_session_consume(session, streamID, call.unconsumedBytes)
        call.unconsumedBytes = 0
    }

    /// Cancels a call (its consumer stopped listening): RST_STREAM(CANCEL), nothing more delivered.
    func cancel(_ token: CallToken) {
        guard let streamID = streamIDs[ObjectIdentifier(token)] else { return }
        end(streamID: streamID, GRPCCallError(.cancelled, "the call was cancelled"))
    }

    /// Ends a call from this side: resets its stream and finishes its consumer with `error`.
    private func end(streamID: Int32, _ error: GRPCCallError) {
        guard let call = calls[streamID] else { return }
        if let session {
            nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, UInt32(NGHTTP2_CANCEL.rawValue))
        }
        apply(call.state.fail(error), to: call, streamID: streamID)
        if !inSession { flush() }
    }

    private func failAll(_ error: GRPCCallError) {
        if failure == nil {
            failure = error
            firstFailure.record(error)
        }
        for (streamID, call) in calls {
            apply(call.state.fail(error), to: call, streamID: streamID)
        }
    }

    private func apply(_ action: GRPCResponseState.Action, to call: Call, streamID: Int32) {
        switch action {
        case .none:
            break
        case .deliver(let messages):
            for message in messages {
                call.pendingBytes += 5 + message.readableBytes
                call.continuation.yield(message)
            }
        case .finish(let messages, let error):
            for message in messages { call.continuation.yield(message) }
            call.deadlineTask?.cancel()
            // The stream is over: what it held of the connection's window goes back at once.
            if call.unconsumedBytes > 0, let session {
                nghttp2_session_consume_connection(session, call.unconsumedBytes)
                call.unconsumedBytes = 0
            }
            calls.removeValue(forKey: streamID)
            streamIDs.removeValue(forKey: ObjectIdentifier(call.token))
            if let error {
                call.continuation.finish(throwing: error)
            } else {
                call.continuation.finish()
            }
        }
    }

    // MARK: Output

    /// Serialises every frame nghttp2 has queued and writes it in one buffer.
    private func flush() {
        precondition(!inSession, "flush() re-entered from an nghttp2 callback")
        guard let session, let context, !closed else { return }
        var out: ByteBuffer?
        inSession = true
        while true {
            var chunk: UnsafePointer<UInt8>?
            let count = groupd_nghttp2_mem_send(session, &chunk)
            if count < 0 {
                inSession = false
                failAll(GRPCCallError(.internal, "HTTP/2 session failed: \(String(cString: nghttp2_strerror(Int32(count))))"))
                close()
                return
            }
            if count == 0 { break }
            if out == nil { out = context.channel.allocator.buffer(capacity: max(Int(count), 4096)) }
            out!.writeBytes(UnsafeRawBufferPointer(start: chunk, count: Int(count)))
        }
        inSession = false
        if let out { context.writeAndFlush(wrapOutboundOut(out), promise: nil) }
    }

    // MARK: nghttp2 callbacks (called only from inside mem_recv / mem_send)

    func onHeader(streamID: Int32, name: String, value: String) {
        calls[streamID]?.state.receiveHeaderField(name: name, value: value)
    }

    func onHeadersComplete(streamID: Int32, endStream: Bool) {
        guard let call = calls[streamID] else { return }
        apply(call.state.endOfHeaders(endStream: endStream), to: call, streamID: streamID)
    }

    func onDataChunk(streamID: Int32, data: UnsafeRawBufferPointer) {
        guard let call = calls[streamID] else {
            // A call already ended (cancelled, timed out): its late bytes only reopen the connection.
            if let session { nghttp2_session_consume_connection(session, data.count) }
            return
        }
        call.unconsumedBytes += data.count
        apply(call.state.receiveData(data), to: call, streamID: streamID)
        if calls[streamID] != nil { releaseWindow(call, streamID: streamID) }
    }

    func onStreamClose(streamID: Int32, errorCode: UInt32) {
        guard let call = calls[streamID] else { return }
        apply(call.state.streamClosed(http2ErrorCode: errorCode), to: call, streamID: streamID)
    }

    func onGoAway() {
        // Streams above the GOAWAY's last id are closed by nghttp2 (REFUSED_STREAM); the others
        // finish. No new call starts here.
        goAwayReceived = true
    }

    func readRequest(streamID: Int32, into buffer: UnsafeMutableRawBufferPointer, flags: UnsafeMutablePointer<UInt32>) -> Int {
        guard let call = calls[streamID] else { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
        let count = min(buffer.count, call.request.count - call.requestOffset)
        call.request.withUnsafeBytes { bytes in
            buffer.baseAddress!.copyMemory(from: bytes.baseAddress! + call.requestOffset, byteCount: count)
        }
        call.requestOffset += count
        if call.requestOffset == call.request.count {
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            call.request = []
            call.requestOffset = 0
        }
        return count
    }

    // MARK: Helpers

    /// `grpc-timeout`: at most 8 digits, in the finest unit that fits, rounded up.
    static func encodeTimeout(_ timeout: TimeAmount) -> String {
        let nanoseconds = max(timeout.nanoseconds, 0)
        let units: [(Int64, Character)] = [(1, "n"), (1_000, "u"), (1_000_000, "m"), (1_000_000_000, "S"), (60_000_000_000, "M"), (3_600_000_000_000, "H")]
        for (size, unit) in units {
            let value = (nanoseconds + size - 1) / size
            if value <= 99_999_999 { return "\(value)\(unit)" }
        }
        return "99999999H"
    }

    /// Calls `body` with an `nghttp2_nv` array over `fields` (nghttp2 copies it when submitting).
    private static func withNameValues<R>(_ fields: [(String, String)], _ body: (UnsafePointer<nghttp2_nv>, Int) -> R) -> R {
        var bytes: [UInt8] = []
        var ranges: [(Int, Int, Int, Int)] = []
        for (name, value) in fields {
            let nameStart = bytes.count
            bytes += name.utf8
            let valueStart = bytes.count
            bytes += value.utf8
            ranges.append((nameStart, valueStart - nameStart, valueStart, bytes.count - valueStart))
        }
        bytes.append(0)  // never empty, so the base address exists
        return bytes.withUnsafeMutableBufferPointer { storage in
            let base = storage.baseAddress!
            let nva = ranges.map { range in
                nghttp2_nv(name: base + range.0, value: base + range.2, namelen: range.1, valuelen: range.3,
                           flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue))
            }
            return nva.withUnsafeBufferPointer { body($0.baseAddress!, $0.count) }
        }
    }
}

/// Identifies one call to the handler, so the caller can cancel it before knowing its stream id.
final class CallToken: Sendable {}

/// The first reason a client connection failed, shared between its handler and `connect`.
final class FirstFailure: Sendable {
    private let error = Mutex<GRPCCallError?>(nil)

    /// Keeps `error` unless a reason was recorded already.
    func record(_ error: GRPCCallError) {
        self.error.withLock { if $0 == nil { $0 = error } }
    }

    /// The first reason recorded, if any.
    var value: GRPCCallError? { error.withLock { $0 } }
}

/// The ``FirstFailure`` of each channel a `connect` opened.
final class ChannelFailures: Sendable {
    private let byChannel = Mutex<[ObjectIdentifier: FirstFailure]>([:])

    /// Keeps the failure record of `channel`'s handler.
    func add(_ failure: FirstFailure, for channel: any Channel) {
        byChannel.withLock { $0[ObjectIdentifier(channel)] = failure }
    }

    /// The first reason `channel` failed, if its handler recorded one.
    func first(for channel: any Channel) -> GRPCCallError? {
        byChannel.withLock { $0[ObjectIdentifier(channel)] }?.value
    }
}
