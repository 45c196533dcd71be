import NIOCore

/// The request headers a handler can read: every header that is not an HTTP/2 pseudo-header
/// or one the transport consumes itself (`content-type`, `te`, `grpc-timeout`, `grpc-encoding`,
/// `grpc-accept-encoding`). Names are lowercase, as HTTP/2 requires.
public struct Metadata: Sendable, Equatable {
    /// The headers in the order they arrived.
    public private(set) var entries: [(name: String, value: String)] = []

    /// Creates metadata from name and value pairs.
    public init(_ entries: [(name: String, value: String)] = []) {
        self.entries = entries
    }

    /// Appends a header.
    public mutating func append(name: String, value: String) {
        entries.append((name, value))
    }

    /// The first value of the header `name` (lowercase), if present.
    public subscript(name: String) -> String? {
        for entry in entries where entry.name == name { return entry.value }
        return nil
    }

    public static func == (lhs: Metadata, rhs: Metadata) -> Bool {
        lhs.entries.elementsEqual(rhs.entries) { $0.name == $1.name && $0.value == $1.value }
    }
}

/// What a handler knows about its call besides the request message.
public struct ServerContext: Sendable {
    /// The method path, `/package.Service/Method`.
    public let path: String
    /// The request metadata.
    public let metadata: Metadata
    /// When the call must be over, from `grpc-timeout`; nil when the client set none. The
    /// transport also cancels the handler's task then.
    public let deadline: ContinuousClock.Instant?
    /// Where the handler tells the call observer about the call (app, operator, error reason);
    /// `nil` when calls are not observed.
    public let annotations: CallAnnotations?
    /// The protocol the call came in (gRPC, or Connect over HTTP/1.1 or HTTP/2).
    public let callProtocol: CallProtocol

    /// Creates a context (the transport does; tests may too).
    public init(
        path: String, metadata: Metadata, deadline: ContinuousClock.Instant? = nil, annotations: CallAnnotations? = nil,
        callProtocol: CallProtocol = .grpc
    ) {
        self.path = path
        self.metadata = metadata
        self.deadline = deadline
        self.annotations = annotations
        self.callProtocol = callProtocol
    }
}

/// How a method is served. Request and response messages are serialized protobuf bytes; the
/// transport adds and removes the gRPC length prefix.
public enum RPCHandler: Sendable {
    /// A unary method answered synchronously on the connection's event loop, for methods that
    /// do no I/O and never block (health checks). Returns the response or the status to end with.
    case inlineUnary(@Sendable (_ request: ByteBuffer, _ context: ServerContext) -> Result<ByteBuffer, GRPCStatus>)
    /// A unary method run as a task off the event loop; cancelled when the call is (deadline,
    /// RST_STREAM, connection loss). A thrown error ends the call with its status.
    case unary(@Sendable (_ request: ByteBuffer, _ context: ServerContext) async throws -> ByteBuffer)
    /// A server-streaming method run as a task off the event loop. Writes go through the writer,
    /// which applies back-pressure; returning ends the call with OK, throwing with the error's status.
    case serverStreaming(@Sendable (_ request: ByteBuffer, _ context: ServerContext, _ writer: ServerStreamWriter) async throws -> Void)
    /// A bidirectional-streaming method (and so a client-streaming one, which writes one
    /// response) run as a task off the event loop, started as soon as the request headers are in.
    /// Request messages arrive through `requests` as the client sends them (their flow-control
    /// window reopens as they are taken); the client's half-close ends the sequence. Writes go
    /// through the writer as for server streaming; returning ends the call with OK, throwing with
    /// the error's status. A reset, the deadline or a lost connection cancels the task.
    case bidirectionalStreaming(
        @Sendable (_ requests: ServerRequestStream, _ context: ServerContext, _ writer: ServerStreamWriter) async throws -> Void)
}

/// The table from method path to handler. Paths not in it answer `UNIMPLEMENTED`.
public struct ServerRouter: Sendable {
    /// A registered method: its handler, and whether its calls need a token.
    public struct Route: Sendable {
        /// How the method is served.
        public var handler: RPCHandler
        /// Whether its handler checks a token before doing any work.
        public var needsToken: Bool

        /// A route.
        /// - Parameters:
        ///   - handler: How the method is served.
        ///   - needsToken: Whether its handler checks a token.
        public init(handler: RPCHandler, needsToken: Bool) {
            self.handler = handler
            self.needsToken = needsToken
        }
    }

    private var routes: [String: Route] = [:]
    /// Whether request metadata carries a token that verifies; asked on the event loop, only when
    /// the budget of calls without a verified token (`TransportLimits.maxUnauthenticatedCalls`)
    /// is spent, for a call of a method that needs a token. `nil`: such calls are refused then.
    /// Must be cheap and never block.
    public var tokenVerifier: (@Sendable (Metadata) -> Bool)?

    /// Creates an empty router.
    public init() {}

    /// Serves `path` with `handler`, replacing any earlier registration.
    /// - Parameters:
    ///   - path: The method path, `/package.Service/Method`.
    ///   - handler: How to serve it.
    ///   - needsToken: Whether its handler checks a token before doing any work (true), or serves
    ///     anyone (false: health, reflection). A call of a method that needs none holds a place in
    ///     the budget of unauthenticated calls until its stream closes.
    public mutating func register(_ path: String, _ handler: RPCHandler, needsToken: Bool = true) {
        routes[path] = Route(handler: handler, needsToken: needsToken)
    }

    /// The handler for `path`, if registered.
    public func handler(for path: String) -> RPCHandler? {
        routes[path]?.handler
    }

    /// The route of `path`, if registered.
    public func route(for path: String) -> Route? {
        routes[path]
    }

    /// Every registered path.
    public var paths: [String] { Array(routes.keys).sorted() }
}
