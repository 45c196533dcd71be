import ArgumentParser
import GRPCServer
import GroupModel
import GroupdConsole
import GroupService
import GroupStore
import GroupStorePostgres
import GroupStoreSQLite
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization
import UnixSignals

#if canImport(Glibc)
import Glibc
#endif

/// `groupd serve --config FILE`: runs the server until SIGTERM or SIGINT, then drains.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the gRPC server.")

    @Option(help: "The YAML configuration file.") var config = "groupd.yaml"

    func run() async throws {
        let configuration = try loadConfiguration(config)
        let tls = try loadServerTLS(configuration, configPath: config)
        // Trap SIGHUP first: from here on it reloads instead of ending the process.
        let hangups = await UnixSignalsSequence(trapping: .sighup)
        // SIGTERM and SIGINT too, before the listener is bound: one that arrives once clients can
        // connect but before the services run waits here (buffered) and starts the graceful
        // shutdown, instead of killing the process.
        let stops = await UnixSignalsSequence(trapping: .sigterm, .sigint)
        // Every logger writes through one output whose level and format a reload changes.
        let logOutput = LogOutput(settings: configuration.log)
        LoggingSystem.bootstrap(logOutput.handler)
        let logger = Logger(label: "groupd")

        let store: Store
        switch configuration.store.backend {
        case .sqlite:
            guard mkdir(configuration.dataDir, 0o755) == 0 || errno == EEXIST else {
                printError("groupd: cannot create data_dir \(configuration.dataDir): \(String(cString: strerror(errno)))")
                throw ExitCode(1)
            }
            store = Store(
                backend: try await SQLiteBackend.open(path: configuration.databasePath, durability: configuration.durability),
                batching: configuration.writeBatching)
            // A relative data_dir is relative to the working directory: say where that is.
            logger.info("store: SQLite", metadata: ["path": "\(absolutePath(configuration.databasePath))"])
        case .postgres:
            // Several nodes share the database: no node keeps group records in memory, since a
            // write on another node would leave them stale (docs/SCALING.md).
            let backend: PostgresBackend
            do {
                var settings = configuration.store.postgres
                settings.dieBeforeDoorbellFile = getenv(PostgresStoreSettings.dieBeforeDoorbellVariable).map { String(cString: $0) }
                backend = try await PostgresBackend.open(settings: settings, logger: logger)
            } catch {
                printError("groupd: cannot open the PostgreSQL store: \(error)")
                throw ExitCode(1)
            }
            logger.info("store: PostgreSQL", metadata: ["migrations": "\(backend.appliedMigrations.joined(separator: ","))"])
            store = Store(backend: backend, cacheCapacity: 0, batching: configuration.writeBatching)
        }
        // The server's time: the system's, or (tests only: testing.clock: manual, which loading
        // refuses without GROUPD_TEST_CLOCK=1) a clock standing at the start time until advanced.
        let manualClock = configuration.testing.clock == .manual ? ManualWallClock(SystemWallClock().now()) : nil
        let clock: any WallClock = manualClock ?? SystemWallClock()
        let authenticator = await Authenticator(configuration: configuration, clock: clock)
        // Policy plugins: load every app's chain before serving; a plugin that fails to load stops startup.
        let policy = ServicePolicy.standard(logger: logger, clock: clock)
        do {
            try policy.apply(configuration, baseDirectory: ServicePolicy.directory(of: config))
        } catch {
            printError("groupd: \(error)")
            // The plugins loaded before the one that failed, and the store, are closed too.
            try? await policy.shutdown()
            try? await store.close()
            throw ExitCode(1)
        }
        let telemetry = ServiceTelemetry(configuration: configuration, logOutput: logOutput)
        // Traces: the tracer is bootstrapped before the service, which takes it for its spans.
        var traceExport: (any Service)?
        if let tracing = configuration.tracing {
            do {
                traceExport = try TraceExport.bootstrap(tracing, metrics: telemetry.metrics, logger: logger)
            } catch {
                printError("groupd: cannot start tracing: \(error)")
                try? await policy.shutdown()
                try? await store.close()
                throw ExitCode(1)
            }
        }
        let service = GroupdService(
            configuration: configuration, store: store, authenticator: authenticator, clock: clock, logger: logger,
            policy: policy, telemetry: telemetry)

        let threads = configuration.eventLoopThreads > 0 ? configuration.eventLoopThreads : System.coreCount
        let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        var serverConfiguration = configuration.serverConfiguration
        serverConfiguration.tls = tls
        serverConfiguration.callObserver = telemetry
        serverConfiguration.connectCodec = ConnectJSONCodec()
        let router = service.makeRouter()
        let server = GRPCServer(configuration: serverConfiguration, router: router, group: group, logger: logger)
        // The operator console: the same router, codec, limits and observer on a port of its own
        // (plain HTTP), which also answers GET with the console's files.
        let console = configuration.console.map { settings in
            GRPCServer(
                configuration: serverConfiguration.console(settings), router: router, group: group,
                logger: Logger(label: "groupd.console"))
        }
        // Listen before anything else runs: an address that cannot be bound (a port in use) stops
        // groupd with one line naming it, before any background work has begun. The metrics and
        // test-clock endpoints are bound first, so a client that reached the gRPC port finds them.
        var endpoints: [BoundEndpoint] = []
        let resources = OpenResources(store: store, policy: policy, group: group, logger: logger)
        func abandonStart() async {
            for endpoint in endpoints { await endpoint.close() }
            await resources.close()
        }
        do {
            if let metrics = telemetry.metrics, let settings = configuration.metrics {
                endpoints.append(try await MetricsEndpoint.bind(metrics: metrics, settings: settings, group: group, logger: logger))
            }
            if let manualClock, let port = configuration.testing.clockPort {
                endpoints.append(try await TestClockEndpoint.bind(clock: manualClock, port: port, group: group, logger: logger))
            }
        } catch {
            await abandonStart()
            throw error
        }
        do {
            try await server.start()
        } catch {
            printError("groupd: cannot listen on \(listenAddress(configuration.listen.host, configuration.listen.port)): \(bindFailure(error))")
            await abandonStart()
            throw ExitCode(1)
        }
        if let console, let settings = configuration.console {
            do {
                try await console.start()
            } catch {
                printError("groupd: cannot listen on \(listenAddress(settings.host, settings.port)) (console): \(bindFailure(error))")
                await server.shutdownGracefully()
                await abandonStart()
                throw ExitCode(1)
            }
            logger.info("console listening", metadata: [
                "address": "\(listenAddress(settings.host, console.localPort ?? settings.port))",
                "url": "http://\(listenAddress(settings.host, console.localPort ?? settings.port))/",
            ])
        }

        // SIGHUP reloads the file; the reloader ends quietly at shutdown.
        let reloader = ReloadOnSignal(signals: hangups, service: service, path: config, tls: tls, logger: logger)
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [
            // First, so that it is shut down last (the group shuts its services down in reverse).
            .init(service: resources),
            .init(service: ServerService(servers: [server] + (console.map { [$0] } ?? []), service: service)),
            .init(service: reloader, successTerminationBehavior: .ignore),
            .init(service: EventStreamService(service: service), successTerminationBehavior: .ignore),
        ]
        // Before the server in the list, so shut down after it has drained (the group shuts its
        // services down in reverse): the last calls' spans are exported before the process ends.
        if let traceExport { services.insert(.init(service: traceExport), at: 1) }
        if let metrics = telemetry.metrics {
            metrics.addCollector { gauges in gauges.set("groupd_transport_queued_bytes", to: Double(server.queuedBytes)) }
        }
        // The Prometheus and test-clock endpoints (bound above), on the server's event loops.
        services += endpoints.map { .init(service: $0) }
        let serviceGroup = ServiceGroup(configuration: .init(services: services, logger: logger))
        // The first SIGTERM or SIGINT (trapped above) shuts down gracefully, even one that came
        // before `run` (the group starts its services, then stops them).
        let stopping = Task {
            for await signal in stops {
                logger.info("shutting down gracefully", metadata: ["signal": "\(signal)"])
                await serviceGroup.triggerGracefulShutdown()
                break
            }
        }
        defer { stopping.cancel() }
        try await serviceGroup.run()
        logger.info("stopped")
    }
}

