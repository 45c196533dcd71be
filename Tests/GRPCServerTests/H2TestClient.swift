import CNGHTTP2
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

@testable import GRPCProtocol
@testable import GRPCServer

/// A gRPC client over one HTTP/2 connection for the transport tests: nghttp2's client session
/// as a sans-I/O codec on a NIO channel, with each call's header blocks, DATA and close recorded.
/// Requests are framed by hand, so a test can send what no stock client would (compressed flags,
/// corrupt bodies, messages one at a time on a stream left open).
///
/// Everything touching the session runs on the channel's event loop; tests wait on recorded
/// events with ``wait(for:_:)``, which gives up after a deadline.
final class H2TestClient: @unchecked Sendable {
    // @unchecked Sendable: every mutable property is touched only on `channel.eventLoop`.

    /// What a call received and what it still has to send.
    struct Call {
        /// Each HEADERS block received, fields in order (response headers, then trailers).
        var headerBlocks: [[(name: String, value: String)]] = []
        /// The DATA received.
        var data: [UInt8] = []
        /// The stream is closed; `closeCode` is its RST_STREAM code (0: closed normally).
        var closed = false
        var closeCode: UInt32 = 0
        /// Bytes queued for DATA frames; `endAfterPending` ends the stream once they are sent.
        var pending: [UInt8] = []
        var endAfterPending = false
        var deferred = false
        /// Bytes of DATA sent.
        var sentBytes = 0

        /// The first value of `name` in the response headers (the first block).
        func header(_ name: String) -> String? {
            headerBlocks.first?.first { $0.name == name }?.value
        }

        /// The first value of `name` in the last block (the trailers, or Trailers-Only headers).
        func trailer(_ name: String) -> String? {
            headerBlocks.last?.first { $0.name == name }?.value
        }

        /// `grpc-status` once the call is over.
        var status: Int? { closed ? trailer("grpc-status").flatMap { Int($0) } : nil }

        /// The gRPC messages received: compressed flag and bytes.
        var messages: [(compressed: Bool, bytes: [UInt8])] {
            var out: [(Bool, [UInt8])] = []
            var index = 0
            while data.count - index >= 5 {
                let length = Int(data[index + 1]) << 24 | Int(data[index + 2]) << 16 | Int(data[index + 3]) << 8 | Int(data[index + 4])
                guard data.count - index - 5 >= length else { break }
                out.append((data[index] == 1, Array(data[(index + 5)..<(index + 5 + length)])))
                index += 5 + length
            }
            return out
        }
    }

    let channel: any Channel
    private var session: OpaquePointer?
    private(set) var calls: [Int32: Call] = [:]
    private var waiters: [(id: Int, check: () -> Bool, continuation: CheckedContinuation<Bool, Never>)] = []
    private var nextWaiter = 0
    /// Set when the connection closed: nothing more arrives, so a wait not met by then fails at once.
    private var connectionClosed = false

    private init(channel: any Channel) {
        self.channel = channel
    }

    /// Connects to `127.0.0.1:port`; the preface goes out from the event loop as soon as the
    /// connection is up, whatever the test's task is doing (a server closes a connection whose
    /// preface is late: its preface timeout).
    static func connect(port: Int, group: any EventLoopGroup) async throws -> H2TestClient {
        let handler = Handler()
        let channel = try await ClientBootstrap(group: group)
            .channelInitializer { channel in
                handler.client = H2TestClient(channel: channel)
                return channel.pipeline.addHandler(handler)
            }
            .connect(host: "127.0.0.1", port: port).get()
        // Set on the loop before `connect` completed.
        return try await channel.eventLoop.submit { handler.client! }.get()
    }

    /// Closes the connection and deletes the session.
    func close() async {
        try? await channel.close()
        try? await channel.eventLoop.submit {
            nghttp2_session_del(self.session)
            self.session = nil
        }.get()
    }

