import GroupModel
import Synchronization

/// Reads of groups by id (``PostgresBackend/groups(app:ids:)``: GetGroupsInfo, and every call
/// that reads a group outside a write) answered together: the reads that arrive while the
/// running ones wait on the database are answered by one statement per app, as the group commit
/// writes the mutations that queue behind a running batch in one transaction.
///
/// - At most ``maxRunning`` batches run at once (half the read pool, so other reads always find
///   a connection). A read that finds a free slot starts a batch at once: on an idle store a
///   read costs what it did alone, and waits on nothing.
/// - A read that finds every slot busy waits; the next batch to start takes every waiting read
///   (up to ``maxIDs`` group ids), merges their ids per app and reads them in one statement each,
///   in one connection's turn. Each read gets the groups it asked for, read after it was asked.
/// - At most ``maxWaiting`` reads wait (the pool's `max_waiting`); the next is refused at once
///   with `RESOURCE_EXHAUSTED` (`STORE_BUSY`), as a read refused by the pool is.
/// - A batch that fails fails each of its reads with the same error.
final class PostgresGroupReads: Sendable {
    /// Reads `ids` per app; answers the live groups found, per app then by id.
    typealias Fetch = @Sendable (_ ids: [String: [String]]) async throws -> [String: [String: Group]]

    private struct Request {
        var app: String
        var ids: [String]
        var continuation: CheckedContinuation<[String: Group], any Error>
    }

    private struct State {
        var waiting: [Request] = []
        var running = 0
        var held = false
        var batches = 0
        var waitingObservers: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state = Mutex(State())
    /// How many batches run at once at most.
    let maxRunning: Int
    /// How many reads may wait at most.
    let maxWaiting: Int
    /// How many group ids one batch reads at most (a single read asking for more runs alone).
    let maxIDs: Int
    private let fetch: Fetch

    init(maxRunning: Int, maxWaiting: Int, maxIDs: Int = 1000, fetch: @escaping Fetch) {
        self.maxRunning = max(1, maxRunning)
        self.maxWaiting = max(0, maxWaiting)
        self.maxIDs = max(1, maxIDs)
        self.fetch = fetch
    }

    /// The live groups of `app` among `ids`, by id.
    /// - Throws: `RESOURCE_EXHAUSTED` (`STORE_BUSY`) when ``maxWaiting`` reads wait already;
    ///   what the batch's read throws.
    func groups(app: String, ids: [String]) async throws -> [String: Group] {
        try await withCheckedThrowingContinuation { continuation in
            enum Next { case start, wait, refuse(Int) }
            let (next, observers): (Next, [CheckedContinuation<Void, Never>]) = state.withLock { state in
                let mayStart = !state.held && state.running < maxRunning
                if !mayStart && state.waiting.count >= maxWaiting { return (.refuse(state.waiting.count), []) }
                state.waiting.append(Request(app: app, ids: ids, continuation: continuation))
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
            case .refuse(let count): continuation.resume(throwing: PostgresStoreError.poolExhausted(count).groupError)
            }
        }
    }

    /// Runs batches until no read waits (or the tests hold them).
    private func drain() async {
        while let batch = takeBatch() {
            var wanted: [String: [String]] = [:]
            var seen: [String: Set<String>] = [:]
            for request in batch {
                for id in request.ids where seen[request.app, default: []].insert(id).inserted {
                    wanted[request.app, default: []].append(id)
                }
            }
            do {
                let found = try await fetch(wanted)
                for request in batch {
                    let groups = found[request.app] ?? [:]
                    var answer: [String: Group] = [:]
                    for id in request.ids { if let group = groups[id] { answer[id] = group } }
                    request.continuation.resume(returning: answer)
                }
            } catch {
                for request in batch { request.continuation.resume(throwing: error) }
            }
        }
    }

    /// The next batch: the waiting reads from the oldest, up to ``maxIDs`` ids (at least one
    /// read); `nil` (and the slot given back) when none waits or the tests hold the batches.
    private func takeBatch() -> [Request]? {
        state.withLock { state in
            if state.held || state.waiting.isEmpty {
                state.running -= 1
                return nil
            }
            var count = 0
            var taken = 0
            for request in state.waiting {
                if taken > 0 && count + request.ids.count > maxIDs { break }
                count += request.ids.count
                taken += 1
            }
            let batch = Array(state.waiting.prefix(taken))
            state.waiting.removeFirst(taken)
            state.batches += 1
            return batch
        }
    }

    private static func takeObservers(_ state: inout State) -> [CheckedContinuation<Void, Never>] {
        let count = state.waiting.count
        let due = state.waitingObservers.filter { $0.count <= count }.map(\.continuation)
        state.waitingObservers.removeAll { $0.count <= count }
        return due
    }

    // MARK: Tests

    /// How many batches have run (each one statement per app).
    var batchCount: Int { state.withLock { $0.batches } }

    /// Tests only: from now on no batch starts; reads wait (up to ``maxWaiting``).
    func hold() {
        state.withLock { $0.held = true }
    }

    /// Tests only: batches start again, as many as slots are free; the first takes every read that
    /// waited meanwhile (up to ``maxIDs`` ids).
    func release() {
        let starts = state.withLock { state in
            state.held = false
            let starts = state.waiting.isEmpty ? 0 : max(0, maxRunning - state.running)
            state.running += starts
            return starts
        }
        for _ in 0..<starts { Task { await self.drain() } }
    }

    /// Tests only: returns once at least `count` reads wait.
    func waitUntilWaiting(_ count: Int) async {
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
