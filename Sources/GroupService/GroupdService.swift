import GRPCProtocol
import GroupAPI
import GroupModel
import GroupStore
import Logging
import NIOCore
import PolicyHost
import Synchronization
import Tracing

/// groupd's RPC layer: authenticates each call, runs its handler against the model and the
/// store, and maps outcomes to gRPC. One instance serves every app of the configuration.
public final class GroupdService: Sendable {
    let store: Store
    let clock: any WallClock
    let logger: Logger
    /// The health service, for `beginShutdown()`.
    public let health: HealthService
    /// The configuration snapshot in force, swapped whole by ``reload(to:baseDirectory:)``.
    private let current: Mutex<ConfigurationSnapshot>
    /// Whether a reload is under way (reloads run one at a time).
    let reloading = Mutex(false)
    /// AVChatRoom membership: the audiences this node holds in memory, presences, online counts.
    let rooms: LiveRooms
    /// The AVChatRoom message rates and recent client message ids this node holds in memory.
    let roomMessages = RoomMessageLimiter()
    /// The read receipts waiting to be reported to senders (``flushReadReceipts()``).
    let readReceipts = ReadReceiptBatcher()
    /// The policy plugins' per-app chains (``ServicePolicy/disabled``: none).
    public let policy: ServicePolicy
    /// The event stream's fan-out (Subscribe), fed by the store's commits.
    public let events: EventHub
    /// Metrics, access log and log settings (``ServiceTelemetry/disabled``: none).
    public let telemetry: ServiceTelemetry
    /// The calls' server spans' tracer (nil: `tracing` is not configured).
    let tracer: (any Tracer)?

    /// Creates the service.
    /// - Parameters:
    ///   - configuration: The validated configuration (apps and their limits).
    ///   - store: Where groups, members and events live.
    ///   - authenticator: Verifies each call's token.
    ///   - clock: The time source (injectable for tests).
    ///   - logger: Where unexpected failures are logged.
    ///   - policy: The policy plugins (chains already applied); none by default.
    ///   - telemetry: Metrics, access log and log settings; none by default.
    ///   - tracer: With `tracing` configured, what makes the spans of calls, commits and policy
    ///     hooks (default: the tracer `InstrumentationSystem` was bootstrapped with); ignored
    ///     without it.
    public init(
        configuration: GroupdConfiguration, store: Store, authenticator: Authenticator,
        clock: any WallClock = SystemWallClock(), logger: Logger, policy: ServicePolicy = .disabled,
        telemetry: ServiceTelemetry = .disabled, tracer: (any Tracer)? = nil
    ) {
        self.policy = policy
        self.telemetry = telemetry
        let tracer = configuration.tracing.map { _ in tracer ?? InstrumentationSystem.tracer }
        self.tracer = tracer
        if let tracer {
            store.traceCommits(with: tracer)
            policy.host?.traceHooks(with: tracer)
        }
        // Health knows the reflection services only when they are served.
        self.health = HealthService(services: GroupAPI.allServiceNames.filter {
            configuration.reflection || !$0.hasPrefix("grpc.reflection.")
        })
        self.store = store
        self.clock = clock
        self.rooms = LiveRooms(store: store, clock: clock)
        self.logger = logger
        self.current = Mutex(ConfigurationSnapshot(
            configuration: configuration, authenticator: authenticator,
            rateLimiters: RateLimiters(configuration: configuration, now: { [clock] in clock.uptimeNanoseconds() })))
        self.events = EventHub(store: store, clock: clock, logger: logger)
        policy.replayAfterEvents(from: store, logger: logger)
        policy.notifyAfterEvents(from: events)
        if store.isShared {
            // Rooms' messages sent through other nodes: counted against the room's rate here
            // too, and delivered to this node's streams.
            store.followRoomMessages { [weak self] messages in
                guard let self else { return }
                let now = self.clock.now()
                for message in messages {
                    let rate = self.snapshot.limits(app: message.appID)?.avChatRoomMessagesPerSecond ?? 0
                    self.roomMessages.admitted(elsewhere: message, rate: rate, now: now)
                    self.publishRoomMessage(message)
                }
            }
            // Rooms' audiences follow every node's events (AudienceRegistry.replay).
            let rooms = self.rooms
            store.observeCommittedEvents { result in
                guard case .success(let events) = result else { return }
                for logged in events where logged.groupType == .avChatRoom { rooms.replay(logged.event) }
            }
        }
        let health = self.health
        // Observed first, then read: a change made in between is not missed.
        store.observeAvailability { health.setStoreAvailable($0) }
        health.setStoreAvailable(store.isAvailable)
        if let metrics = telemetry.metrics { instrument(metrics) }
        events.observePresence { [weak self] app, user, at in await self?.streamPresenceChanged(app: app, user: user, at: at) }
    }

