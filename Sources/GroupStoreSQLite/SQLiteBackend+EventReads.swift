import Foundation
import GRDB
public import GroupModel
import GroupStore
import GroupStoreSQL

/// Event-log reads over SQLite: a group's events by sequence, the app-wide log by `event_id`,
/// a user's stream, memberships with their watermark, retention positions.
extension SQLiteBackend {
    public func events(app: String, groupID: String, after sequence: Int64, limit: Int) async throws -> [GroupEvent] {
        try await pool.read { db in
            let groupKey = try Rows.groupKey(db, app: app, groupID: groupID, dismissedToo: true)
            let rows = try Row.fetchCursor(
                db.cachedStatement(
                    sql: """
                        SELECT \(Rows.eventColumns) FROM group_events
                        WHERE group_key = ? AND seq > ? ORDER BY seq LIMIT ?
                        """),
                arguments: [groupKey, sequence, max(0, limit)])
            var events: [GroupEvent] = []
            while let row = try rows.next() { events.append(try Rows.event(row)) }
            return events
        }
    }

    public func latestEventID() async throws -> Int64 {
        try await pool.read { db in try EventRows.latestEventID(db) }
    }

    public func appEvents(app: String, after eventID: Int64, limit: Int) async throws -> EventLogPage {
        let limit = max(1, limit)
        return try await pool.read { db in
            let latest = try EventRows.latestEventID(db)
            let events = try EventRows.loggedEvents(
                db, where: "e.app_id = ? AND e.event_id > ? ORDER BY e.event_id LIMIT ?",
                arguments: [.text(app), .integer(eventID), .int(limit)])
            let isLast = events.count < limit
            return EventLogPage(
                events: events, scannedThrough: isLast ? max(latest, eventID) : events.last?.eventID ?? eventID,
                isLast: isLast)
        }
    }

    public func userEvents(app: String, userID: String, after eventID: Int64, limit: Int) async throws -> EventLogPage {
        let limit = max(1, limit)
        return try await pool.read { db in
            let latest = try EventRows.latestEventID(db)
            let scope = try EventRows.userScope(db, app: app, userID: userID, after: eventID, topics: storesTopics)
            // The candidates: the first `limit` rows after the cursor of each of the user's groups
            // (and of their communities' topics) and of the rows addressed to the user (each an
            // index range), merged in `event_id`
            // order; the page is the first `limit` of them. Any source that filled its `limit`
            // holds the page's last row or a later one, so no row at or before it is missed.
            let ids = try EventRows.userCandidateIDs(
                db, app: app, userID: userID, groups: scope.candidateGroups, after: eventID, limit: limit)
            let candidates = try EventRows.loggedEvents(
                db,
                where: "e.event_id IN (SELECT value FROM json_each(?)) ORDER BY e.event_id",
                arguments: [.text(try Rows.jsonArray(ids))],
                resolveApprovers: false)
            let isLast = candidates.count < limit
            var events: [LoggedEvent] = []
            for candidate in candidates where scope.includes(candidate, userID: userID) {
                var event = candidate
                if case .approvers = event.event.recipient { event.approvers = [userID] }
                events.append(event)
            }
            return EventLogPage(
                events: events,
                scannedThrough: isLast ? max(latest, eventID) : candidates.last?.eventID ?? eventID,
                isLast: isLast)
        }
    }

    public func streamMemberships(app: String, userID: String) async throws -> MembershipSnapshot {
        try await pool.read { db in
            let watermark = try EventRows.latestEventID(db)
            let rows = try Row.fetchCursor(
                db.cachedStatement(
                    sql: """
                        SELECT g.group_id, g.type, m.join_seq, m.receive_option, m.role,
                            \(storesTopics ? "m.permission_groups" : "NULL") FROM members m
                        JOIN groups g ON g.group_key = m.group_key
                        WHERE m.app_id = ? AND m.user_id = ? AND g.dismissed_at IS NULL
                        """),
                arguments: [app, userID])
            var memberships: [StreamMembership] = []
            while let row = try rows.next() {
                memberships.append(StreamMembership(
                    groupID: try row.decode(atIndex: 0),
                    groupType: try Rows.parse(row.decode(atIndex: 1), GroupType.init(rawValue:)),
                    joinSequence: max(0, try row.decode(Int64.self, atIndex: 2) - 1),
                    receiveOption: try Rows.parse(row.decode(atIndex: 3), ReceiveOption.init(rawValue:)),
                    role: try Rows.parse(row.decode(atIndex: 4), MemberRole.init(rawValue:)),
                    permissionGroups: PermissionGroupCoding.decodeAssignments(try row.decode(String?.self, atIndex: 5))))
            }
            return MembershipSnapshot(memberships: memberships, watermark: watermark)
        }
    }

    public func retainedStart(app: String, cutoff: Timestamp) async throws -> RetainedStart {
        try await pool.read { db in
            if let row = try Row.fetchOne(
                db.cachedStatement(
                    sql: """
                        SELECT event_id, time FROM group_events
                        WHERE app_id = ? AND time >= ? ORDER BY event_id LIMIT 1
                        """),
                arguments: [app, cutoff.millisecondsSince1970])
            {
                let eventID: Int64 = try row.decode(atIndex: 0)
                return RetainedStart(
                    afterEventID: eventID - 1, time: Timestamp(millisecondsSince1970: try row.decode(atIndex: 1)))
            }
            return RetainedStart(afterEventID: try EventRows.latestEventID(db), time: cutoff)
        }
    }
}
