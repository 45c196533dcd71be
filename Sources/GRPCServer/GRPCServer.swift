import GRPCProtocol
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL

/// A gRPC server over HTTP/2, each connection driven by nghttp2: with prior knowledge (h2c), or
/// over TLS with ALPN `h2` when the configuration has ``ServerConfiguration/tls``.
///
/// ```swift
/// let server = GRPCServer(configuration: config, router: router, group: group, logger: logger)
/// try await server.start()
/// // …
/// await server.shutdownGracefully()
/// ```
public final class GRPCServer: Sendable {
    private let configuration: ServerConfiguration
    private let router: ServerRouter
    private let group: any EventLoopGroup
    private let logger: Logger
    private let state: NIOLockedValueBox<State>
    /// Calls without a verified token in flight, over every connection.
    private let unauthenticatedBudget: UnauthenticatedCallBudget
    /// The bytes queued for clients over every connection, against `limits.maxQueuedBytes`.
    private let queuedBytesBudget: QueuedBytesBudget
    /// Logs the connections the defences end, throttled (shared by every connection).
    private let defenceLog: DefenceLog

    private struct State: Sendable {
        var listener: (any Channel)?
        var connections: ConnectionSlots<any Channel>
        var shuttingDown = false
        /// Connections closed at accept because `maxConnections` were open, each with a stream.
        var refusedConnections = 0
        /// Connections evicted at accept to make room under `maxConnections`.
        var evictedConnections = 0
    }

    /// Creates a server; nothing listens until `start()`.
    /// - Parameters:
    ///   - configuration: Address, limits and HTTP/2 settings.
    ///   - router: The methods served.
    ///   - group: The event loops that own the connections (one per core is usual).
    ///   - logger: Where connection-level problems are logged.
    public init(configuration: ServerConfiguration, router: ServerRouter, group: any EventLoopGroup, logger: Logger) {
        self.configuration = configuration
        self.router = router
        self.group = group
        self.logger = logger
        self.state = NIOLockedValueBox(State(connections: ConnectionSlots(limit: configuration.maxConnections)))
        self.unauthenticatedBudget = UnauthenticatedCallBudget(limit: configuration.limits.maxUnauthenticatedCalls)
        self.queuedBytesBudget = QueuedBytesBudget(limit: configuration.limits.maxQueuedBytes)
        self.defenceLog = DefenceLog(logger: logger)
    }

