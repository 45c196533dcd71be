#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// A source of time, injected wherever the domain needs "now" so that tests control it: calendar
/// time (expiry, retention cutoffs, token `exp`), elapsed time (rate-limit buckets) and the
/// periodic jobs that run by time (the retention pass).
///
/// Named `WallClock` rather than `Clock` so that it does not shadow the standard library's
/// `Clock` protocol (which measures durations, not calendar time) in modules that import this one.
public protocol WallClock: Sendable {
    /// The current time.
    func now() -> Timestamp

    /// Nanoseconds from an arbitrary origin that never go back, for measuring elapsed time
    /// (rate-limit buckets).
    func uptimeNanoseconds() -> UInt64

    /// Runs `job` now, then again each time `interval` of this clock's time has passed since the
    /// previous run ended, until the calling task is cancelled.
    /// - Parameters:
    ///   - interval: The time between the end of one run and the start of the next.
    ///   - job: The work; it is not interrupted by cancellation, which ends the loop after it.
    func repeating(every interval: Duration, _ job: @Sendable () async -> Void) async
}

/// The operating system's clocks: `CLOCK_REALTIME` for calendar time, `CLOCK_MONOTONIC` for
/// elapsed time, and the task's sleep for periodic jobs.
public struct SystemWallClock: WallClock {
    /// Create the system clock.
    public init() {}

    /// The current time from `clock_gettime(CLOCK_REALTIME)`.
    public func now() -> Timestamp {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Timestamp(millisecondsSince1970: Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000)
    }

    /// `clock_gettime(CLOCK_MONOTONIC)` in nanoseconds.
    public func uptimeNanoseconds() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
    }

    /// Runs `job`, sleeps `interval`, and again, until the task is cancelled.
    public func repeating(every interval: Duration, _ job: @Sendable () async -> Void) async {
        while !Task.isCancelled {
            await job()
            try? await Task.sleep(for: interval)
        }
    }
}

/// A clock that only moves when told to, for tests of expiry (mute, tokens, applications),
/// retention and rate limits.
///
/// Periodic jobs (``repeating(every:_:)``) run when an advance reaches their next turn; a test
/// that advanced the clock calls ``settle(jobs:)`` to know that every job so woken has finished its run.
public final class ManualWallClock: WallClock {
    private struct Sleeper {
        let deadline: Timestamp
        let wake: CheckedContinuation<Void, Never>
    }

    private struct State {
        var now: Timestamp
        /// Nanoseconds the clock moved forward since it was made (moves back do not count).
        var elapsedNanoseconds: UInt64 = 0
        /// Periodic jobs waiting for their next turn, by id.
        var sleepers: [Int: Sleeper] = [:]
        var nextSleeper = 0
        /// Periodic jobs that are not waiting for a turn: running, or woken and about to run.
        var awake = 0
        /// Periodic jobs started on this clock so far.
        var started = 0
        /// ``settle(jobs:)`` calls waiting for `awake` to reach 0 with `jobs` started.
        var settling: [(jobs: Int, wake: CheckedContinuation<Void, Never>)] = []

        /// The settle() calls whose wait is over (removed from `settling`).
        mutating func settled() -> [CheckedContinuation<Void, Never>] {
            guard awake == 0 else { return [] }
            let started = self.started
            let done = settling.filter { $0.jobs <= started }
            settling.removeAll { $0.jobs <= started }
            return done.map(\.wake)
        }
    }

    // The mutex makes the time, the sleepers and the counts safe to use from any task.
    private let state: Mutex<State>

    /// Create a clock standing at `start`.
    public init(_ start: Timestamp = Timestamp(millisecondsSince1970: 1_700_000_000_000)) {
        self.state = Mutex(State(now: start))
    }

    /// The time the clock stands at.
    public func now() -> Timestamp { self.state.withLock { $0.now } }

    /// How far the clock moved forward since it was made, in nanoseconds (1 s more, so that it
    /// never reads 0).
    public func uptimeNanoseconds() -> UInt64 { self.state.withLock { $0.elapsedNanoseconds } + 1_000_000_000 }

