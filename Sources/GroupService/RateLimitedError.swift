import GRPCProtocol
import GroupModel

/// A call refused by a rate limit: `RESOURCE_EXHAUSTED` with the `ErrorInfo` of every groupd
/// error (reason `RATE_LIMITED`, metadata `scope`: `app`, `operator` or `operator_writes`) and a
/// `google.rpc.RetryInfo` whose `retry_delay` is when a call would pass.
public struct RateLimitedError: Error, Sendable, Hashable, GRPCStatusConvertible {
    /// The bucket that refused and the delay.
    public let refusal: RateLimitRefusal
    /// The app whose limit it is.
    public let appID: String

    /// Create the error of `refusal` in `appID`.
    public init(_ refusal: RateLimitRefusal, appID: String) {
        self.refusal = refusal
        self.appID = appID
    }

    /// The retry delay, rounded up to the millisecond (and at least one).
    public var retryDelayMilliseconds: Int64 {
        max(1, Int64((refusal.retryAfterSeconds * 1000).rounded(.up)))
    }

    /// The domain error (code, reason, message, metadata; `retry_delay_ms` becomes the
    /// `google.rpc.RetryInfo` of its status).
    public var groupError: GroupError {
        GroupError(
            code: .resourceExhausted, reason: .rateLimited,
            message: "rate limit '\(refusal.scope)' of app '\(appID)' reached; retry in \(retryDelayMilliseconds) ms",
            metadata: ["scope": refusal.scope, "retry_delay_ms": String(retryDelayMilliseconds)])
    }

    /// `RESOURCE_EXHAUSTED` with the `ErrorInfo` of ``groupError`` and a `google.rpc.RetryInfo`.
    public var grpcStatus: GRPCStatus { groupError.grpcStatus }
}
