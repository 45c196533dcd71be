/// One RPC of a service in `Protos/`, typed by its request and response messages.
///
/// Generated as `<Service>.Method.<rpc>` (e.g. `Groupd_V1_GroupService.Method.createGroup`) so the
/// server can register a typed handler for it.
public struct ProtoMethod<Request: ProtoMessage, Response: ProtoMessage>: Sendable, Hashable {
    /// The HTTP/2 `:path` of the method: `/<service>/<method>`.
    public let path: String

    /// The service's full name, e.g. `groupd.v1.GroupService`.
    public let serviceName: String

    /// The method's name, e.g. `CreateGroup`.
    public let methodName: String

    /// Whether the client sends a stream of requests.
    public let isClientStreaming: Bool

    /// Whether the server answers with a stream of responses.
    public let isServerStreaming: Bool

    /// Describes a method.
    ///
    /// - Parameters:
    ///   - service: The service's full name.
    ///   - method: The method's name.
    ///   - isClientStreaming: Whether requests are streamed.
    ///   - isServerStreaming: Whether responses are streamed.
    public init(service: String, method: String, isClientStreaming: Bool = false, isServerStreaming: Bool) {
        self.path = "/\(service)/\(method)"
        self.serviceName = service
        self.methodName = method
        self.isClientStreaming = isClientStreaming
        self.isServerStreaming = isServerStreaming
    }

    /// The same method without its static types, for lists and routing tables.
    public var erased: AnyProtoMethod {
        AnyProtoMethod(
            path: path, serviceName: serviceName, methodName: methodName,
            isClientStreaming: isClientStreaming, isServerStreaming: isServerStreaming,
            requestType: Request.self, responseType: Response.self
        )
    }
}

/// A ``ProtoMethod`` with its message types erased: an entry of `GroupAPI.allMethods`.
///
/// Equality and hashing use the path alone: a path names one method.
public struct AnyProtoMethod: Sendable, Hashable, CustomStringConvertible {
    /// The HTTP/2 `:path` of the method: `/<service>/<method>`.
    public let path: String

    /// The service's full name.
    public let serviceName: String

    /// The method's name.
    public let methodName: String

    /// Whether the client sends a stream of requests.
    public let isClientStreaming: Bool

    /// Whether the server answers with a stream of responses.
    public let isServerStreaming: Bool

    /// The request message type.
    public let requestType: any ProtoMessage.Type

    /// The response message type.
    public let responseType: any ProtoMessage.Type

    /// Two descriptions are equal when their paths are.
    public static func == (lhs: AnyProtoMethod, rhs: AnyProtoMethod) -> Bool {
        lhs.path == rhs.path
    }

    /// Hashes the path.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(path)
    }

    /// The path.
    public var description: String {
        path
    }
}
