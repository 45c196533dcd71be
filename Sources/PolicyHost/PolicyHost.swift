import Logging
import NIOCore
import NIOPosix
import PolicyABI
import NIOConcurrencyHelpers
import Synchronization
import Tracing

/// Counters of one plugin in one app's chain (since that chain was built).
public struct PluginStatistics: Sendable, Hashable {
    /// The plugin's name (from its table).
    public var plugin: String
    /// The library's path.
    public var path: String
    /// Calls that reached the plugin.
    public var calls: Int
    /// Calls the plugin answered with a reject.
    public var rejects: Int
    /// Calls that failed: errors, timeouts and unknown decisions.
    public var failures: Int
    /// Calls past the hook's time budget (included in ``failures``).
    public var timeouts: Int
    /// Times the circuit breaker tripped.
    public var breakerTrips: Int
    /// Calls not made because the breaker was open.
    public var skippedByBreaker: Int
}

/// The circuit breaker of one plugin in one app's chain.
public struct PluginBreakerState: Sendable, Hashable {
    /// Closed (calls go through), half-open (the next call is a trial) or open (calls skipped).
    public enum State: Int, Sendable, Hashable {
        case closed = 0, halfOpen = 1, open = 2
    }

    /// The app.
    public var app: String
    /// The plugin's name.
    public var plugin: String
    /// The breaker's state now.
    public var state: State
}

/// Loads policy plugins, keeps each app's chain and runs hooks on a dedicated thread pool.
///
/// Call ``run(_:app:request:)`` from an async RPC handler: the plugin runs on one of the
/// host's threads (never the cooperative pool or an event loop), within the hook's budget.
public final class PolicyHost: Sendable {
    private let settings: PolicyHostConfiguration
    let pool: NIOThreadPool
    /// Budget timers fire here, on a thread of their own, so an answer past its budget is
    /// decided on time even when the cooperative pool is busy. Nothing else runs on it.
    private let timers: MultiThreadedEventLoopGroup
    private let libraries = PluginLibraryCache.shared
    let chains = NIOLockedValueBox<[String: AppChain]>([:])
    /// Per app: the after-event notifications not yet handed to the plugins, in order.
    let afterEventQueues = NIOLockedValueBox<[String: AfterEventQueue]>([:])
    let logger: Logger
    /// Told how long each plugin call took (metrics); set once at start-up.
    private let callObserver = NIOLockedValueBox<(@Sendable (_ plugin: String, _ hook: PolicyHook, _ duration: Duration) -> Void)?>(nil)

    /// Makes a span for each plugin call of a traced call; set once at start-up.
    private let tracer = NIOLockedValueBox<(any Tracer)?>(nil)

    /// The time the circuit breakers' cooldowns are measured on.
    let breakerNow: @Sendable () -> ContinuousClock.Instant

