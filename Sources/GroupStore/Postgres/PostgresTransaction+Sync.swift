import GroupModel

/// The rows of versioned member sync and joined-group sync, as ``SyncRows`` writes them on SQLite.
extension PostgresTransaction {
    /// See ``SyncRows/record(_:groupKey:before:time:eventID:db:)``.
    func recordSync(_ change: GroupChange, groupKey key: Int64, before: Group, time: Timestamp, eventID: Int64?) throws {
        let app = before.appID
        if change.changesMembers {
            let version = before.memberVersion + 1
            try session.execute(
                "UPDATE groups SET member_version = ? WHERE app_id = ? AND group_key = ?",
                [.integer(version), .text(app), .integer(key)])
            let touched = change.insertedMembers.map(\.userID) + change.updatedMembers.map(\.userID)
            if !touched.isEmpty {
                try session.execute(
                    "UPDATE members SET changed_version = ? WHERE app_id = ? AND group_key = ? AND user_id = ANY(?)",
                    [.integer(version), .text(app), .integer(key), .texts(touched)])
            }
            if !change.insertedMembers.isEmpty {
                try session.execute(
                    "DELETE FROM member_tombstones WHERE app_id = ? AND group_key = ? AND user_id = ANY(?)",
                    [.text(app), .integer(key), .texts(change.insertedMembers.map(\.userID))])
            }
            for user in change.removedMembers {
                try session.execute(
                    """
                    INSERT INTO member_tombstones (app_id, group_key, user_id, version, removed_at) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT (app_id, group_key, user_id) DO UPDATE
                        SET version = excluded.version, removed_at = excluded.removed_at
                    """, [.text(app), .integer(key), .text(user), .integer(version), .integer(time.millisecondsSince1970)])
            }
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

    /// See ``SyncRows/recordCreation(_:groupKey:eventID:db:)``.
    func recordSyncCreation(_ plan: GroupCreationPlan, groupKey key: Int64, eventID: Int64?) throws {
        let app = plan.group.appID
        if !plan.members.isEmpty {
            try session.execute(
                "UPDATE groups SET member_version = 1 WHERE app_id = ? AND group_key = ?", [.text(app), .integer(key)])
            try session.execute(
                "UPDATE members SET changed_version = 1 WHERE app_id = ? AND group_key = ?", [.text(app), .integer(key)])
        }
        guard let eventID, plan.group.type != .avChatRoom else { return }
        stampInfo(app: app, groupKey: key, eventID: eventID)
        for member in plan.members {
            joinedChange(app: app, user: member.userID, groupKey: key, eventID: eventID)
        }
    }

    /// See ``SyncRows/purgeTombstones(app:before:limit:db:)``.
    func purgeTombstones(app: String, before cutoff: Int64, limit: Int) throws -> Int {
        var ids: [Int64] = []
        var floors: [Int64: Int64] = [:]
        try session.rows(
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
            try session.execute(
                "UPDATE groups SET member_floor = greatest(member_floor, ?) WHERE app_id = ? AND group_key = ?",
                [.integer(floor), .text(app), .integer(group)])
        }
        try session.execute(
            "DELETE FROM member_tombstones WHERE app_id = ? AND tomb_id = ANY(?)", [.text(app), .integers(ids)])
        return ids.count
    }
}
