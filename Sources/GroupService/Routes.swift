import GRPCProtocol
import GroupAPI
import GroupModel
import NIOCore

/// Builds the router: typed registration of each implemented method behind authentication,
/// and `UNIMPLEMENTED` for every method of the API that has no handler yet.
struct Routes {
    private(set) var router = ServerRouter()
    /// The paths registered so far (a handler's, in a fresh `Routes`: the methods it serves).
    private(set) var implemented: Set<String> = []
    private let authenticate: @Sendable (ServerContext) throws -> CallContext

    init(authenticate: @escaping @Sendable (ServerContext) throws -> CallContext) {
        self.authenticate = authenticate
    }

    /// Serves a unary method: authenticate, decode, run `body`, encode.
    mutating func unary<Request, Response>(
        _ method: ProtoMethod<Request, Response>,
        _ body: @escaping @Sendable (Request, CallContext) async throws -> Response
    ) {
        let authenticate = self.authenticate
        implemented.insert(method.path)
        router.register(method.path, .unary { bytes, server in
            let call = try authenticate(server)
            let request = try MessageCoding.decode(Request.self, from: bytes)
            return MessageCoding.encode(try await body(request, call))
        })
    }

    /// Serves a server-streaming method: authenticate, decode, run `body` with the call's writer
    /// (the body encodes what it writes: Subscribe encodes an item once for every stream).
    mutating func serverStreaming<Request, Response>(
        _ method: ProtoMethod<Request, Response>,
        _ body: @escaping @Sendable (Request, CallContext, ServerStreamWriter) async throws -> Void
    ) {
        let authenticate = self.authenticate
        implemented.insert(method.path)
        router.register(method.path, .serverStreaming { bytes, server, writer in
            let call = try authenticate(server)
            let request = try MessageCoding.decode(Request.self, from: bytes)
            try await body(request, call, writer)
        })
    }

    /// Tells the transport, when its budget of unauthenticated calls is spent, whether a call's
    /// metadata carries a token that verifies (see `ServerRouter.tokenVerifier`).
    mutating func verifyTokens(with verifier: @escaping @Sendable (Metadata) -> Bool) {
        router.tokenVerifier = verifier
    }

    /// Marks methods registered elsewhere (health) as implemented.
    mutating func registerExternally(_ register: (inout ServerRouter) -> Void, paths: [String]) {
        register(&router)
        implemented.formUnion(paths)
    }

    /// The router, every handler telling its call's observer the reason of the error it ends with
    /// (and, with `tracing`, running its calls in server spans).
    /// Every API method has a handler (RouterRPCTests checks it); a method added to the protos
    /// without one answers `UNIMPLEMENTED` rather than "Method not found".
    func finish(tracing: CallTracing? = nil) -> ServerRouter {
        var router = ServerRouter()
        router.tokenVerifier = self.router.tokenVerifier
        for path in self.router.paths {
            let route = self.router.route(for: path)!
            // One wrapper either way: each async layer around a handler costs every call.
            let handler = tracing?.wrap(route.handler, path: path) ?? Self.annotatingErrors(route.handler)
            router.register(path, handler, needsToken: route.needsToken)
        }
        for method in GroupAPI.allMethods where !implemented.contains(method.path) {
            let status = GRPCStatus(.unimplemented, "\(method.path) is not implemented")
            router.register(method.path, .inlineUnary { _, _ in .failure(status) })
        }
        return router
    }

    /// Records the stable reason of `error`, which the call's handler threw, in its annotations.
    static func annotate(_ error: any Error, _ server: ServerContext) {
        if let annotations = server.annotations, let reason = errorReason(error) { annotations.setReason(reason) }
    }

    /// `handler`, recording the stable reason of a thrown error in the call's annotations.
    static func annotatingErrors(_ handler: RPCHandler) -> RPCHandler {
        switch handler {
        case .inlineUnary:
            return handler
        case .unary(let body):
            return .unary { bytes, server in
                do {
                    return try await body(bytes, server)
                } catch {
                    annotate(error, server)
                    throw error
                }
            }
        case .serverStreaming(let body):
            return .serverStreaming { bytes, server, writer in
                do {
                    try await body(bytes, server, writer)
                } catch {
                    annotate(error, server)
                    throw error
                }
            }
        case .bidirectionalStreaming(let body):
            return .bidirectionalStreaming { requests, server, writer in
                do {
                    try await body(requests, server, writer)
                } catch {
                    annotate(error, server)
                    throw error
                }
            }
        }
    }

    /// The `ErrorInfo.reason` a call failing with `error` sends, if any.
    static func errorReason(_ error: any Error) -> String? {
        switch error {
        case let error as GroupError: error.reason.rawValue
        case let error as RateLimitedError: error.groupError.reason.rawValue
        default: nil
        }
    }
}
