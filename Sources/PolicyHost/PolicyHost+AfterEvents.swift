import Logging
import Synchronization
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// One app's after-event notifications waiting for its plugins, in notification order, and
/// whether a task is draining them. At most one task drains a queue at a time, so an app's
/// `after_event` plugins see its events one by one, in commit order: a plugin that keeps them
/// (the webhook plugin's journal) keeps that order, per group and overall.
final class AfterEventQueue: Sendable {
    struct Item: Sendable {
        let links: [ChainLink]
        let event: HookRequest
        let budget: Duration
    }

    private struct State {
        var pending: [Item] = []
        var head = 0
        var draining = false
        /// While a replay runs (``AfterEventReplay``), new events wait here, behind it.
        var held: [Item]?
        /// ``whenIdle()`` calls waiting for the queue to be drained.
        var idleWaiters: [CheckedContinuation<Void, Never>] = []

        /// Nothing to hand out, nothing held back, no task draining.
        var isIdle: Bool { !draining && held == nil && head >= pending.count }
    }

    private let state = NIOLockedValueBox(State())

    /// Add `item` (held back while a replay runs, unless it is part of the replay).
    /// - Returns: `true` when no task drains the queue: the caller starts one.
    func enqueue(_ item: Item, replaying: Bool = false) -> Bool {
        state.withLockedValue { state in
            if !replaying, state.held != nil {
                state.held!.append(item)
                return false
            }
            state.pending.append(item)
            guard !state.draining else { return false }
            state.draining = true
            return true
        }
    }

    /// Hold new events back until ``release(_:)``.
    func hold() {
        state.withLockedValue { state in
            if state.held == nil { state.held = [] }
        }
    }

    /// Queue the held events behind the replay, each passed through `filter` first (`nil`: drop it).
    /// - Returns: `true` when no task drains the queue: the caller starts one.
    func release(_ filter: (Item) -> Item?) -> Bool {
        let (start, idle) = state.withLockedValue { state -> (Bool, [CheckedContinuation<Void, Never>]) in
            let held = state.held ?? []
            state.held = nil
            state.pending.append(contentsOf: held.compactMap(filter))
            guard !state.draining, state.head < state.pending.count else { return (false, Self.takeIdleWaiters(&state)) }
            state.draining = true
            return (true, [])
        }
        for waiter in idle { waiter.resume() }
        return start
    }

    /// Returns once the queue is drained: every item enqueued so far was handed to its plugins
    /// and they returned, and no replay holds events back.
    func whenIdle() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let idle = state.withLockedValue { state in
                if state.isIdle { return true }
                state.idleWaiters.append(continuation)
                return false
            }
            if idle { continuation.resume() }
        }
    }

    private static func takeIdleWaiters(_ state: inout State) -> [CheckedContinuation<Void, Never>] {
        guard state.isIdle else { return [] }
        defer { state.idleWaiters = [] }
        return state.idleWaiters
    }

    /// The next item, or `nil` when the queue is empty (the draining task then ends; the next
    /// ``enqueue(_:replaying:)`` starts another).
    func next() -> Item? {
        var idle: [CheckedContinuation<Void, Never>] = []
        defer { for waiter in idle { waiter.resume() } }
        return state.withLockedValue { state in
            guard state.head < state.pending.count else {
                state.pending.removeAll(keepingCapacity: true)
                state.head = 0
                state.draining = false
                idle = Self.takeIdleWaiters(&state)
                return nil
            }
            defer {
                state.head += 1
                if state.head > 1024 {  // drop what was handed out, now and then
                    state.pending.removeFirst(state.head)
                    state.head = 0
                }
            }
            return state.pending[state.head]
        }
    }
}

extension PolicyHost {
    /// Queue `event` for `links` (the app's `after_event` plugins) and make sure a task drains
    /// the app's queue.
    func enqueueAfterEvent(app: String, links: [ChainLink], event: HookRequest, budget: Duration) {
        let queue = afterEventQueue(app: app)
        if queue.enqueue(AfterEventQueue.Item(links: links, event: event, budget: budget)) { drain(queue) }
    }

    /// Returns once every after-event notification made so far (replays included) has been
    /// handed to the apps' `after_event` plugins and they returned.
    public func afterEventsDelivered() async {
        let queues = afterEventQueues.withLockedValue { Array($0.values) }
        for queue in queues { await queue.whenIdle() }
    }

    func afterEventQueue(app: String) -> AfterEventQueue {
        afterEventQueues.withLockedValue { queues in
            if let queue = queues[app] { return queue }
            let queue = AfterEventQueue()
            queues[app] = queue
            return queue
        }
    }

    /// Start the one task that drains `queue` (the caller was told no task does).
    func drain(_ queue: AfterEventQueue) {
        Task {
            while let item = queue.next() {
                for link in item.links {
                    await self.deliverAfterEvent(link, event: item.event, budget: item.budget)
                }
            }
        }
    }

