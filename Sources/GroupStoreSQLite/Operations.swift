import Foundation
import GRDB
import GroupModel
import GroupStore
import GroupStoreSQL

/// The SQL of group changes and member rows, run inside the caller's transaction.
enum Operations {
    /// Per user (0 when none), how many undismissed groups of the app other than AVChatRooms they
    /// are in: `joined_counts` (v7), or the members counted on a file before it (tests of older files).
    static func joinedGroupCounts(app: String, users: [String], countedTable: Bool = true, db: Database) throws -> [String: Int] {
        var counts: [String: Int] = [:]
        if users.isEmpty { return counts }
        for user in users { counts[user] = 0 }
        let padded = Rows.padded(Array(Set(users)))
        let sql = countedTable
            ? "SELECT user_id, count FROM joined_counts WHERE app_id = ? AND user_id IN (\(Rows.placeholders(padded.count)))"
            : """
                SELECT m.user_id, COUNT(*) FROM members m JOIN groups g ON g.group_key = m.group_key
                WHERE m.app_id = ? AND m.user_id IN (\(Rows.placeholders(padded.count)))
                  AND g.dismissed_at IS NULL AND g.type <> 'AVChatRoom'
                GROUP BY m.user_id
                """
        try RawStatement(db, sql).rows([.text(app)] + padded.map { .text($0) }) { row in counts[row.text(0)] = row.int(1) }
        return counts
    }

