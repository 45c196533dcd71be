import Dispatch
import Logging
import Synchronization
import PolicyHost
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Finds the plugin libraries SwiftPM built next to the test bundle (`swift build --build-tests`
/// builds every product, dynamic libraries included, into the same directory).
enum PluginLibraries {
    #if canImport(Darwin)
    static let suffix = "dylib"
    #else
    static let suffix = "so"
    #endif

    /// The build directory holding `libPolicyFixtureBehaviors.so`: `GROUPD_PLUGIN_DIR` if set,
    /// else the directory of the test executable (`/proc/self/exe`, then `argv[0]`), or
    /// `.build/debug` under the working directory.
    static let directory: String = {
        var candidates: [String] = []
        if let override = getenv("GROUPD_PLUGIN_DIR") { candidates.append(String(cString: override)) }
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        if count > 0 {
            candidates.append(parent(of: String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)))
        }
        if let argument = CommandLine.arguments.first, argument.contains("/") { candidates.append(parent(of: argument)) }
        candidates.append(".build/debug")
        let probe = "libPolicyFixtureBehaviors.\(suffix)"
        for candidate in candidates {
            // The test image may sit inside a bundle directory (macOS: .xctest/Contents/MacOS).
            var directory = candidate
            for _ in 0..<4 {
                if access(directory + "/" + probe, R_OK) == 0 { return directory }
                directory = parent(of: directory)
            }
        }
        return candidates.first ?? "."
    }()

    static func path(_ product: String) -> String {
        "\(directory)/lib\(product).\(suffix)"
    }

    private static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    static var behaviors: String { path("PolicyFixtureBehaviors") }

    /// Read a per-tag counter of the behaviours fixture (0 live, 1 destroyed, 2 max in flight, 3 completed).
    static func fixtureStat(_ tag: String, _ which: Int32) -> Int {
        guard let handle = dlopen(behaviors, RTLD_NOW | RTLD_LOCAL), let symbol = dlsym(handle, "policy_fixture_stat") else {
            return -1
        }
        typealias Stat = @convention(c) (UnsafePointer<CChar>, Int32) -> Int
        return tag.withCString { unsafeBitCast(symbol, to: Stat.self)($0, which) }
    }
}

/// A host with test-friendly settings and a logger that keeps quiet unless asked.
func makeHost(
    threads: Int = 4, breakerThreshold: Int = 5, breakerCooldown: Duration = .seconds(30), logs: CapturedLogs? = nil,
    breakerClock: BreakerTestClock? = nil
) -> PolicyHost {
    var logger = logs.map { logs in Logger(label: "groupd.policy.test") { _ in CapturingLogHandler(store: logs) } }
        ?? Logger(label: "groupd.policy.test")
    if logs == nil { logger.logLevel = getenv("POLICY_TEST_LOGS") == nil ? .critical : .debug }
    return PolicyHost(
        configuration: PolicyHostConfiguration(threads: threads, breakerThreshold: breakerThreshold, breakerCooldown: breakerCooldown),
        logger: logger, breakerNow: { breakerClock?.now ?? ContinuousClock.now })
}

/// A continuous-clock reading that moves only when told, for breaker cooldowns.
final class BreakerTestClock: Sendable {
    private let base = ContinuousClock.now
    private let offset = Mutex<Duration>(.zero)

    /// The time it stands at.
    var now: ContinuousClock.Instant { base.advanced(by: offset.withLock { $0 }) }

    /// Move it forward by `duration`.
    func advance(by duration: Duration) { offset.withLock { $0 += duration } }
}

/// A unique tag for fixture statistics.
func uniqueTag(_ prefix: String) -> String {
    "\(prefix)-\(UInt32.random(in: 0...UInt32.max))"
}

/// Run `body` with a fresh host and shut its thread pool down afterwards.
func withHost<R>(
    threads: Int = 4, breakerThreshold: Int = 5, breakerCooldown: Duration = .seconds(30), logs: CapturedLogs? = nil,
    breakerClock: BreakerTestClock? = nil, _ body: (PolicyHost) async throws -> R
) async throws -> R {
    let host = makeHost(
        threads: threads, breakerThreshold: breakerThreshold, breakerCooldown: breakerCooldown, logs: logs,
        breakerClock: breakerClock)
    do {
        let result = try await body(host)
        try await host.shutdown()
        return result
    } catch {
        try? await host.shutdown()
        throw error
    }
}

/// A chain entry for the behaviours fixture with `config` (e.g. "mode=reject;tag=x").
func fixture(_ config: String, hooks: [PolicyHook], failureMode: FailureMode? = nil) -> PluginConfiguration {
    PluginConfiguration(path: PluginLibraries.behaviors, config: config, hooks: hooks, failureMode: failureMode)
}

extension PluginLibraries {
    /// Waits until statistic `which` (see ``fixtureStat(_:_:)``) of `tag` reaches `value` — woken by
    /// the fixture at each change, not by polling; at most `seconds`, a bound for a broken test —
    /// and returns it then. An instance is destroyed by whichever thread lets go of it last,
    /// which may be a pool thread a moment after the caller got its answer: wait for the count.
    static func fixtureStat(_ tag: String, _ which: Int32, reaching value: Int, seconds: Int = 60) async -> Int {
        let library = behaviors
        // The wait blocks a thread: a dispatch thread, never the cooperative pool's.
        return await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                guard let handle = dlopen(library, RTLD_NOW | RTLD_LOCAL), let symbol = dlsym(handle, "policy_fixture_wait_stat") else {
                    continuation.resume(returning: -1)
                    return
                }
                typealias Wait = @convention(c) (UnsafePointer<CChar>, Int32, Int, Int) -> Int
                let wait = unsafeBitCast(symbol, to: Wait.self)
                continuation.resume(returning: tag.withCString { wait($0, which, value, seconds * 1000) })
            }
        }
    }
}

/// Log lines a host wrote, as "level message".
final class CapturedLogs: Sendable {
    private let stored = Mutex<[String]>([])
    var lines: [String] { stored.withLock { $0 } }
    func append(_ line: String) { stored.withLock { $0.append(line) } }
}

/// A `LogHandler` that keeps every line in a ``CapturedLogs``.
struct CapturingLogHandler: LogHandler {
    let store: CapturedLogs
    var logLevel: Logger.Level = .trace
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        store.append("\(event.level) \(event.message)")
    }
}
