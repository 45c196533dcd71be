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
    private let defenceLog: DefenceLog
    private let state = NIOLockedValueBox(State())

    private struct State {
        var listener: (any Channel)?
        var connections: [ObjectIdentifier: any Channel] = [:]
        var shuttingDown = false
        /// Connections closed at accept because `maxConnections` were open.
        var refusedConnections = 0
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
        self.defenceLog = DefenceLog(logger: logger)
    }

    /// Binds the listening socket and starts accepting connections.
    /// - Throws: When the address cannot be bound.
    public func start() async throws {
        let configuration = self.configuration
        let router = self.router
        let logger = self.logger
        let defenceLog = self.defenceLog
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
                        try pipeline.addHandler(TLSHandshakeGate(handshakeTimeout: configuration.tlsHandshakeTimeout, logger: logger))
                    }
                    try pipeline.addHandler(
                        HTTP2Connection(router: router, configuration: configuration, logger: logger, defenceLog: defenceLog)
                    )
                    self.track(channel)
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

    /// How many connections were closed at accept because `maxConnections` were open.
    public var refusedConnectionCount: Int {
        state.withLockedValue { $0.refusedConnections }
    }

    private func track(_ channel: any Channel) {
        let id = ObjectIdentifier(channel)
        let limit = configuration.maxConnections
        // (refused, how many were refused for the limit so far: 0 when this one was not)
        let (refused, overLimit) = state.withLockedValue { state -> (Bool, Int) in
            if state.shuttingDown { return (true, 0) }
            if limit > 0, state.connections.count >= limit {
                state.refusedConnections += 1
                return (true, state.refusedConnections)
            }
            state.connections[id] = channel
            return (false, 0)
        }
        if refused {
            // The first refusal and every thousandth after it: a flood must not flood the log too.
            if overLimit == 1 || overLimit % 1000 == 0 {
                logger.warning("max_connections reached: closing new connections", metadata: [
                    "max_connections": "\(limit)", "refused_so_far": "\(overLimit)",
                ])
            }
            channel.close(promise: nil)
            return
        }
        channel.closeFuture.whenComplete { [self] _ in
            _ = state.withLockedValue { $0.connections.removeValue(forKey: id) }
        }
    }

    /// Stops accepting, sends GOAWAY on every connection, lets calls in flight finish within the
    /// drain timeout, then closes whatever is left.
    public func shutdownGracefully() async {
        let (listener, connections) = state.withLockedValue { state in
            state.shuttingDown = true
            return (state.listener, Array(state.connections.values))
        }
        try? await listener?.close()
        for channel in connections {
            channel.pipeline.fireUserInboundEventTriggered(HTTP2Connection.GracefulShutdownEvent())
        }
        let deadline = NIODeadline.now() + configuration.drainTimeout
        while connectionCount > 0 && NIODeadline.now() < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        let left = state.withLockedValue { Array($0.connections.values) }
        if !left.isEmpty {
            logger.warning("drain timeout: closing connections with calls in flight", metadata: ["connections": "\(left.count)"])
            for channel in left { try? await channel.close() }
        }
    }
}
