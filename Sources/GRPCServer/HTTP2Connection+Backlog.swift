import CNGHTTP2
import GRPCProtocol
import Logging
import NIOCore

/// Clients that do not read: the bytes a connection holds queued for its client, the caps on
/// them (``TransportLimits``), and the stalled-write timeout.
///
/// A client that never opens its flow-control window (SETTINGS_INITIAL_WINDOW_SIZE 0 and no
/// WINDOW_UPDATE), or never reads its socket, would otherwise keep every stream and its queued
/// response for as long as it stays connected.
extension HTTP2Connection {
    /// The connection's queued bytes and the watch over them.
    struct Backlog {
        /// The bytes its streams hold for the client (``HTTP2Stream/queuedBytes``, summed).
        var bytes = 0
        /// The most `bytes` ever was.
        var peak = 0
        /// Set when streams were shed for the caps; new streams are refused until `bytes` is
        /// under half the connection's cap.
        var refusingStreams = false
        /// Whether a DATA frame was filled since the stall timer was armed.
        var progressed = false
        /// The stall timer, while armed.
        var stallCheck: Scheduled<Void>?
        /// Whether a defence acted on this connection (its memory is worth trimming when it goes).
        var defended = false
    }

    /// Adds a stream's change of queued bytes to the connection's and the server's count.
    @inline(__always)
    func accountQueued(_ delta: Int) {
        guard delta != 0 else { return }
        backlog.bytes += delta
        budget.add(delta)
        if delta > 0 {
            if backlog.bytes > backlog.peak { backlog.peak = backlog.bytes }
            if backlog.stallCheck == nil { armStallCheck() }
        }
    }

    /// A stream queued a message: over a cap, shed the streams the client does not read.
    func checkQueuedBytes() {
        let limits = configuration.limits
        guard backlog.bytes > limits.maxQueuedBytesPerConnection || budget.isOverLimit else { return }
        shedStalledStreams()
    }

    /// Resets streams blocked by the client (its window spent, or the socket not writable),
    /// newest first, until the connection and the server are under their caps.
    func shedStalledStreams() {
        guard let session, let context else { return }
        let limit = configuration.limits.maxQueuedBytesPerConnection
        let socketBlocked = !context.channel.isWritable
        let connectionWindowSpent = nghttp2_session_get_remote_window_size(session) <= 0
        let waiting = streams.values.filter { $0.queuedBytes > 0 }.sorted { $0.id > $1.id }
        var shed = 0
        var shedBytes = 0
        for stream in waiting {
            guard backlog.bytes > limit || budget.isOverLimit else { break }
            let blocked = socketBlocked || connectionWindowSpent || nghttp2_session_get_stream_remote_window_size(session, stream.id) <= 0
            guard blocked else { continue }
            shedBytes += stream.queuedBytes
            resetStalled(stream, session: session)
            shed += 1
        }
        guard shed > 0 else { return }
        backlog.refusingStreams = true
        backlog.defended = true
        budget.releaseFreedMemorySoon()
        defenceLog.record(.stalledStreamReset, "reset streams of a client that does not read its responses", metadata: [
            "peer": "\(peerAddress)", "streams_reset": "\(shed)", "bytes_released": "\(shedBytes)",
            "queued_bytes": "\(backlog.bytes)", "server_queued_bytes": "\(budget.queuedBytes)",
        ])
    }

