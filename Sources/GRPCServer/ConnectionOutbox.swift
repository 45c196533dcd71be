import GRPCProtocol
import NIOConcurrencyHelpers
import NIOCore

/// The messages written by a connection's server-streaming calls from other threads, on their
/// way to the connection's event loop.
///
/// A fan-out writes the same item to many streams of a connection in a burst; each write only
/// appends to this queue, and the first write of a burst schedules the one event-loop hop that
/// hands every queued message to its stream and flushes the connection once. One FIFO per
/// connection keeps each stream's messages in the order they were written.
final class ConnectionOutbox: Sendable {
    /// One message for one stream.
    struct Entry {
        /// The stream.
        var streamID: Int32
        /// The serialized message (shared storage; the transport adds the gRPC prefix).
        var message: ByteBuffer
    }

    /// The queue, behind its lock.
    private struct State {
        /// Messages not yet taken by the event loop, in the order written.
        var entries: [Entry] = []
        /// Whether a drain is scheduled on the event loop and has not taken the entries yet.
        var drainScheduled = false
    }

    /// The queue.
    private let state = NIOLockedValueBox(State())

    /// An empty outbox.
    init() {}

    /// Queues a message for a stream (any thread).
    /// - Returns: Whether the caller must schedule the drain: true for the first message after
    ///   the last ``takeAll(into:)``.
    func post(_ message: ByteBuffer, toStream streamID: Int32) -> Bool {
        state.withLockedValue { state -> Bool in
            state.entries.append(Entry(streamID: streamID, message: message))
            if state.drainScheduled { return false }
            state.drainScheduled = true
            return true
        }
    }

    /// Takes every queued message (on the event loop) by swapping it with `batch`, which must
    /// be empty: the emptied array of the previous drain keeps its capacity for the next burst.
    func takeAll(into batch: inout [Entry]) {
        state.withLockedValue { state in
            state.drainScheduled = false
            swap(&batch, &state.entries)
        }
    }
}
