import Foundation
import GroupModel
import GroupStore
import GroupStoreSQL
import Logging
import NIOCore
import PostgresNIO
import Synchronization

/// Runs `body` in a task on `executor` (an event loop's: never the cooperative pool, whose few
/// threads may all be blocked) and waits for it, blocking the calling thread: for the parts of the
/// PostgreSQL store that keep a serial dispatch queue of their own. Never call it from an event
/// loop or from a task.
func waitBlocking<T: Sendable>(on executor: EventLoopTaskExecutor, _ body: @escaping @Sendable () async throws -> T) throws -> T {
    let done = DispatchSemaphore(value: 0)
    let outcome = Mutex<Result<T, any Error>?>(nil)
    Task(executorPreference: executor) {
        let result: Result<T, any Error>
        do { result = .success(try await body()) } catch { result = .failure(error) }
        outcome.withLock { $0 = result }
        done.signal()
    }
    done.wait()
    return try outcome.withLock { $0! }.get()
}

/// What a session waits for (``PostgresSession/perform(_:)``, ``PostgresSession/answer(_:of:)``):
/// the first of the driver's answer, the connection's close and the watchdog settles it and
/// resumes the waiting task.
final class Awaited<T: Sendable>: Sendable {
    private struct State {
        var settled = false
        var continuation: UnsafeContinuation<T, any Error>?
    }

    private let state = Mutex(State())

    /// Suspends until the first ``finish(_:)``; `start` (which arranges the calls of
    /// ``finish(_:)``) runs once the continuation is in place, so an answer that comes at once
    /// is not lost.
    func value(_ start: (Awaited<T>) -> Void) async throws -> T {
        try await withUnsafeThrowingContinuation { continuation in
            state.withLock { $0.continuation = continuation }
            start(self)
        }
    }

    func finish(_ outcome: Result<T, any Error>) {
        let continuation = state.withLock { state -> UnsafeContinuation<T, any Error>? in
            guard !state.settled else { return nil }
            state.settled = true
            defer { state.continuation = nil }
            return state.continuation
        }
        continuation?.resume(with: outcome)
    }
}

/// A task executor that runs jobs on a NIO event loop: a task that prefers it runs its
/// nonisolated code there, so the PostgreSQL statements it awaits are written from the loop
/// and it resumes on the loop when they are answered (one `execute` per resumption, no
/// wake-up of another thread).
final class EventLoopTaskExecutor: TaskExecutor {
    let eventLoop: any EventLoop

    init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
