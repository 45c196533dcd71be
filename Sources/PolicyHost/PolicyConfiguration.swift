/// One plugin in an app's chain.
public struct PluginConfiguration: Sendable, Hashable, Codable {
    /// Path of the shared library (`.so`/`.dylib`).
    public var path: String
    /// The plugin's own configuration, an opaque string (JSON for the shipped plugins).
    public var config: String
    /// The hooks this plugin is called on; others skip it.
    public var hooks: [PolicyHook]
    /// What a failure of this plugin means; `nil` uses each hook's ``PolicyHook/defaultFailureMode``.
    public var failureMode: FailureMode?

    private enum CodingKeys: String, CodingKey {
        case path, config, hooks
        case failureMode = "failure_mode"
    }

    /// Make a chain entry.
    public init(path: String, config: String = "", hooks: [PolicyHook], failureMode: FailureMode? = nil) {
        self.path = path
        self.config = config
        self.hooks = hooks
        self.failureMode = failureMode
    }
}

/// One app's policy: its chain of plugins, in order, and its time budgets.
public struct AppPolicyConfiguration: Sendable, Hashable {
    /// The chain, in order: the first reject or discard stops it; rewrites compose in order.
    public var plugins: [PluginConfiguration]
    /// How long one plugin may take on one hook before its failure mode applies.
    public var budget: Duration
    /// Per-hook overrides of ``budget``.
    public var hookBudgets: [PolicyHook: Duration]
    /// The app's failure mode per hook; a plugin's own ``PluginConfiguration/failureMode`` wins,
    /// and a hook absent here takes ``PolicyHook/defaultFailureMode``.
    public var failureModes: [PolicyHook: FailureMode]

    /// Make an app's policy; the budget defaults to 200 ms.
    public init(
        plugins: [PluginConfiguration], budget: Duration = .milliseconds(200), hookBudgets: [PolicyHook: Duration] = [:],
        failureModes: [PolicyHook: FailureMode] = [:]
    ) {
        self.plugins = plugins
        self.budget = budget
        self.hookBudgets = hookBudgets
        self.failureModes = failureModes
    }

    /// The failure mode of `plugin` on `hook`: the plugin's own, else the app's for the hook,
    /// else the hook's default.
    public func failureMode(of plugin: PluginConfiguration, for hook: PolicyHook) -> FailureMode {
        plugin.failureMode ?? failureModes[hook] ?? hook.defaultFailureMode
    }

    /// The budget for `hook`.
    public func budget(for hook: PolicyHook) -> Duration {
        hookBudgets[hook] ?? budget
    }
}

/// Settings of the host itself (not per app).
public struct PolicyHostConfiguration: Sendable, Hashable {
    /// Threads that run plugin calls: plugins may block, so they never run on the
    /// cooperative pool or an event loop.
    public var threads: Int
    /// Consecutive failures (errors, timeouts, unknown decisions) that trip a plugin's breaker.
    public var breakerThreshold: Int
    /// How long a tripped plugin stays off before one trial call is let through.
    public var breakerCooldown: Duration

    /// The defaults: 4 threads, trip after 5 consecutive failures, for 30 seconds.
    public static var defaults: PolicyHostConfiguration {
        PolicyHostConfiguration(threads: 4, breakerThreshold: 5, breakerCooldown: .seconds(30))
    }

    /// Make host settings.
    public init(threads: Int, breakerThreshold: Int, breakerCooldown: Duration) {
        self.threads = threads
        self.breakerThreshold = breakerThreshold
        self.breakerCooldown = breakerCooldown
    }
}