    /// Binds the listening socket and starts accepting connections.
    /// - Throws: When the address cannot be bound.
    public func start() async throws {
        let configuration = self.configuration
        let router = self.router
        let logger = self.logger
        let unauthenticatedBudget = self.unauthenticatedBudget
        let queuedBytesBudget = self.queuedBytesBudget
        let defenceLog = self.defenceLog
        let connect = configuration.connectEnabled
            ? ConnectProtocol(
                router: router, codec: configuration.connectCodec, maxMessageBytes: configuration.maxMessageBytes,
                responseCompression: configuration.responseCompression)
            : nil
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 1024)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelOption(.maxMessagesPerRead, value: UInt(max(1, configuration.limits.readsPerTurn)))
            .childChannelOption(.recvAllocator, value: AdaptiveRecvByteBufferAllocator(
                minimum: 64, initial: min(2048, configuration.limits.readBufferBytes), maximum: configuration.limits.readBufferBytes))
            .childChannelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    if let tls = configuration.tls {
                        // The context in force now: a reload (certificate rotation) reaches the
                        // connections accepted after it; open ones keep theirs.
                        try pipeline.addHandler(NIOSSLServerHandler(context: tls.context))
                        try pipeline.addHandler(TLSHandshakeGate(
                            handshakeTimeout: configuration.tlsHandshakeTimeout, logger: logger, acceptsHTTP1: connect != nil))
                    }
                    let activity = ConnectionActivity(acceptedAt: channel.eventLoop.now)
                    try pipeline.addHandler(
                        HTTP2Connection(
                            router: router, configuration: configuration, logger: logger, activity: activity,
                            unauthenticatedBudget: unauthenticatedBudget, queuedBytesBudget: queuedBytesBudget,
                            defenceLog: defenceLog, connect: connect)
                    )
                    self.track(channel, activity: activity)
                }
            }
        let listener = try await bootstrap.bind(host: configuration.host, port: configuration.port).get()
        state.withLockedValue { $0.listener = listener }
        var metadata: Logger.Metadata = ["address": "\(listener.localAddress.map { "\($0)" } ?? "?")"]
        if let credentials = configuration.tls?.credentials {
            metadata["tls"] = "\(credentials.files.clientCA == nil ? "on" : "on, client certificates required")"
            metadata["certificate_serial"] = "\(credentials.serialNumber)"
            metadata["certificate_not_after"] = "\(ServerTLS.utc(credentials.notValidAfter))"
        }
        logger.info("listening", metadata: metadata)
    }

    /// The port the server listens on, once started (useful with port 0).
    public var localPort: Int? {
        state.withLockedValue { $0.listener?.localAddress?.port }
    }

    /// How many connections are open.
    public var connectionCount: Int {
        state.withLockedValue { $0.connections.count }
    }

    /// The bytes queued for clients and not yet sent, over every connection (response messages,
    /// and the cost of each stream waiting to send; see ``TransportLimits``).
    public var queuedBytes: Int { queuedBytesBudget.queuedBytes }

    /// How many connections were closed at accept because `maxConnections` were open, each with a
    /// stream open.
    public var refusedConnectionCount: Int {
        state.withLockedValue { $0.refusedConnections }
    }

    /// How many connections without an open stream were evicted to make room for new ones.
    public var evictedConnectionCount: Int {
        state.withLockedValue { $0.evictedConnections }
    }

    /// Calls without a verified token in flight now (``TransportLimits/maxUnauthenticatedCalls``).
    public var unauthenticatedCallCount: Int {
        unauthenticatedBudget.count
    }

    private func track(_ channel: any Channel, activity: ConnectionActivity) {
        let id = ObjectIdentifier(channel)
        let limit = configuration.maxConnections
        enum Outcome {
            case accepted
            case evicting(any Channel)
            /// Refused; how many were refused for the limit so far (0: shutting down).
            case refused(Int)
        }
        let outcome = state.withLockedValue { state -> Outcome in
            if state.shuttingDown { return .refused(0) }
            switch state.connections.admit(id, channel, activity: activity) {
            case .accepted:
                return .accepted
            case .acceptedEvicting(_, let victim, _):
                state.evictedConnections += 1
                return .evicting(victim)
            case .refused:
                state.refusedConnections += 1
                return .refused(state.refusedConnections)
            }
        }
        switch outcome {
        case .accepted:
            break
        case .evicting(let victim):
            // The victim's loop decides how it leaves (close, or GOAWAY and close).
            victim.pipeline.fireUserInboundEventTriggered(HTTP2Connection.EvictionEvent())
        case .refused(let overLimit):
            if overLimit > 0 {
                configuration.callObserver?.defenceTriggered(.connectionRefused)
                // The first refusal and every thousandth after it: a flood must not flood the log too.
                if overLimit == 1 || overLimit % 1000 == 0 {
                    logger.warning("max_connections reached, each with a call in flight: closing new connections", metadata: [
                        "max_connections": "\(limit)", "refused_so_far": "\(overLimit)",
                        "peer": "\(channel.remoteAddress?.peerDescription ?? "?")",
                    ])
                }
            }
            channel.close(promise: nil)
            return
        }
        channel.closeFuture.whenComplete { [self] _ in
            state.withLockedValue { $0.connections.remove(id) }
        }
    }

    /// Stops accepting, sends GOAWAY on every connection, lets calls in flight finish within the
    /// drain timeout, then closes whatever is left.
    public func shutdownGracefully() async {
        let (listener, connections) = state.withLockedValue { state in
            state.shuttingDown = true
            return (state.listener, state.connections.connections)
        }
        try? await listener?.close()
        for channel in connections {
            channel.pipeline.fireUserInboundEventTriggered(HTTP2Connection.GracefulShutdownEvent())
        }
        let deadline = NIODeadline.now() + configuration.drainTimeout
        while connectionCount > 0 && NIODeadline.now() < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        let left = state.withLockedValue { $0.connections.connections }
        if !left.isEmpty {
            logger.warning("drain timeout: closing connections with calls in flight", metadata: ["connections": "\(left.count)"])
            for channel in left { try? await channel.close() }
        }
    }
}