/// What `serve` opens before its services run (the store, the policy plugins, the event loops),
/// closed once whatever ends the services: as a lifecycle service listed first, so that at a
/// graceful shutdown the group stops it last, once the server has drained and every stream has
/// ended; when a service throws instead, the group cancels every service, this one closes them
/// then, and the error still ends `run()`. A start-up that fails before the services run closes
/// them itself (`close()`).
final class OpenResources: Service, Sendable {
    private let store: Store
    private let policy: ServicePolicy
    private let group: MultiThreadedEventLoopGroup
    private let logger: Logger
    private let closed = Mutex(false)

    init(store: Store, policy: ServicePolicy, group: MultiThreadedEventLoopGroup, logger: Logger) {
        self.store = store
        self.policy = policy
        self.group = group
        self.logger = logger
    }

    /// Waits for the graceful shutdown (or the cancellation of the service group), then closes.
    func run() async throws {
        try? await gracefulShutdown()
        await close()
    }

    /// Closes the store (its last batch committed), shuts the policy plugins down (after-event
    /// hooks still queued are run first) and the event loops; each failure is logged, and the
    /// others are still closed. A second call does nothing.
    func close() async {
        guard closed.withLock({ closed in defer { closed = true }; return !closed }) else { return }
        do { try await store.close() } catch {
            logger.error("closing the store failed", metadata: ["error": "\(error)"])
        }
        do { try await policy.shutdown() } catch {
            logger.error("shutting the policy plugins down failed", metadata: ["error": "\(error)"])
        }
        do { try await group.shutdownGracefully() } catch {
            logger.error("shutting the event loops down failed", metadata: ["error": "\(error)"])
        }
        logger.info("closed the store, the policy plugins and the event loops")
    }
}

