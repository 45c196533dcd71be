import Foundation
import GroupModel
import Synchronization
import Tracing

/// How the store groups pending writes into transactions (group commit).
public struct WriteBatching: Sendable, Hashable {
    /// The most mutations one transaction applies (at least 1).
    public var maxWrites: Int
    /// How long a mutation arriving at an idle store waits for others to share its transaction
    /// (`.zero`: it never waits). Under load nothing waits: the mutations that arrive while one
    /// batch commits form the next.
    public var maxWait: Duration

    /// Creates a setting.
    public init(maxWrites: Int, maxWait: Duration) {
        self.maxWrites = max(1, maxWrites)
        self.maxWait = max(.zero, maxWait)
    }

    /// 256 mutations at most, no waiting.
    public static let defaults = WriteBatching(maxWrites: 256, maxWait: .zero)
}

/// Group commit: mutations queue here, and every mutation waiting when the backend is free (up
/// to ``WriteBatching/maxWrites``) is applied in one transaction, one fsync.
///
/// - A mutation that throws fails alone: before it wrote anything (plans throw before they
///   write), nothing needs undoing; after writing, the backend aborts the batch and the others
///   run again at once in a new one (``BatchOutcome/Ending/aborted(at:)``), before any newer
///   mutation.
/// - A mutation is answered only once the transaction holding it has committed (or failed: then
///   every mutation of the batch fails with the commit's error, and none of it is stored).
/// - The batch's events are handed to the observers once it has committed, in commit order,
///   before any of its mutations is answered; so are the mutations' `committed` hooks (the
///   group cache).
/// - While a batch commits, new mutations queue; the next batch takes them all, so the batch size
///   follows the load without waiting (``WriteBatching/maxWait`` adds a wait when idle, on a
///   timer: no thread blocks, whatever thread queued the mutation).
final class GroupCommitQueue: Sendable {
    /// How to answer a mutation's caller once its batch's fate is known (`nil`: committed).
    typealias Answer = @Sendable ((any Error)?) -> Void

    /// What an applied mutation leaves for the end of its batch.
    struct Applied: Sendable {
        /// Answers the caller.
        var answer: Answer
        /// The events it appended, for the observers once the batch has committed.
        var events: [LoggedEvent]
        /// Runs after `COMMIT`, before observers and answers, with the positions the batch gave
        /// the events appended with provisional ids.
        var committed: @Sendable (EventPositions) -> Void
        /// Runs when the batch did not commit (the mutation's changes are not stored; it may run
        /// again).
        var discarded: @Sendable () -> Void
    }

    /// One queued mutation.
    struct PendingWrite: Sendable {
        /// What it writes (a backend shared by several nodes locks it).
        let scope: WriteScope
        /// Applies the mutation in the batch's transaction. A mutation that throws has undone its
        /// own side effects (cache marks) before throwing. It may be applied again (an aborted
        /// batch), after its earlier application was discarded.
        let apply: @Sendable (any StoreTransaction) async throws -> Applied
        /// Answers the caller with the mutation's own error.
        let fail: @Sendable (any Error) -> Void
        /// The caller's trace context (its call's span) when the call is traced: the batch's
        /// commit span is made its child when commits are traced.
        var traceContext: ServiceContext? = nil
        /// The mutation's name, for its commit span.
        var method = ""
    }

    /// Receives each committed batch's events.
    typealias Observer = @Sendable (Result<[LoggedEvent], any Error>) -> Void
    /// Receives each batch's mutation count and the time from starting its transaction to its end.
    typealias BatchObserver = @Sendable (_ mutations: Int, _ duration: Duration) -> Void

    /// What the queue is doing.
    private enum Phase {
        /// No batch under way.
        case idle
        /// Waiting, since the first mutation arrived at an idle store, for more (the timer of
        /// this generation ends the wait).
        case waiting(generation: Int)
        /// Batches are under way (one caller of the backend at a time: this one).
        case committing
    }

    private struct State {
        var pending: [PendingWrite] = []
        var phase = Phase.idle
        var generation = 0
        /// Tests: while set, mutations queue and no batch starts.
        var held = false
        /// Tests: callers waiting for this many queued mutations.
        var pendingWaiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
        var observers: [Observer] = []
        var statistics = GroupCommitStatistics()
        /// Told each batch's size and how long its transaction took (metrics).
        var batchObserver: BatchObserver?
        /// Makes each traced mutation's commit span.
        var tracer: (any Tracer)?
    }

    /// Where a piece of work leaves its result for the end of the batch (written by the
    /// backend's transaction, read by `then`, which the backend calls after the transaction).
    private final class Slot: @unchecked Sendable {
        var applied: Applied?
    }

    private let backend: any StoreBackend
    private let batching: WriteBatching
    private let state = Mutex(State())

    /// A queue committing through `backend`.
    init(backend: any StoreBackend, batching: WriteBatching) {
        self.backend = backend
        self.batching = batching
    }

