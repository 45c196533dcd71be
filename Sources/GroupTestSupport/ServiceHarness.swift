public import GRPCProtocol
public import GroupAPI
public import GroupModel
public import GroupService
public import GroupStore
import GRPCClient
import GRPCServer
import Logging
import NIOCore
import NIOPosix
public import Tracing

/// Who a test call comes from: the `authorization` and `x-operator-id` metadata it carries.
public enum TestIdentity: Sendable, Hashable {
    /// A user token of `app` for `user`.
    case user(String, app: String = TestApps.appA)
    /// The app's backend: an admin token without `x-operator-id`.
    case admin(app: String = TestApps.appA)
    /// An admin token acting for `user` through `x-operator-id`.
    case adminActing(for: String, app: String = TestApps.appA)
    /// Exactly these header values (`nil`: header absent).
    case headers(authorization: String?, operatorID: String?)

    /// A user of app-a (shorthand for `.user(id)`).
    public static func user(_ id: String) -> Self { .user(id, app: TestApps.appA) }
    /// The backend of app-a (shorthand for `.admin()`).
    public static var admin: Self { .admin(app: TestApps.appA) }
}

/// How a harness's calls reach the service's router: one test body runs in both modes.
public enum TestTransport: String, Sendable, CaseIterable, CustomStringConvertible {
    /// In process, through `InProcessTransport`: no socket.
    case inProcess
    /// Live over HTTP/2: the router served by `GRPCServer` on a loopback port, called through
    /// `GRPCClientConnection`.
    case live

    public var description: String { rawValue }
}

/// The outcome of one call: the decoded response, or the status the call ended with.
public struct RPCOutcome<Response: ProtoMessage>: Sendable {
    /// The response or the status.
    public let result: Result<Response, GRPCStatus>

    /// Creates an outcome.
    public init(_ result: Result<Response, GRPCStatus>) { self.result = result }

    /// The response; throws the status if the call failed.
    public func get() throws -> Response { try result.get() }

    /// The status, when the call failed; `nil` when it succeeded.
    public var status: GRPCStatus? {
        if case .failure(let status) = result { return status }
        return nil
    }

    /// The response, when the call succeeded.
    public var response: Response? {
        if case .success(let response) = result { return response }
        return nil
    }

    /// The failure's status code (`.ok` on success).
    public var code: GRPCStatus.Code { status?.code ?? .ok }

    /// The `google.rpc.ErrorInfo` of the failure's details, when present and decodable.
    public var errorInfo: Google_Rpc_ErrorInfo? { status?.errorInfo }
}

extension GRPCStatus {
    /// `details` decoded as a `google.rpc.Status`; nil when there are none.
    /// - Throws: When the bytes are not a valid `google.rpc.Status`.
    public func decodedDetails() throws -> Google_Rpc_Status? {
        guard let details else { return nil }
        return try Google_Rpc_Status(serializedBytes: details)
    }

    /// The first `google.rpc.ErrorInfo` in `details`.
    public var errorInfo: Google_Rpc_ErrorInfo? {
        guard let status = try? decodedDetails() else { return nil }
        for any in status.details {
            if let info = try? any.unpack(Google_Rpc_ErrorInfo.self) { return info }
        }
        return nil
    }

    /// The first `google.rpc.BadRequest` in `details`.
    public var badRequest: Google_Rpc_BadRequest? {
        guard let status = try? decodedDetails() else { return nil }
        for any in status.details {
            if let request = try? any.unpack(Google_Rpc_BadRequest.self) { return request }
        }
        return nil
    }
}

