import GRDB
import GroupModel
import GroupStore
import GroupStoreSQL

/// The rows of versioned member sync and joined-group sync (v15), written in the transaction of
/// the change they record.
enum SyncRows {
    /// Records a change of an existing group: the new member version on the group row and on each
    /// inserted or updated member row, a tombstone per removed member (an inserted member's is
    /// deleted), and, after the write's last event (`eventID`), the joined-group changes of the
    /// users it touched and the group's record change.
    static func record(
        _ change: GroupChange, groupKey key: Int64, before: Group, time: Timestamp, eventID: Int64?, db: Database
    ) throws {
        if change.changesMembers {
            let version = before.memberVersion + 1
            try db.cachedStatement(sql: "UPDATE groups SET member_version = ? WHERE group_key = ?")
                .execute(arguments: [version, key])
            for member in change.insertedMembers + change.updatedMembers {
                try db.cachedStatement(sql: "UPDATE members SET changed_version = ? WHERE group_key = ? AND user_id = ?")
                    .execute(arguments: [version, key, member.userID])
            }
            for member in change.insertedMembers {
                try db.cachedStatement(sql: "DELETE FROM member_tombstones WHERE group_key = ? AND user_id = ?")
                    .execute(arguments: [key, member.userID])
            }
            for user in change.removedMembers {
                try db.cachedStatement(
                    sql: """
                        INSERT INTO member_tombstones (group_key, user_id, app_id, version, removed_at)
                        VALUES (?, ?, ?, ?, ?)
                        ON CONFLICT (group_key, user_id) DO UPDATE
                            SET version = excluded.version, removed_at = excluded.removed_at
                        """
                ).execute(arguments: [key, user, before.appID, version, time.millisecondsSince1970])
            }
        }
        guard let eventID, before.type != .avChatRoom else { return }
        var users = Set<String>()
        for user in change.insertedMembers.map(\.userID) + change.updatedMembers.map(\.userID) + change.removedMembers
        where users.insert(user).inserted {
            try joinedChange(app: before.appID, user: user, groupKey: key, eventID: eventID, db: db)
        }
        if change.changesListedGroup(from: before) {
            try db.cachedStatement(sql: "UPDATE groups SET info_event_id = ? WHERE group_key = ?")
                .execute(arguments: [eventID, key])
        }
    }

    /// Records a new group: its members at member version 1, and their joined-group changes and
    /// the group's record at `eventID`.
    static func recordCreation(_ plan: GroupCreationPlan, groupKey key: Int64, eventID: Int64?, db: Database) throws {
        if !plan.members.isEmpty {
            try db.cachedStatement(sql: "UPDATE groups SET member_version = 1 WHERE group_key = ?").execute(arguments: [key])
            try db.cachedStatement(sql: "UPDATE members SET changed_version = 1 WHERE group_key = ?").execute(arguments: [key])
        }
        guard let eventID, plan.group.type != .avChatRoom else { return }
        try db.cachedStatement(sql: "UPDATE groups SET info_event_id = ? WHERE group_key = ?").execute(arguments: [eventID, key])
        for member in plan.members {
            try joinedChange(app: plan.group.appID, user: member.userID, groupKey: key, eventID: eventID, db: db)
        }
    }

    /// Records that `user`'s entry for the group changed at `eventID` (joined, left, own record, remark).
    static func joinedChange(app: String, user: String, groupKey: Int64, eventID: Int64, db: Database) throws {
        try db.cachedStatement(
            sql: """
                INSERT INTO joined_changes (app_id, user_id, group_key, event_id) VALUES (?, ?, ?, ?)
                ON CONFLICT (app_id, user_id, group_key) DO UPDATE SET event_id = excluded.event_id
                """
        ).execute(arguments: [app, user, groupKey, eventID])
    }

    /// Deletes up to `limit` of the app's member tombstones older than `before`, raising each
    /// group's `member_floor` to the highest version deleted; returns how many.
    static func purgeTombstones(app: String, before: Timestamp, limit: Int, db: Database) throws -> Int {
        var ids: [Int64] = []
        var floors: [Int64: Int64] = [:]
        let rows = try Row.fetchCursor(
            db.cachedStatement(
                sql: """
                    SELECT tomb_id, group_key, version FROM member_tombstones
                    WHERE app_id = ? AND removed_at < ? ORDER BY removed_at LIMIT ?
                    """),
            arguments: [app, before.millisecondsSince1970, limit])
        while let row = try rows.next() {
            ids.append(try row.decode(Int64.self, atIndex: 0))
            let group: Int64 = try row.decode(atIndex: 1)
            floors[group] = max(floors[group] ?? 0, try row.decode(Int64.self, atIndex: 2))
        }
        if ids.isEmpty { return 0 }
        for (group, floor) in floors {
            try db.cachedStatement(sql: "UPDATE groups SET member_floor = max(member_floor, ?) WHERE group_key = ?")
                .execute(arguments: [floor, group])
        }
        try db.cachedStatement(sql: "DELETE FROM member_tombstones WHERE tomb_id IN (SELECT value FROM json_each(?))")
            .execute(arguments: [try Rows.jsonArray(ids)])
        return ids.count
    }
}
