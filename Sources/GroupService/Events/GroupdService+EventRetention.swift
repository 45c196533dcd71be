import GroupModel
import GroupStore
import Logging

extension GroupdService {
    /// How many events one purge statement deletes (short write transactions between batches).
    static let eventPurgeBatch = 1000
    /// How many messages one purge transaction deletes.
    static let messagePurgeBatch = 1000
    /// How many sweep rounds (each over at most ``expiryBatch`` groups) one retention pass runs
    /// per app; the rest waits for the next pass.
    static let expirySweepRounds = 50

    /// What one retention pass did.
    public struct RetentionReport: Sendable, Hashable {
        /// Events deleted past `event_retention_seconds`.
        public var purgedEvents = 0
        /// Messages deleted past `message_retention_seconds`.
        public var purgedMessages = 0
        /// Events committed by expiring pending applications and invitations (`APPLICATION_EXPIRED`).
        public var expiryEvents = 0
    }

    /// Deletes, for every app, the stored events older than its `event_retention_seconds`
    /// (messages stay: they are the history, kept by ``purgeExpiredMessages()``), in batches, and
    /// the member removals kept for versioned member sync from before the same cutoff.
    /// - Returns: How many events were deleted.
    @discardableResult
    public func purgeExpiredEvents() async throws -> Int {
        let now = clock.now()
        var total = 0
        for app in configuration.apps {
            let cutoff = now.adding(seconds: -Int64(max(0, app.limits.eventRetentionSeconds)))
            total += try await Self.deleteInBatches(of: Self.eventPurgeBatch) { limit in
                try await store.purgeEvents(app: app.id, olderThan: cutoff, limit: limit)
            }
            // Member removals kept for versioned member sync go with the events of their time.
            _ = try await Self.deleteInBatches(of: Self.eventPurgeBatch) { limit in
                try await store.purgeMemberTombstones(app: app.id, olderThan: cutoff, limit: limit)
            }
        }
        return total
    }

    /// Deletes, for every app with a `message_retention_seconds` above 0, the group messages
    /// sent before it (body and event row), in batches. 0 keeps history forever.
    /// - Returns: How many messages were deleted.
    @discardableResult
    public func purgeExpiredMessages() async throws -> Int {
        let now = clock.now()
        var total = 0
        for app in configuration.apps where app.limits.messageRetentionSeconds > 0 {
            let cutoff = now.adding(seconds: -Int64(app.limits.messageRetentionSeconds))
            total += try await Self.deleteInBatches(of: Self.messagePurgeBatch) { limit in
                try await store.purgeMessages(app: app.id, olderThan: cutoff, limit: limit)
            }
        }
        return total
    }

    /// Runs `delete` (which deletes at most its argument's number of rows and says how many it
    /// did) until a batch comes back short, checking for cancellation between batches.
    /// - Returns: How many rows were deleted in all.
    private static func deleteInBatches(of batch: Int, _ delete: (Int) async throws -> Int) async throws -> Int {
        var total = 0
        while true {
            try Task.checkCancellation()
            let deleted = try await delete(batch)
            total += deleted
            if deleted < batch { return total }
        }
    }

    /// Marks, for every app, the pending applications and invitations past their expiry as
    /// expired, committing their `APPLICATION_EXPIRED` events (which the event stream then
    /// delivers), without waiting for a write to their group or a listing.
    /// - Returns: How many events the expiries committed.
    @discardableResult
    public func expireDueApplications() async throws -> Int {
        let now = clock.now()
        var total = 0
        for app in configuration.apps {
            for _ in 0..<Self.expirySweepRounds {
                try Task.checkCancellation()
                let events = try await store.expireApplications(app: app.id, now: now, limit: Self.expiryBatch)
                total += events.count
                // Every expired item commits at least one event: none means nothing was due.
                if events.isEmpty { break }
            }
        }
        return total
    }

    /// One retention pass: expire due applications, purge events, purge messages. Each part
    /// runs even when an earlier one failed; the first failure is rethrown after all ran. On a
    /// database several nodes share, one node runs the pass at a time: while another runs it,
    /// this returns an empty report at once.
    public func runRetentionPass() async throws -> RetentionReport {
        try await store.exclusively("retention") { try await self.retentionPass() } ?? RetentionReport()
    }

    private func retentionPass() async throws -> RetentionReport {
        var report = RetentionReport()
        var failure: (any Error)?
        do { report.expiryEvents = try await expireDueApplications() } catch { failure = failure ?? error }
        do { report.purgedEvents = try await purgeExpiredEvents() } catch { failure = failure ?? error }
        do { report.purgedMessages = try await purgeExpiredMessages() } catch { failure = failure ?? error }
        if let failure { throw failure }
        return report
    }

    /// Runs ``runRetentionPass()`` now and then every `interval` of the service's clock until
    /// the task is cancelled; failures are logged and retried at the next round. (Under a
    /// `ManualWallClock` a pass runs when an advance reaches its turn.)
    public func runEventRetention(every interval: Duration = .seconds(60)) async {
        await clock.repeating(every: interval) { [self] in
            do {
                let report = try await runRetentionPass()
                if report.expiryEvents > 0 { logger.info("application expiry committed \(report.expiryEvents) events") }
                if report.purgedEvents > 0 { logger.info("event retention purged \(report.purgedEvents) events") }
                if report.purgedMessages > 0 { logger.info("message retention purged \(report.purgedMessages) messages") }
            } catch is CancellationError {
                return
            } catch {
                // A pass cut short by shutdown (its task cancelled mid-statement, which the store
                // reports as a storage failure) is no failure: nothing is logged.
                if Task.isCancelled { return }
                logger.error("retention pass failed", metadata: ["error": "\(error)"])
            }
        }
    }
}
