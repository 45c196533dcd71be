import Foundation
import GroupAPI
public import PolicyHost

/// `apps[].policy`: an app's chain of policy plugins (docs/PLUGINS.md, docs/CONFIGURATION.md).
///
/// ```yaml
/// policy:
///   budget_ms: 200                       # per plugin call; default 200
///   hook_budgets_ms: {before_send_group_message: 50}
///   failure_modes: {before_invite: fail_closed}
///   plugins:
///     - path: libKeywordPolicy.so        # relative: the config file's directory, then groupd's
///       config: {words: [spam], mode: mask}   # a string, or a mapping sent as JSON
///       hooks: [before_create_group, before_send_group_message]
///       failure_mode: fail_open          # optional; overrides failure_modes for this plugin
/// ```
public struct AppPolicySettings: Sendable, Hashable {
    /// `plugins`: the chain, in order (the first reject or discard stops it).
    public var plugins: [PluginConfiguration]
    /// `budget_ms`: how long one plugin may take on one hook. Default 200.
    public var budgetMilliseconds: Int
    /// `hook_budgets_ms`: per-hook overrides of ``budgetMilliseconds``.
    public var hookBudgetMilliseconds: [PolicyHook: Int]
    /// `failure_modes`: per-hook failure modes of this app (unset hooks take
    /// `PolicyHook.defaultFailureMode`: custom-field validation fails closed, the rest open).
    public var failureModes: [PolicyHook: FailureMode]

    /// The keys `apps[].policy` accepts.
    static let keys = ["plugins", "budget_ms", "hook_budgets_ms", "failure_modes"]
    /// The keys of one entry of `apps[].policy.plugins`.
    static let pluginKeys = ["path", "config", "hooks", "failure_mode"]
    /// The accepted range of `budget_ms` and `hook_budgets_ms` values.
    static let budgetRange = 1...60_000
    /// The longest chain an app may configure.
    static let maxPlugins = 32

    /// Make an app's policy settings.
    public init(
        plugins: [PluginConfiguration], budgetMilliseconds: Int = 200, hookBudgetMilliseconds: [PolicyHook: Int] = [:],
        failureModes: [PolicyHook: FailureMode] = [:]
    ) {
        self.plugins = plugins
        self.budgetMilliseconds = budgetMilliseconds
        self.hookBudgetMilliseconds = hookBudgetMilliseconds
        self.failureModes = failureModes
    }

    /// The host's form, with `resolve` applied to every plugin path.
    public func hostConfiguration(resolvingPaths resolve: (String) -> String = { $0 }) -> AppPolicyConfiguration {
        AppPolicyConfiguration(
            plugins: plugins.map { plugin in
                var plugin = plugin
                plugin.path = resolve(plugin.path)
                return plugin
            },
            budget: .milliseconds(budgetMilliseconds),
            hookBudgets: hookBudgetMilliseconds.mapValues { .milliseconds($0) },
            failureModes: failureModes)
    }
}

extension GroupdConfiguration.App {
    /// Decode `policy` from the app's mapping (absent or null: no plugins). Every mistake names
    /// its key path (`apps[0].policy.plugins[1].hooks[2]`).
    static func decodePolicy(_ c: KeyedDecodingContainer<ConfigKey>) throws -> AppPolicySettings? {
        guard c.contains(ConfigKey("policy")), try !c.decodeNil(forKey: ConfigKey("policy")) else { return nil }
        return try c.decode(PolicyCoding.self, forKey: ConfigKey("policy")).settings
    }
}

/// The YAML form of ``AppPolicySettings``.
struct PolicyCoding: Codable {
    var settings: AppPolicySettings

    init(_ settings: AppPolicySettings) { self.settings = settings }

