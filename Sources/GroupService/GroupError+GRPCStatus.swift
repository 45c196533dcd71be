import GRPCProtocol
import GroupAPI
import GroupModel

/// The one place where a domain failure becomes a gRPC status: the code maps one to one, and
/// `grpc-status-details-bin` carries a `google.rpc.Status` with a `google.rpc.ErrorInfo`
/// (`reason`, `domain` "groupd", `metadata`), plus a `google.rpc.BadRequest` naming the field
/// for invalid arguments and a `google.rpc.RetryInfo` for refusals with `retry_delay_ms`.
extension GroupError: GRPCStatusConvertible {
    /// The `ErrorInfo.domain` of every groupd error.
    public static let errorDomain = "groupd"

    public var grpcStatus: GRPCStatus {
        let code = Self.statusCode(for: self.code)
        var info = Google_Rpc_ErrorInfo()
        info.reason = reason.rawValue
        info.domain = Self.errorDomain
        // `reason.<key>` entries carry a policy plugin's reason per rejected key into the
        // BadRequest below; they are not ErrorInfo metadata (keys there have no dots).
        info.metadata = metadata.filter { !$0.key.hasPrefix("reason.") }
        // A setting is named on the wire by its `GroupSettings` field.
        if let setting = metadata["setting"], let key = GroupSettingKey(rawValue: setting) {
            info.metadata["setting"] = key.apiName
        }
        var status = Google_Rpc_Status()
        status.code = Int32(code.rawValue)
        status.message = message
        status.details = [Google_Protobuf_Any(packing: info)]
        if let keys = metadata["error_keys"] {
            // A policy refusal: one violation per rejected field key, with the plugin's reason.
            var badRequest = Google_Rpc_BadRequest()
            badRequest.fieldViolations = keys.split(separator: ",").map { key in
                var violation = Google_Rpc_BadRequest.FieldViolation()
                violation.field = String(key)
                violation.description_p = metadata["reason.\(key)"] ?? message
                violation.reason = reason.rawValue
                return violation
            }
            status.details.append(Google_Protobuf_Any(packing: badRequest))
        } else if self.code == .invalidArgument, let field = metadata["field"] {
            var violation = Google_Rpc_BadRequest.FieldViolation()
            violation.field = field
            violation.description_p = message
            violation.reason = reason.rawValue
            var badRequest = Google_Rpc_BadRequest()
            badRequest.fieldViolations = [violation]
            status.details.append(Google_Protobuf_Any(packing: badRequest))
        }
        if let text = metadata["retry_delay_ms"], let delayMs = Int64(text) {
            // A refusal that says when to retry (RATE_LIMITED, SLOW_MODE): when the call would pass.
            var delay = Google_Protobuf_Duration()
            delay.seconds = delayMs / 1000
            delay.nanos = Int32(delayMs % 1000) * 1_000_000
            var retry = Google_Rpc_RetryInfo()
            retry.retryDelay = delay
            status.details.append(Google_Protobuf_Any(packing: retry))
        }
        return GRPCStatus(code, message, details: status.serializedBytes())
    }

    private static func statusCode(for code: Code) -> GRPCStatus.Code {
        switch code {
        case .cancelled: .cancelled
        case .invalidArgument: .invalidArgument
        case .deadlineExceeded: .deadlineExceeded
        case .notFound: .notFound
        case .alreadyExists: .alreadyExists
        case .permissionDenied: .permissionDenied
        case .resourceExhausted: .resourceExhausted
        case .failedPrecondition: .failedPrecondition
        case .aborted: .aborted
        case .outOfRange: .outOfRange
        case .unimplemented: .unimplemented
        case .internal: .internal
        case .unavailable: .unavailable
        case .dataLoss: .dataLoss
        case .unauthenticated: .unauthenticated
        default: .unknown
        }
    }
}