/// The gRPC server (and the console's listener, when there is one) as a lifecycle service: serve
/// until graceful shutdown, then end long-lived streams, send GOAWAY and drain calls in flight on
/// every listener at once.
struct ServerService: Service {
    let servers: [GRPCServer]
    let service: GroupdService

    /// Serves until graceful shutdown (``Serve`` has started the servers: they listen already).
    func run() async throws {
        try? await gracefulShutdown()
        service.beginShutdown()
        await withTaskGroup(of: Void.self) { group in
            for server in servers { group.addTask { await server.shutdownGracefully() } }
        }
    }
}

/// `path` made absolute against the working directory.
func absolutePath(_ path: String) -> String {
    guard !path.hasPrefix("/"), let directory = getcwd(nil, 0) else { return path }
    defer { free(directory) }
    let base = String(cString: directory)
    return (base.hasSuffix("/") ? base : base + "/") + (path.hasPrefix("./") ? String(path.dropFirst(2)) : path)
}

/// `host:port`, with an IPv6 host in brackets.
func listenAddress(_ host: String, _ port: Int) -> String {
    host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
}

/// Why a bind failed, in words: the system's message for an errno (e.g. "Address already in use").
func bindFailure(_ error: any Error) -> String {
    if let error = error as? IOError { return String(cString: strerror(error.errnoCode)) }
    return "\(error)"
}

extension ServerConfiguration {
    /// This configuration on the console's address, answering `GET` and `HEAD` with the console's
    /// embedded files (Connect on, whatever `listen.connect` says: the console calls through it).
    ///
    /// Without TLS: the files are served over HTTP/1.1 only, and a browser offered ALPN `h2` takes
    /// it, so over TLS the page would get Connect's refusal instead (docs/CONSOLE.md, "Security notes").
    func console(_ settings: ConsoleSettings) -> ServerConfiguration {
        var console = self
        console.host = settings.host
        console.port = settings.port
        console.tls = nil
        console.connectEnabled = true
        console.staticFiles = StaticFiles { path in
            ConsoleFile.file(at: path).map { StaticFile(contentType: $0.contentType, body: $0.body, etag: $0.etag) }
        }
        return console
    }
}

extension GroupdConfiguration {
    /// The transport's share of the configuration.
    var serverConfiguration: ServerConfiguration {
        var server = ServerConfiguration()
        server.host = listen.host
        server.port = listen.port
        server.connectEnabled = listen.connect
        server.maxMessageBytes = maxMessageBytes
        server.http2.maxConcurrentStreams = maxConcurrentStreams
        server.maxConnections = maxConnections
        server.http2.maxHeaderListSize = maxHeaderListBytes
        server.drainTimeout = .nanoseconds(Int64(drainTimeoutSeconds * 1_000_000_000))
        server.keepalive = keepalive.settings
        server.limits = transport.limits
        if let tls { server.tlsHandshakeTimeout = .nanoseconds(Int64(tls.handshakeTimeoutSeconds * 1_000_000_000)) }
        server.responseCompression = compression.responseCompression
        server.limits = transport.limits
        return server
    }
}