    init(from decoder: any Decoder) throws {
        let c = try decoder.configMapping(allowing: AppPolicySettings.keys)
        var budget: Int = try c.value("budget_ms", or: 200)
        if try !Self.checkBudget(budget, path: ["budget_ms"], decoder) { budget = 200 }
        var hookBudgets: [PolicyHook: Int] = [:]
        for (name, value) in try c.value("hook_budgets_ms", or: [String: Int]()).sorted(by: { $0.key < $1.key }) {
            let path = ["hook_budgets_ms", name]
            guard let hook = try Self.hook(name, path: path.map { ConfigKey($0) }, decoder) else { continue }
            if try Self.checkBudget(value, path: path, decoder) { hookBudgets[hook] = value }
        }
        var failureModes: [PolicyHook: FailureMode] = [:]
        for (name, value) in try c.value("failure_modes", or: [String: String]()).sorted(by: { $0.key < $1.key }) {
            let path = ["failure_modes", name]
            guard let hook = try Self.hook(name, path: path.map { ConfigKey($0) }, decoder) else { continue }
            failureModes[hook] = try Self.failureMode(value, path: path, decoder)
        }
        var plugins = try c.value("plugins", or: [PluginCoding]()).map(\.plugin)
        if plugins.count > AppPolicySettings.maxPlugins {
            try decoder.record(["plugins"], "expected at most \(AppPolicySettings.maxPlugins) plugins, found \(plugins.count)")
            plugins = Array(plugins.prefix(AppPolicySettings.maxPlugins))
        }
        settings = AppPolicySettings(
            plugins: plugins, budgetMilliseconds: budget, hookBudgetMilliseconds: hookBudgets, failureModes: failureModes)
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: ConfigKey.self)
        try c.encode(settings.budgetMilliseconds, forKey: ConfigKey("budget_ms"))
        if !settings.hookBudgetMilliseconds.isEmpty {
            try c.encode(Dictionary(uniqueKeysWithValues: settings.hookBudgetMilliseconds.map { ($0.key.rawValue, $0.value) }),
                         forKey: ConfigKey("hook_budgets_ms"))
        }
        if !settings.failureModes.isEmpty {
            try c.encode(Dictionary(uniqueKeysWithValues: settings.failureModes.map { ($0.key.rawValue, $0.value.rawValue) }),
                         forKey: ConfigKey("failure_modes"))
        }
        try c.encode(settings.plugins.map(PluginCoding.init), forKey: ConfigKey("plugins"))
    }

    /// Whether `value` is a budget; if not, the mistake is recorded at `path` below `decoder`.
    static func checkBudget(_ value: Int, path: [String], _ decoder: any Decoder) throws -> Bool {
        guard AppPolicySettings.budgetRange.contains(value) else {
            try decoder.record(
                path,
                "expected milliseconds from \(AppPolicySettings.budgetRange.lowerBound) to \(AppPolicySettings.budgetRange.upperBound), found \(value)")
            return false
        }
        return true
    }

    /// The hook called `name`; `nil` (the mistake recorded at `path` below `decoder`) for an unknown name.
    static func hook(_ name: String, path: [any CodingKey], _ decoder: any Decoder) throws -> PolicyHook? {
        guard let hook = PolicyHook(rawValue: name) else {
            try decoder.record(
                keys: path, "unknown hook '\(name)'; expected one of: \(PolicyHook.allCases.map(\.rawValue).joined(separator: ", "))")
            return nil
        }
        return hook
    }

    /// The failure mode called `name`; `nil` (the mistake recorded at `path` below `decoder`) for an unknown name.
    static func failureMode(_ name: String, path: [String], _ decoder: any Decoder) throws -> FailureMode? {
        guard let mode = FailureMode(rawValue: name) else {
            try decoder.record(path, "expected fail_closed or fail_open, found '\(name)'")
            return nil
        }
        return mode
    }
}

/// The YAML form of one `PluginConfiguration`: `config` may be a string (passed as it is) or
/// any other YAML value (passed as compact JSON).
struct PluginCoding: Codable {
    var plugin: PluginConfiguration

    init(_ plugin: PluginConfiguration) { self.plugin = plugin }

