import GRPCProtocol
import Logging
import NIOCore
import NIOTLS

/// Sits between the TLS handler and the HTTP/2 connection: closes a connection whose handshake
/// did not negotiate ALPN `h2`, or `http/1.1` when Connect calls are served over HTTP/1.1 (a
/// client with no ALPN at all is neither a gRPC nor a Connect client), and one whose handshake
/// has not completed within the handshake timeout (a client that connects and stays silent, or
/// a plaintext client that waits for the server to speak first).
///
/// Reads reach the connection only after the handshake completed with an accepted protocol.
final class TLSHandshakeGate: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// Where the handshake is.
    enum State: Equatable {
        /// Waiting for `TLSUserEvent.handshakeCompleted`.
        case handshaking
        /// Completed with an accepted protocol: everything passes.
        case open
        /// Refused (wrong ALPN or timeout): nothing passes, the channel is closing.
        case refused
    }

    private let handshakeTimeout: TimeAmount
    private let logger: Logger
    /// Whether ALPN `http/1.1` is accepted beside `h2`.
    private let acceptsHTTP1: Bool
    private(set) var state = State.handshaking
    private var timeoutTask: Scheduled<Void>?

    /// - Parameters:
    ///   - handshakeTimeout: How long the handshake may take from the connection's start.
    ///   - logger: Where refusals are logged (at debug: clients cause them, not the server).
    ///   - acceptsHTTP1: Whether ALPN `http/1.1` is accepted beside `h2` (Connect served).
    init(handshakeTimeout: TimeAmount, logger: Logger, acceptsHTTP1: Bool = false) {
        self.handshakeTimeout = handshakeTimeout
        self.logger = logger
        self.acceptsHTTP1 = acceptsHTTP1
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timeoutTask = context.eventLoop.scheduleTask(in: handshakeTimeout) {
            let (gate, context) = bound.value
            guard gate.state == .handshaking else { return }
            gate.refuse(context: context, because: "the TLS handshake did not complete in time")
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timeoutTask?.cancel()
        timeoutTask = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        timeoutTask?.cancel()
        timeoutTask = nil
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted(let negotiated) = event as? TLSUserEvent, state == .handshaking {
            timeoutTask?.cancel()
            timeoutTask = nil
            if negotiated == "h2" || (acceptsHTTP1 && negotiated == "http/1.1") {
                state = .open
            } else {
                let accepted = acceptsHTTP1 ? "h2 or http/1.1" : "h2"
                refuse(context: context, because: "the client did not negotiate ALPN \(accepted) (negotiated: \(negotiated ?? "none"))")
                return
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard state == .open else { return }
        context.fireChannelRead(data)
    }

    private func refuse(context: ChannelHandlerContext, because reason: String) {
        state = .refused
        logger.debug("closing TLS connection", metadata: [
            "reason": "\(reason)", "peer": "\(context.remoteAddress.map { "\($0)" } ?? "?")",
        ])
        context.close(promise: nil)
    }
}