    /// Write `change` (not empty) and its events; returns the numbered events.
    /// - Parameters:
    ///   - change: What to write: the group row after the change, member rows, retained mutes, bans,
    ///     dismissal and events.
    ///   - key: The group's row.
    ///   - before: The group as the snapshot read it.
    ///   - members: The member rows the snapshot read (their custom fields before the change).
    ///   - time: The change's time: the events' time, the dismissal time, and what ended bans are
    ///     compared with (those are deleted).
    ///   - memberOrigin: Whether the file has the member origin columns (`join_source`, `inviter_id`,
    ///     v6; ``SQLiteBackend/storesMemberOrigin``).
    ///   - ownerSettings: Whether the file has `edit_settings_permission` and `owner_quit` (v8); if not
    ///     (tests of older files), those settings are not written.
    ///   - inviteLinks: Whether the file has `invite_link_permission` and `members.invite_link_id` (v14);
    ///     if not (tests of older files), they are not written.
    ///   - db: The database, inside the caller's write transaction.
    static func apply(
        _ change: GroupChange, groupKey key: Int64, before: Group, members: [String: Member], time: Timestamp,
        memberOrigin: Bool, ownerSettings: Bool = true, inviteLinks: Bool = true, db: Database
    ) throws -> [GroupEvent] {
        let after = change.group
        let ms = time.millisecondsSince1970

        // The sequence of each new member's join event, where the change has one.
        var joinSequences: [String: Int64] = [:]
        for (offset, event) in change.events.enumerated()
        where event.kind == .memberJoined || event.kind == .memberInvited {
            for user in event.targets where joinSequences[user] == nil {
                joinSequences[user] = before.latestSequence + Int64(offset) + 1
            }
        }

        for user in change.removedMembers {
            try RawStatement(db, "DELETE FROM members WHERE group_key = ? AND user_id = ?")
                .execute([.integer(key), .text(user)])
        }

        for member in change.updatedMembers {
            try RawStatement(
                db,
                """
                UPDATE members SET role = ?, name_card = ?, muted_until = ?, receive_option = ?, permission_groups = ?
                WHERE group_key = ? AND user_id = ?
                """
            ).execute([
                .text(member.role.rawValue), .text(member.nameCard), .integer(member.mutedUntil?.millisecondsSince1970),
                .text(member.receiveOption.rawValue), .text(PermissionGroupCoding.encodeAssignments(member.permissionGroups)),
                .integer(key), .text(member.userID),
            ])
            guard db.changesCount == 1 else {
                throw GroupError.internal("the change updates \(member.userID), who is not a member")
            }
            let old = try members[member.userID]?.custom ?? memberCustom(groupKey: key, userID: member.userID, db: db)
            if old != member.custom {
                for name in old.keys where member.custom[name] == nil {
                    try db.cachedStatement(sql: "DELETE FROM member_custom WHERE group_key = ? AND user_id = ? AND key = ?")
                        .execute(arguments: [key, member.userID, name])
                }
                for (name, value) in member.custom where old[name] != value {
                    try db.cachedStatement(
                        sql: """
                            INSERT INTO member_custom (group_key, user_id, key, value) VALUES (?, ?, ?, ?)
                            ON CONFLICT (group_key, user_id, key) DO UPDATE SET value = excluded.value
                            """
                    ).execute(arguments: [key, member.userID, name, Data(value)])
                }
            }
        }

        var nextJoinOrder: Int64?
        if !change.insertedMembers.isEmpty {
            var next = try RawStatement(db, "SELECT next_join_order FROM groups WHERE group_key = ?")
                .first([.integer(key)]) { $0.int64(0) } ?? 1
            for var member in change.insertedMembers {
                member.joinOrder = next
                next += 1
                if let sequence = joinSequences[member.userID] { member.joinSequence = sequence }
                try Rows.insert(member, groupKey: key, appID: before.appID, origin: memberOrigin, inviteLinks: inviteLinks, db: db)
                try RawStatement(db, "DELETE FROM retained_mutes WHERE group_key = ? AND user_id = ?")
                    .execute([.integer(key), .text(member.userID)])
            }
            nextJoinOrder = next
        }

        for (user, until) in change.retainedMutes {
            try db.cachedStatement(
                sql: """
                    INSERT INTO retained_mutes (group_key, user_id, muted_until) VALUES (?, ?, ?)
                    ON CONFLICT (group_key, user_id) DO UPDATE SET muted_until = excluded.muted_until
                    """
            ).execute(arguments: [key, user, until.millisecondsSince1970])
        }

        if !change.bans.isEmpty || !change.liftedBans.isEmpty {
            // Ended bans are ignored by reads and deleted here, lazily.
            try RawStatement(db, "DELETE FROM group_bans WHERE group_key = ? AND until_ms IS NOT NULL AND until_ms <= ?")
                .execute([.integer(key), .integer(ms)])
            for user in change.liftedBans {
                try RawStatement(db, "DELETE FROM group_bans WHERE group_key = ? AND user_id = ?")
                    .execute([.integer(key), .text(user)])
            }
            for ban in change.bans {
                try RawStatement(
                    db,
                    """
                    INSERT INTO group_bans (group_key, user_id, until_ms, reason, operator_id, banned_at)
                    VALUES (?, ?, ?, ?, ?, ?)
                    ON CONFLICT (group_key, user_id) DO UPDATE SET until_ms = excluded.until_ms,
                        reason = excluded.reason, operator_id = excluded.operator_id, banned_at = excluded.banned_at
                    """
                ).execute([
                    .integer(key), .text(ban.userID), .integer(ban.until?.millisecondsSince1970), .text(ban.reason),
                    .text(ban.operatorID), .integer(ban.bannedAt.millisecondsSince1970),
                ])
            }
        }

        let settings = after.settings
        let (mode, roles) = Rows.encode(after.mute.mode)
        try RawStatement(
            db,
            """
            UPDATE groups SET
                introduction = ?, notification = ?, face_url = ?, owner_id = ?, max_members = ?,
                member_count = ?, join_option = ?, join_approvers = ?, invite_permission = ?,
                invitee_must_accept = ?, invitation_needs_approval = ?, remove_members_permission = ?,
                edit_profile_permission = ?, edit_member_info_permission = ?,
                mute_mode = ?, mute_roles = ?, mute_until = ?, updated_at = ?,
                next_join_order = coalesce(?, next_join_order),
                dismissed_at = CASE WHEN ? THEN ? ELSE dismissed_at END
            WHERE group_key = ?
            """
        ).execute([
            .text(after.introduction), .text(after.notification), .text(after.faceURL), .text(after.ownerID),
            .integer(after.maxMembers.map { Int64($0) }), .int(after.memberCount), .text(settings.joinOption.rawValue),
            .text(settings.joinApprovers.rawValue), .text(settings.invitePermission.rawValue),
            .bool(settings.inviteeMustAccept), .bool(settings.invitationNeedsApproval),
            .text(settings.removeMembersPermission.rawValue), .text(settings.editProfilePermission.rawValue),
            .text(settings.editMemberInfoPermission.rawValue), .text(mode), .text(roles),
            .integer(after.mute.until?.millisecondsSince1970), .integer(after.updatedAt.millisecondsSince1970),
            .integer(nextJoinOrder), .bool(change.dismissesGroup), .integer(ms), .integer(key),
        ])
        // Set apart (a file before v8 has no such columns; tests of older files).
        if ownerSettings, settings.editSettingsPermission != before.settings.editSettingsPermission
            || settings.ownerQuit != before.settings.ownerQuit {
            try db.cachedStatement(sql: "UPDATE groups SET edit_settings_permission = ?, owner_quit = ? WHERE group_key = ?")
                .execute(arguments: [settings.editSettingsPermission.rawValue, settings.ownerQuit.rawValue, key])
        }
        // Set apart (a file before v12 has no such columns; tests of older files).
        if settings.mentionAllPermission != before.settings.mentionAllPermission
            || settings.slowModeIntervalSeconds != before.settings.slowModeIntervalSeconds {
            try db.cachedStatement(sql: "UPDATE groups SET mention_all_permission = ?, slow_mode_interval = ? WHERE group_key = ?")
                .execute(arguments: [settings.mentionAllPermission.rawValue, settings.slowModeIntervalSeconds, key])
        }
        // Set apart (a file before v13 has no such columns; tests of older files).
        if after.settings.pinPermission != before.settings.pinPermission {
            try db.cachedStatement(sql: "UPDATE groups SET pin_permission = ? WHERE group_key = ?")
                .execute(arguments: [after.settings.pinPermission.rawValue, key])
        }
        if after.permissionGroups != before.permissionGroups {
            try db.cachedStatement(sql: "UPDATE groups SET permission_groups = ? WHERE group_key = ?")
                .execute(arguments: [PermissionGroupCoding.encode(after.permissionGroups), key])
        }
        if after.pins != before.pins {
            try db.cachedStatement(sql: "UPDATE groups SET pins = ? WHERE group_key = ?")
                .execute(arguments: [after.pins.isEmpty ? nil : PinnedMessageCoding.encode(after.pins), key])
        }
        // Set apart (a file before v10 has no such column; tests of older files).
        if after.mute.operatorID != before.mute.operatorID {
            try db.cachedStatement(sql: "UPDATE groups SET mute_operator = ? WHERE group_key = ?")
                .execute(arguments: [after.mute.operatorID, key])
        }
        // Set apart (a file before v11 has no such column; tests of older files).
        if after.muteBypass != before.muteBypass {
            try db.cachedStatement(sql: "UPDATE groups SET mute_bypass = ? WHERE group_key = ?")
                .execute(arguments: [EventJSON.encode(after.muteBypass), key])
        }
        // Set apart (a file before v14 has no such column; tests of older files).
        if inviteLinks, settings.inviteLinkPermission != before.settings.inviteLinkPermission {
            try db.cachedStatement(sql: "UPDATE groups SET invite_link_permission = ? WHERE group_key = ?")
                .execute(arguments: [settings.inviteLinkPermission.rawValue, key])
        }
        // Set apart: the name search trigger re-indexes on any UPDATE OF name.
        if after.name != before.name {
            try db.cachedStatement(sql: "UPDATE groups SET name = ? WHERE group_key = ?")
                .execute(arguments: [after.name, key])
        }
        try writeCustom(after.custom, before: before.custom, groupKey: key, db: db)

        return try Rows.appendEvents(
            change.events, groupKey: key, appID: before.appID, groupID: before.id, after: before.latestSequence,
            time: time, db: db)
    }