    init(from decoder: any Decoder) throws {
        let c = try decoder.configMapping(allowing: AppPolicySettings.pluginKeys)
        let path: String = try c.required("path")
        if path.isEmpty { try decoder.record(["path"], "expected the path of a plugin library, found an empty string") }
        var config = ""
        if c.contains(ConfigKey("config")), try !c.decodeNil(forKey: ConfigKey("config")) {
            if let text = try? c.decode(String.self, forKey: ConfigKey("config")) {
                config = text
            } else {
                config = try c.decode(PluginConfigValue.self, forKey: ConfigKey("config")).json
            }
        }
        let names: [String] = try c.required("hooks")
        if names.isEmpty { try decoder.record(["hooks"], "expected at least one hook") }
        var hooks: [PolicyHook] = []
        for (index, name) in names.enumerated() {
            guard let hook = try PolicyCoding.hook(name, path: [ConfigKey("hooks"), ConfigKey(intValue: index)!], decoder) else { continue }
            if !hooks.contains(hook) { hooks.append(hook) }
        }
        var failureMode: FailureMode?
        if let name = try c.decodeIfPresent(String.self, forKey: ConfigKey("failure_mode")) {
            failureMode = try PolicyCoding.failureMode(name, path: ["failure_mode"], decoder)
        }
        if hooks.contains(.afterEvent), Self.isWebhookPlugin(path), Self.configKeys(config)?.contains("queue_dir") == false {
            try decoder.record(
                ["config"],
                "the webhook plugin needs \"queue_dir\" (the after-event journal's directory) when its hooks include after_event")
        }
        plugin = PluginConfiguration(path: path, config: config, hooks: hooks, failureMode: failureMode)
    }

    /// Whether `path` names the shipped webhook plugin (`libWebhookPolicy.so`, in any directory),
    /// whose `queue_dir` is required with `after_event` (docs/PLUGINS.md). The plugin cannot
    /// refuse that itself: `instance_new` is not told the entry's hooks.
    static func isWebhookPlugin(_ path: String) -> Bool {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        return name == "libWebhookPolicy.so" || name == "libWebhookPolicy.dylib"
    }

    /// The top-level keys of a JSON object `config`; `nil` when it is not one (the plugin says why).
    static func configKeys(_ config: String) -> Set<String>? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(config.utf8)) as? [String: Any] else { return nil }
        return Set(object.keys)
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: ConfigKey.self)
        try c.encode(plugin.path, forKey: ConfigKey("path"))
        try c.encode(plugin.config, forKey: ConfigKey("config"))
        try c.encode(plugin.hooks.map(\.rawValue), forKey: ConfigKey("hooks"))
        if let mode = plugin.failureMode { try c.encode(mode.rawValue, forKey: ConfigKey("failure_mode")) }
    }
}

/// Any YAML value of a plugin's `config`, rendered as compact JSON (keys sorted).
enum PluginConfigValue: Decodable {
    case null, bool(Bool), int(Int), double(Double), string(String)
    case list([PluginConfigValue]), mapping([String: PluginConfigValue])

    init(from decoder: any Decoder) throws {
        if let mapping = try? decoder.container(keyedBy: ConfigKey.self) {
            var values: [String: PluginConfigValue] = [:]
            for key in mapping.allKeys { values[key.stringValue] = try mapping.decode(PluginConfigValue.self, forKey: key) }
            self = .mapping(values)
            return
        }
        if var list = try? decoder.unkeyedContainer() {
            var values: [PluginConfigValue] = []
            while !list.isAtEnd { values.append(try list.decode(PluginConfigValue.self)) }
            self = .list(values)
            return
        }
        let single = try decoder.singleValueContainer()
        if single.decodeNil() { self = .null }
        else if let value = try? single.decode(Bool.self) { self = .bool(value) }
        else if let value = try? single.decode(Int.self) { self = .int(value) }
        else if let value = try? single.decode(Double.self) { self = .double(value) }
        else { self = .string(try single.decode(String.self)) }
    }

    /// Compact JSON.
    var json: String {
        switch self {
        case .null: "null"
        case .bool(let value): value ? "true" : "false"
        case .int(let value): String(value)
        case .double(let value): value.isFinite ? "\(value)" : "null"
        case .string(let value): Self.quoted(value)
        case .list(let values): "[" + values.map(\.json).joined(separator: ",") + "]"
        case .mapping(let values):
            "{" + values.keys.sorted().map { Self.quoted($0) + ":" + values[$0]!.json }.joined(separator: ",") + "}"
        }
    }

    /// `text` as a JSON string literal.
    static func quoted(_ text: String) -> String {
        var out = ""
        JSONString.append(text, to: &out)
        return out
    }
}