    /// Start a host with no chains (every hook allows) and its thread pool.
    /// - Parameters:
    ///   - configuration: threads and circuit-breaker settings.
    ///   - logger: where load failures, breaker trips and plugins' `log` lines go.
    ///   - breakerNow: the time the circuit breakers' cooldowns are measured on (the continuous
    ///     clock; injectable so that tests move it instead of waiting out a cooldown).
    public init(
        configuration: PolicyHostConfiguration = .defaults, logger: Logger = Logger(label: "groupd.policy"),
        breakerNow: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now }
    ) {
        self.settings = configuration
        self.logger = logger
        self.breakerNow = breakerNow
        self.pool = NIOThreadPool(numberOfThreads: max(1, configuration.threads))
        self.pool.start()
        self.timers = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    }

    /// Stop the thread pool after the queued plugin calls ran. Calls made afterwards fail
    /// with ``PolicyFailure/Kind/hostShutdown`` (and their failure mode applies).
    public func shutdown() async throws {
        try await pool.shutdownGracefully()
        try await timers.shutdownGracefully()
    }

    /// Replace every app's chain. Everything is loaded and instantiated first: if one plugin
    /// fails, nothing changes (the previous chains stay in force) and the error is logged and thrown.
    /// Old instances are destroyed once the calls still using them finished.
    /// - Throws: ``PolicyLoadError`` saying which plugin, which app and why.
    public func apply(_ apps: [String: AppPolicyConfiguration]) throws(PolicyLoadError) {
        install(try prepare(apps))
    }

    /// Load and instantiate every app's chain without putting any in force: the first half of
    /// ``apply(_:)``, for a reload that must build everything (configuration, chains) before it
    /// swaps anything. Dropping the result destroys its instances.
    /// - Throws: ``PolicyLoadError`` saying which plugin, which app and why.
    public func prepare(_ apps: [String: AppPolicyConfiguration]) throws(PolicyLoadError) -> PreparedChains {
        var built: [String: AppChain] = [:]
        for (app, configuration) in apps.sorted(by: { $0.key < $1.key }) {
            built[app] = try buildChain(app: app, configuration)
        }
        return PreparedChains(chains: built)
    }

    /// Put chains built by ``prepare(_:)`` in force for every app (apps absent from them lose
    /// their chain). Old instances are destroyed once the calls still using them finished.
    public func install(_ prepared: PreparedChains) {
        let old = chains.withLockedValue { chains in
            let old = chains
            chains = prepared.chains
            return old
        }
        _ = old  // released here; in-flight calls keep their instances alive until they return
    }

    /// Replace one app's chain (`nil` removes it), leaving the other apps' chains alone.
    /// - Throws: ``PolicyLoadError``; the app's previous chain then stays in force.
    public func apply(app: String, _ configuration: AppPolicyConfiguration?) throws(PolicyLoadError) {
        let chain = try configuration.map { (configuration) throws(PolicyLoadError) in try buildChain(app: app, configuration) }
        let old = chains.withLockedValue { chains in
            let old = chains[app]
            chains[app] = chain
            return old
        }
        _ = old  // released outside the lock: its instances are destroyed once their calls drain
    }

    /// Whether `app` has a plugin on `hook` (to skip building a request nobody reads).
    public func hasPlugins(for hook: PolicyHook, app: String) -> Bool {
        chains.withLockedValue { $0[app] }?.links.contains { $0.hooks.contains(hook) } ?? false
    }

    /// Run `app`'s chain for `hook`: in chain order, the first reject or discard stops it,
    /// rewrites compose (each plugin sees the fields as the previous ones left them), a
    /// failure applies the plugin's failure mode.
    /// - Returns: the chain's outcome; ``HookOutcome/allow`` when the app has no plugin on `hook`.
    public func run(_ hook: PolicyHook, app: String, request: HookRequest) async -> HookOutcome {
        guard let chain = chains.withLockedValue({ $0[app] }) else { return .allow }
        var current = request
        var changes: [String: String?] = [:]
        for link in chain.links where link.hooks.contains(hook) {
            let mode = link.failureMode ?? chain.configuration.failureModes[hook] ?? hook.defaultFailureMode
            let budget = chain.configuration.budget(for: hook)
            switch await traced(link, hook: hook, { await call(link, hook: hook, request: current, budget: budget) }) {
            case .allow:
                continue
            case .reject(let rejection):
                return .reject(rejection)
            case .discard:
                return .discard
            case .rewrite(let list):
                current.apply(list)
                for change in list { changes.updateValue(change.value, forKey: change.key) }
            case .failure(let failure):
                if mode == .failClosed { return .error(failure) }
            }
        }
        return changes.isEmpty ? .allow : .rewrite(changes)
    }

    /// Tell every plugin on ``PolicyHook/afterEvent`` about a committed event. Returns at
    /// once: the plugins run later on the host's threads and their decisions are ignored.
    /// An app's events reach its plugins one at a time, in the order they were notified
    /// (``AfterEventQueue``).
    public func notify(app: String, event: HookRequest) {
        guard let chain = chains.withLockedValue({ $0[app] }) else { return }
        let links = chain.links.filter { $0.hooks.contains(.afterEvent) }
        guard !links.isEmpty else { return }
        enqueueAfterEvent(app: app, links: links, event: event, budget: chain.configuration.budget(for: .afterEvent))
    }

    /// Tells `observer` how long each plugin call takes from now on (the time from submitting it
    /// to its answer or its timeout; calls skipped by an open breaker are not timed).
    public func observeCalls(_ observer: @escaping @Sendable (_ plugin: String, _ hook: PolicyHook, _ duration: Duration) -> Void) {
        callObserver.withLockedValue { $0 = observer }
    }

    /// The circuit-breaker state of every plugin of every app's current chain, in chain order.
    public func breakerStates() -> [PluginBreakerState] {
        let chains = self.chains.withLockedValue { $0 }
        let now = breakerNow()
        return chains.keys.sorted().flatMap { app in
            chains[app]!.links.map { link in
                let state: PluginBreakerState.State = switch link.breaker.withLockedValue({ $0.state }) {
                case .closed: .closed
                case .halfOpen: .halfOpen
                case .open(let until): now >= until ? .halfOpen : .open
                }
                return PluginBreakerState(app: app, plugin: link.instance.library.name, state: state)
            }
        }
    }

    /// The counters of each plugin in `app`'s current chain, in chain order.
    public func statistics(app: String) -> [PluginStatistics] {
        (chains.withLockedValue { $0[app] }?.links ?? []).map { $0.statistics }
    }

    // MARK: - Internals

    private func buildChain(app: String, _ configuration: AppPolicyConfiguration) throws(PolicyLoadError) -> AppChain {
        var links: [ChainLink] = []
        for plugin in configuration.plugins {
            do {
                let library = try libraries.library(at: plugin.path)
                let instance = try PluginInstance(library: library, app: app, config: plugin.config, logger: logger)
                links.append(ChainLink(instance: instance, configuration: plugin, settings: settings))
            } catch {
                var error = error
                error.app = app
                logger.error("refusing policy plugin: \(error.description)", metadata: ["code": "\(error.code)"])
                throw error
            }
        }
        return AppChain(configuration: configuration, links: links)
    }

    /// Traces plugin calls from now on: each call of a plugin on a before-hook (or the read filter)
    /// made inside a traced call (its span the task's current `ServiceContext`) gets a span
    /// `policy <hook>` under it, with the plugin (`groupd.policy.plugin`), the hook
    /// (`groupd.policy.hook`) and its decision (`groupd.policy.decision`: allow, reject, discard,
    /// rewrite, or the failure's kind; a failure is an error status).
    public func traceHooks(with tracer: any Tracer) {
        self.tracer.withLockedValue { $0 = tracer }
    }

    /// `body`'s plugin call, in a span of its own when the calling task is traced.
    private func traced(_ link: ChainLink, hook: PolicyHook, _ body: () async -> LinkResult) async -> LinkResult {
        guard let tracer = tracer.withLockedValue({ $0 }), let context = ServiceContext.current else { return await body() }
        let span = tracer.startAnySpan("policy \(hook.rawValue)", context: context, ofKind: .internal)
        let result = await body()
        if span.isRecording {
            span.attributes["groupd.policy.plugin"] = link.instance.library.name
            span.attributes["groupd.policy.hook"] = hook.rawValue
            switch result {
            case .allow: span.attributes["groupd.policy.decision"] = "allow"
            case .reject: span.attributes["groupd.policy.decision"] = "reject"
            case .discard: span.attributes["groupd.policy.decision"] = "discard"
            case .rewrite: span.attributes["groupd.policy.decision"] = "rewrite"
            case .failure(let failure):
                span.attributes["groupd.policy.decision"] = failure.kind.rawValue
                span.setStatus(SpanStatus(code: .error, message: failure.message))
            }
        }
        span.end()
        return result
    }

    private func call(_ link: ChainLink, hook: PolicyHook, request: HookRequest, budget: Duration) async -> LinkResult {
        let plugin = link.instance.library.name
        guard link.breaker.withLockedValue({ $0.permitsCall(now: breakerNow()) }) else {
            link.counters.skippedByBreaker.add(1, ordering: .relaxed)
            return .failure(PolicyFailure(plugin: plugin, kind: .circuitOpen, code: 0, message: "policy plugin \(plugin) is tripped off by its circuit breaker"))
        }
        link.counters.calls.add(1, ordering: .relaxed)
        let observer = callObserver.withLockedValue { $0 }
        let started = ContinuousClock.now
        let result = await invoke(link.instance, hook: hook, request: request, budget: budget)
        observer?(plugin, hook, ContinuousClock.now - started)
        switch result {
        case .failure(let failure):
            link.counters.failures.add(1, ordering: .relaxed)
            if failure.kind == .timeout { link.counters.timeouts.add(1, ordering: .relaxed) }
            logger.warning("policy plugin failed", metadata: [
                "plugin": "\(plugin)", "app": "\(link.instance.app)", "hook": "\(hook.rawValue)",
                "kind": "\(failure.kind.rawValue)", "message": "\(failure.message)",
            ])
            if link.breaker.withLockedValue({ $0.recordFailure(now: breakerNow()) }) {
                link.counters.breakerTrips.add(1, ordering: .relaxed)
                logger.error("policy plugin \(plugin) for app \(link.instance.app) tripped its circuit breaker after \(settings.breakerThreshold) consecutive failures; off for \(settings.breakerCooldown)")
            }
        case .reject:
            link.counters.rejects.add(1, ordering: .relaxed)
            link.breaker.withLockedValue { $0.recordSuccess() }
        default:
            link.breaker.withLockedValue { $0.recordSuccess() }
        }
        return result
    }

    /// Run one plugin call on the pool, racing it against the budget. A call that misses the
    /// budget keeps its instance alive until the plugin returns; its late answers are dropped.
    private func invoke(_ instance: PluginInstance, hook: PolicyHook, request: HookRequest, budget: Duration) async -> LinkResult {
        let plugin = instance.library.name
        let state = CallState(plugin: plugin, app: instance.app, logger: logger)
        return await withCheckedContinuation { (continuation: CheckedContinuation<LinkResult, Never>) in
            let completion = Completion(continuation)
            pool.submit { poolState in
                guard poolState == .active else {
                    completion.resume(.failure(PolicyFailure(plugin: plugin, kind: .hostShutdown, code: 0, message: "the policy host is shut down")))
                    return
                }
                // Timed out while queued: do not start a call nobody waits for.
                guard !completion.isDone else { return }
                let decision = instance.onHook(hook, request: request, state: state, budget: budget)
                completion.resume(LinkResult(decision: decision, answers: state.close(), plugin: plugin))
            }
            let (seconds, attoseconds) = budget.components
            let nanoseconds = seconds * 1_000_000_000 + attoseconds / 1_000_000_000
            completion.arm(timers.next().scheduleTask(in: .nanoseconds(nanoseconds)) {
                if completion.resume(.failure(PolicyFailure(
                    plugin: plugin, kind: .timeout, code: 0,
                    message: "policy plugin \(plugin) did not answer \(hook.rawValue) within \(budget)"))) {
                    _ = state.close()
                }
            })
        }
    }
}

