import GRPCProtocol
import NIOCore

/// A `TaskExecutor` that runs jobs on one event loop. A call's task prefers the executor of its
/// connection's loop, so it starts, resumes after each `await` and completes its call where the
/// connection lives: no hop to the cooperative pool and back for every call.
///
/// - Important: What runs on it must not block: the loop serves every connection it owns.
///   Blocking work (SQLite, plugins) runs on its own threads and is awaited.
final class EventLoopTaskExecutor: TaskExecutor {
    /// The loop the jobs run on.
    let eventLoop: any EventLoop

    /// An executor for `eventLoop`.
    init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        eventLoop.execute { job.runSynchronously(on: executor) }
    }
}
