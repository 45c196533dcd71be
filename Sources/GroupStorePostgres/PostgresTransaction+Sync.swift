import GroupModel
import GroupStore
import GroupStoreSQL

/// The rows of versioned member sync and joined-group sync, as ``SyncRows`` writes them on SQLite.
extension PostgresTransaction {
    /// See `SyncRows.record(_:groupKey:before:time:eventID:db:)`. The member version, the
    /// members' `changed_version` and the inserted members' tombstones were written with the
    /// change's own rows (`apply`); what is left: the removed members' tombstones (held for the
    /// tail like the deletions, or one statement in a dismissal), and the joined-group rows (by
    /// the batch's tail).
    func recordSync(_ change: GroupChange, groupKey key: Int64, before: Group, time: Timestamp, eventID: Int64?) async throws {
        let app = before.appID
        if !change.removedMembers.isEmpty, !change.dismissesGroup {
            // Held with the member deletions (`PostgresTransaction+Held.swift`).
            hold(app: app) { rows in
                for user in change.removedMembers.sorted() {
                    rows.tombstoneKeys.append(key)
                    rows.tombstoneUsers.append(user)
                    rows.tombstoneVersions.append(before.memberVersion + 1)
                    rows.tombstoneTimes.append(time.millisecondsSince1970)
                }
            }
        } else if !change.removedMembers.isEmpty {
            try await session.execute(
                """
                INSERT INTO member_tombstones (app_id, group_key, user_id, version, removed_at)
                SELECT ?, ?, user_id, ?, ? FROM unnest(?::text[]) AS user_id
                ON CONFLICT (app_id, group_key, user_id) DO UPDATE
                    SET version = excluded.version, removed_at = excluded.removed_at
                """,
                [
                    .text(app), .integer(key), .integer(before.memberVersion + 1), .integer(time.millisecondsSince1970),
                    .texts(change.removedMembers.sorted()),
                ])
        }
        guard let eventID, before.type != .avChatRoom else { return }
        var users = Set<String>()
        for user in change.insertedMembers.map(\.userID) + change.updatedMembers.map(\.userID) + change.removedMembers
        where users.insert(user).inserted {
            joinedChange(app: app, user: user, groupKey: key, eventID: eventID)
        }
        if change.changesListedGroup(from: before) {
            stampInfo(app: app, groupKey: key, eventID: eventID)
        }
    }

    /// See `SyncRows.recordCreation(_:groupKey:eventID:db:)`. The member version 1 went in
    /// with the group and member rows; what is left are the joined-group rows (by the batch's tail).
    func recordSyncCreation(_ plan: GroupCreationPlan, groupKey key: Int64, eventID: Int64?) throws {
        let app = plan.group.appID
        guard let eventID, plan.group.type != .avChatRoom else { return }
        stampInfo(app: app, groupKey: key, eventID: eventID)
        for member in plan.members {
            joinedChange(app: app, user: member.userID, groupKey: key, eventID: eventID)
        }
    }

    /// See `SyncRows.purgeTombstones(app:before:limit:db:)`.
    func purgeTombstones(app: String, before cutoff: Int64, limit: Int) async throws -> Int {
        var ids: [Int64] = []
        var floors: [Int64: Int64] = [:]
        try await session.rows(
            """
            SELECT tomb_id, group_key, version FROM member_tombstones
            WHERE app_id = ? AND removed_at < ? ORDER BY removed_at LIMIT ?
            """, [.text(app), .integer(cutoff), .int(limit)]
        ) { row in
            ids.append(try row.int64(0))
            let group = try row.int64(1)
            floors[group] = max(floors[group] ?? 0, try row.int64(2))
        }
        if ids.isEmpty { return 0 }
        for (group, floor) in floors.sorted(by: { $0.key < $1.key }) {
            try await session.execute(
                "UPDATE groups SET member_floor = greatest(member_floor, ?) WHERE app_id = ? AND group_key = ?",
                [.integer(floor), .text(app), .integer(group)])
        }
        try await session.execute(
            "DELETE FROM member_tombstones WHERE app_id = ? AND tomb_id = ANY(?)", [.text(app), .integers(ids)])
        return ids.count
    }
}
