import GRPCServer
import GroupAPI
import GroupModel
import GroupStore
import Logging
import NIOCore

/// groupd's RPC layer: authenticates each call, runs its handler against the model and the
/// store, and maps outcomes to gRPC. One instance serves every app of the configuration.
public final class GroupdService: Sendable {
    let configuration: GroupdConfiguration
    let store: any GroupOperationStore
    let authenticator: Authenticator
    let clock: any WallClock
    let logger: Logger
    /// The health service, for `beginShutdown()`.
    public let health = HealthService()
    private let limits: [String: AppLimits]
    private let customFields: [String: CustomFieldSchema]
    /// The AVChatRoom audiences this node holds in memory.
    let audience = AudienceRegistry()

    /// Creates the service.
    /// - Parameters:
    ///   - configuration: The validated configuration (apps and their limits).
    ///   - store: Where groups, members and events live.
    ///   - authenticator: Verifies each call's token.
    ///   - clock: The time source (injectable for tests).
    ///   - logger: Where unexpected failures are logged.
    public init(
        configuration: GroupdConfiguration, store: any GroupOperationStore, authenticator: Authenticator,
        clock: any WallClock = SystemWallClock(), logger: Logger
    ) {
        self.configuration = configuration
        self.store = store
        self.authenticator = authenticator
        self.clock = clock
        self.logger = logger
        self.limits = Dictionary(configuration.apps.map { ($0.id, $0.limits) }, uniquingKeysWith: { first, _ in first })
        self.customFields = Dictionary(
            configuration.apps.compactMap { app in app.customFields.map { (app.id, $0) } }, uniquingKeysWith: { first, _ in first })
    }

    /// The router serving every method of the API; the ones without a handler yet answer
    /// `UNIMPLEMENTED`.
    public func makeRouter() -> ServerRouter {
        var routes = Routes(authenticate: { [self] server in try authenticate(server) })
        routes.registerExternally({ health.register(in: &$0) }, paths: Grpc_Health_V1_Health.allMethods.map(\.path))
        registerGroupMethods(in: &routes)
        registerGroupOperationMethods(in: &routes)
        registerListingMethods(in: &routes)
        registerMembershipMethods(in: &routes)
        registerMemberMethods(in: &routes)
        registerLifecycleMethods(in: &routes)
        return routes.finish()
    }

    /// Ends long-lived streams (health watches) so clients move on while calls drain.
    public func beginShutdown() {
        health.beginShutdown()
    }

    private func authenticate(_ server: ServerContext) throws -> CallContext {
        let caller = try authenticator.authenticate(
            authorization: server.metadata["authorization"], operatorID: server.metadata["x-operator-id"])
        guard let limits = limits[caller.appID] else {
            throw GroupError(code: .unauthenticated, reason: .unknownApp, message: "unknown app \(caller.appID)")
        }
        return CallContext(caller: caller, limits: limits, customFields: customFields[caller.appID], server: server)
    }
}