    fileprivate func start() {
        var callbacks: OpaquePointer?
        nghttp2_session_callbacks_new(&callbacks)
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, userData in
            let client = H2TestClient.from(userData)
            client.calls[groupd_nghttp2_frame_stream_id(frame!), default: Call()].headerBlocks.append([])
            return 0
        }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) { _, frame, name, nameLength, value, valueLength, _, userData in
            let client = H2TestClient.from(userData)
            let id = groupd_nghttp2_frame_stream_id(frame!)
            let field = (
                String(decoding: UnsafeBufferPointer(start: name, count: nameLength), as: UTF8.self),
                String(decoding: UnsafeBufferPointer(start: value, count: valueLength), as: UTF8.self)
            )
            client.calls[id, default: Call()].headerBlocks[client.calls[id]!.headerBlocks.count - 1].append(field)
            return 0
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, streamID, data, length, userData in
            H2TestClient.from(userData).calls[streamID, default: Call()].data += UnsafeBufferPointer(start: data, count: length)
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamID, code, userData in
            let client = H2TestClient.from(userData)
            client.calls[streamID, default: Call()].closed = true
            client.calls[streamID, default: Call()].closeCode = code
            return 0
        }
        let userData = Unmanaged.passUnretained(self).toOpaque()
        nghttp2_session_client_new(&session, callbacks, userData)
        nghttp2_submit_settings(session, 0, nil, 0)
        flush()
    }

    private static func from(_ userData: UnsafeMutableRawPointer?) -> H2TestClient {
        Unmanaged<H2TestClient>.fromOpaque(userData!).takeUnretainedValue()
    }

    fileprivate func received(_ buffer: ByteBuffer) {
        guard let session else { return }
        _ = buffer.withUnsafeReadableBytes { bytes in
            groupd_nghttp2_mem_recv(session, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count)
        }
        flush()
    }

    private func flush() {
        guard let session else { return }
        var out = channel.allocator.buffer(capacity: 0)
        while true {
            var chunk: UnsafePointer<UInt8>?
            let count = groupd_nghttp2_mem_send(session, &chunk)
            if count <= 0 { break }
            out.writeBytes(UnsafeRawBufferPointer(start: chunk, count: Int(count)))
        }
        if out.readableBytes > 0 { channel.writeAndFlush(out, promise: nil) }
        checkWaiters()
    }

    private func checkWaiters() {
        var still: [(id: Int, check: () -> Bool, continuation: CheckedContinuation<Bool, Never>)] = []
        for waiter in waiters {
            if waiter.check() {
                waiter.continuation.resume(returning: true)
            } else if connectionClosed {
                waiter.continuation.resume(returning: false)
            } else {
                still.append(waiter)
            }
        }
        waiters = still
    }

    /// The connection closed (on the event loop).
    fileprivate func closed() {
        connectionClosed = true
        checkWaiters()
    }

    /// The call's record.
    func call(_ id: Int32) async throws -> Call {
        try await channel.eventLoop.submit { self.calls[id] ?? Call() }.get()
    }

    /// Waits until `condition` holds for call `id` (checked after every read and write).
    /// - Returns: The call's record then.
    /// - Throws: When it does not hold within `seconds`.
    @discardableResult
    func wait(for id: Int32, seconds: Int64 = 60, _ condition: @escaping @Sendable (Call) -> Bool) async throws -> Call {
        let met = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            channel.eventLoop.execute {
                if condition(self.calls[id] ?? Call()) {
                    continuation.resume(returning: true)
                    return
                }
                if self.connectionClosed {
                    continuation.resume(returning: false)
                    return
                }
                let waiter = self.nextWaiter
                self.nextWaiter += 1
                self.waiters.append((waiter, { condition(self.calls[id] ?? Call()) }, continuation))
                self.channel.eventLoop.scheduleTask(in: .seconds(seconds)) {
                    guard let index = self.waiters.firstIndex(where: { $0.id == waiter }) else { return }
                    self.waiters.remove(at: index).continuation.resume(returning: false)
                }
            }
        }
        let (record, closed) = try await channel.eventLoop.submit { (self.calls[id] ?? Call(), self.connectionClosed) }.get()
        guard met else { throw TimedOut(call: "\(id)", record: "\(record)", connectionClosed: closed) }
        return record
    }

    /// A wait that was not met: within its bound, or before the connection closed.
    struct TimedOut: Error {
        var call: String
        var record: String
        /// Whether the connection had closed (the wait failed then, not at its bound).
        var connectionClosed: Bool
    }

    /// Opens a call to `path` with the usual gRPC headers and `extra` ones.
    /// - Returns: The stream id.
    func open(_ path: String, headers extra: [(String, String)] = []) async throws -> Int32 {
        try await channel.eventLoop.submit {
            var fields = HeaderFields()
            for (name, value) in [
                (":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "localhost"),
                ("content-type", "application/grpc"), ("te", "trailers"),
            ] + extra {
                fields.append(name: name, value: Array(value.utf8))
            }
            var provider = nghttp2_data_provider()
            provider.read_callback = { _, streamID, buffer, length, flags, _, userData in
                let client = H2TestClient.from(userData)
                return client.fill(streamID: streamID, buffer: UnsafeMutableRawBufferPointer(start: buffer, count: length), flags: flags!)
            }
            var id: Int32 = 0
            fields.withNVArray { nva, count in
                id = nghttp2_submit_request(self.session, nil, nva, count, &provider, nil)
            }
            self.calls[id] = Call()
            self.flush()
            return id
        }.get()
    }

    private func fill(streamID: Int32, buffer: UnsafeMutableRawBufferPointer, flags: UnsafeMutablePointer<UInt32>) -> Int {
        guard var call = calls[streamID] else { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
        let count = min(buffer.count, call.pending.count)
        if count > 0 {
            call.pending.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
            call.pending.removeFirst(count)
            call.sentBytes += count
        }
        defer { calls[streamID] = call }
        if call.pending.isEmpty && call.endAfterPending {
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            return count
        }
        if count == 0 {
            call.deferred = true
            return Int(NGHTTP2_ERR_DEFERRED.rawValue)
        }
        return count
    }

    /// Sends raw DATA bytes on call `id`; `end` half-closes once they are sent.
    func send(_ id: Int32, bytes: [UInt8], end: Bool = false) async throws {
        try await channel.eventLoop.submit {
            self.calls[id]!.pending += bytes
            if end { self.calls[id]!.endAfterPending = true }
            if self.calls[id]!.deferred {
                self.calls[id]!.deferred = false
                nghttp2_session_resume_data(self.session, id)
            }
            self.flush()
        }.get()
    }

    /// Sends one gRPC message on call `id` (`compressed` sets the prefix flag as given).
    func send(_ id: Int32, message: [UInt8], compressed: Bool = false, end: Bool = false) async throws {
        let length = UInt32(message.count)
        let prefix: [UInt8] = [compressed ? 1 : 0, UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)]
        try await send(id, bytes: prefix + message, end: end)
    }

    /// Half-closes call `id` (after what is pending).
    func halfClose(_ id: Int32) async throws {
        try await send(id, bytes: [], end: true)
    }

    /// Resets call `id` with CANCEL.
    func reset(_ id: Int32) async throws {
        try await channel.eventLoop.submit {
            nghttp2_submit_rst_stream(self.session, 0, id, UInt32(NGHTTP2_CANCEL.rawValue))
            self.flush()
        }.get()
    }

    /// The flow-control window the server left call `id` for sending.
    func sendWindow(_ id: Int32) async throws -> Int32 {
        try await channel.eventLoop.submit { nghttp2_session_get_stream_remote_window_size(self.session, id) }.get()
    }

    /// A unary call: `message` (compressed flag as given) and the end of the request in one go.
    func unary(_ path: String, message: [UInt8], compressed: Bool = false, headers: [(String, String)] = []) async throws -> Call {
        let id = try await open(path, headers: headers)
        try await send(id, message: message, compressed: compressed, end: true)
        return try await wait(for: id) { $0.closed }
    }

    private final class Handler: ChannelInboundHandler, @unchecked Sendable {
        // @unchecked Sendable: used on its channel's event loop only.
        typealias InboundIn = ByteBuffer
        /// Set by the channel initializer, before any event.
        var client: H2TestClient?

        /// Starts the session and sends the preface the moment the connection is up.
        func channelActive(context: ChannelHandlerContext) {
            client?.start()
            context.fireChannelActive()
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            client?.received(unwrapInboundIn(data))
        }

        func channelInactive(context: ChannelHandlerContext) {
            client?.closed()
            context.fireChannelInactive()
        }
    }
}
