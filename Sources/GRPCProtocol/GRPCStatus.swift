/// A gRPC status: the code and message a call ends with, and the optional
/// `google.rpc.Status` bytes sent in `grpc-status-details-bin`.
///
/// `GRPCStatus` is also the error handlers throw to end a call with a status other than OK.
public struct GRPCStatus: Error, Sendable, Hashable, CustomStringConvertible {
    /// A gRPC status code. Extensible: unknown values received from elsewhere keep their number.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        /// The code's number on the wire (`grpc-status`).
        public let rawValue: Int

        /// Creates a code from its wire number; nil outside 0...16.
        public init?(rawValue: Int) {
            guard (0...16).contains(rawValue) else { return nil }
            self.rawValue = rawValue
        }

        private init(_ value: Int) { self.rawValue = value }

        public static let ok = Code(0)
        public static let cancelled = Code(1)
        public static let unknown = Code(2)
        public static let invalidArgument = Code(3)
        public static let deadlineExceeded = Code(4)
        public static let notFound = Code(5)
        public static let alreadyExists = Code(6)
        public static let permissionDenied = Code(7)
        public static let resourceExhausted = Code(8)
        public static let failedPrecondition = Code(9)
        public static let aborted = Code(10)
        public static let outOfRange = Code(11)
        public static let unimplemented = Code(12)
        public static let `internal` = Code(13)
        public static let unavailable = Code(14)
        public static let dataLoss = Code(15)
        public static let unauthenticated = Code(16)

        private static let names = [
            "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
            "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
            "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
            "UNAUTHENTICATED",
        ]

        /// The canonical UPPER_SNAKE name of the code.
        public var description: String { Self.names[rawValue] }
    }

    /// The status code.
    public var code: Code
    /// A human-readable message, sent percent-encoded in `grpc-message`.
    public var message: String
    /// Serialized `google.rpc.Status`, sent base64-encoded in `grpc-status-details-bin`.
    public var details: [UInt8]?

    /// Creates a status.
    /// - Parameters:
    ///   - code: The status code.
    ///   - message: The message for `grpc-message`; empty sends none.
    ///   - details: A serialized `google.rpc.Status` for `grpc-status-details-bin`, if any.
    public init(_ code: Code, _ message: String = "", details: [UInt8]? = nil) {
        self.code = code
        self.message = message
        self.details = details
    }

    /// The status of a call that succeeded.
    public static let ok = GRPCStatus(.ok)

    public var description: String {
        message.isEmpty ? code.description : "\(code): \(message)"
    }
}

/// An error that knows which gRPC status it ends a call with.
///
/// The service layer conforms its domain errors to this protocol: the one place where a
/// domain failure becomes a status. Errors that do not conform end the call with `INTERNAL`
/// and are logged, never shown to the client.
public protocol GRPCStatusConvertible: Error {
    /// The status this error ends a call with.
    var grpcStatus: GRPCStatus { get }
}

extension GRPCStatus: GRPCStatusConvertible {
    public var grpcStatus: GRPCStatus { self }
}

extension GRPCStatus {
    /// The status a call ends with when its handler throws `error`: the error's own
    /// (``GRPCStatusConvertible``), `CANCELLED` for a cancelled task, `INTERNAL` for anything
    /// else (whose text is not shown to the client).
    public init(for error: any Error) {
        if let convertible = error as? any GRPCStatusConvertible {
            self = convertible.grpcStatus
        } else if error is CancellationError {
            self = GRPCStatus(.cancelled, "the call was cancelled")
        } else {
            self = GRPCStatus(.internal, "internal error")
        }
    }
}

/// The statuses a transport ends a call with for the call's own shape, the same in every
/// transport (HTTP/2 and in process).
extension GRPCStatus {
    /// No route for the path.
    package static func methodNotFound(_ path: String) -> GRPCStatus {
        GRPCStatus(.unimplemented, "Method not found: \(path)")
    }

    /// A second request message for a unary or server-streaming method.
    package static let moreThanOneRequest = GRPCStatus(.internal, "more than one request message for a method that takes one")

    /// A unary or server-streaming request that ended without its message.
    package static let noRequestMessage = GRPCStatus(.internal, "request stream ended without a message")

    /// The request ended with a message incomplete.
    package static let endedInsideMessage = GRPCStatus(.internal, "request ended inside a message")

    /// The call's deadline passed.
    package static let deadlineExceeded = GRPCStatus(.deadlineExceeded, "deadline exceeded")
}
