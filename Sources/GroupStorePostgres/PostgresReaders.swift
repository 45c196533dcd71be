import Dispatch
import Foundation
import GroupModel
import GroupStore
import GroupStoreSQL
import Logging
import Synchronization

/// A pool of connections: a call takes a free one, runs on its event loop (the statements are
/// awaited there) and gives it back. The reads use one; the AVChatRoom relay and the periodic
/// passes' locks each use a pool of one connection, which their calls take in turn. When all are busy up to `maxWaiting` calls queue, first come
/// first served; the next is refused with `RESOURCE_EXHAUSTED` (`STORE_BUSY`) at once.
final class PostgresReaders: Sendable {
    private struct State {
        var free: [PostgresSession]
        var waiting: [CheckedContinuation<PostgresSession, any Error>] = []
        var closed = false
    }

    private let state: Mutex<State>
    private let maxWaiting: Int
    private let availability: PostgresAvailability
    private let all: [PostgresSession]

    init(sessions: [PostgresSession], maxWaiting: Int, availability: PostgresAvailability) {
        self.state = Mutex(State(free: sessions))
        self.all = sessions
        self.maxWaiting = maxWaiting
        self.availability = availability
    }

    /// Runs `body` on a free connection, on that connection's event loop.
    /// - Throws: `UNAVAILABLE` (the database cannot be reached), `RESOURCE_EXHAUSTED` (pool and
    ///   queue full), or what `body` throws (a lost connection as `UNAVAILABLE`).
    func run<T: Sendable>(_ body: @Sendable (PostgresSession) async throws -> T) async throws -> T {
        guard availability.isAvailable else { throw availability.unavailableError() }
        let session = try await checkout()
        defer { checkin(session) }
        return try await availability.reporting { try await session.run(body) }
    }

    /// Runs `body` on a free connection, first as one statement outside a transaction
    /// (`inSnapshot` false: one round trip instead of three); when it needs a second statement
    /// (custom fields to read), it returns `nil` and runs again in one read snapshot.
    func runOne<T: Sendable>(_ body: @Sendable (PostgresSession, _ inSnapshot: Bool) async throws -> T?) async throws -> T {
        try await run { session in
            if let value = try await body(session, false) { return value }
            return try await session.readTransaction {
                guard let value = try await body(session, true) else { throw GroupError.internal("a read in a snapshot asked for one") }
                return value
            }
        }
    }

    private func checkout() async throws -> PostgresSession {
        enum Taken { case session(PostgresSession), wait, refused(Int), closed }
        let taken: Taken = state.withLock { state in
            if state.closed { return .closed }
            if let session = state.free.popLast() { return .session(session) }
            if state.waiting.count >= maxWaiting { return .refused(state.waiting.count) }
            return .wait
        }
        switch taken {
        case .session(let session): return session
        case .refused(let count): throw PostgresStoreError.poolExhausted(count).groupError
        case .closed: throw GroupError.internal("the store is closed")
        case .wait:
            return try await withCheckedThrowingContinuation { continuation in
                let handed: PostgresSession? = state.withLock { state in
                    if let session = state.free.popLast() { return session }
                    state.waiting.append(continuation)
                    return nil
                }
                if let handed { continuation.resume(returning: handed) }
            }
        }
    }

    private func checkin(_ session: PostgresSession) {
        let waiter: CheckedContinuation<PostgresSession, any Error>? = state.withLock { state in
            if state.waiting.isEmpty {
                state.free.append(session)
                return nil
            }
            return state.waiting.removeFirst()
        }
        waiter?.resume(returning: session)
    }

    /// Closes every connection, blocking; waiting calls fail. (Called once no read runs.)
    func closeNow() {
        let waiting = state.withLock { state in
            state.closed = true
            defer { state.waiting = [] }
            return state.waiting
        }
        for waiter in waiting { waiter.resume(throwing: GroupError.internal("the store is closed")) }
        for session in all { session.disconnectBlocking() }
    }
}

/// Whether the database answers: set false at once when a connection is lost, true again once a
/// probe succeeds. While false, calls fail fast with `UNAVAILABLE` and the probe retries with
/// back-off (50 ms doubling to 2 s); while true it probes every second.
///
/// One chain of probes runs at a time. A lost connection starts a new chain (probing at once) and
/// ends the old one: a probe whose `SELECT 1` was answered before the loss was reported no longer
/// counts, so it cannot mark the store available (and report SERVING) in the middle of an outage.
final class PostgresAvailability: Sendable {
    private struct State {
        var available = true
        var lastError = ""
        var stopped = false
        /// The live chain of probes; a lost connection starts the next.
        var chain = 0
        var backoff: Double = 0.05
        var onRecovery: (@Sendable () -> Void)?
        var observers: [@Sendable (Bool) -> Void] = []
    }

