import Foundation
import GRDB
public import GroupModel

/// How the store groups pending writes into transactions (group commit).
public struct WriteBatching: Sendable, Hashable {
    /// The most mutations one transaction applies (at least 1).
    public var maxWrites: Int
    /// How long the writer waits for more mutations once it has fewer than ``maxWrites``
    /// (`.zero`: it never waits; the writes that arrive while one batch commits form the next).
    public var maxWait: Duration

    /// Creates a setting.
    public init(maxWrites: Int, maxWait: Duration) {
        self.maxWrites = max(1, maxWrites)
        self.maxWait = max(.zero, maxWait)
    }

    /// 256 mutations at most, no waiting.
    public static let defaults = WriteBatching(maxWrites: 256, maxWait: .zero)
}

/// Group commit for one SQLite writer connection: mutations queue here and the writer applies
/// every mutation waiting, up to ``WriteBatching/maxWrites``, in one transaction with one fsync.
///
/// - Each mutation runs in its own savepoint: one that throws is rolled back alone and fails
///   alone; its neighbours commit.
/// - A mutation is answered only once the transaction holding it has committed (or failed:
///   then every mutation of the batch fails with the commit's error, and none of it is stored).
/// - The events the batch appended are read in the transaction, before `COMMIT`, and handed to
///   the observers once it has committed, in commit order, before any mutation is answered.
/// - While a batch commits, new mutations queue; the writer takes them all when it is done, so
///   the batch size follows the load without any waiting (``WriteBatching/maxWait`` adds some).
final class GroupCommitQueue: Sendable {
    /// What a mutation gives back once applied: how to answer its caller when the batch's fate
    /// is known (`nil`: committed; an error: the commit failed).
    typealias Answer = @Sendable ((any Error)?) -> Void

    /// One queued mutation.
    struct PendingWrite: Sendable {
        /// Applies the mutation in the batch's transaction (inside its savepoint).
        let apply: @Sendable (Database) throws -> Answer
        /// Answers the caller with the mutation's own error (its savepoint was rolled back).
        let fail: @Sendable (any Error) -> Void
    }

    /// Reads the events a transaction appended after `eventID`, in order; called by the writer
    /// inside the transaction, before `COMMIT`.
    typealias EventReader = @Sendable (_ db: Database, _ afterEventID: Int64) throws -> [LoggedEvent]

    private struct State {
        var pending: [PendingWrite] = []
        var draining = false
        var waiting = false
        var observers: [@Sendable (Result<[LoggedEvent], any Error>) -> Void] = []
    }

    private let pool: DatabasePool
    private let batching: WriteBatching
    private let latestEventID: @Sendable (Database) throws -> Int64
    private let readEvents: EventReader
    /// Guards `state`; signalled when a mutation arrives while the writer waits for more.
    private let condition = NSCondition()
    /// Only touched with `condition` locked.
    nonisolated(unsafe) private var state = State()
    /// What the mutation being applied asked to run once its fate is known (writer only).
    nonisolated(unsafe) private var mutationHooks: [Hook] = []
    /// The hooks of the batch's mutations that applied (writer only).
    nonisolated(unsafe) private var batchHooks: [Hook] = []

    /// Code to run once a mutation's changes are known to be stored, or known to be discarded.
    struct Hook {
        var committed: () -> Void
        var discarded: () -> Void
    }

    /// A queue committing through `pool`'s writer.
    /// - Parameters:
    ///   - latestEventID: The highest event id given so far (read on the writer).
    ///   - readEvents: Reads the events appended after an event id (on the writer, in the transaction).
    init(
        pool: DatabasePool, batching: WriteBatching, latestEventID: @escaping @Sendable (Database) throws -> Int64,
        readEvents: @escaping EventReader
    ) {
        self.pool = pool
        self.batching = batching
        self.latestEventID = latestEventID
        self.readEvents = readEvents
    }

    /// Hands every batch's committed events to `observer` from now on, on the writer, before the
    /// batch's mutations are answered. A failure to read them is handed over as an error (the
    /// batch itself committed).
    func observe(_ observer: @escaping @Sendable (Result<[LoggedEvent], any Error>) -> Void) {
        condition.lock()
        state.observers.append(observer)
        condition.unlock()
    }

