import NIOCore
import Synchronization

/// Writes the messages of one server-streaming or bidirectional-streaming call, with a bounded
/// queue.
///
/// At most `capacity` messages wait for the connection to send them. `write(_:)` suspends
/// while the queue is full; `tryWrite(_:)` never suspends and reports a full queue instead, for
/// fan-out code that must not wait on one slow subscriber.
///
/// By default the call ends when the handler returns. A handler that calls ``detach()`` returns
/// once the stream is set up, and the call stays open without a task until ``finish(_:)`` or
/// until the client goes (``onClose(_:)``): an idle stream then costs no suspended task.
public final class ServerStreamWriter: Sendable {
    /// The outcome of `tryWrite(_:)`.
    public enum TryWriteResult: Sendable, Equatable {
        /// The message was queued.
        case enqueued
        /// The queue holds `capacity` messages; nothing was queued.
        case full
        /// The call is over (finished, cancelled or its connection gone); nothing was queued.
        case closed
    }

    private struct State {
        var closed = false
        /// Set by ``detach()``.
        var detached = false
        var waiters: [CheckedContinuation<Void, any Error>] = []
        /// Runs once when the call is over (``close()``).
        var onClose: (@Sendable () -> Void)?
    }

    /// The most messages that may wait to be sent.
    public let capacity: Int
    private let state = Mutex(State())
    /// Messages queued and not yet sent. Counted without the lock: a fan-out writes to thousands
    /// of writers, and each message is counted in and out.
    private let queued = Atomic<Int>(0)
    /// `state.closed`, readable without the lock.
    private let closedFlag = Atomic<Bool>(false)
    /// Whether a writer waits in ``write(_:)`` (only then does ``didSend()`` take the lock).
    private let hasWaiters = Atomic<Bool>(false)
    private let deliver: @Sendable (ByteBuffer) -> Void
    private let finisher: @Sendable (GRPCStatus) -> Void

    /// Creates a writer; the transport does this for each server-streaming call.
    /// - Parameters:
    ///   - capacity: The queue bound.
    ///   - finish: Ends the call with a status after the queued messages (hops to its event loop).
    ///   - deliver: Hands a serialized message to the connection (hops to its event loop).
    package init(
        capacity: Int, finish: @escaping @Sendable (GRPCStatus) -> Void = { _ in },
        deliver: @escaping @Sendable (ByteBuffer) -> Void
    ) {
        self.capacity = capacity
        self.finisher = finish
        self.deliver = deliver
    }

    /// Whether the handler detached the call from its return.
    package var isDetached: Bool { state.withLock { $0.detached } }

    /// Keeps the call open after the handler returns: it ends with ``finish(_:)``, or when the
    /// client goes (cancel, reset, lost connection, deadline), which runs the ``onClose(_:)``
    /// handler. A handler that throws still ends the call with the error's status.
    public func detach() {
        state.withLock { $0.detached = true }
    }

    /// Ends the call with `status` once the queued messages are sent (a no-op once the call is
    /// over). For detached calls; a handler that does not detach ends the call by returning.
    public func finish(_ status: GRPCStatus) {
        if isClosed { return }
        finisher(status)
    }

    /// Runs `handler` once when the call is over (at once if it already is). One handler; a
    /// second replaces the first.
    public func onClose(_ handler: @escaping @Sendable () -> Void) {
        let runNow = state.withLock { state -> Bool in
            if state.closed { return true }
            state.onClose = handler
            return false
        }
        if runNow { handler() }
    }

    /// How many messages are queued and not yet sent.
    public var queuedCount: Int { queued.load(ordering: .sequentiallyConsistent) }

    /// Whether the call is over.
    public var isClosed: Bool { closedFlag.load(ordering: .sequentiallyConsistent) }

    /// Queues a message, waiting while the queue is full.
    /// - Parameter message: The serialized message.
    /// - Throws: `GRPCStatus` with `CANCELLED` when the call is over, or `CancellationError`
    ///   when the task is cancelled while waiting.
    public func write(_ message: ByteBuffer) async throws {
        while true {
            switch tryWrite(message) {
            case .enqueued: return
            case .closed: throw GRPCStatus(.cancelled, "the call is over")
            case .full:
                try Task.checkCancellation()
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    // Registered first, then the count checked again: a send that lowered it
                    // meanwhile either sees the flag or is seen here.
                    let resumeNow = state.withLock { state -> Bool in
                        if state.closed { return true }
                        state.waiters.append(continuation)
                        hasWaiters.store(true, ordering: .sequentiallyConsistent)
                        if queued.load(ordering: .sequentiallyConsistent) < capacity {
                            state.waiters.removeLast()
                            return true
                        }
                        return false
                    }
                    if resumeNow { continuation.resume() }
                }
            }
        }
    }

    /// Queues a message if there is room.
    /// - Parameter message: The serialized message.
    /// - Returns: Whether it was queued, or why not.
    public func tryWrite(_ message: ByteBuffer) -> TryWriteResult {
        if closedFlag.load(ordering: .sequentiallyConsistent) { return .closed }
        var count = queued.load(ordering: .sequentiallyConsistent)
        while true {
            if count >= capacity { return .full }
            let (exchanged, original) = queued.compareExchange(
                expected: count, desired: count + 1, ordering: .sequentiallyConsistent)
            if exchanged { break }
            count = original
        }
        // A close racing this write lets the message reach a stream that is over: the
        // connection drops messages for ended streams.
        deliver(message)
        return .enqueued
    }

    /// Called by the connection when a queued message has been handed to HTTP/2.
    package func didSend() {
        queued.subtract(1, ordering: .sequentiallyConsistent)
        guard hasWaiters.load(ordering: .sequentiallyConsistent) else { return }
        let waiters = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            hasWaiters.store(false, ordering: .sequentiallyConsistent)
            let waiters = state.waiters
            state.waiters.removeAll()
            return waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Called by the connection when the call is over; wakes every waiting writer and runs the
    /// ``onClose(_:)`` handler.
    package func close() {
        let (waiters, onClose) = state.withLock { state -> ([CheckedContinuation<Void, any Error>], (@Sendable () -> Void)?) in
            if state.closed { return ([], nil) }
            state.closed = true
            closedFlag.store(true, ordering: .sequentiallyConsistent)
            let waiters = state.waiters
            state.waiters.removeAll()
            let onClose = state.onClose
            state.onClose = nil
            return (waiters, onClose)
        }
        for waiter in waiters { waiter.resume() }
        onClose?()
    }
}