    /// Run one `after_event` call on the pool and wait until the plugin returns, however long
    /// it takes: the next event must not overtake it, and a call dropped for being late would
    /// be an event lost. Nothing waits on it but the app's queue. The circuit breaker does not
    /// apply either (a skipped call is a lost event); failures are counted and logged.
    private func deliverAfterEvent(_ link: ChainLink, event: HookRequest, budget: Duration) async {
        let plugin = link.instance.library.name
        let state = CallState(plugin: plugin, app: link.instance.app, logger: logger)
        link.counters.calls.add(1, ordering: .relaxed)
        let started = NIODeadline.now()
        let result: LinkResult = await withCheckedContinuation { continuation in
            pool.submit { poolState in
                guard poolState == .active else {
                    continuation.resume(returning: .failure(PolicyFailure(
                        plugin: plugin, kind: .hostShutdown, code: 0, message: "the policy host is shut down")))
                    return
                }
                let decision = link.instance.onHook(.afterEvent, request: event, state: state, budget: budget)
                continuation.resume(returning: LinkResult(decision: decision, answers: state.close(), plugin: plugin))
            }
        }
        let elapsed = NIODeadline.now() - started
        if elapsed.nanoseconds > Int64(budget.components.seconds) * 1_000_000_000 + budget.components.attoseconds / 1_000_000_000 {
            logger.warning("policy plugin took longer than its budget on after_event", metadata: [
                "plugin": "\(plugin)", "app": "\(link.instance.app)", "elapsed_ms": "\(elapsed.nanoseconds / 1_000_000)",
            ])
        }
        if case .failure(let failure) = result {
            link.counters.failures.add(1, ordering: .relaxed)
            logger.warning("policy plugin failed", metadata: [
                "plugin": "\(plugin)", "app": "\(link.instance.app)", "hook": "after_event",
                "kind": "\(failure.kind.rawValue)", "message": "\(failure.message)",
                "event_id": "\(event.eventID)",
            ])
        }
    }
}

extension PolicyHost {
    /// Start a replay for every app whose `after_event` plugins keep a position
    /// (`after_event_position` returns more than 0): from now on, new events of those apps wait
    /// behind the replay. Feed each replay the app's committed events after its
    /// ``AfterEventReplay/position`` with ``AfterEventReplay/offer(_:)``, in `event_id` order,
    /// then call ``AfterEventReplay/finish()``. Call it once, when the service starts, before
    /// the first event is notified.
    /// - Returns: one replay per app that needs one.
    public func beginAfterEventReplays() -> [AfterEventReplay] {
        let chains = self.chains.withLockedValue { $0 }
        var replays: [AfterEventReplay] = []
        for (app, chain) in chains.sorted(by: { $0.key < $1.key }) {
            let positioned = chain.links.filter { $0.hooks.contains(.afterEvent) }.compactMap { link in
                link.instance.afterEventPosition().flatMap { $0 > 0 ? (link, $0) : nil }
            }
            guard !positioned.isEmpty else { continue }
            let queue = afterEventQueue(app: app)
            queue.hold()
            replays.append(AfterEventReplay(
                app: app, host: self, queue: queue, links: positioned, budget: chain.configuration.budget(for: .afterEvent)))
        }
        return replays
    }
}

/// One app's replay of committed events to the `after_event` plugins that missed them (a crash
/// between a commit and the plugin): each plugin gets the events after its own position, in
/// order, before any event committed since the service started; those new events that the
/// replay already carried are not given twice.
public final class AfterEventReplay: Sendable {
    /// The app.
    public let app: String
    /// Offer the app's committed events after this `event_id` (the lowest plugin position).
    public let position: Int64
    private let host: PolicyHost
    private let queue: AfterEventQueue
    private let links: [(link: ChainLink, position: Int64)]
    private let budget: Duration
    /// The links each replayed `event_id` went to.
    private let replayed = NIOLockedValueBox<[Int64: Set<ObjectIdentifier>]>([:])

    init(app: String, host: PolicyHost, queue: AfterEventQueue, links: [(link: ChainLink, position: Int64)], budget: Duration) {
        self.app = app
        self.position = links.map(\.position).min() ?? 0
        self.host = host
        self.queue = queue
        self.links = links
        self.budget = budget
    }

    /// Hand `event` (a committed event of the app, in `event_id` order) to each plugin whose
    /// position is below its `event_id`.
    public func offer(_ event: HookRequest) {
        let targets = links.filter { $0.position < event.eventID }.map(\.link)
        guard !targets.isEmpty else { return }
        replayed.withLockedValue { $0[event.eventID] = Set(targets.map(ObjectIdentifier.init)) }
        if queue.enqueue(AfterEventQueue.Item(links: targets, event: event, budget: budget), replaying: true) {
            host.drain(queue)
        }
    }

    /// End the replay: the events held back while it ran follow it, minus what it carried.
    public func finish() {
        let replayed = self.replayed.withLockedValue { $0 }
        let start = queue.release { item in
            guard let done = replayed[item.event.eventID] else { return item }
            let rest = item.links.filter { !done.contains(ObjectIdentifier($0)) }
            return rest.isEmpty ? nil : AfterEventQueue.Item(links: rest, event: item.event, budget: item.budget)
        }
        if start { host.drain(queue) }
    }
}
