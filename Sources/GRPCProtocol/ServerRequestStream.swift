import NIOCore
import Synchronization

/// The request messages of a client- or bidirectional-streaming call, in the order they arrive.
///
/// Iteration ends (`next()` returns nil) when the client half-closes its side of the stream. It
/// throws `CancellationError` once the call is over for another reason: the client reset it, the
/// deadline passed, the connection went, or a request message was refused (too large, corrupt),
/// which ended the call with its status. One task iterates it.
///
/// Back-pressure: a message's bytes go back to the client's HTTP/2 flow-control window only when
/// the handler takes it, so a client cannot send more than the stream window (1 MiB) ahead of a
/// handler that does not read.
public struct ServerRequestStream: AsyncSequence, Sendable {
    /// A serialized request message (decompressed; without the gRPC prefix).
    public typealias Element = ByteBuffer

    let source: Source

    /// Iterates the messages.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let source: Source

        /// The next message; nil once the client half-closed and every message was taken.
        /// - Throws: `CancellationError` when the call is over.
        public mutating func next() async throws -> ByteBuffer? {
            try await source.next()
        }
    }

    /// Makes the iterator (one per stream).
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(source: source)
    }

    /// Creates a stream and its source; `onTake` runs with each message's size on the wire
    /// when the handler takes it (the transport reopens the flow-control window there).
    package static func makeStream(onTake: @escaping @Sendable (Int) -> Void) -> (ServerRequestStream, Source) {
        let source = Source(onTake: onTake)
        return (ServerRequestStream(source: source), source)
    }

    /// The producer side, fed by the connection on its event loop.
    package final class Source: Sendable {
        private struct State {
            /// Messages received and not taken, with their size on the wire.
            var queue = CircularBuffer<(message: ByteBuffer, wireBytes: Int)>(initialCapacity: 2)
            /// The client half-closed.
            var finished = false
            /// The call is over; nothing more is delivered.
            var cancelled = false
            /// The iterator waiting for a message.
            var waiter: CheckedContinuation<(message: ByteBuffer, wireBytes: Int)?, any Error>?
        }

        private enum Step {
            case take((message: ByteBuffer, wireBytes: Int))
            case end
            case fail
            case wait
        }

        private let state = Mutex(State())
        private let onTake: @Sendable (Int) -> Void

        package init(onTake: @escaping @Sendable (Int) -> Void) {
            self.onTake = onTake
        }

        /// Delivers a message (dropped once the call is over).
        package func yield(_ message: ByteBuffer, wireBytes: Int) {
            let waiter = state.withLock { state -> CheckedContinuation<(message: ByteBuffer, wireBytes: Int)?, any Error>? in
                if state.cancelled { return nil }
                if let waiter = state.waiter {
                    state.waiter = nil
                    return waiter
                }
                state.queue.append((message, wireBytes))
                return nil
            }
            waiter?.resume(returning: (message, wireBytes))
        }

        /// The client half-closed: the iteration ends after the queued messages.
        package func finish() {
            let waiter = state.withLock { state -> CheckedContinuation<(message: ByteBuffer, wireBytes: Int)?, any Error>? in
                state.finished = true
                guard state.queue.isEmpty, let waiter = state.waiter else { return nil }
                state.waiter = nil
                return waiter
            }
            waiter?.resume(returning: nil)
        }

        /// The call is over: a waiting or later `next()` throws `CancellationError`.
        package func cancel() {
            let waiter = state.withLock { state -> CheckedContinuation<(message: ByteBuffer, wireBytes: Int)?, any Error>? in
                state.cancelled = true
                state.queue.removeAll()
                let waiter = state.waiter
                state.waiter = nil
                return waiter
            }
            waiter?.resume(throwing: CancellationError())
        }

        private func step(registering continuation: CheckedContinuation<(message: ByteBuffer, wireBytes: Int)?, any Error>?) -> Step {
            state.withLock { state -> Step in
                if state.cancelled { return .fail }
                if let first = state.queue.popFirst() { return .take(first) }
                if state.finished { return .end }
                guard let continuation else { return .wait }
                precondition(state.waiter == nil, "a ServerRequestStream is iterated by one task at a time")
                state.waiter = continuation
                return .wait
            }
        }

        func next() async throws -> ByteBuffer? {
            let taken: (message: ByteBuffer, wireBytes: Int)?
            switch step(registering: nil) {
            case .take(let item): taken = item
            case .end: return nil
            case .fail: throw CancellationError()
            case .wait:
                taken = try await withTaskCancellationHandler {
                    try await withCheckedThrowingContinuation { continuation in
                        switch step(registering: continuation) {
                        case .take(let item): continuation.resume(returning: item)
                        case .end: continuation.resume(returning: nil)
                        case .fail: continuation.resume(throwing: CancellationError())
                        case .wait: break
                        }
                    }
                } onCancel: {
                    self.cancel()
                }
            }
            guard let taken else { return nil }
            onTake(taken.wireBytes)
            return taken.message
        }
    }
}
