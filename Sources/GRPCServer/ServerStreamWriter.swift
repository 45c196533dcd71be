import NIOConcurrencyHelpers
import NIOCore

/// Writes the messages of one server-streaming call, with a bounded queue.
///
/// At most `capacity` messages wait for the connection to send them. `write(_:)` suspends
/// while the queue is full; `tryWrite(_:)` never suspends and reports a full queue instead, for
/// fan-out code that must not wait on one slow subscriber.
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
        var queued = 0
        var closed = false
        var waiters: [CheckedContinuation<Void, any Error>] = []
    }

    /// The most messages that may wait to be sent.
    public let capacity: Int
    private let state = NIOLockedValueBox(State())
    private let deliver: @Sendable (ByteBuffer) -> Void

    /// Creates a writer; the transport does this for each server-streaming call.
    /// - Parameters:
    ///   - capacity: The queue bound.
    ///   - deliver: Hands a serialized message to the connection (hops to its event loop).
    init(capacity: Int, deliver: @escaping @Sendable (ByteBuffer) -> Void) {
        self.capacity = capacity
        self.deliver = deliver
    }

    /// How many messages are queued and not yet sent.
    public var queuedCount: Int { state.withLockedValue { $0.queued } }

    /// Whether the call is over.
    public var isClosed: Bool { state.withLockedValue { $0.closed } }

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
                    let resumeNow = state.withLockedValue { state -> Bool in
                        if state.closed || state.queued < capacity { return true }
                        state.waiters.append(continuation)
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
        let result = state.withLockedValue { state -> TryWriteResult in
            if state.closed { return .closed }
            if state.queued >= capacity { return .full }
            state.queued += 1
            return .enqueued
        }
        if result == .enqueued { deliver(message) }
        return result
    }

    /// Called by the connection when a queued message has been handed to HTTP/2.
    func didSend() {
        let waiters = state.withLockedValue { state -> [CheckedContinuation<Void, any Error>] in
            state.queued -= 1
            let waiters = state.waiters
            state.waiters.removeAll()
            return waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Called by the connection when the call is over; wakes every waiting writer.
    func close() {
        let waiters = state.withLockedValue { state -> [CheckedContinuation<Void, any Error>] in
            state.closed = true
            let waiters = state.waiters
            state.waiters.removeAll()
            return waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}