    /// RST_STREAM(ENHANCE_YOUR_CALM) for one stream; its queued messages are dropped now.
    private func resetStalled(_ stream: HTTP2Stream, session: OpaquePointer) {
        streams.removeValue(forKey: stream.id)
        accountQueued(-stream.queuedBytes)
        stream.dropOutbound()
        if stream.state.shed() {
            observeCallEnd(stream, status: GRPCStatus(.resourceExhausted, "the client does not read its responses"))
        }
        if stream.receivedBytes > stream.consumedBytes {
            nghttp2_session_consume_connection(session, stream.receivedBytes - stream.consumedBytes)
        }
        stream.abandon()
        managementStreamClosed()
        observeStreamGone(stream)
        nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream.id, UInt32(NGHTTP2_ENHANCE_YOUR_CALM.rawValue))
        configuration.callObserver?.defenceTriggered(.stalledStreamReset)
    }

    /// Whether a new stream must be refused (REFUSED_STREAM): the connection shed streams and
    /// has not come back under half its cap.
    func refusesNewStream() -> Bool {
        guard backlog.refusingStreams else { return false }
        if backlog.bytes <= configuration.limits.maxQueuedBytesPerConnection / 2 {
            backlog.refusingStreams = false
            return false
        }
        return true
    }

    /// Refuses stream `streamID` at its first HEADERS frame; no call starts.
    func refuseStream(_ streamID: Int32) {
        guard let session else { return }
        nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, UInt32(NGHTTP2_REFUSED_STREAM.rawValue))
        configuration.callObserver?.defenceTriggered(.queuedBytesStreamRefused)
    }

    // MARK: Stalled writes

    /// Arms the stall timer: it fires after the stalled-write timeout.
    func armStallCheck() {
        guard let context, !closing else { return }
        backlog.progressed = false
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        backlog.stallCheck = context.eventLoop.scheduleTask(in: configuration.limits.stalledWriteTimeout) {
            bound.value.stallCheckFired()
        }
    }

    /// A whole timeout passed since the timer was armed: bytes still queued (or the socket not
    /// writable) and no DATA frame filled meanwhile is a stalled client.
    private func stallCheckFired() {
        backlog.stallCheck = nil
        guard let context, session != nil, !closing else { return }
        guard backlog.bytes > 0 || !context.channel.isWritable else { return }  // re-armed at the next message
        if backlog.progressed {
            armStallCheck()
            return
        }
        closeStalled()
    }

    /// GOAWAY(ENHANCE_YOUR_CALM, "write_stalled") and close, without waiting for a client that
    /// does not read to take the frames still queued.
    private func closeStalled() {
        guard let session, let context else { return }
        backlog.defended = true
        defenceLog.record(.stalledConnectionClosed, "closing connection: the client read nothing of its queued responses for the stalled-write timeout", metadata: [
            "peer": "\(peerAddress)", "queued_bytes": "\(backlog.bytes)", "streams": "\(streams.count)",
            "timeout_seconds": "\(Double(configuration.limits.stalledWriteTimeout.nanoseconds) / 1e9)",
        ])
        configuration.callObserver?.defenceTriggered(.stalledConnectionClosed)
        let debug = Self.writeStalledDebugData
        _ = debug.withUnsafeBufferPointer { bytes in
            nghttp2_submit_goaway(
                session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nghttp2_session_get_last_proc_stream_id(session),
                UInt32(NGHTTP2_ENHANCE_YOUR_CALM.rawValue), bytes.baseAddress, bytes.count)
        }
        // Only the control frames: DATA for a client that does not read would only sit in the
        // socket's buffer.
        for stream in streams.values { stream.dropOutbound() }
        terminating = true
        var out = context.channel.allocator.buffer(capacity: 256)
        inSession = true
        while out.readableBytes < 1 << 16 {
            var chunk: UnsafePointer<UInt8>?
            let count = groupd_nghttp2_mem_send(session, &chunk)
            if count <= 0 { break }
            out.writeBytes(UnsafeRawBufferPointer(start: chunk, count: Int(count)))
        }
        inSession = false
        context.writeAndFlush(wrapOutboundOut(out), promise: nil)
        closeConnection()
    }

    /// The GOAWAY debug data of a connection closed for a stalled client.
    static let writeStalledDebugData: [UInt8] = Array("write_stalled".utf8)

    /// The client's address for log lines (`ip:port`).
    var peerAddress: String {
        if !peer.isEmpty { return peer }
        return context?.channel.remoteAddress?.peerDescription ?? "?"
    }

    /// The connection is going: its queued bytes leave the server's count, and the memory of a
    /// large backlog goes back to the system.
    func releaseBacklog() {
        backlog.stallCheck?.cancel()
        backlog.stallCheck = nil
        budget.add(-backlog.bytes)
        backlog.bytes = 0
        if backlog.defended || backlog.peak >= QueuedBytesBudget.trimThreshold {
            backlog.peak = 0
            backlog.defended = false
            budget.releaseFreedMemorySoon()
        }
    }
}