/// A `GroupdService` over a temporary store, serving ``TestApps/apps``, whose router is called
/// with serialized request bytes, in process (no socket) or live over HTTP/2
/// (``TestTransport``).
///
/// Keep the harness alive while using ``store``; its file goes with it. A live harness holds a
/// server and a connection: ``close()`` ends them.
public final class ServiceHarness: Sendable {
    /// The temporary store (and its directory).
    public let temporary: TemporaryStore
    /// The service under test.
    public let service: GroupdService
    /// `service.makeRouter()`.
    public let router: ServerRouter
    /// The configuration the service serves.
    public let configuration: GroupdConfiguration
    /// The clock of the service and the authenticator; tokens are minted at its `now()`.
    public let clock: any WallClock
    /// The store the service writes to.
    public var store: Store { temporary.store }
    /// How calls reach the router.
    public let transport: TestTransport
    private let inProcess: InProcessTransport
    /// The server and the connection of a live harness.
    private let live: LiveEndpoint?

    /// Builds the service.
    /// - Parameters:
    ///   - configuration: Apps and limits; ``TestApps/configuration(dataDir:)`` by default.
    ///   - clock: The service's and the authenticator's time source.
    ///   - policy: The policy plugins (chains applied by the caller); none by default.
    ///   - kind: The kind of store the service writes to.
    ///   - telemetry: Metrics, access log and log settings; none by default.
    ///   - transport: How calls reach the router; in process by default.
    ///   - tracer: The tracer of the service's spans, when `configuration` has `tracing`.
    public init(
        configuration: GroupdConfiguration = TestApps.configuration(), clock: any WallClock = SystemWallClock(),
        policy: ServicePolicy = .disabled, store kind: StoreKind = .sqlite, telemetry: ServiceTelemetry = .disabled,
        transport: TestTransport = .inProcess, tracer: (any Tracer)? = nil
    ) async throws {
        let temporary = try await temporaryStore(kind)
        let authenticator = await Authenticator(apps: configuration.apps, clock: clock)
        self.temporary = temporary
        self.configuration = configuration
        self.clock = clock
        self.service = GroupdService(
            configuration: configuration, store: temporary.store, authenticator: authenticator, clock: clock,
            logger: Logger(label: "groupd-test"), policy: policy, telemetry: telemetry, tracer: tracer)
        self.router = service.makeRouter()
        self.transport = transport
        self.inProcess = InProcessTransport(router: router)
        switch transport {
        case .inProcess:
            self.live = nil
        case .live:
            self.live = try await LiveEndpoint.start(router)
        }
    }

    /// Ends a live harness's connection and server (nothing to do in process).
    public func close() async {
        await live?.stop()
    }

    /// The `authorization` and `x-operator-id` values of `identity` (tokens valid for an hour from now).
    public func headers(for identity: TestIdentity) async throws -> (authorization: String?, operatorID: String?) {
        switch identity {
        case .user(let user, let app):
            return ("Bearer " + (try await TestApps.token(user: user, app: app, now: clock.now())), nil)
        case .admin(let app):
            return ("Bearer " + (try await TestApps.token(user: "backend", admin: true, app: app, now: clock.now())), nil)
        case .adminActing(let user, let app):
            return ("Bearer " + (try await TestApps.token(user: "backend", admin: true, app: app, now: clock.now())), user)
        case .headers(let authorization, let operatorID):
            return (authorization, operatorID)
        }
    }

    /// Calls the unary `method` with `request` as `identity`, through the router's registered handler.
    public func call<Request, Response>(
        _ method: ProtoMethod<Request, Response>, _ request: Request, as identity: TestIdentity
    ) async throws -> RPCOutcome<Response> {
        let (authorization, operatorID) = try await headers(for: identity)
        var metadata = Metadata()
        if let authorization { metadata.append(name: "authorization", value: authorization) }
        if let operatorID { metadata.append(name: "x-operator-id", value: operatorID) }
        let raw = await callRaw(path: method.path, bytes: request.serializedBytes(), metadata: metadata)
        switch raw {
        case .failure(let status):
            return RPCOutcome(.failure(status))
        case .success(let bytes):
            do {
                return RPCOutcome(.success(try Response(serializedBytes: bytes)))
            } catch {
                return RPCOutcome(.failure(GRPCStatus(.internal, "test harness: undecodable response: \(error)")))
            }
        }
    }