    private let state = Mutex(State())
    private let session: PostgresSession
    private let logger: Logger
    private let queue = DispatchQueue(label: "groupd.postgres.availability")
    /// Where the observers are told of changes, one at a time, in the order the changes were made.
    private let notifications = DispatchQueue(label: "groupd.postgres.availability.notifications")
    /// Seconds between probes while available.
    static let interval = 1.0

    init(session: PostgresSession, logger: Logger) {
        self.session = session
        self.logger = logger
    }

    var isAvailable: Bool { state.withLock { $0.available } }

    /// The error calls get while unavailable.
    func unavailableError() -> GroupError {
        let last = state.withLock { $0.lastError }
        return GroupError(
            code: .unavailable, reason: .storeUnavailable,
            message: "the database cannot be reached" + (last.isEmpty ? "" : ": \(last)"))
    }

    /// Starts probing; `onRecovery` runs each time the database answers again after an outage.
    func start(onRecovery: @escaping @Sendable () -> Void) {
        let chain = state.withLock { state in
            state.onRecovery = onRecovery
            return state.chain
        }
        schedule(after: Self.interval, chain: chain)
    }

    /// Calls `observer` with every change of availability.
    func observe(_ observer: @escaping @Sendable (Bool) -> Void) {
        state.withLock { $0.observers.append(observer) }
    }

    func stop() {
        state.withLock { $0.stopped = true }
        queue.sync { session.disconnectBlocking() }
    }

    /// A connection was lost: unavailable now, and a new chain of probes starts at once (while
    /// unavailable already, the running chain goes on).
    func connectionLost() {
        let chain: Int? = state.withLock { state in
            state.lastError = "a connection was lost"
            guard state.available else { return nil }
            state.chain += 1
            state.backoff = 0.05
            Self.change(&state, to: false, notifying: notifications)
            return state.chain
        }
        if let chain { queue.async { self.probe(chain) } }
    }

    private func schedule(after seconds: Double, chain: Int) {
        queue.asyncAfter(deadline: .now() + seconds) { self.probe(chain) }
    }

    /// Whether `chain` is the live chain of probes (and the monitor runs).
    private func isLive(_ chain: Int) -> Bool {
        state.withLock { !$0.stopped && $0.chain == chain }
    }

    private func probe(_ chain: Int) {
        guard isLive(chain) else { return }
        do {
            try session.commandBlocking("SELECT 1")
            // Available again only if no connection was lost since this probe began.
            let (live, recovered) = state.withLock { state -> (Bool, (@Sendable () -> Void)?) in
                guard !state.stopped && state.chain == chain else { return (false, nil) }
                state.backoff = 0.05
                guard !state.available else { return (true, nil) }
                Self.change(&state, to: true, notifying: notifications)
                return (true, state.onRecovery ?? {})
            }
            guard live else { return }
            if let recovered {
                logger.info("the database answers again")
                recovered()
            }
            schedule(after: Self.interval, chain: chain)
        } catch {
            session.disconnectBlocking()
            let description = (error as? PostgresStoreError)?.description ?? String(describing: error)
            let (changed, delay) = state.withLock { state in
                state.lastError = description
                let changed = state.available
                if changed { Self.change(&state, to: false, notifying: notifications) }
                defer { state.backoff = min(state.backoff * 2, 2) }
                return (changed, state.backoff)
            }
            if changed {
                logger.warning("the database cannot be reached", metadata: ["error": "\(description)"])
            }
            schedule(after: delay, chain: chain)
        }
    }

    /// Runs `body`, whatever the availability; errors come out as ``reported(_:)`` makes them.
    func reporting<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch {
            throw reported(error)
        }
    }

    /// `error` as callers get it (``PostgresStoreError/groupError``); a lost connection also
    /// makes the database unavailable (and probed at once).
    func reported(_ error: any Error) -> any Error {
        guard let failure = error as? PostgresStoreError else { return error }
        if case .unavailable = failure { connectionLost() }
        return failure.groupError
    }

    /// Sets the flag, under the lock that holds it, and queues the change for the observers there:
    /// a call that lost its connection and the probe may change it at once from two threads, and
    /// the observers get the changes in the order they were made, so the last one they get is the
    /// flag's value (told outside the lock, a probe's `true` could reach them after a call's later
    /// `false`, and health would report SERVING through a whole outage).
    private static func change(_ state: inout State, to available: Bool, notifying notifications: DispatchQueue) {
        state.available = available
        let observers = state.observers
        notifications.async { for observer in observers { observer(available) } }
    }
}
