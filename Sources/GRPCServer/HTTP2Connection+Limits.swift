import CNGHTTP2
import GRPCProtocol
import Logging
import NIOCore

/// Until when a call holds a place in the budget of calls without a verified token.
enum UnauthenticatedPlace {
    /// It holds none (admitted on a verified token, or not admitted).
    case none
    /// A method that needs a token: until its handler starts (and checks the token first).
    case untilDispatch
    /// A method that needs none (health, reflection): until its stream closes.
    case untilClose
}

/// The defences against silent, half-open and unused connections (the preface and
/// unused-connection timeouts, eviction at `maxConnections`) and the budget of calls without a
/// verified token (``TransportLimits``).
extension HTTP2Connection {
    /// The debug data of the GOAWAY sent when the preface came without SETTINGS in time.
    static let prefaceTimeoutDebugData: [UInt8] = Array("preface_timeout".utf8)
    /// The debug data of the GOAWAY sent to a connection that never opened a stream in time.
    static let unusedTimeoutDebugData: [UInt8] = Array("idle_timeout".utf8)
    /// The debug data of the GOAWAY sent to a connection evicted at `maxConnections`.
    static let evictionDebugData: [UInt8] = Array("idle_eviction".utf8)

    /// The client's address for log lines.
    var peerForLog: String {
        peer.isEmpty ? (context?.channel.remoteAddress?.peerDescription ?? "?") : peer
    }

    // MARK: Preface and unused-connection timeouts

    /// HTTP/2 can start now (at accept, or once the TLS handshake completed): the preface and
    /// unused-connection clocks start.
    func startHTTP2Clock(context: ChannelHandlerContext) {
        guard management.http2StartedAt == nil else { return }
        management.http2Started(at: context.eventLoop.now)
        if let due = management.prefaceDeadline {
            timers.preface = schedule(.preface, at: due, context: context)
        }
        if let due = management.unusedDeadline {
            timers.unused = schedule(.unused, at: due, context: context)
        }
    }

    /// The client sent a SETTINGS frame (not an ACK): the first completes its preface.
    func onSettingsReceived() {
        guard management.preface != .complete else { return }
        management.clientSettingsReceived()
        activity?.prefaceCompleted()
        if let preface = timers.preface {
            preface.cancel()
            timers.preface = nil
        }
    }

    func prefaceTimerFired(at now: NIODeadline, context: ChannelHandlerContext) {
        let seconds = Double(configuration.limits.prefaceTimeout.nanoseconds) / 1e9
        switch management.prefaceTimerFired(at: now) {
        case .satisfied:
            return
        case .wait(let due):
            timers.preface = schedule(.preface, at: due, context: context)
            return
        case .close:
            defenceLog.record(.prefaceTimeout, "closing connection: no HTTP/2 connection preface within preface_timeout_seconds", metadata: [
                "peer": "\(peerForLog)", "preface_timeout_seconds": "\(seconds)",
            ])
            configuration.callObserver?.defenceTriggered(.prefaceTimeout)
            closeConnection()
        case .goAwayAndClose:
            defenceLog.record(.prefaceTimeout, "closing connection: preface without SETTINGS within preface_timeout_seconds: GOAWAY PROTOCOL_ERROR", metadata: [
                "peer": "\(peerForLog)", "preface_timeout_seconds": "\(seconds)",
            ])
            configuration.callObserver?.defenceTriggered(.prefaceTimeout)
            // No stream can exist before the client's SETTINGS: the connection closes once this
            // GOAWAY is written.
            submitGoAway(code: NGHTTP2_PROTOCOL_ERROR, debug: Self.prefaceTimeoutDebugData)
            terminating = true
            flush()
        }
    }

    func unusedTimerFired(at now: NIODeadline, context: ChannelHandlerContext) {
        switch management.unusedTimerFired(at: now) {
        case .wait(let due):
            timers.unused = schedule(.unused, at: due, context: context)
        case .goAway:
            guard !draining else { return }
            defenceLog.record(.unusedConnectionTimeout, "closing connection: no stream opened within transport.idle_timeout_seconds: GOAWAY NO_ERROR", metadata: [
                "peer": "\(peerForLog)",
                "idle_timeout_seconds": "\(Double(configuration.limits.unusedConnectionTimeout?.nanoseconds ?? 0) / 1e9)",
            ])
            configuration.callObserver?.defenceTriggered(.unusedConnectionTimeout)
            // A stream racing this GOAWAY is above its last stream id: the client retries it on a
            // new connection (RFC 9113 §6.8).
            submitGoAway(code: NGHTTP2_NO_ERROR, debug: Self.unusedTimeoutDebugData)
            flush()
        case .stop, .sendPing, .close:
            break
        }
    }