    /// Writes a group's (or a topic's) custom fields as `after`, over `before` as stored: the
    /// keys removed and the values changed.
    static func writeCustom(_ after: [String: [UInt8]], before: [String: [UInt8]], groupKey key: Int64, db: Database) throws {
        if after == before { return }
        for name in before.keys where after[name] == nil {
            try db.cachedStatement(sql: "DELETE FROM group_custom WHERE group_key = ? AND key = ?")
                .execute(arguments: [key, name])
        }
        for (name, value) in after where before[name] != value {
            try db.cachedStatement(
                sql: """
                    INSERT INTO group_custom (group_key, key, value) VALUES (?, ?, ?)
                    ON CONFLICT (group_key, key) DO UPDATE SET value = excluded.value
                    """
            ).execute(arguments: [key, name, Data(value)])
        }
    }

    // MARK: Reading rows

    /// Members of one group by user id, with custom fields.
    /// - Parameters:
    ///   - groupKey: The group's row.
    ///   - userIDs: The users whose member rows are read (those who are not members are absent).
    ///   - inviteLinks: Whether the file has `members.invite_link_id` (v14).
    ///   - db: The database, inside the caller's transaction.
    static func members(groupKey: Int64, userIDs: [String], inviteLinks: Bool = true, db: Database) throws -> [String: Member] {
        let userIDs = userIDs.count > 1 ? Array(Set(userIDs)) : userIDs
        if userIDs.isEmpty { return [:] }
        let padded = Rows.padded(userIDs)
        var rows: [Rows.MemberRow] = []
        let sql =
            padded.count > 1 ? membersSQL(inviteLinks: inviteLinks, count: padded.count)
            : inviteLinks ? oneMemberSQL : oneMemberSQLBeforeV14
        try RawStatement(db, sql).rows([.integer(groupKey)] + padded.map { .text($0) }) { rows.append(try Rows.member($0)) }
        var result: [String: Member] = [:]
        for member in try withCustom(rows, groupKey: groupKey, db: db) { result[member.userID] = member }
        return result
    }