    /// Calls the method at `path` with raw request bytes and metadata through the harness's
    /// transport: the status the call ends with, or its one response message.
    public func callRaw(path: String, bytes: [UInt8], metadata: Metadata) async -> Result<[UInt8], GRPCStatus> {
        var messages: [[UInt8]] = []
        do {
            if let live {
                for try await message in live.connection.call(path: path, request: bytes, metadata: metadata.entries) {
                    messages.append(Array(message.readableBytesView))
                }
            } else {
                for try await message in inProcess.call(path: path, request: ByteBuffer(bytes: bytes), metadata: metadata) {
                    messages.append(Array(message.readableBytesView))
                }
            }
        } catch let error as GRPCCallError {
            return .failure(GRPCStatus(error.code, error.message, details: error.details?.serializedBytes()))
        } catch {
            return .failure(GRPCStatus(for: error))
        }
        guard messages.count == 1 else {
            return .failure(GRPCStatus(.internal, "test harness: \(path) answered \(messages.count) messages"))
        }
        return .success(messages[0])
    }
}

extension ServiceHarness {
    /// Calls `method` as `identity` and returns the response; throws the status when it fails.
    public func ok<Request, Response>(
        _ method: ProtoMethod<Request, Response>, _ request: Request, as identity: TestIdentity
    ) async throws -> Response {
        try await call(method, request, as: identity).get()
    }

    /// A field mask of `paths`.
    public static func mask(_ paths: String...) -> Google_Protobuf_FieldMask {
        Google_Protobuf_FieldMask.with { $0.paths = paths }
    }

    /// The AVChatRoom audience count and membership of `user` as the service holds them, through
    /// GetGroupsInfo as the backend (member_count) and GetSelfMemberInfo as `user`.
    public func audienceCount(_ groupID: String, app: String = TestApps.appA) async throws -> UInt32 {
        let response = try await ok(
            Groupd_V1_GroupService.Method.getGroupsInfo, .with { $0.groupIds = [groupID] }, as: .admin(app: app))
        return response.groups.first?.memberCount ?? 0
    }
}

/// Runs `body` with a harness of `transport` (and `clock`), then closes it, also when `body`
/// throws: for test bodies that run in process and live over HTTP/2.
public func withServiceHarness(
    _ transport: TestTransport, clock: any WallClock = SystemWallClock(), _ body: (ServiceHarness) async throws -> Void
) async throws {
    let harness = try await ServiceHarness(clock: clock, transport: transport)
    do {
        try await body(harness)
    } catch {
        await harness.close()
        throw error
    }
    await harness.close()
}

/// A router served by `GRPCServer` on a loopback port, with a client connection to it: the live
/// side of tests that run in process and over HTTP/2.
public struct LiveEndpoint: Sendable {
    /// The server.
    public let server: GRPCServer
    /// A connection to it.
    public let connection: GRPCClientConnection

    /// Serves `router` on a free loopback port and connects to it.
    public static func start(_ router: ServerRouter) async throws -> LiveEndpoint {
        var configuration = ServerConfiguration()
        configuration.host = "127.0.0.1"
        configuration.port = 0
        let server = GRPCServer(
            configuration: configuration, router: router, group: MultiThreadedEventLoopGroup.singleton,
            logger: Logger(label: "groupd-test", factory: { _ in SwiftLogNoOpLogHandler() }))
        try await server.start()
        do {
            return LiveEndpoint(
                server: server, connection: try await GRPCClientConnection.connect(to: .init(host: "127.0.0.1", port: server.localPort!)))
        } catch {
            await server.shutdownGracefully()
            throw error
        }
    }

    /// Closes the connection, then the server.
    public func stop() async {
        await connection.close()
        await server.shutdownGracefully()
    }

    /// Runs `body` with a connection to `router` served live, then stops both, also when `body`
    /// throws.
    public static func with(_ router: ServerRouter, _ body: (GRPCClientConnection) async throws -> Void) async throws {
        let endpoint = try await start(router)
        do {
            try await body(endpoint.connection)
        } catch {
            await endpoint.stop()
            throw error
        }
        await endpoint.stop()
    }
}
