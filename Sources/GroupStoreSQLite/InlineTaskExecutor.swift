import Dispatch
import Synchronization

/// Runs the async pieces of work of a batch inside the writer's synchronous GRDB access, on its
/// thread: GRDB hands the connection to a closure, and the transaction must begin, run every
/// piece and commit before that closure returns.
///
/// ``run(_:)`` starts a task that prefers this executor, so every job of it (its start, and its
/// resumption after any suspension) is queued here, and runs the queued jobs on the calling
/// thread until the task has ended. The SQLite transaction's operations are synchronous, so a
/// piece of work awaits nothing that suspends and the task runs to its end in its first job;
/// a suspension (a hop to an actor) only means the loop waits for the job that resumes it.
final class InlineTaskExecutor: TaskExecutor {
    private let jobs = Mutex<[UnownedJob]>([])
    private let arrived = DispatchSemaphore(value: 0)

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        jobs.withLock { $0.append(job) }
        arrived.signal()
    }

    /// Runs `body` to its end on the calling thread and returns its value.
    static func run<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
        let executor = InlineTaskExecutor()
        let value = Mutex<T?>(nil)
        let ended = Atomic(false)
        Task(executorPreference: executor) {
            let result = await body()
            value.withLock { $0 = result }
            ended.store(true, ordering: .releasing)
            executor.arrived.signal()
        }
        while !ended.load(ordering: .acquiring) {
            executor.arrived.wait()
            let due = executor.jobs.withLock { jobs in
                defer { jobs = [] }
                return jobs
            }
            for job in due { job.runSynchronously(on: executor.asUnownedTaskExecutor()) }
        }
        return value.withLock { $0! }
    }
}

/// A value handed to a task that runs on the thread it was made on (``InlineTaskExecutor``): the
/// GRDB connection of the writer's access, which is not `Sendable` but is only used there.
struct OnThisThread<Value>: @unchecked Sendable {
    let value: Value
}
