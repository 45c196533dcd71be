import GRPCProtocol
import GroupModel
import NIOCore

/// Everything a handler knows about its call once the caller is authenticated.
public struct CallContext: Sendable {
    /// Who calls, for which app, acting as whom.
    public let caller: Caller
    /// The caller's app limits.
    public let limits: AppLimits
    /// The app's custom-field definitions (`nil`: none configured, any non-empty key is accepted).
    public let customFields: CustomFieldSchema?
    /// The transport's view of the call (metadata, deadline).
    public let server: ServerContext
    /// The service clock's time when the call was authenticated: the time its views are shown
    /// at (a mute that ended before it is not shown).
    public let now: Timestamp
}
