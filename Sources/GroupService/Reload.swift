import Foundation
import GroupModel
import Logging
import PolicyHost
import Synchronization

/// A key whose new value needs a restart, and the value kept meanwhile.
public struct RestartOnlyChange: Sendable, Hashable, CustomStringConvertible {
    /// The key path, e.g. `listen.port`.
    public var key: String
    /// The value in force (kept).
    public var running: String
    /// The value in the reloaded file (ignored until a restart).
    public var requested: String

    /// `key: file says X, keeping Y until a restart`.
    public var description: String {
        "\(key): the file says \(requested); keeping \(running) until a restart"
    }
}

/// What a reload changed.
public struct ReloadOutcome: Sendable, Hashable {
    /// The new snapshot's generation.
    public var generation: Int
    /// Apps served from now on that were not before.
    public var appsAdded: [String]
    /// Apps no longer served: their tokens now get `UNAUTHENTICATED` / `UNKNOWN_APP`.
    public var appsRemoved: [String]
    /// Apps still served whose secrets, limits, custom fields, rate limits or policy changed.
    public var appsChanged: [String]
    /// Keys that changed in the file but need a restart; their running values stay.
    public var restartOnly: [RestartOnlyChange]
}

/// Why a reload was refused; the configuration in force stays.
public enum ReloadError: Error, Sendable, CustomStringConvertible {
    /// Another reload is under way.
    case inProgress
    /// The new file is invalid (file, key path, what was expected).
    case invalid(ConfigurationError)
    /// A policy plugin of the new configuration failed to load or initialise.
    case policy(String)

    /// What was wrong, for the log line.
    public var description: String {
        switch self {
        case .inProgress: "another reload is under way"
        case .invalid(let error): error.description
        case .policy(let message): "policy plugins: \(message)"
        }
    }
}

extension GroupdConfiguration {
    /// The keys a reload cannot change: they shape the listening socket, the store or the
    /// event loops, which live as long as the process. A reload that changes one logs it and
    /// keeps the running value. `auth` and `apps` (everything under them) reload. `tls` is TLS
    /// turned on or off; the TLS files themselves are read again on every reload.
    public static let restartOnlyKeys = [
        "listen.host", "listen.port", "listen.connect", "data_dir", "durability", "write_batch.max_writes",
        "write_batch.max_wait_microseconds", "store", "max_message_bytes", "max_header_list_bytes",
        "max_concurrent_streams", "max_connections", "drain_timeout_seconds", "event_loop_threads",
        "tls", "tls.handshake_timeout_seconds", "keepalive", "metrics", "console", "tracing", "compression", "reflection", "transport",
        "testing",
    ]

    /// `self` with every restart-only key set to `running`'s value, and the keys that differed.
    public func keepingRestartOnlyKeys(of running: GroupdConfiguration) -> (GroupdConfiguration, [RestartOnlyChange]) {
        var kept = self
        var changes: [RestartOnlyChange] = []
        func keep<T: Equatable>(_ key: String, _ path: WritableKeyPath<GroupdConfiguration, T>) {
            guard self[keyPath: path] != running[keyPath: path] else { return }
            changes.append(RestartOnlyChange(key: key, running: "\(running[keyPath: path])", requested: "\(self[keyPath: path])"))
            kept[keyPath: path] = running[keyPath: path]
        }
        keep("listen.host", \.listen.host)
        keep("listen.port", \.listen.port)
        keep("listen.connect", \.listen.connect)
        keep("data_dir", \.dataDir)
        keep("durability", \.durability)
        keep("write_batch.max_writes", \.writeBatch.maxWrites)
        keep("write_batch.max_wait_microseconds", \.writeBatch.maxWaitMicroseconds)
        keep("store", \.store)
        keep("max_message_bytes", \.maxMessageBytes)
        keep("max_header_list_bytes", \.maxHeaderListBytes)
        keep("max_concurrent_streams", \.maxConcurrentStreams)
        keep("max_connections", \.maxConnections)
        keep("drain_timeout_seconds", \.drainTimeoutSeconds)
        keep("event_loop_threads", \.eventLoopThreads)
        keep("metrics", \.metrics)
        keep("console", \.console)
        keep("tracing", \.tracing)
        keep("compression", \.compression)
        keep("reflection", \.reflection)
        keep("transport", \.transport)
        keep("testing", \.testing)
        let (transportKept, transportChanges) = kept.keepingRestartOnlyTransportKeys(of: running)
        return (transportKept, changes + transportChanges)
    }
}