/// Every app's chain, loaded and instantiated by ``PolicyHost/prepare(_:)`` and not yet in
/// force; ``PolicyHost/install(_:)`` swaps them in.
public struct PreparedChains: Sendable {
    let chains: [String: AppChain]

    /// The apps that have a chain.
    public var apps: [String] { chains.keys.sorted() }
}

/// One app's chain, immutable; swapped whole on reload.
final class AppChain: Sendable {
    let configuration: AppPolicyConfiguration
    let links: [ChainLink]

    init(configuration: AppPolicyConfiguration, links: [ChainLink]) {
        self.configuration = configuration
        self.links = links
    }
}

/// One plugin in a chain: its instance, hooks, failure mode, breaker and counters.
final class ChainLink: Sendable {
    final class Counters: Sendable {
        let calls = Atomic<Int>(0), rejects = Atomic<Int>(0), failures = Atomic<Int>(0)
        let timeouts = Atomic<Int>(0), breakerTrips = Atomic<Int>(0), skippedByBreaker = Atomic<Int>(0)
    }

    let instance: PluginInstance
    let hooks: Set<PolicyHook>
    let failureMode: FailureMode?
    let breaker: NIOLockedValueBox<CircuitBreaker>
    let counters = Counters()

    init(instance: PluginInstance, configuration: PluginConfiguration, settings: PolicyHostConfiguration) {
        self.instance = instance
        self.hooks = Set(configuration.hooks)
        self.failureMode = configuration.failureMode
        self.breaker = NIOLockedValueBox(CircuitBreaker(threshold: settings.breakerThreshold, cooldown: settings.breakerCooldown))
    }

