import Foundation
import GroupModel
import GroupStore
import GroupStoreSQL

/// A mutation's events: numbered per group at once, held in the app's ``PostgresStreamTail`` until
/// the batch's last statement gives them their positions.
extension PostgresTransaction {
    /// Numbers `drafts` after `sequence` and moves the group's `latest_seq` (unless `movesLatest`
    /// is false: the caller's group update did); the events themselves join the app's
    /// ``PostgresStreamTail``, inserted with their positions by the batch's last statement.
    /// Returns the events and their provisional ids.
    func appendEvents(
        _ drafts: [GroupEvent.Draft], groupKey: Int64, appID: String, groupID: String, after sequence: Int64,
        time: Timestamp, movesLatest: Bool = true
    ) async throws -> ([GroupEvent], [Int64]) {
        if drafts.isEmpty { return ([], []) }
        let (events, ids) = numberEvents(drafts, groupKey: groupKey, appID: appID, groupID: groupID, after: sequence, time: time)
        if movesLatest {
            // A held update of the group's row would write its `latest_seq` after this.
            try await flushHeld(touching: groupKey)
            try await session.execute(
                "UPDATE groups SET latest_seq = ? WHERE app_id = ? AND group_key = ?",
                [.integer(events[events.count - 1].sequence), .text(appID), .integer(groupKey)])
        }
        return (events, ids)
    }

    /// Numbers `drafts` after `sequence` and adds them to the app's ``PostgresStreamTail``;
    /// returns the events and their provisional ids.
    func numberEvents(
        _ drafts: [GroupEvent.Draft], groupKey: Int64, appID: String, groupID: String, after sequence: Int64, time: Timestamp
    ) -> ([GroupEvent], [Int64]) {
        var tail = tails.removeValue(forKey: appID) ?? PostgresStreamTail(app: appID)
        defer { tails[appID] = tail }
        var events: [GroupEvent] = []
        var ids: [Int64] = []
        for (offset, draft) in drafts.enumerated() {
            let event = GroupEvent(
                draft: draft, appID: appID, groupID: groupID, sequence: sequence + Int64(offset) + 1, time: time)
            events.append(event)
            ids.append(tail.append(event, groupKey: groupKey))
        }
        return (events, ids)
    }

    /// Per app, the events this transaction appended, for the batch's tail, with the sends and
    /// other rows held in memory (written by the tail; sends that move the `latest_seq` of a group
    /// whose `info_event_id` the tail moves, and the rows of an app without events, are written
    /// here first).
    func takeTails() async throws -> [PostgresStreamTail] {
        defer { tails = [:] }
        var taken: [PostgresStreamTail] = []
        for app in tails.keys.sorted() {
            guard var tail = tails[app] else { continue }
            if let rows = sends.rows[app], tail.stampedGroups.isDisjoint(with: rows.latest.keys) {
                tail.sends = rows
                sends.rows[app] = nil
            }
            if tail.count > 0 { tail.held = held.rows.removeValue(forKey: app) }
            taken.append(tail)
        }
        try await flushSends()
        try await flushHeld()
        return taken
    }

    /// `user`'s joined-group sync row of the group takes the position of the event
    /// `provisional` (written by the tail).
    func joinedChange(app: String, user: String, groupKey: Int64, eventID provisional: Int64) {
        tails[app]?.joinedChange(user: user, groupKey: groupKey, provisional: provisional)
    }

    /// The group's `info_event_id` takes the position of the event `provisional` (written by
    /// the tail).
    func stampInfo(app: String, groupKey: Int64, eventID provisional: Int64) {
        tails[app]?.stampInfo(groupKey: groupKey, provisional: provisional)
    }
}