    /// Move the clock forward (or back, with a negative value) by `seconds`; periodic jobs whose
    /// turn it reaches start their run.
    public func advance(seconds: Int64) {
        self.advance(milliseconds: seconds &* 1000)
    }

    /// Move the clock forward (or back, with a negative value) by `milliseconds`; periodic jobs
    /// whose turn it reaches start their run.
    public func advance(milliseconds: Int64) {
        self.move { $0.adding(milliseconds: milliseconds) }
    }

    /// Set the clock to `time`; periodic jobs whose turn it reaches start their run.
    public func set(_ time: Timestamp) {
        self.move { _ in time }
    }

    /// Waits until at least `jobs` periodic jobs have started on this clock and none is running
    /// or about to run: every job an advance woke (and the first run of each job) has finished
    /// and waits for its next turn.
    /// - Parameter jobs: How many jobs the caller knows will start (a job started by a task that
    ///   has not run yet is not known to the clock); 0 waits only for those started.
    public func settle(jobs: Int = 0) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let idle = self.state.withLock { state in
                if state.awake == 0, state.started >= jobs { return true }
                state.settling.append((jobs, continuation))
                return false
            }
            if idle { continuation.resume() }
        }
    }

    /// Runs `job` now, then each time an advance reaches `interval` after the end of its previous
    /// run, until the calling task is cancelled.
    public func repeating(every interval: Duration, _ job: @Sendable () async -> Void) async {
        let (seconds, attoseconds) = interval.components
        let step = max(1, seconds &* 1000 &+ attoseconds / 1_000_000_000_000_000)
        self.state.withLock {
            $0.awake += 1
            $0.started += 1
        }
        while true {
            if !Task.isCancelled { await job() }
            let id = self.state.withLock { state -> Int in
                state.nextSleeper += 1
                return state.nextSleeper
            }
            await withTaskCancellationHandler {
                await withCheckedContinuation { (wake: CheckedContinuation<Void, Never>) in
                    // Asleep from here: a settle() waiting for this run may return.
                    let (due, settled) = self.state.withLock { state -> (Bool, [CheckedContinuation<Void, Never>]) in
                        let settled = Self.fallAsleep(&state)
                        let deadline = state.now.adding(milliseconds: step)
                        if Task.isCancelled { return (true, settled) }
                        state.sleepers[id] = Sleeper(deadline: deadline, wake: wake)
                        return (false, settled)
                    }
                    self.resumeSettled(settled)
                    if due {
                        self.state.withLock { $0.awake += 1 }
                        wake.resume()
                    }
                }
            } onCancel: {
                let sleeper = self.state.withLock { state -> Sleeper? in
                    guard let sleeper = state.sleepers.removeValue(forKey: id) else { return nil }
                    state.awake += 1
                    return sleeper
                }
                sleeper?.wake.resume()
            }
            if Task.isCancelled {
                self.resumeSettled(self.state.withLock { Self.fallAsleep(&$0) })
                return
            }
        }
    }

    /// One job fewer awake; the settle() calls to resume when none is left.
    private static func fallAsleep(_ state: inout State) -> [CheckedContinuation<Void, Never>] {
        state.awake -= 1
        return state.settled()
    }

    private func resumeSettled(_ waiters: [CheckedContinuation<Void, Never>]) {
        for waiter in waiters { waiter.resume() }
    }

    /// Sets the time to `change(now)` and wakes the jobs whose turn it reached.
    private func move(_ change: (Timestamp) -> Timestamp) {
        let woken = self.state.withLock { state -> [CheckedContinuation<Void, Never>] in
            let before = state.now
            state.now = change(before)
            let forward = state.now.millisecondsSince1970 &- before.millisecondsSince1970
            if forward > 0 { state.elapsedNanoseconds &+= UInt64(forward) &* 1_000_000 }
            let due = state.sleepers.filter { $0.value.deadline <= state.now }
            for id in due.keys { state.sleepers[id] = nil }
            state.awake += due.count
            return due.map(\.value.wake)
        }
        for wake in woken { wake.resume() }
    }
}
