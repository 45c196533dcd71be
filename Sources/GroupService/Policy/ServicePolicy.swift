public import Logging
public import PolicyHost
public import GroupModel

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The service's policy plugins: a `PolicyHost` and the per-app chains built from the
/// configuration's `apps[].policy`. One instance lives as long as the process; a reload builds
/// the next chains with ``prepare(_:baseDirectory:)`` and swaps them in with ``install(_:)``.
public final class ServicePolicy: Sendable {
    /// The host, `nil` when the service runs without plugins (every hook allows at no cost).
    public let host: PolicyHost?

    /// No plugins: every hook allows.
    public static let disabled = ServicePolicy(host: nil)

    /// A host with the default settings (4 plugin threads, breaker after 5 failures for 30 s),
    /// logging as `groupd.policy` through `logger`'s handler, and no chains yet.
    /// - Parameters:
    ///   - logger: Where the host logs.
    ///   - clock: The clock the breakers' cooldowns follow (its elapsed time); the time budget of
    ///     each plugin call stays on the continuous clock, since it bounds real work.
    public static func standard(logger: Logger, clock: any WallClock = SystemWallClock()) -> ServicePolicy {
        var policyLogger = logger
        policyLogger[metadataKey: "component"] = "policy"
        let base = ContinuousClock.now
        let origin = clock.uptimeNanoseconds()
        let breakerNow: @Sendable () -> ContinuousClock.Instant = {
            base.advanced(by: .nanoseconds(Int64(clamping: clock.uptimeNanoseconds() &- origin)))
        }
        return ServicePolicy(host: PolicyHost(configuration: .defaults, logger: policyLogger, breakerNow: breakerNow))
    }

    /// The directory of a configuration file's path (`nil` for a bare file name: the working directory).
    public static func directory(of path: String) -> String? {
        guard let slash = path.lastIndex(of: "/") else { return nil }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// Wrap a host (its chains are empty until ``apply(_:baseDirectory:)`` or ``install(_:)``).
    public init(host: PolicyHost?) {
        self.host = host
    }

    /// Every app's chain as the host takes it, relative plugin paths resolved with
    /// ``resolvePluginPath(_:baseDirectory:)``. Apps without `policy` (or with no plugins) are absent.
    /// - Parameters:
    ///   - configuration: The validated configuration.
    ///   - baseDirectory: The configuration file's directory (`nil`: the working directory).
    public static func chains(for configuration: GroupdConfiguration, baseDirectory: String?) -> [String: AppPolicyConfiguration] {
        var chains: [String: AppPolicyConfiguration] = [:]
        for app in configuration.apps {
            guard let policy = app.policy, !policy.plugins.isEmpty else { continue }
            chains[app.id] = policy.hostConfiguration { resolvePluginPath($0, baseDirectory: baseDirectory) }
        }
        return chains
    }

    /// Load and instantiate every app's chain of `configuration` without putting it in force
    /// (for a reload: build everything, then swap). `nil` when the service has no host.
    /// - Throws: `PolicyLoadError` (which plugin, which app, why); nothing changes.
    public func prepare(_ configuration: GroupdConfiguration, baseDirectory: String?) throws(PolicyLoadError) -> PreparedChains? {
        guard let host else { return nil }
        return try host.prepare(Self.chains(for: configuration, baseDirectory: baseDirectory))
    }

    /// Put chains from ``prepare(_:baseDirectory:)`` in force; calls in flight finish on the old ones.
    public func install(_ prepared: PreparedChains?) {
        guard let host, let prepared else { return }
        host.install(prepared)
    }

    /// ``prepare(_:baseDirectory:)`` then ``install(_:)``: at startup, and for a reload that has
    /// nothing else to build. A plugin that fails to load or initialise leaves the chains in force.
    /// - Throws: `PolicyLoadError`.
    public func apply(_ configuration: GroupdConfiguration, baseDirectory: String?) throws(PolicyLoadError) {
        install(try prepare(configuration, baseDirectory: baseDirectory))
    }

    /// A plugin of the configuration that cannot be put in force, by its key path.
    public struct LoadFailure: Sendable, Hashable, CustomStringConvertible {
        /// `apps[i].policy.plugins[j]`.
        public var keyPath: String
        /// Why: the load error (which path, which app, which code, the plugin's message).
        public var error: PolicyLoadError

        /// `apps[i].policy.plugins[j]: policy plugin PATH for app APP: CODE: MESSAGE`.
        public var description: String { "\(keyPath): \(error)" }
    }

    /// Loads every configured plugin (`dlopen`, the ABI checks) and makes one instance of each
    /// chain entry with its app id and config string, then lets them go (`instance_destroy`):
    /// what `groupd check-config` runs. Nothing is put in force.
    /// - Returns: Every entry that failed, in configuration order (empty: all load), and how
    ///   many entries were checked.
    public func checkLoad(
        _ configuration: GroupdConfiguration, baseDirectory: String?
    ) -> (failures: [LoadFailure], checked: Int) {
        guard let host else { return ([], 0) }
        var failures: [LoadFailure] = []
        var checked = 0
        for (appIndex, app) in configuration.apps.enumerated() {
            guard let policy = app.policy else { continue }
            for (pluginIndex, plugin) in policy.plugins.enumerated() {
                checked += 1
                var single = policy
                single.plugins = [plugin]
                let chain = single.hostConfiguration { Self.resolvePluginPath($0, baseDirectory: baseDirectory) }
                do {
                    // Built and dropped at once: the instance is destroyed when the chain goes.
                    _ = try host.prepare([app.id: chain])
                } catch {
                    failures.append(LoadFailure(keyPath: "apps[\(appIndex)].policy.plugins[\(pluginIndex)]", error: error))
                }
            }
        }
        return (failures, checked)
    }

    /// Stop the host's threads (after the queued plugin calls ran).
    public func shutdown() async throws {
        try await host?.shutdown()
    }

    /// Where a configured plugin path points: an absolute path as it is; a relative one against
    /// `baseDirectory` (the configuration file's directory) when a file is there, else against
    /// the directory of the groupd executable (where `swift build` puts the shipped plugins),
    /// else against `baseDirectory` (so the load error names the path the operator expects).
    public static func resolvePluginPath(_ path: String, baseDirectory: String?) -> String {
        guard !path.hasPrefix("/") else { return path }
        let fromConfig = join(baseDirectory ?? ".", path)
        if access(fromConfig, F_OK) == 0 { return fromConfig }
        if let executable = executableDirectory() {
            let beside = join(executable, path)
            if access(beside, F_OK) == 0 { return beside }
        }
        return fromConfig
    }

    /// The directory of the running executable, from `/proc/self/exe` (Linux).
    static func executableDirectory() -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        let path = String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard let slash = path.lastIndex(of: "/") else { return nil }
        return String(path[..<slash])
    }

    private static func join(_ directory: String, _ path: String) -> String {
        directory.hasSuffix("/") ? directory + path : directory + "/" + path
    }
}