    /// Hands every batch's committed events to `observer` from now on (on the thread that ends
    /// the batch), before the batch's mutations are answered: the events as the mutations built
    /// them while writing, in commit order. (The observer's `Result` lets a feed that reads
    /// events back report that it could not; this one never fails.)
    func observe(_ observer: @escaping Observer) {
        state.withLock { $0.observers.append(observer) }
    }

    /// Tells `observer` each batch's size and transaction time from now on (committed, aborted
    /// and failed batches alike), on the thread that ends the batch.
    func observeBatches(_ observer: @escaping BatchObserver) {
        state.withLock { $0.batchObserver = observer }
    }

    /// Records, from now on, a `store.commit` span for every mutation queued with a trace context:
    /// a child of the caller's span, from the start of its batch's transaction to its end.
    func trace(with tracer: any Tracer) {
        state.withLock { $0.tracer = tracer }
    }

    /// Queues a mutation for the next batch.
    func enqueue(_ write: PendingWrite) {
        let maxWait = batching.maxWait
        let (start, timer, ready) = state.withLock { state -> (Bool, Int?, [CheckedContinuation<Void, Never>]) in
            state.pending.append(write)
            var start = false
            var timer: Int?
            if !state.held {
                switch state.phase {
                case .idle where maxWait == .zero || state.pending.count >= batching.maxWrites:
                    state.phase = .committing
                    start = true
                case .idle:
                    state.generation += 1
                    state.phase = .waiting(generation: state.generation)
                    timer = state.generation
                case .waiting where state.pending.count >= batching.maxWrites:
                    state.phase = .committing
                    start = true
                case .waiting, .committing:
                    break
                }
            }
            return (start, timer, Self.readyWaiters(&state))
        }
        for waiter in ready { waiter.resume() }
        if let generation = timer {
            DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(maxWait / .nanoseconds(1)))) {
                self.waitEnded(generation)
            }
        }
        if start { drive() }
    }

    /// The wait that began with `generation` is over: the batch starts, unless it started
    /// already (full) or the queue is held.
    private func waitEnded(_ generation: Int) {
        let start = state.withLock { state in
            guard case .waiting(let waiting) = state.phase, waiting == generation, !state.held else { return false }
            state.phase = .committing
            return true
        }
        if start { drive() }
    }

    /// What the queue has committed so far.
    var statistics: GroupCommitStatistics {
        state.withLock { $0.statistics }
    }

    // MARK: Holding (tests)

    /// Tests: from now on mutations queue and no new batch starts (one under way finishes).
    func hold() {
        state.withLock { $0.held = true }
    }

    /// Tests: batches start again, the first one taking what queued meanwhile.
    func release() {
        let start = state.withLock { state in
            state.held = false
            if case .committing = state.phase { return false }
            if state.pending.isEmpty { return false }
            state.phase = .committing
            return true
        }
        if start { drive() }
    }

    /// Tests: returns once at least `count` mutations are queued (not yet taken by a batch).
    func waitUntilQueued(_ count: Int) async {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state in
                state.pendingWaiters.append((count, continuation))
                return Self.readyWaiters(&state)
            }
            for waiter in ready { waiter.resume() }
        }
    }

    /// The waiters whose count is reached, taken out.
    private static func readyWaiters(_ state: inout State) -> [CheckedContinuation<Void, Never>] {
        if state.pendingWaiters.isEmpty { return [] }
        let count = state.pending.count
        let ready = state.pendingWaiters.filter { $0.count <= count }.map(\.continuation)
        state.pendingWaiters.removeAll { $0.count <= count }
        return ready
    }

    // MARK: Batches

    /// Runs batches until none is waiting. A backend that calls `then` before `commit` returns
    /// is looped over here; one that calls it later continues from `then`.
    private func drive() {
        while let batch = take() {
            let turn = Mutex((finished: false, returned: false))
            let slots = batch.map { _ in Slot() }
            let work: [TransactionWork] = zip(batch, slots).map { write, slot in
                { transaction in slot.applied = try await write.apply(transaction) }
            }
            let (batchObserver, tracer) = state.withLock { ($0.batchObserver, $0.tracer) }
            let started = ContinuousClock.now
            let traced = tracer != nil && batch.contains { $0.traceContext != nil }
            let tracedStart = traced ? DefaultTracerClock.now : nil
            backend.commit(work, scopes: batch.map(\.scope)) { outcome in
                batchObserver?(batch.count, ContinuousClock.now - started)
                if let tracer, let tracedStart { Self.recordSpans(batch, outcome: outcome, tracer: tracer, start: tracedStart) }
                let again = self.finish(batch, slots: slots, outcome: outcome)
                if !again.isEmpty { self.runFirst(again) }
                let callReturned = turn.withLock { turn in
                    turn.finished = true
                    return turn.returned
                }
                if callReturned { self.drive() }
            }
            let finished = turn.withLock { turn in
                turn.returned = true
                return turn.finished
            }
            if !finished { return }
        }
    }

    /// Ends a batch: hooks, observers, answers; returns the mutations to run again (an aborted
    /// batch).
    private func finish(_ batch: [PendingWrite], slots: [Slot], outcome: BatchOutcome) -> [PendingWrite] {
        for (index, error) in outcome.failures { batch[index].fail(error) }
        switch outcome.ending {
        case .committed:
            count { $0.batches += 1; $0.mutations += slots.count(where: { $0.applied != nil }) }
            let positions = outcome.positions
            for slot in slots { slot.applied?.committed(positions) }
            var events = slots.flatMap { $0.applied?.events ?? [] }
            // Only a backend that numbers events at the commit (PostgreSQL) has positions to give.
            if !positions.bases.isEmpty { events = events.map(positions.numbered) }
            if !events.isEmpty {
                let observers = self.observers()
                backend.publish(events) { ordered in
                    for observer in observers { observer(.success(ordered)) }
                }
            }
            for (index, slot) in slots.enumerated() where outcome.failures[index] == nil {
                if let applied = slot.applied {
                    applied.answer(nil)
                } else {
                    batch[index].fail(GroupError.internal("the backend committed a batch without running one of its mutations"))
                }
            }
            return []
        case .aborted:
            count { $0.abortedBatches += 1 }
            var again: [PendingWrite] = []
            for (index, slot) in slots.enumerated() where outcome.failures[index] == nil {
                slot.applied?.discarded()
                again.append(batch[index])
            }
            return again
        case .failed(let error):
            count { $0.failedBatches += 1 }
            // Nothing of the batch is stored: the mutations that applied are discarded, and they
            // and the ones the backend did not reach fail with it.
            for slot in slots { slot.applied?.discarded() }
            for (index, slot) in slots.enumerated() where outcome.failures[index] == nil {
                if let applied = slot.applied { applied.answer(error) } else { batch[index].fail(error) }
            }
            return []
        }
    }

    /// One `store.commit` span per traced mutation of a batch: the batch's size, the mutation,
    /// and whether the batch committed (an error status when it failed or the mutation did).
    private static func recordSpans(
        _ batch: [PendingWrite], outcome: BatchOutcome, tracer: any Tracer, start: DefaultTracerClock.Instant
    ) {
        let end = DefaultTracerClock.now
        let ending = switch outcome.ending {
        case .committed: "committed"
        case .aborted: "aborted"
        case .failed: "failed"
        }
        for (index, write) in batch.enumerated() {
            guard let context = write.traceContext else { continue }
            let span = tracer.startAnySpan("store.commit", at: start, context: context, ofKind: .internal)
            if span.isRecording {
                span.attributes["groupd.store.batch_size"] = batch.count
                span.attributes["groupd.store.mutation"] = write.method
                span.attributes["groupd.store.outcome"] = ending
                if case .failed(let error) = outcome.ending {
                    span.setStatus(SpanStatus(code: .error, message: "\(error)"))
                } else if let error = outcome.failures[index] {
                    span.setStatus(SpanStatus(code: .error, message: "\(error)"))
                }
            }
            span.end(at: end)
        }
    }

    private func count(_ update: (inout GroupCommitStatistics) -> Void) {
        state.withLock { update(&$0.statistics) }
    }

    /// Puts `writes` at the head of the queue (the next batch takes them first, in order).
    private func runFirst(_ writes: [PendingWrite]) {
        state.withLock { $0.pending.insert(contentsOf: writes, at: 0) }
    }

    /// Up to `maxWrites` waiting mutations; `nil`, and the queue idle, when none is waiting (or
    /// the queue is held).
    private func take() -> [PendingWrite]? {
        state.withLock { state in
            if state.pending.isEmpty || state.held {
                state.phase = .idle
                return nil
            }
            let count = min(state.pending.count, batching.maxWrites)
            if count == state.pending.count {
                defer { state.pending = [] }
                return state.pending
            }
            defer { state.pending.removeFirst(count) }
            return Array(state.pending[..<count])
        }
    }

    /// Hands events another node committed (``StoreBackend/followCommits(_:)``) to the observers.
    func deliver(_ events: [LoggedEvent]) {
        if events.isEmpty { return }
        for observer in observers() { observer(.success(events)) }
    }

    private func observers() -> [Observer] {
        state.withLock { $0.observers }
    }
}

/// What group commit has done (tests and metrics).
public struct GroupCommitStatistics: Sendable, Hashable {
    /// Transactions committed.
    public var batches = 0
    /// Mutations those transactions held.
    public var mutations = 0
    /// Batches rolled back because a mutation failed after writing (their other mutations ran
    /// again).
    public var abortedBatches = 0
    /// Batches that failed as a whole (commit or I/O errors).
    public var failedBatches = 0
}