    /// The configuration snapshot in force now. A call reads it once, in `authenticate`; code
    /// serving a call uses what its ``CallContext`` captured rather than reading this again.
    public var snapshot: ConfigurationSnapshot { current.withLock { $0 } }

    /// The configuration in force now (``snapshot``'s).
    public var configuration: GroupdConfiguration { snapshot.configuration }

    /// Put `snapshot` in force: calls authenticated from now on use it.
    func install(_ snapshot: ConfigurationSnapshot) {
        current.withLock { $0 = snapshot }
    }

    /// The router serving every method of the API; the ones without a handler yet answer
    /// `UNIMPLEMENTED`.
    public func makeRouter() -> ServerRouter {
        var routes = Routes(authenticate: { [self] server in try authenticate(server) })
        // Asked only while the transport's budget of calls without a verified token is spent:
        // a call whose token verifies is let through (the token cache makes it a lookup).
        routes.verifyTokens { [self] metadata in
            (try? snapshot.authenticator.authenticate(
                authorization: metadata["authorization"], operatorID: metadata["x-operator-id"])) != nil
        }
        routes.registerExternally({ health.register(in: &$0) }, paths: Grpc_Health_V1_Health.allMethods.map(\.path))
        // Reflection needs no token: discovery runs before a client picks one.
        let reflection = configuration.reflection
        routes.registerExternally({ ReflectionService().register(in: &$0, enabled: reflection) }, paths: ReflectionService.paths)
        // One handler per proto service (Handlers/).
        GroupServiceHandler(service: self).register(in: &routes)
        MemberServiceHandler(service: self).register(in: &routes)
        ApplicationServiceHandler(service: self).register(in: &routes)
        MessageServiceHandler(service: self).register(in: &routes)
        EventServiceHandler(service: self).register(in: &routes)
        let ratio = configuration.tracing?.sampleRatio ?? 1
        return routes.finish(tracing: tracer.map { CallTracing(tracer: $0, sampleRatio: ratio) })
    }

    /// Ends long-lived streams (health watches) so clients move on while calls drain.
    public func beginShutdown() {
        health.beginShutdown()
    }

    /// Authenticate and admit a call under the snapshot in force, read once here: the token is
    /// checked against its secrets, the app's and the operator's rate limits are charged, and the
    /// call's context gets its limits and custom-field definitions.
    private func authenticate(_ server: ServerContext) throws -> CallContext {
        let snapshot = self.snapshot
        // One credential per call: were two authorization headers accepted, which one counts
        // would depend on the reader (a proxy may check the last, this server would take the first).
        if server.metadata.entries.lazy.filter({ $0.name == "authorization" }).count > 1 {
            throw GroupError(
                code: .unauthenticated, reason: .tokenMalformed,
                message: "the call carries more than one authorization header; send one")
        }
        let caller = try snapshot.authenticator.authenticate(
            authorization: server.metadata["authorization"], operatorID: server.metadata["x-operator-id"])
        guard let limits = snapshot.limits(app: caller.appID) else {
            throw GroupError(code: .unauthenticated, reason: .unknownApp, message: "unknown app \(caller.appID)")
        }
        server.annotations?.setCaller(app: caller.appID, operatorID: caller.operatorID)
        if tracer != nil { CallTracing.recordApp(caller.appID) }
        if let limiter = snapshot.rateLimiters.apps[caller.appID],
            let refusal = limiter.acquire(
                operatorKey: Self.rateLimitKey(caller), isWrite: !RateLimiters.isRead(method: server.path))
        {
            telemetry.metrics?.rateLimitRefused(limit: refusal.scope)
            throw RateLimitedError(refusal, appID: caller.appID)
        }
        return CallContext(
            caller: caller, limits: limits, customFields: snapshot.customFields(app: caller.appID), server: server,
            now: clock.now())
    }

    /// The operator's rate-limit bucket: the user acted for, or the token's subject (a user's
    /// id, or for the backend `admin:` and its account name, so it never shares a user's bucket).
    static func rateLimitKey(_ caller: Caller) -> String {
        if let user = caller.operatorID { return user }
        return "admin:" + caller.userID
    }
}