    var statistics: PluginStatistics {
        PluginStatistics(
            plugin: instance.library.name, path: instance.library.path,
            calls: counters.calls.load(ordering: .relaxed), rejects: counters.rejects.load(ordering: .relaxed),
            failures: counters.failures.load(ordering: .relaxed), timeouts: counters.timeouts.load(ordering: .relaxed),
            breakerTrips: counters.breakerTrips.load(ordering: .relaxed),
            skippedByBreaker: counters.skippedByBreaker.load(ordering: .relaxed))
    }
}

/// One plugin's answer to one call.
enum LinkResult: Sendable {
    case allow
    case reject(PolicyRejection)
    case rewrite([(key: String, value: String?)])
    case discard
    case failure(PolicyFailure)

    init(decision: Int32, answers: CallState.Answers, plugin: String) {
        switch decision {
        case Int32(GROUPD_DECISION_ALLOW.rawValue):
            self = .allow
        case Int32(GROUPD_DECISION_REJECT.rawValue):
            var reasons: [String: String] = [:]
            for field in answers.rejectedFields { reasons[field.key] = field.reason }
            var keys: [String] = []
            for field in answers.rejectedFields where !keys.contains(field.key) { keys.append(field.key) }
            self = .reject(PolicyRejection(
                plugin: plugin, errorKeys: keys, reasons: reasons,
                rejectedMembers: answers.rejectedMembers.map(\.user),
                message: answers.error?.message ?? answers.rejectedFields.first?.reason ?? "rejected by policy \(plugin)"))
        case Int32(GROUPD_DECISION_REWRITE.rawValue):
            self = answers.changes.isEmpty ? .allow : .rewrite(answers.changes)
        case Int32(GROUPD_DECISION_DISCARD.rawValue):
            self = .discard
        case Int32(GROUPD_DECISION_ERROR.rawValue):
            self = .failure(PolicyFailure(
                plugin: plugin, kind: .pluginError, code: answers.error?.code ?? 0,
                message: answers.error?.message ?? "policy plugin \(plugin) failed without a message"))
        default:
            self = .failure(PolicyFailure(
                plugin: plugin, kind: .unknownDecision, code: decision,
                message: "policy plugin \(plugin) returned unknown decision \(decision)"))
        }
    }
}

/// Resumes a continuation exactly once, from the plugin's thread or the budget timer.
final class Completion: Sendable {
    private struct State {
        var continuation: CheckedContinuation<LinkResult, Never>?
        var timer: Scheduled<Void>?
    }
    private let state: NIOLockedValueBox<State>

    init(_ continuation: CheckedContinuation<LinkResult, Never>) {
        state = NIOLockedValueBox(State(continuation: continuation))
    }

    var isDone: Bool { state.withLockedValue { $0.continuation == nil } }

    /// Keep the timer so a finished call can cancel it; cancel at once if already finished.
    func arm(_ timer: Scheduled<Void>) {
        let done = state.withLockedValue { state in
            guard state.continuation != nil else { return true }
            state.timer = timer
            return false
        }
        if done { timer.cancel() }
    }

    /// - Returns: `true` if this call resumed the continuation.
    @discardableResult
    func resume(_ result: LinkResult) -> Bool {
        let (continuation, timer) = state.withLockedValue { state in
            defer { state.continuation = nil; state.timer = nil }
            return (state.continuation, state.timer)
        }
        timer?.cancel()
        guard let continuation else { return false }
        continuation.resume(returning: result)
        return true
    }
}
