import GroupModel
import GroupStore
import Logging

extension GroupdService {
    /// How many events one purge statement deletes (short write transactions between batches).
    static let eventPurgeBatch = 1000

    /// Deletes, for every app, the stored events older than its `event_retention_seconds`
    /// (messages stay: they are the history), in batches.
    /// - Returns: How many events were deleted.
    @discardableResult
    public func purgeExpiredEvents() async throws -> Int {
        guard let log = store as? any EventLogStore else { return 0 }
        let now = clock.now()
        var total = 0
        for app in configuration.apps {
            let cutoff = now.adding(seconds: -Int64(max(0, app.limits.eventRetentionSeconds)))
            while true {
                try Task.checkCancellation()
                let deleted = try await log.purgeEvents(app: app.id, olderThan: cutoff, limit: Self.eventPurgeBatch)
                total += deleted
                if deleted < Self.eventPurgeBatch { break }
            }
        }
        return total
    }

    /// Runs ``purgeExpiredEvents()`` every `interval` until the task is cancelled; failures are
    /// logged and retried at the next round.
    public func runEventRetention(every interval: Duration = .seconds(60)) async {
        while !Task.isCancelled {
            do {
                let deleted = try await purgeExpiredEvents()
                if deleted > 0 { logger.info("event retention purged \(deleted) events") }
            } catch is CancellationError {
                return
            } catch {
                logger.error("event retention failed", metadata: ["error": "\(error)"])
            }
            try? await Task.sleep(for: interval)
        }
    }
}
