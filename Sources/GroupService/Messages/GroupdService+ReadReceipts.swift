import GroupAPI
import GroupModel
import GroupStore
import Logging

/// The batched `MESSAGE_READ_RECEIPT` events to senders: MarkGroupRead adds the messages a reader
/// covers to their senders' batches
/// (``MessageServiceHandler/noteReadReceipts(app:group:reader:from:to:limits:)``), and the flush
/// job reports each batch when it is due.
extension GroupdService {
    /// How often the flush job looks for due receipt batches (the app's interval decides when a
    /// batch is due; this only bounds how late past it the report goes out).
    static let readReceiptTickMilliseconds: Int64 = 100

    /// Commits one `MESSAGE_READ_RECEIPT` for each due batch, with the counts as they are now
    /// (`GroupRules.planReadReceipt(to:sequences:positions:)`). A batch of a group since
    /// dismissed, or of a sender no longer a member, is dropped.
    public func flushReadReceipts() async {
        for due in readReceipts.takeDue(now: clock.now()) {
            do {
                let positions = try await store.readPositions(app: due.key.app, groupID: due.key.groupID)
                guard let draft = GroupRules.planReadReceipt(to: due.key.sender, sequences: due.sequences, positions: positions)
                else { continue }
                _ = try await store.mutateGroup(
                    app: due.key.app, groupID: due.key.groupID, operatorID: nil, targets: [], at: clock.now()
                ) { snapshot in
                    (GroupChange(group: snapshot.group, events: [draft]), ())
                }
            } catch let error as GroupError where error.reason == .groupNotFound {
                continue
            } catch {
                if Task.isCancelled { return }
                logger.error("read receipt report failed", metadata: ["error": "\(error)", "group": "\(due.key.groupID)"])
            }
        }
    }

    /// Runs ``flushReadReceipts()`` every ``readReceiptTickMilliseconds`` of the service's clock
    /// until the task is cancelled (under a `ManualWallClock`, when an advance reaches its turn).
    public func runReadReceiptFlush() async {
        await clock.repeating(every: .milliseconds(Self.readReceiptTickMilliseconds)) { [self] in
            await flushReadReceipts()
        }
    }
}