    /// Applies `body` in the next batch's transaction, in its own savepoint, and returns its
    /// value once that transaction has committed.
    /// - Throws: What `body` throws (nothing of it is stored), or the commit's error (nothing
    ///   of the batch is stored).
    func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<T, any Error>) in
            enqueue(PendingWrite(
                apply: { db in
                    let value = try body(db)
                    return { error in
                        if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: value) }
                    }
                },
                fail: { error in continuation.resume(throwing: error) }))
        }
    }

    /// From inside a mutation (on the writer): run `committed` once the batch holding it has
    /// committed (after `COMMIT`, before any answer), or `discarded` if its changes are not
    /// stored (its savepoint rolled back, or the batch's commit failed).
    func afterMutation(committed: @escaping () -> Void, discarded: @escaping () -> Void) {
        mutationHooks.append(Hook(committed: committed, discarded: discarded))
    }

    private func enqueue(_ write: PendingWrite) {
        condition.lock()
        state.pending.append(write)
        let start = !state.draining
        state.draining = true
        if state.waiting { condition.signal() }
        condition.unlock()
        if start {
            pool.asyncWriteWithoutTransaction { db in self.drain(db) }
        }
    }

    // MARK: The writer

    /// Applies batches until none is waiting (on the writer).
    private func drain(_ db: Database) {
        var batch: [PendingWrite] = []
        while take(into: &batch) {
            run(batch, db)
            batch.removeAll(keepingCapacity: true)
        }
    }

    /// Moves up to `maxWrites` waiting mutations into `batch` (waiting up to `maxWait` for more
    /// when it is not full); false, and the queue marked idle, when none is waiting.
    private func take(into batch: inout [PendingWrite]) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        if state.pending.isEmpty {
            state.draining = false
            return false
        }
        if batching.maxWait > .zero, state.pending.count < batching.maxWrites {
            let deadline = Date().addingTimeInterval(Self.seconds(batching.maxWait))
            state.waiting = true
            while state.pending.count < batching.maxWrites, condition.wait(until: deadline) {}
            state.waiting = false
        }
        let count = min(state.pending.count, batching.maxWrites)
        if count == state.pending.count {
            swap(&batch, &state.pending)
        } else {
            batch.append(contentsOf: state.pending[..<count])
            state.pending.removeFirst(count)
        }
        return true
    }

    private static func seconds(_ duration: Duration) -> TimeInterval {
        let (seconds, attoseconds) = duration.components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }

    /// One transaction: every mutation in its savepoint, the new events read, `COMMIT`, the
    /// observers, then the answers.
    private func run(_ batch: [PendingWrite], _ db: Database) {
        var answers: [Answer] = []
        answers.reserveCapacity(batch.count)
        var afterEventID: Int64 = 0
        do {
            try db.beginTransaction(.immediate)
            afterEventID = try latestEventID(db)
        } catch {
            for write in batch { write.fail(error) }
            return
        }
        for write in batch {
            if !db.isInsideTransaction {
                // An earlier failure ended the transaction (SQLite rolls back on I/O errors, a
                // full disk…): what it held is gone; the rest starts a new one.
                discardBatch(answers, GroupCommitError.transactionLost)
                answers.removeAll()
                do {
                    try db.beginTransaction(.immediate)
                    afterEventID = try latestEventID(db)
                } catch {
                    write.fail(error)
                    continue
                }
            }
            do {
                try db.cachedStatement(sql: "SAVEPOINT mutation").execute()
                let answer = try write.apply(db)
                try db.cachedStatement(sql: "RELEASE SAVEPOINT mutation").execute()
                answers.append(answer)
                batchHooks += mutationHooks
                mutationHooks.removeAll()
            } catch {
                if db.isInsideTransaction {
                    try? db.cachedStatement(sql: "ROLLBACK TRANSACTION TO SAVEPOINT mutation").execute()
                    try? db.cachedStatement(sql: "RELEASE SAVEPOINT mutation").execute()
                }
                for hook in mutationHooks { hook.discarded() }
                mutationHooks.removeAll()
                write.fail(error)
            }
        }
        guard db.isInsideTransaction else {
            discardBatch(answers, GroupCommitError.transactionLost)
            return
        }
        let observers = self.observers()
        var events: Result<[LoggedEvent], any Error> = .success([])
        if !observers.isEmpty, !answers.isEmpty {
            events = Result { try readEvents(db, afterEventID) }
        }
        do {
            try db.commit()
        } catch {
            try? db.rollback()
            discardBatch(answers, error)
            return
        }
        for hook in batchHooks { hook.committed() }
        batchHooks.removeAll()
        if case .success(let list) = events, list.isEmpty {
        } else {
            for observer in observers { observer(events) }
        }
        for answer in answers { answer(nil) }
    }

    private func observers() -> [@Sendable (Result<[LoggedEvent], any Error>) -> Void] {
        condition.lock()
        defer { condition.unlock() }
        return state.observers
    }

    /// The batch's applied mutations are not stored: their hooks learn it, their callers get `error`.
    private func discardBatch(_ answers: [Answer], _ error: any Error) {
        for hook in batchHooks { hook.discarded() }
        batchHooks.removeAll()
        for answer in answers { answer(error) }
    }
}

/// Why a mutation that had applied was not stored.
enum GroupCommitError: Error, CustomStringConvertible {
    /// SQLite ended the batch's transaction on a later mutation's error (I/O error, full disk):
    /// nothing of the transaction is stored.
    case transactionLost

    var description: String {
        "the write's transaction was rolled back by a storage error in the same batch"
    }
}
