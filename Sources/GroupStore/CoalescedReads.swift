import GroupModel
import Synchronization

/// Reads that arrive while the running ones wait on the database, answered together: one
/// statement (PostgreSQL) or one read transaction (SQLite) for many callers, as the group commit
/// writes the mutations that queue behind a running batch in one transaction. On PostgreSQL,
/// reads of groups by id (`PostgresBackend.groups(app:ids:)`: GetGroupsInfo, and every call that
/// reads a group outside a write) and users' views of groups
/// (`PostgresBackend.groupsForUser(app:userID:ids:)`: GetGroupsInfo with an operator); on
/// SQLite, users' views (`SQLiteBackend.userView(app:userID:of:)`).
///
/// - At most ``maxRunning`` batches run at once (a share of the backend's read connections, so
///   other reads always find one). A read that finds a free slot starts a batch at once: on an
///   idle store a read costs what it did alone, and waits on nothing.
/// - A read that finds every slot busy waits; the next batch to start takes every waiting read
///   (up to ``maxWeight`` in total: group ids asked), and `fetch` answers them in one
///   connection's turn. Each read gets what it asked for, read after it was asked.
/// - At most ``maxWaiting`` reads wait; the next is refused at once with what `refusal` makes
///   (on PostgreSQL `RESOURCE_EXHAUSTED` / `STORE_BUSY`, as a read refused by the pool is).
/// - A batch that fails fails each of its reads with the same error.
public final class CoalescedReads<Read: Sendable, Answer: Sendable>: Sendable {
    /// Answers `reads`, one answer per read, in their order.
    public typealias Fetch = @Sendable (_ reads: [Read]) async throws -> [Answer]

    // The members the reading path uses are `@usableFromInline` and its methods `@inlinable`, so
    // that the backend modules specialize them for their reads and answers: run as unspecialized
    // generic code from another module, each read looked its generic types' metadata up at run
    // time (6 % of groupd's instructions per GetGroupsInfo on PostgreSQL).

    @usableFromInline
    struct Request {
        @usableFromInline var read: Read
        @usableFromInline var weight: Int
        @usableFromInline var continuation: CheckedContinuation<Answer, any Error>

        @inlinable
        init(read: Read, weight: Int, continuation: CheckedContinuation<Answer, any Error>) {
            self.read = read
            self.weight = weight
            self.continuation = continuation
        }
    }

    @usableFromInline
    enum Next { case start, wait, refuse(Int) }

    @usableFromInline
    struct State {
        @usableFromInline var waiting: [Request] = []
        @usableFromInline var running = 0
        @usableFromInline var held = false
        @usableFromInline var batches = 0
        @usableFromInline var waitingObservers: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []

        @inlinable
        init() {}
    }

    @usableFromInline
    let state = Mutex(State())
    /// How many batches run at once at most.
    public let maxRunning: Int
    /// How many reads may wait at most.
    public let maxWaiting: Int
    /// How much one batch reads at most, in ``weight`` (a single read weighing more runs alone).
    public let maxWeight: Int
    @usableFromInline
    let weight: @Sendable (Read) -> Int
    @usableFromInline
    let refusal: @Sendable (_ waiting: Int) -> any Error
    @usableFromInline
    let fetch: Fetch

    package init(
        maxRunning: Int, maxWaiting: Int, maxWeight: Int = 1000, weight: @escaping @Sendable (Read) -> Int,
        refusal: @escaping @Sendable (_ waiting: Int) -> any Error, fetch: @escaping Fetch
    ) {
        self.maxRunning = max(1, maxRunning)
        self.maxWaiting = max(0, maxWaiting)
        self.maxWeight = max(1, maxWeight)
        self.weight = weight
        self.refusal = refusal
        self.fetch = fetch
    }

    /// The answer to `read`.
    /// - Throws: `refusal`'s error when ``maxWaiting`` reads wait already; what the batch's
    ///   fetch throws.
    @inlinable
    public func read(_ read: Read) async throws -> Answer {
        try await withCheckedThrowingContinuation { continuation in
            let (next, observers): (Next, [CheckedContinuation<Void, Never>]) = state.withLock { state in
                let mayStart = !state.held && state.running < maxRunning
                if !mayStart && state.waiting.count >= maxWaiting { return (.refuse(state.waiting.count), []) }
                state.waiting.append(Request(read: read, weight: weight(read), continuation: continuation))
                if mayStart {
                    state.running += 1
                    return (.start, [])
                }
                return (.wait, Self.takeObservers(&state))
            }
            for observer in observers { observer.resume() }
            switch next {
            case .start: Task { await self.drain() }
            case .wait: break
            case .refuse(let count): continuation.resume(throwing: refusal(count))
            }
        }
    }

    /// Runs batches until no read waits (or the tests hold them).
    @inlinable
    func drain() async {
        while let batch = takeBatch() {
            do {
                let answers = try await fetch(batch.map { $0.read })
                guard answers.count == batch.count else {
                    throw GroupError.internal("a coalesced read answered \(answers.count) of \(batch.count) reads")
                }
                for (request, answer) in zip(batch, answers) { request.continuation.resume(returning: answer) }
            } catch {
                for request in batch { request.continuation.resume(throwing: error) }
            }
        }
    }

    /// The next batch: the waiting reads from the oldest, up to ``maxWeight`` (at least one
    /// read); `nil` (and the slot given back) when none waits or the tests hold the batches.
    @inlinable
    func takeBatch() -> [Request]? {
        state.withLock { state in
            if state.held || state.waiting.isEmpty {
                state.running -= 1
                return nil
            }
            var count = 0
            var taken = 0
            for request in state.waiting {
                if taken > 0 && count + request.weight > maxWeight { break }
                count += request.weight
                taken += 1
            }
            let batch = Array(state.waiting.prefix(taken))
            state.waiting.removeFirst(taken)
            state.batches += 1
            return batch
        }
    }

    @inlinable
    static func takeObservers(_ state: inout State) -> [CheckedContinuation<Void, Never>] {
        let count = state.waiting.count
        let due = state.waitingObservers.filter { $0.count <= count }.map(\.continuation)
        state.waitingObservers.removeAll { $0.count <= count }
        return due
    }

    // MARK: Tests

    /// How many batches have run.
    package var batchCount: Int { state.withLock { $0.batches } }

    /// Tests only: from now on no batch starts; reads wait (up to ``maxWaiting``).
    package func hold() {
        state.withLock { $0.held = true }
    }

    /// Tests only: batches start again, as many as slots are free; the first takes every read that
    /// waited meanwhile (up to ``maxWeight``).
    package func release() {
        let starts = state.withLock { state in
            state.held = false
            let starts = state.waiting.isEmpty ? 0 : max(0, maxRunning - state.running)
            state.running += starts
            return starts
        }
        for _ in 0..<starts { Task { await self.drain() } }
    }

    /// Tests only: returns once at least `count` reads wait.
    package func waitUntilWaiting(_ count: Int) async {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state in
                if state.waiting.count >= count { return true }
                state.waitingObservers.append((count, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }
}
