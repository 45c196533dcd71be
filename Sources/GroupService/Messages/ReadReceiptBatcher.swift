import GroupModel
import Synchronization

/// The read receipts waiting to be reported on this node: per group and sender, the sender's
/// messages whose read count changed since the last report, and when the report is due.
///
/// A `MarkGroupRead` that covers messages adds them here (``note(app:groupID:sender:sequences:now:intervalMilliseconds:)``);
/// the first addition to an empty batch sets its due time an interval later (the app's
/// `read_receipt_interval_ms`), later ones join it. The flush job (``GroupdService/flushReadReceipts()``)
/// takes the due batches and commits one `MESSAGE_READ_RECEIPT` per batch, with the counts as they
/// are then. So 200 members reading one message within the interval make one event, not 200.
/// In memory, per node: each node reports the reads it took.
final class ReadReceiptBatcher: Sendable {
    /// One batch's identity: a sender's messages in one group of an app.
    struct Key: Hashable, Sendable {
        var app: String
        var groupID: String
        var sender: String
    }

    /// A batch taken for reporting: whose, and which messages (ascending).
    struct Due: Sendable {
        var key: Key
        var sequences: [Int64]
    }

    private struct Batch {
        var sequences: Set<Int64>
        var dueAt: Timestamp
    }

    private let state = Mutex<[Key: Batch]>([:])

    /// Adds messages of `sender` whose read count changed at `now`.
    func note(app: String, groupID: String, sender: String, sequences: [Int64], now: Timestamp, intervalMilliseconds: Int) {
        if sequences.isEmpty { return }
        let key = Key(app: app, groupID: groupID, sender: sender)
        state.withLock { batches in
            if batches[key] == nil {
                batches[key] = Batch(sequences: [], dueAt: now.adding(milliseconds: Int64(max(0, intervalMilliseconds))))
            }
            batches[key]!.sequences.formUnion(sequences)
        }
    }

    /// Removes and returns the batches due at `now`.
    func takeDue(now: Timestamp) -> [Due] {
        state.withLock { batches in
            let due = batches.filter { $0.value.dueAt <= now }
            for key in due.keys { batches.removeValue(forKey: key) }
            return due.map { Due(key: $0.key, sequences: $0.value.sequences.sorted()) }
                .sorted { ($0.key.app, $0.key.groupID, $0.key.sender) < ($1.key.app, $1.key.groupID, $1.key.sender) }
        }
    }

    /// How many batches wait (tests).
    var pendingCount: Int { state.withLock { $0.count } }
}
