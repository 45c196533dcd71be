import Dispatch
import Foundation
import GroupModel
import Logging
import Synchronization

/// The read connections: a call takes a free one, runs on a dispatch thread (the statements
/// block) and gives it back. When all are busy up to `maxWaiting` calls queue, first come
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

    /// Runs `body` on a free connection, off the calling thread.
    /// - Throws: `UNAVAILABLE` (the database cannot be reached), `RESOURCE_EXHAUSTED` (pool and
    ///   queue full), or what `body` throws (a lost connection as `UNAVAILABLE`).
    func run<T: Sendable>(_ body: @escaping @Sendable (PostgresSession) throws -> T) async throws -> T {
        guard availability.isAvailable else { throw availability.unavailableError() }
        let session = try await checkout()
        return try await availability.perform(on: .global()) {
            defer { self.checkin(session) }
            return try body(session)
        }
    }

    /// Runs `body` on a free connection, first as one statement outside a transaction
    /// (`inSnapshot` false: one round trip instead of three); when it needs a second statement
    /// (custom fields to read), it returns `nil` and runs again in one read snapshot.
    func runOne<T: Sendable>(_ body: @escaping @Sendable (PostgresSession, _ inSnapshot: Bool) throws -> T?) async throws -> T {
        try await run { session in
            if let value = try body(session, false) { return value }
            return try session.readTransaction {
                guard let value = try body(session, true) else { throw GroupError.internal("a read in a snapshot asked for one") }
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
        for session in all { session.disconnect() }
    }
}

/// Whether the database answers: set false at once when a connection is lost, true again once a
/// probe succeeds. While false, calls fail fast with `UNAVAILABLE` and the probe retries with
/// back-off (50 ms doubling to 2 s); while true it probes every second.
final class PostgresAvailability: Sendable {
    private struct State {
        var available = true
        var lastError = ""
        var stopped = false
        var probing = false
        var backoff: Double = 0.05
        var onRecovery: (@Sendable () -> Void)?
        var observers: [@Sendable (Bool) -> Void] = []
    }

    private let state = Mutex(State())
    private let session: PostgresSession
    private let logger: Logger
    private let queue = DispatchQueue(label: "groupd.postgres.availability")
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
        state.withLock { $0.onRecovery = onRecovery }
        schedule(after: Self.interval)
    }

    /// Calls `observer` with every change of availability.
    func observe(_ observer: @escaping @Sendable (Bool) -> Void) {
        state.withLock { $0.observers.append(observer) }
    }

    func stop() {
        state.withLock { $0.stopped = true }
        queue.sync { session.disconnect() }
    }

    /// A connection was lost: unavailable now, and probe at once.
    func connectionLost() {
        let changed = set(available: false, error: "a connection was lost")
        if changed { queue.async { self.probe() } }
    }

    private func schedule(after seconds: Double) {
        queue.asyncAfter(deadline: .now() + seconds) { self.probe() }
    }

    private func probe() {
        guard !state.withLock({ $0.stopped }) else { return }
        do {
            try session.command("SELECT 1")
            let wasDown = !isAvailable
            set(available: true, error: "")
            if wasDown {
                logger.info("the database answers again")
                state.withLock { $0.onRecovery }?()
            }
            state.withLock { $0.backoff = 0.05 }
            schedule(after: Self.interval)
        } catch {
            session.disconnect()
            let description = (error as? PostgresStoreError)?.description ?? String(describing: error)
            if set(available: false, error: description) {
                logger.warning("the database cannot be reached", metadata: ["error": "\(description)"])
            }
            let delay = state.withLock { state in
                defer { state.backoff = min(state.backoff * 2, 2) }
                return state.backoff
            }
            schedule(after: delay)
        }
    }

    /// Runs `body` on `queue` (its statements block), or fails at once while the database cannot
    /// be reached; errors come out as ``reported(_:)`` makes them.
    func run<T: Sendable>(on queue: DispatchQueue, _ body: @escaping @Sendable () throws -> T) async throws -> T {
        guard isAvailable else { throw unavailableError() }
        return try await perform(on: queue, body)
    }

    /// Runs `body` on `queue`, whatever the availability; errors come out as ``reported(_:)``
    /// makes them.
    func perform<T: Sendable>(on queue: DispatchQueue, _ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result(catching: body).mapError(self.reported)) }
        }
    }

    /// `error` as callers get it (``PostgresStoreError/groupError``); a lost connection also
    /// makes the database unavailable (and probed at once).
    func reported(_ error: any Error) -> any Error {
        guard let failure = error as? PostgresStoreError else { return error }
        if case .unavailable = failure { connectionLost() }
        return failure.groupError
    }

    /// Sets the flag; returns whether it changed (and tells the observers).
    @discardableResult
    private func set(available: Bool, error: String) -> Bool {
        let (changed, observers) = state.withLock { state -> (Bool, [@Sendable (Bool) -> Void]) in
            if !error.isEmpty { state.lastError = error }
            guard state.available != available else { return (false, []) }
            state.available = available
            return (true, state.observers)
        }
        for observer in observers { observer(available) }
        return changed
    }
}