extension GroupdService {
    /// Reload from the configuration file at `path` (SIGHUP): read and validate it, build the next
    /// snapshot and policy chains, and put them in force; calls in flight finish under the old
    /// snapshot and connections stay up. Every outcome is logged: what changed, the restart-only
    /// keys kept, or why the file was refused (the configuration in force then stays).
    /// - Returns: What changed, or `nil` when the reload was refused.
    @discardableResult
    public func reload(path: String) async -> ReloadOutcome? {
        do {
            let configuration: GroupdConfiguration
            do {
                configuration = try GroupdConfiguration.load(path: path)
            } catch let error as ConfigurationError {
                throw ReloadError.invalid(error)
            }
            let directory = (path as NSString).deletingLastPathComponent
            let outcome = try await reload(to: configuration, baseDirectory: directory.isEmpty ? nil : directory)
            for change in outcome.restartOnly {
                logger.warning("reload: \(change.key) needs a restart", metadata: [
                    "key": "\(change.key)", "running": "\(change.running)", "requested": "\(change.requested)",
                ])
            }
            logger.info("configuration reloaded", metadata: [
                "file": "\(path)", "generation": "\(outcome.generation)",
                "apps_added": "\(outcome.appsAdded.joined(separator: ","))",
                "apps_removed": "\(outcome.appsRemoved.joined(separator: ","))",
                "apps_changed": "\(outcome.appsChanged.joined(separator: ","))",
            ])
            return outcome
        } catch {
            logger.error("reload refused, the configuration in force stays: \(error)", metadata: ["file": "\(path)"])
            return nil
        }
    }

    /// Put `configuration` in force: the restart-only keys keep their running values, a new
    /// authenticator holds the new secrets (its token cache starts empty, so a removed secret or
    /// app stops working at once), rate limiters whose app kept the same `rate_limits` carry over
    /// with their buckets, and the policy chains are prepared before anything is swapped.
    /// - Parameters:
    ///   - configuration: A validated configuration.
    ///   - baseDirectory: The configuration file's directory, for relative plugin paths.
    /// - Returns: What changed.
    /// - Throws: ``ReloadError``; nothing changed.
    public func reload(to configuration: GroupdConfiguration, baseDirectory: String? = nil) async throws(ReloadError) -> ReloadOutcome {
        let started = reloading.withLock { busy in
            if busy { return false }
            busy = true
            return true
        }
        guard started else { throw .inProgress }
        defer { reloading.withLock { $0 = false } }

        do {
            try configuration.validate()
        } catch let error as ConfigurationError {
            throw .invalid(error)
        } catch {
            throw .invalid(ConfigurationError(file: "<reload>", keyPath: "", message: "\(error)"))
        }
        let old = snapshot
        let (next, restartOnly) = configuration.keepingRestartOnlyKeys(of: old.configuration)
        let prepared: PreparedChains?
        do {
            prepared = try policy.prepare(next, baseDirectory: baseDirectory)
        } catch {
            throw .policy("\(error)")
        }
        let authenticator = await Authenticator(configuration: next, clock: clock)
        let snapshot = ConfigurationSnapshot(
            configuration: next, authenticator: authenticator,
            rateLimiters: RateLimiters(configuration: next, previous: old.rateLimiters, now: { [clock] in clock.uptimeNanoseconds() }),
            generation: old.generation + 1)
        policy.install(prepared)
        install(snapshot)
        telemetry.apply(next)

        let before = Dictionary(old.configuration.apps.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        let after = Dictionary(next.apps.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        return ReloadOutcome(
            generation: snapshot.generation,
            appsAdded: next.apps.map(\.id).filter { before[$0] == nil },
            appsRemoved: old.configuration.apps.map(\.id).filter { after[$0] == nil },
            appsChanged: next.apps.filter { app in before[app.id].map { $0 != app } ?? false }.map(\.id),
            restartOnly: restartOnly)
    }
}
