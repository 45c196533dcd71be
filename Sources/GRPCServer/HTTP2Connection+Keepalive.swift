import CNGHTTP2
import GRPCProtocol
import Logging
import NIOCore

/// Keepalive PINGs, the idle and age limits, and the policing of client PINGs: the
/// connection's timers around its ``ConnectionManagement``. Timers are the event loop's
/// scheduled tasks, so an `EmbeddedEventLoop` drives them with `advanceTime`.
extension HTTP2Connection {
    /// The connection's timers; each is cancelled when the connection goes.
    struct ManagementTimers {
        var keepalive: Scheduled<Void>?
        var pingTimeout: Scheduled<Void>?
        var idle: Scheduled<Void>?
        var age: Scheduled<Void>?
        var ageGrace: Scheduled<Void>?
        var preface: Scheduled<Void>?
        var unused: Scheduled<Void>?

        /// Cancel every timer (their tasks hold the connection until they run).
        mutating func cancelAll() {
            for task in [keepalive, pingTimeout, idle, age, ageGrace, preface, unused] { task?.cancel() }
            self = ManagementTimers()
        }
    }

    /// Which timer fired.
    enum ManagementTimer {
        case keepalive, pingTimeout, idle, age, ageGrace, preface, unused
    }

    /// The debug data of the GOAWAY sent for too many PINGs; gRPC clients recognise it and
    /// double their keepalive time.
    static let tooManyPingsDebugData: [UInt8] = Array("too_many_pings".utf8)

    /// Starts the clock of a new connection: keepalive, idle and age timers as configured.
    func startConnectionManagement(context: ChannelHandlerContext) {
        let now = context.eventLoop.now
        management = ConnectionManagement(settings: configuration.keepalive, limits: configuration.limits, now: now)
        if let due = management.firstKeepaliveDeadline {
            timers.keepalive = schedule(.keepalive, at: due, context: context)
        }
        if let due = management.idleDeadline {
            timers.idle = schedule(.idle, at: due, context: context)
        }
        if let due = management.ageDeadline(jitter: ConnectionManagement.randomAgeJitter()) {
            timers.age = schedule(.age, at: due, context: context)
        }
        // On TLS, HTTP/2 starts once the handshake completed (`TLSUserEvent.handshakeCompleted`).
        if configuration.tls == nil { startHTTP2Clock(context: context) }
    }

    func schedule(_ timer: ManagementTimer, at deadline: NIODeadline, context: ChannelHandlerContext) -> Scheduled<Void> {
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        return context.eventLoop.scheduleTask(deadline: deadline) { bound.value.timerFired(timer) }
    }

    private func timerFired(_ timer: ManagementTimer) {
        guard let context, session != nil, !closing else { return }
        let now = context.eventLoop.now
        switch timer {
        case .keepalive:
            timers.keepalive = nil
            let action = management.keepaliveTimerFired(at: now)
            if case .sendPing = action { sendKeepalivePing() }
            apply(action, for: .keepalive, context: context)
        case .pingTimeout:
            timers.pingTimeout = nil
            let action = management.pingTimeoutFired(at: now)
            if action == .close {
                logger.debug("closing connection: no answer to the keepalive PING", metadata: [
                    "timeout_seconds": "\(Double(configuration.keepalive.timeout.nanoseconds) / 1e9)",
                ])
            }
            // The keepalive timer takes over again after an answer.
            apply(action, for: .keepalive, context: context)
        case .idle:
            timers.idle = nil
            let action = management.idleTimerFired(at: now)
            if action == .goAway { logger.debug("connection idle for max_connection_idle: GOAWAY") }
            apply(action, for: .idle, context: context)
        case .age:
            timers.age = nil
            logger.debug("connection reached max_connection_age: GOAWAY")
            beginDraining()
            let grace = configuration.keepalive.maxConnectionAgeGrace ?? configuration.drainTimeout
            timers.ageGrace = schedule(.ageGrace, at: now + grace, context: context)
        case .preface:
            timers.preface = nil
            prefaceTimerFired(at: now, context: context)
        case .unused:
            timers.unused = nil
            unusedTimerFired(at: now, context: context)
        case .ageGrace:
            timers.ageGrace = nil
            if !streams.isEmpty {
                logger.debug("max_connection_age_grace over: closing with calls in flight", metadata: ["calls": "\(streams.count)"])
            }
            closeConnection()
        }
    }

    private func apply(_ action: ConnectionManagement.TimerAction, for timer: ManagementTimer, context: ChannelHandlerContext) {
        switch action {
        case .wait(let deadline):
            let task = schedule(timer, at: deadline, context: context)
            if timer == .idle { timers.idle = task } else { timers.keepalive = task }
        case .sendPing(let timeoutAt):
            timers.pingTimeout = schedule(.pingTimeout, at: timeoutAt, context: context)
        case .goAway:
            beginDraining()
        case .close:
            closeConnection()
        case .stop:
            break
        }
    }

    private func sendKeepalivePing() {
        guard let session else { return }
        nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil)
        flush()
    }

    // MARK: Events (on the loop; the nghttp2 ones from inside mem_recv / mem_send)

    /// Bytes arrived from the client.
    func managementRead(context: ChannelHandlerContext) {
        management.read(at: context.eventLoop.now)
    }

    /// A stream was opened by the client.
    func managementStreamOpened() {
        management.streamOpened()
        activity?.streamOpened(openStreams: streams.count)
        if let unused = timers.unused {
            unused.cancel()
            timers.unused = nil
        }
    }

    /// A stream closed; when it was the last one, the idle clock starts.
    func managementStreamClosed() {
        guard streams.isEmpty, let context else {
            activity?.streamClosed(openStreams: streams.count, at: nil)
            return
        }
        let now = context.eventLoop.now
        activity?.streamClosed(openStreams: 0, at: now)
        management.lastStreamClosed(at: now)
        if timers.idle == nil, let due = management.idleDeadline {
            timers.idle = schedule(.idle, at: due, context: context)
        }
    }

    /// A PING frame arrived (nghttp2 has queued its ACK already, for a PING that is not one).
    func onPingReceived(ack: Bool) {
        guard !ack, let context, let session else { return }
        let verdict = management.clientPing(at: context.eventLoop.now, hasOpenStreams: !streams.isEmpty)
        guard verdict == .tooManyPings, !terminating else { return }
        logger.debug("client sent too many PINGs: GOAWAY ENHANCE_YOUR_CALM", metadata: [
            "min_ping_interval_seconds": "\(Double(configuration.keepalive.minPingInterval.nanoseconds) / 1e9)",
            "permit_without_stream": "\(configuration.keepalive.permitWithoutStream)",
        ])
        Self.tooManyPingsDebugData.withUnsafeBufferPointer { debug in
            _ = nghttp2_submit_goaway(
                session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nghttp2_session_get_last_proc_stream_id(session),
                UInt32(NGHTTP2_ENHANCE_YOUR_CALM.rawValue), debug.baseAddress, debug.count)
        }
        // The connection closes once this GOAWAY is written, calls in flight or not (as grpc-go).
        draining = true
        finalGoAwaySubmitted = true
        terminating = true
    }
}
