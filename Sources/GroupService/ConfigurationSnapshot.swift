import GroupModel

/// Everything a call needs from the configuration, built once per configuration and never
/// changed: the apps' limits and custom-field definitions, the authenticator holding their
/// secrets and the rate limiters. (The policy plugins' chains live in the policy host, which
/// ``GroupdService/reload(to:baseDirectory:)`` prepares before and swaps with the snapshot.)
///
/// ``GroupdService`` holds one snapshot and swaps it whole on reload; each call reads it once,
/// when it is authenticated, and runs to its end under that snapshot, so a call in flight never
/// sees half of an old configuration and half of a new one.
public final class ConfigurationSnapshot: Sendable {
    /// The configuration in force. After a reload, the keys that need a restart keep the
    /// values the server started with (see `GroupdConfiguration.restartOnlyKeys`).
    public let configuration: GroupdConfiguration
    /// 1 for the configuration the server started with, then one more per accepted reload.
    public let generation: Int
    /// Verifies tokens against this configuration's apps and secrets.
    public let authenticator: Authenticator
    /// Each app's rate limiters (apps without `rate_limits` have none).
    public let rateLimiters: RateLimiters
    /// Each app's limits, by app id.
    let limits: [String: AppLimits]
    /// Each app's custom-field definitions, by app id (apps without any are absent).
    let customFields: [String: CustomFieldSchema]

    /// Assemble a snapshot.
    /// - Parameters:
    ///   - configuration: The validated configuration.
    ///   - authenticator: Its authenticator.
    ///   - rateLimiters: Its rate limiters (default: fresh ones).
    ///   - generation: Its number.
    public init(
        configuration: GroupdConfiguration, authenticator: Authenticator, rateLimiters: RateLimiters? = nil,
        generation: Int = 1
    ) {
        self.configuration = configuration
        self.generation = generation
        self.authenticator = authenticator
        self.rateLimiters = rateLimiters ?? RateLimiters(configuration: configuration)
        self.limits = Dictionary(configuration.apps.map { ($0.id, $0.limits) }, uniquingKeysWith: { first, _ in first })
        self.customFields = Dictionary(
            configuration.apps.compactMap { app in app.customFields.map { (app.id, $0) } },
            uniquingKeysWith: { first, _ in first })
    }

    /// The app `id`'s limits, if it is served.
    public func limits(app id: String) -> AppLimits? { limits[id] }

    /// The app `id`'s custom-field definitions, if it has any.
    public func customFields(app id: String) -> CustomFieldSchema? { customFields[id] }
}