    // MARK: Eviction at maxConnections

    /// The server evicts this connection to take a new one (it had no open stream when chosen):
    /// one that sent nothing valid is closed without a word; another gets GOAWAY `NO_ERROR`
    /// (debug data `idle_eviction`) and closes once a stream that raced it, if any, has ended.
    func evict() {
        guard session != nil, !closing else { return }
        configuration.callObserver?.defenceTriggered(.idleEviction)
        if management.preface == .awaitingMagic {
            defenceLog.record(.idleEviction, "max_connections reached: evicting a connection that sent no HTTP/2 preface", metadata: [
                "peer": "\(peerForLog)", "max_connections": "\(configuration.maxConnections)",
            ])
            closeConnection()
            return
        }
        defenceLog.record(.idleEviction, "max_connections reached: evicting a connection without open streams: GOAWAY NO_ERROR", metadata: [
            "peer": "\(peerForLog)", "max_connections": "\(configuration.maxConnections)",
            "used": "\(management.everOpenedStream)",
        ])
        guard !finalGoAwaySubmitted else {
            flush()
            return
        }
        submitGoAway(code: NGHTTP2_NO_ERROR, debug: Self.evictionDebugData)
        flush()
    }

    /// Queues a GOAWAY naming the last stream processed, after which the connection closes as
    /// soon as it has no stream (or at once, with ``terminating``).
    private func submitGoAway(code: nghttp2_error_code, debug: [UInt8]) {
        guard let session else { return }
        debug.withUnsafeBufferPointer { debug in
            _ = nghttp2_submit_goaway(
                session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nghttp2_session_get_last_proc_stream_id(session),
                UInt32(code.rawValue), debug.baseAddress, debug.count)
        }
        draining = true
        finalGoAwaySubmitted = true
    }

    // MARK: Calls without a verified token

    /// Admits a call whose request headers are in, or refuses it with
    /// ``TransportLimits/unauthenticatedCallsRefusal`` when the budget of calls without a verified
    /// token is spent and the call carries no token that verifies.
    /// - Returns: Whether the call goes on.
    func admitUnauthenticated(_ stream: HTTP2Stream, route: ServerRouter.Route) -> Bool {
        if unauthenticatedBudget.acquire() {
            stream.unauthenticatedPlace = route.needsToken ? .untilDispatch : .untilClose
            return true
        }
        if route.needsToken, let verifier = router.tokenVerifier, verifier(stream.metadata) {
            return true
        }
        configuration.callObserver?.defenceTriggered(.unauthenticatedCallRefused)
        if !loggedUnauthenticatedRefusal {
            // Once per connection: a flood of refused calls must not flood the log too.
            loggedUnauthenticatedRefusal = true
            defenceLog.record(.unauthenticatedCallRefused, "refusing calls without a verified token: transport.max_unauthenticated_calls in flight", metadata: [
                "peer": "\(peerForLog)", "path": "\(stream.path)",
                "max_unauthenticated_calls": "\(unauthenticatedBudget.limit)",
            ])
        }
        respond(stream, .status(configuration.limits.unauthenticatedCallsRefusal))
        return false
    }

    /// The handler of a call of a method that needs a token starts: it checks the token first
    /// and ends the call at once if it does not verify, so the call's place is free.
    func releaseUnauthenticatedPlaceAtDispatch(_ stream: HTTP2Stream) {
        guard stream.unauthenticatedPlace == .untilDispatch else { return }
        stream.unauthenticatedPlace = .none
        unauthenticatedBudget.release()
    }

    /// The stream is gone: its place, if it still holds one, is free.
    func releaseUnauthenticatedPlace(_ stream: HTTP2Stream) {
        guard stream.unauthenticatedPlace != .none else { return }
        stream.unauthenticatedPlace = .none
        unauthenticatedBudget.release()
    }
}