    /// The text of ``members(groupKey:userIDs:inviteLinks:db:)``'s read of `count` users.
    private static func membersSQL(inviteLinks: Bool, count: Int) -> String {
        """
        SELECT \(Rows.memberColumns(inviteLinks: inviteLinks)) FROM members m
        WHERE m.group_key = ? AND m.user_id IN (\(Rows.placeholders(count)))
        """
    }

    /// ``membersSQL(inviteLinks:count:)`` of one user (a mutation's operator, a send's sender),
    /// built once rather than on every read.
    private static let oneMemberSQL = membersSQL(inviteLinks: true, count: 1)
    private static let oneMemberSQLBeforeV14 = membersSQL(inviteLinks: false, count: 1)

    static func memberCustom(groupKey: Int64, userID: String, db: Database) throws -> [String: [UInt8]] {
        var custom: [String: [UInt8]] = [:]
        let rows = try Row.fetchCursor(
            db.cachedStatement(sql: "SELECT key, value FROM member_custom WHERE group_key = ? AND user_id = ?"),
            arguments: [groupKey, userID])
        while let row = try rows.next() {
            custom[try row.decode(String.self, atIndex: 0)] = [UInt8](try row.decode(Data.self, atIndex: 1))
        }
        return custom
    }

    /// The members of `rows` (all of group `groupKey`), in order, with their custom fields.
    static func withCustom(_ rows: [Rows.MemberRow], groupKey: Int64, db: Database) throws -> [Member] {
        var members = rows.map(\.member)
        let needing = rows.filter(\.hasCustom).map(\.member.userID)
        if needing.isEmpty { return members }
        var index: [String: Int] = [:]
        for (offset, member) in members.enumerated() { index[member.userID] = offset }
        let padded = Rows.padded(needing)
        let custom = try Row.fetchCursor(
            db.cachedStatement(
                sql: """
                    SELECT user_id, key, value FROM member_custom
                    WHERE group_key = ? AND user_id IN (\(Rows.placeholders(padded.count)))
                    """),
            arguments: StatementArguments([groupKey] + padded.map { $0 as any DatabaseValueConvertible }))
        while let row = try custom.next() {
            guard let offset = index[try row.decode(String.self, atIndex: 0)] else { continue }
            members[offset].custom[try row.decode(String.self, atIndex: 1)] = [UInt8](try row.decode(Data.self, atIndex: 2))
        }
        return members
    }

    /// One user's memberships `rows` (of several groups), in order, with their custom fields.
    static func withCustom(_ rows: [Rows.MemberRow], userID: String, db: Database) throws -> [Member] {
        var members = rows.map(\.member)
        let needing = rows.filter(\.hasCustom).map(\.groupKey)
        if needing.isEmpty { return members }
        var index: [Int64: Int] = [:]
        for (offset, row) in rows.enumerated() { index[row.groupKey] = offset }
        let padded = Rows.padded(needing)
        let custom = try Row.fetchCursor(
            db.cachedStatement(
                sql: """
                    SELECT group_key, key, value FROM member_custom
                    WHERE user_id = ? AND group_key IN (\(Rows.placeholders(padded.count)))
                    """),
            arguments: StatementArguments([userID] + padded.map { $0 as any DatabaseValueConvertible }))
        while let row = try custom.next() {
            guard let offset = index[try row.decode(Int64.self, atIndex: 0)] else { continue }
            members[offset].custom[try row.decode(String.self, atIndex: 1)] = [UInt8](try row.decode(Data.self, atIndex: 2))
        }
        return members
    }

    /// The groups of `rows`, in order, with their custom fields.
    static func withCustom(_ rows: [Rows.GroupRow], db: Database) throws -> [Group] {
        var groups = rows.map(\.group)
        let needing = rows.filter(\.hasCustom).map(\.key)
        if needing.isEmpty { return groups }
        var index: [Int64: Int] = [:]
        for (offset, row) in rows.enumerated() { index[row.key] = offset }
        let padded = Rows.padded(needing)
        let custom = try Row.fetchCursor(
            db.cachedStatement(
                sql: "SELECT group_key, key, value FROM group_custom WHERE group_key IN (\(Rows.placeholders(padded.count)))"),
            arguments: StatementArguments(padded))
        while let row = try custom.next() {
            guard let offset = index[try row.decode(Int64.self, atIndex: 0)] else { continue }
            groups[offset].custom[try row.decode(String.self, atIndex: 1)] = [UInt8](try row.decode(Data.self, atIndex: 2))
        }
        return groups
    }
}

extension Rows.MemberRow {
    /// Every row of `statement` (selecting ``Rows/memberColumns``), decoded.
    static func fetchAll(_ statement: Statement, arguments: StatementArguments) throws -> [Rows.MemberRow] {
        var result: [Rows.MemberRow] = []
        let rows = try Row.fetchCursor(statement, arguments: arguments)
        while let row = try rows.next() { result.append(try Rows.member(row)) }
        return result
    }
}
