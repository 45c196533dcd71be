import Foundation
import GroupModel
import GroupStore
import GroupStoreSQL

/// The write transaction of one batch on the writer connection (only valid during the piece of
/// work it is handed to). The SQL is SQLite's (`SQLiteTransaction`), keyed by app.
///
/// Unlike SQLite, PostgreSQL refuses every statement of a transaction after one failed, so
/// nothing here lets a statement fail on purpose: a group id is checked before the insert (under
/// the group id's lock no other node can take it meanwhile).
///
/// Events are not inserted where a mutation appends them: they wait in the app's
/// ``PostgresStreamTail`` with provisional ids, and the batch's last statement numbers and inserts
/// them, with the rows that carry their positions (joined-group sync, `info_event_id`) and the
/// batch's sends, held in memory until then (`PostgresTransaction+Sends.swift`).
///
/// The reads of a snapshot are in `PostgresTransaction+Load.swift`, the events and their tail in
/// `+Events.swift`, the versioned-sync rows in `+Sync.swift`, retention in `+Purge.swift`; this file
/// holds the writes of a plan's `WriteSet`.
final class PostgresTransaction: StoreTransaction {
    let session: PostgresSession
    /// Per app, the events appended so far, numbered by the batch's tail
    /// (`PostgresTransaction+Events.swift`).
    var tails: [String: PostgresStreamTail] = [:]
    /// The scope of the piece of work running (``PostgresBackend`` sets it): a write of a group
    /// outside it is refused, since only the scope's groups are locked.
    var scope: WriteScope?
    /// The batch's sends: what their snapshots read, and their rows not written yet
    /// (`PostgresTransaction+Sends.swift`).
    var sends = PendingSends()
    /// The rows of the batch's creations, joins, departures and group updates not written yet
    /// (`PostgresTransaction+Held.swift`).
    var held = HeldWrites()
    /// Per group id a creation's load asked about (`SnapshotRequest.newGroup`): the key it
    /// reserved and whether the id was taken then; the creation's write takes it.
    var reservedGroupKeys: [PendingSends.GroupID: (key: Int64, taken: Bool)] = [:]
    /// Writes held in memory so far (the backend counts them with the session's statements to
    /// tell whether a failed piece of work wrote anything).
    var bufferedWrites = 0

    init(session: PostgresSession) {
        self.session = session
    }

    // MARK: Write

    func write(_ writes: WriteSet, over snapshot: StoreSnapshot) async throws -> WriteResult {
        try checkScope(writes.newGroup?.group.id ?? snapshot.group?.id)
        if Self.isSend(writes), let message = writes.message, let key = snapshot.groupRow?.value, let group = snapshot.group {
            // Held in memory; written with the batch's other sends (+Sends).
            try await flushHeld(touching: key)
            let (events, ids) = numberEvents(
                writes.events, groupKey: key, appID: snapshot.app, groupID: group.id, after: group.latestSequence,
                time: snapshot.time)
            bufferSend(message, event: events[0], provisional: ids[0], groupKey: key)
            var result = WriteResult(events: events, eventIDs: ids)
            result.messageEventID = ids[0]
            return result
        }
        // Anything else sees the sends held so far, and may change what memory holds of its groups.
        try await flushSends()
        sends.forget(scope)
        if let key = snapshot.groupRow?.value, held.groupKeys.contains(key), !mergesWithHeld(writes, over: snapshot) {
            try await flushHeld()
        }
        if let group = snapshot.group { held.known[PendingSends.GroupID(app: snapshot.app, id: group.id)] = nil }
        if let plan = writes.newGroup { return try await insertGroup(plan) }
        let time = snapshot.time
        let app = snapshot.app
        var result = WriteResult(events: [], eventIDs: [])
        if let key = snapshot.groupRow?.value, let group = snapshot.group {
            var latest = group.latestSequence
            if let topic = writes.topic {
                try await write(topic, community: group, communityKey: key, time: time)
            }
            if let change = writes.change, snapshot.community != nil, change.changesMembers || !change.bans.isEmpty
                || !change.liftedBans.isEmpty || !change.retainedMutes.isEmpty || change.dismissesGroup {
                throw GroupError.internal("a change of a topic's members, bans or existence (they are its community's)")
            }
            if let change = writes.change {
                (result.events, result.eventIDs) = try await apply(change, groupKey: key, before: group, members: snapshot.members, time: time)
                latest = result.events.last?.sequence ?? latest
            }
            if !writes.events.isEmpty {
                let (appended, ids) = try await appendEvents(
                    writes.events, groupKey: key, appID: app, groupID: group.id, after: latest, time: time)
                if let message = writes.message {
                    // Its body and mention rows are written as every send's are (+Sends).
                    result.messageEventID = ids[0]
                    bufferSend(message, event: appended[0], provisional: ids[0], groupKey: key)
                }
                result.events += appended
                result.eventIDs += ids
            }
            for application in writes.applications {
                try await upsert(application, groupKey: key)
            }
            if let remark = writes.remark {
                if let text = remark.remark {
                    try await session.execute(
                        """
                        INSERT INTO group_remarks (app_id, user_id, group_key, remark, updated_at) VALUES (?, ?, ?, ?, ?)
                        ON CONFLICT (app_id, user_id, group_key)
                        DO UPDATE SET remark = excluded.remark, updated_at = excluded.updated_at
                        """, [.text(app), .text(remark.user), .integer(key), .text(text), .integer(time.millisecondsSince1970)])
                } else {
                    try await session.execute(
                        "DELETE FROM group_remarks WHERE app_id = ? AND user_id = ? AND group_key = ?",
                        [.text(app), .text(remark.user), .integer(key)])
                }
            }
            if let attributes = writes.attributes {
                try await PostgresAttributeRows.write(attributes, app: app, groupKey: key, session: session)
            }
            for link in writes.inviteLinks {
                try await PostgresInviteLinkRows.upsert(link, groupKey: key, session: session)
            }
            if let read = writes.readSequence, snapshot.community != nil {
                // A topic's read position, with the membership it was written for.
                guard let member = snapshot.members[read.user] else {
                    throw GroupError.internal("a read position in a topic for \(read.user), not a member of its community")
                }
                try await session.execute(
                    """
                    INSERT INTO topic_reads (app_id, topic_key, user_id, last_read_seq, joined_at) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT (app_id, topic_key, user_id)
                    DO UPDATE SET last_read_seq = excluded.last_read_seq, joined_at = excluded.joined_at
                    """,
                    [
                        .text(app), .integer(key), .text(read.user), .integer(read.sequence),
                        .integer(member.joinedAt.millisecondsSince1970),
                    ])
            } else if let read = writes.readSequence {
                try await flushHeld(touching: key)
                try await session.execute(
                    "UPDATE members SET last_read_seq = ? WHERE app_id = ? AND group_key = ? AND user_id COLLATE \"C\" = ?",
                    [.integer(read.sequence), .text(app), .integer(key), .text(read.user)])
            }
            if let recall = writes.recall {
                try await session.execute(
                    """
                    UPDATE group_messages SET type = '', text = '', payload = '\\x', mention_all = 0, mentioned_ids = '[]',
                        recalled_by = ?, recall_time = ?, reply_seq = NULL, reply_message_id = NULL,
                        reply_sender_id = NULL, reply_type = NULL, reply_preview = NULL
                    WHERE app_id = ? AND group_key = ? AND seq = ?
                    """,
                    [
                        .text(recall.recall.by), .integer(recall.recall.time.millisecondsSince1970), .text(app), .integer(key),
                        .integer(recall.sequence),
                    ])
                try await session.execute(
                    "DELETE FROM message_mentions WHERE app_id = ? AND group_key = ? AND seq = ?",
                    [.text(app), .integer(key), .integer(recall.sequence)])
                try await session.execute(
                    "UPDATE group_messages SET reply_type = '', reply_preview = NULL WHERE app_id = ? AND group_key = ? AND reply_seq = ?",
                    [.text(app), .integer(key), .integer(recall.sequence)])
            }
            if let edit = writes.edit {
                try await session.execute(
                    """
                    UPDATE group_messages SET text = ?, payload = ?, edit_count = ?, edited_by = ?, edit_time = ?
                    WHERE app_id = ? AND group_key = ? AND seq = ?
                    """,
                    [
                        .text(edit.text), .bytes(edit.payload), .integer(Int64(edit.edit.count)), .text(edit.edit.by),
                        .integer(edit.edit.time.millisecondsSince1970), .text(app), .integer(key), .integer(edit.sequence),
                    ])
                try await session.execute(
                    "UPDATE group_messages SET reply_preview = ? WHERE app_id = ? AND group_key = ? AND reply_seq = ?",
                    [.text(GroupRules.replyPreview(of: edit.text)), .text(app), .integer(key), .integer(edit.sequence)])
            }
            if let reaction = writes.reaction {
                try await PostgresReactionRows.write(reaction, session, app: app, groupKey: key, time: time)
            }
            if let presence = writes.presence {
                if !presence.hold.isEmpty {
                    try await session.command(
                        PostgresPresenceRows.hold,
                        PostgresPresenceRows.holdArguments(app: app, groupID: group.id, users: presence.hold, until: presence.until))
                }
                if !presence.drop.isEmpty {
                    try await session.command(PostgresPresenceRows.drop, [.text(app), .text(group.id), .texts(presence.drop)])
                }
            }
            if let change = writes.change {
                try await recordSync(change, groupKey: key, before: group, time: time, eventID: result.eventIDs.last)
            }
            if let remark = writes.remark, let eventID = result.eventIDs.last, group.type != .avChatRoom {
                joinedChange(app: app, user: remark.user, groupKey: key, eventID: eventID)
            }
        } else if writes.writesGroupRows {
            throw GroupError.internal("a write of a group's rows over a snapshot without a group")
        }
        if let read = writes.applicationReadTime {
            try await session.execute(
                """
                INSERT INTO application_reads (app_id, user_id, read_at) VALUES (?, ?, ?)
                ON CONFLICT (app_id, user_id) DO UPDATE SET read_at = greatest(application_reads.read_at, excluded.read_at)
                """, [.text(app), .text(read.user), .integer(read.time.millisecondsSince1970)])
        }
        return result
    }

    /// Writes a topic of the community `communityKey` (``WriteSet/topic``): a creation inserts its
    /// row (with `parent_key`, `is_private`, its custom fields, the community's settings and owner
    /// copied, never read), an update rewrites its profile, mute, privacy and custom fields, a
    /// deletion marks it dismissed.
    /// - Throws: `GROUP_ID_TAKEN` when a created topic's id is taken (checked first: a failed
    ///   insert would end the transaction).
    private func write(_ topic: TopicWrite, community: Group, communityKey: Int64, time: Timestamp) async throws {
        let app = community.appID
        try await flushHeld(touching: communityKey)
        switch topic {
        case .create(let stored):
            var row = stored
            row.appID = app
            row.type = community.type
            row.settings = community.settings
            row.ownerID = community.ownerID
            row.maxMembers = community.maxMembers
            row.memberCount = community.memberCount
            let taken = try await session.first(
                "SELECT (EXISTS (SELECT 1 FROM groups WHERE app_id = ? AND group_id = ?))::int::int8",
                [.text(app), .text(row.id)], { try $0.bool(0) }) ?? false
            if taken { throw GroupError.groupIDTaken(row.id) }
            let pinPermission = row.settings.pinPermission == row.type.preset.defaultSettings.pinPermission
                ? nil : row.settings.pinPermission.rawValue
            let values = Rows.groupInsertValues(row, nextJoinOrder: 1).map(PGValue.init) + [
                .integer(row.latestSequence), .text(row.settings.inviteLinkPermission.rawValue), .text(pinPermission),
                .integer(communityKey), .bool(row.isPrivate),
            ]
            guard let key = try await session.first(
                """
                INSERT INTO groups (
                    app_id, group_id, type, name, introduction, notification, face_url,
                    owner_id, max_members, member_count,
                    join_option, join_approvers, invite_permission, invitee_must_accept,
                    invitation_needs_approval, remove_members_permission,
                    edit_profile_permission, edit_member_info_permission,
                    mute_mode, mute_roles, mute_until, created_at, updated_at,
                    next_join_order, edit_settings_permission, owner_quit, mention_all_permission,
                    slow_mode_interval, latest_seq, invite_link_permission, pin_permission, parent_key, is_private)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                RETURNING group_key
                """, values, { try $0.int64(0) })
            else { throw GroupError.internal("the insert of topic \(row.id) returned no key") }
            if row.mute.operatorID != nil || !row.pins.isEmpty {
                try await session.execute(
                    "UPDATE groups SET mute_operator = ?, pins = ? WHERE app_id = ? AND group_key = ?",
                    [
                        .text(row.mute.operatorID), .text(row.pins.isEmpty ? nil : PinnedMessageCoding.encode(row.pins)),
                        .text(app), .integer(key),
                    ])
            }
            for (name, value) in row.custom.sorted(by: { $0.key < $1.key }) {
                try await session.execute(
                    "INSERT INTO group_custom (app_id, group_key, key, value) VALUES (?, ?, ?, ?)",
                    [.text(app), .integer(key), .text(name), .bytes(value)])
            }
        case .update(let row):
            let (mode, roles) = Rows.encode(row.mute.mode)
            guard let key = try await session.first(
                """
                UPDATE groups SET name = ?, introduction = ?, notification = ?, face_url = ?,
                    mute_mode = ?, mute_roles = ?, mute_until = ?, mute_operator = ?, updated_at = ?, is_private = ?
                WHERE app_id = ? AND group_id = ? AND parent_key = ? AND dismissed_at IS NULL
                RETURNING group_key
                """,
                [
                    .text(row.name), .text(row.introduction), .text(row.notification), .text(row.faceURL),
                    .text(mode), .text(roles), .integer(row.mute.until?.millisecondsSince1970), .text(row.mute.operatorID),
                    .integer(row.updatedAt.millisecondsSince1970), .bool(row.isPrivate), .text(app), .text(row.id), .integer(communityKey),
                ], { try $0.int64(0) })
            else { throw GroupError.groupNotFound(row.id) }
            try await session.execute("DELETE FROM group_custom WHERE app_id = ? AND group_key = ?", [.text(app), .integer(key)])
            for (name, value) in row.custom.sorted(by: { $0.key < $1.key }) {
                try await session.execute(
                    "INSERT INTO group_custom (app_id, group_key, key, value) VALUES (?, ?, ?, ?)",
                    [.text(app), .integer(key), .text(name), .bytes(value)])
            }
        case .delete(let id):
            let deleted = try await session.execute(
                """
                UPDATE groups SET dismissed_at = ?, updated_at = ?
                WHERE app_id = ? AND group_id = ? AND parent_key = ? AND dismissed_at IS NULL
                """,
                [.integer(time.millisecondsSince1970), .integer(time.millisecondsSince1970), .text(app), .text(id), .integer(communityKey)])
            if deleted == 0 { throw GroupError.groupNotFound(id) }
        }
    }

    /// Holds a group's insert (row, custom fields, members; its events go to the tail), with a
    /// key taken from the group key sequence now.
    private func insertGroup(_ plan: GroupCreationPlan) async throws -> WriteResult {
        let group = plan.group
        let app = group.appID
        // A taken id (a dismissed group's included, or one created earlier in this batch) is
        // refused before anything is held: a failed INSERT would end the whole transaction. The
        // batch holds the lock of this group id (its scope), so no other node takes it meanwhile.
        let id = PendingSends.GroupID(app: app, id: group.id)
        guard !held.groups.contains(id) else { throw GroupError.groupIDTaken(group.id) }
        var reserved = reservedGroupKeys.removeValue(forKey: id)
        if reserved == nil {
            reserved = try await session.first(
                """
                SELECT nextval('groups_group_key_seq'),
                    (EXISTS (SELECT 1 FROM groups WHERE app_id = ? AND group_id = ?))::int::int8
                """, [.text(app), .text(group.id)], { (key: try $0.int64(0), taken: try $0.bool(1)) })
        }
        guard let (groupKey, taken) = reserved, !taken else { throw GroupError.groupIDTaken(group.id) }
        // The group's latest sequence, member version and link and pin permissions (NULL: the
        // type's default, v8) go in with the row.
        let pinPermission = group.settings.pinPermission == group.type.preset.defaultSettings.pinPermission
            ? nil : group.settings.pinPermission.rawValue
        let values = Rows.groupInsertValues(group, nextJoinOrder: plan.members.count + 1).map(PGValue.init) + [
            .int(plan.events.count), .text(group.settings.inviteLinkPermission.rawValue), .text(pinPermission),
            .int(plan.members.isEmpty ? 0 : 1), .integer(groupKey),
        ]
        hold(app: app) { rows in
            rows.groupRows.append(HeldWrites.GroupRow(key: groupKey) { stamp in
                (
                    """
                    INSERT INTO groups (
                        app_id, group_id, type, name, introduction, notification, face_url,
                        owner_id, max_members, member_count,
                        join_option, join_approvers, invite_permission, invitee_must_accept,
                        invitation_needs_approval, remove_members_permission,
                        edit_profile_permission, edit_member_info_permission,
                        mute_mode, mute_roles, mute_until, created_at, updated_at,
                        next_join_order, edit_settings_permission, owner_quit, mention_all_permission,
                        slow_mode_interval, latest_seq, invite_link_permission, pin_permission, member_version,
                        group_key, info_event_id)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,
                        ?, \(stamp == nil ? "0" : "(SELECT base FROM t) + ?"))
                    """, values + (stamp.map { [.integer($0)] } ?? [])
                )
            })
            for (key, value) in group.custom.sorted(by: { $0.key < $1.key }) {
                rows.customKeys.append(groupKey)
                rows.customNames.append(key)
                rows.customValues.append(value)
            }
        }
        for member in plan.members {
            holdInsert(member, app: app, groupKey: groupKey, relativeOrder: nil, changedVersion: 1)
        }
        held.touch(app: app, groupKey: groupKey, groupID: group.id, users: plan.members.map(\.userID))
        if group.type != .avChatRoom { held.countJoined(app: app, inserted: plan.members.map(\.userID), removed: []) }
        let (events, ids) = try await appendEvents(
            plan.events, groupKey: groupKey, appID: app, groupID: group.id, after: 0, time: group.updatedAt,
            movesLatest: false)
        try recordSyncCreation(plan, groupKey: groupKey, eventID: ids.last)
        return WriteResult(events: events, eventIDs: ids, groupRow: GroupRowID(groupKey))
    }

    /// Writes `change` and its events (``Operations/apply(_:groupKey:before:members:time:memberOrigin:db:)`` on SQLite).
    /// Its member inserts and deletions, the group row and its custom fields are held for the
    /// tail (`PostgresTransaction+Held.swift`) unless the change dismisses the group; updates of
    /// existing members, bans and retained mutes are written now.
    private func apply(
        _ change: GroupChange, groupKey key: Int64, before: Group, members: [String: Member], time: Timestamp
    ) async throws -> ([GroupEvent], [Int64]) {
        let app = before.appID
        let after = change.group
        let ms = time.millisecondsSince1970
        let holding = !change.dismissesGroup

        // The member version this change makes (versioned member sync), written with the rows.
        let memberVersion: Int64? = change.changesMembers ? before.memberVersion + 1 : nil
        var joinSequences: [String: Int64] = [:]
        for (offset, event) in change.events.enumerated()
        where event.kind == .memberJoined || event.kind == .memberInvited {
            for user in event.targets where joinSequences[user] == nil {
                joinSequences[user] = before.latestSequence + Int64(offset) + 1
            }
        }

        if !change.removedMembers.isEmpty {
            if holding {
                hold(app: app) { rows in
                    for user in change.removedMembers {
                        rows.removedKeys.append(key)
                        rows.removedUsers.append(user)
                    }
                }
            } else {
                try await session.execute(
                    "DELETE FROM members WHERE app_id = ? AND group_key = ? AND user_id = ANY(?)",
                    [.text(app), .integer(key), .texts(Array(change.removedMembers))])
            }
        }

        for member in change.updatedMembers {
            let changed = try await session.execute(
                """
                UPDATE members SET role = ?, name_card = ?, muted_until = ?, receive_option = ?,
                    permission_groups = ?, changed_version = coalesce(?, changed_version)
                WHERE app_id = ? AND group_key = ? AND user_id COLLATE "C" = ?
                """,
                [
                    .text(member.role.rawValue), .text(member.nameCard), .integer(member.mutedUntil?.millisecondsSince1970),
                    .text(member.receiveOption.rawValue), .text(PermissionGroupCoding.encodeAssignments(member.permissionGroups)),
                    .integer(memberVersion), .text(app), .integer(key), .text(member.userID),
                ])
            guard changed == 1 else {
                throw GroupError.internal("the change updates \(member.userID), who is not a member")
            }
            let old: [String: [UInt8]]
            if let known = members[member.userID] {
                old = known.custom
            } else {
                var read: [String: [UInt8]] = [:]
                try await session.rows(
                    "SELECT key, value FROM member_custom WHERE app_id = ? AND group_key = ? AND user_id = ?",
                    [.text(app), .integer(key), .text(member.userID)]
                ) { read[try $0.text(0)] = try $0.blob(1) }
                old = read
            }
            if old != member.custom {
                let removed = old.keys.filter { member.custom[$0] == nil }
                if !removed.isEmpty {
                    try await session.execute(
                        "DELETE FROM member_custom WHERE app_id = ? AND group_key = ? AND user_id = ? AND key = ANY(?)",
                        [.text(app), .integer(key), .text(member.userID), .texts(removed)])
                }
                for (name, value) in member.custom.sorted(by: { $0.key < $1.key }) where old[name] != value {
                    try await session.execute(
                        """
                        INSERT INTO member_custom (app_id, group_key, user_id, key, value) VALUES (?, ?, ?, ?, ?)
                        ON CONFLICT (app_id, group_key, user_id, key) DO UPDATE SET value = excluded.value
                        """, [.text(app), .integer(key), .text(member.userID), .text(name), .bytes(value)])
                }
            }
        }

        // Inserted members (a dismissal inserts none): join orders continue the group's
        // `next_join_order`, read by the insert before the group update moves it past them (and
        // past the members the batch's earlier held changes of the group inserted); their
        // tombstones and retained mutes go.
        let earlierInserts = held.rows[app]?.groupUpdates[key]?.insertedMembers ?? 0
        for (offset, var member) in change.insertedMembers.enumerated() {
            if let sequence = joinSequences[member.userID] { member.joinSequence = sequence }
            holdInsert(
                member, app: app, groupKey: key, relativeOrder: Int64(earlierInserts + offset),
                changedVersion: memberVersion ?? 0)
        }
        if !change.insertedMembers.isEmpty {
            hold(app: app) { rows in
                for member in change.insertedMembers {
                    rows.returningKeys.append(key)
                    rows.returningUsers.append(member.userID)
                }
            }
        }

        for (user, until) in change.retainedMutes.sorted(by: { $0.key < $1.key }) {
            try await session.execute(
                """
                INSERT INTO retained_mutes (app_id, group_key, user_id, muted_until) VALUES (?, ?, ?, ?)
                ON CONFLICT (app_id, group_key, user_id) DO UPDATE SET muted_until = excluded.muted_until
                """, [.text(app), .integer(key), .text(user), .integer(until.millisecondsSince1970)])
        }

        if !change.bans.isEmpty || !change.liftedBans.isEmpty {
            // Ended bans are ignored by reads and deleted here, lazily.
            try await session.execute(
                "DELETE FROM group_bans WHERE app_id = ? AND group_key = ? AND until_ms IS NOT NULL AND until_ms <= ?",
                [.text(app), .integer(key), .integer(ms)])
            if !change.liftedBans.isEmpty {
                try await session.execute(
                    "DELETE FROM group_bans WHERE app_id = ? AND group_key = ? AND user_id = ANY(?)",
                    [.text(app), .integer(key), .texts(change.liftedBans)])
            }
            for ban in change.bans {
                try await session.execute(
                    """
                    INSERT INTO group_bans (app_id, group_key, user_id, until_ms, reason, operator_id, banned_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (app_id, group_key, user_id) DO UPDATE SET until_ms = excluded.until_ms,
                        reason = excluded.reason, operator_id = excluded.operator_id, banned_at = excluded.banned_at
                    """, [
                        .text(app), .integer(key), .text(ban.userID), .integer(ban.until?.millisecondsSince1970),
                        .text(ban.reason), .text(ban.operatorID), .integer(ban.bannedAt.millisecondsSince1970),
                    ])
            }
        }

        let update = HeldWrites.GroupUpdate(
            values: Self.groupUpdateValues(after), insertedMembers: change.insertedMembers.count,
            latestSequence: before.latestSequence + Int64(change.events.count), memberVersion: memberVersion)
        if holding {
            // One update per group and batch: a later change of the group replaces it.
            hold(app: app) { rows in rows.groupUpdates[key] = rows.groupUpdates[key].map { $0.followed(by: update) } ?? update }
        } else {
            let (sql, arguments) = Self.groupUpdateSQL(
                update.values, app: app, groupKey: key, insertedMembers: update.insertedMembers,
                latestSequence: update.latestSequence, memberVersion: memberVersion, dismissedAt: ms, stamp: nil)
            try await session.execute(sql, arguments)
        }
        if after.custom != before.custom {
            let removed = before.custom.keys.filter { after.custom[$0] == nil }.sorted()
            let changed = after.custom.sorted(by: { $0.key < $1.key }).filter { before.custom[$0.key] != $0.value }
            if holding {
                hold(app: app) { rows in
                    for name in removed {
                        rows.customDeletedKeys.append(key)
                        rows.customDeletedNames.append(name)
                    }
                    for (name, value) in changed {
                        rows.customKeys.append(key)
                        rows.customNames.append(name)
                        rows.customValues.append(value)
                    }
                }
            } else {
                if !removed.isEmpty {
                    try await session.execute(
                        "DELETE FROM group_custom WHERE app_id = ? AND group_key = ? AND key = ANY(?)",
                        [.text(app), .integer(key), .texts(removed)])
                }
                for (name, value) in changed {
                    try await session.execute(
                        """
                        INSERT INTO group_custom (app_id, group_key, key, value) VALUES (?, ?, ?, ?)
                        ON CONFLICT (app_id, group_key, key) DO UPDATE SET value = excluded.value
                        """, [.text(app), .integer(key), .text(name), .bytes(value)])
                }
            }
        }
        if holding {
            held.touch(
                app: app, groupKey: key, groupID: before.id, users: change.insertedMembers.map(\.userID) + change.removedMembers)
            if before.type != .avChatRoom {
                held.countJoined(app: app, inserted: change.insertedMembers.map(\.userID), removed: change.removedMembers)
            }
        }
        let appended = try await appendEvents(
            change.events, groupKey: key, appID: app, groupID: before.id, after: before.latestSequence, time: time,
            movesLatest: false)
        if holding {
            // What the group row reads once the held rows are written: a later load of the group
            // in this batch takes it from here (`PostgresTransaction+Load.swift`).
            held.known[PendingSends.GroupID(app: app, id: before.id)] = HeldWrites.KnownGroup(
                group: Store.group(after: change, before: before, events: appended.0), key: key)
        }
        return appended
    }

    /// The values of a group update's columns from `name` to `mute_bypass`, in the order of
    /// ``groupUpdateSQL(_:app:groupKey:insertedMembers:latestSequence:memberVersion:dismissedAt:stamp:)``.
    static func groupUpdateValues(_ after: Group) -> [PGValue] {
        let settings = after.settings
        let (mode, roles) = Rows.encode(after.mute.mode)
        return [
            .text(after.name), .text(after.introduction), .text(after.notification), .text(after.faceURL),
            .text(after.ownerID), .integer(after.maxMembers.map { Int64($0) }), .int(after.memberCount),
            .text(settings.joinOption.rawValue), .text(settings.joinApprovers.rawValue),
            .text(settings.invitePermission.rawValue), .bool(settings.inviteeMustAccept),
            .bool(settings.invitationNeedsApproval), .text(settings.removeMembersPermission.rawValue),
            .text(settings.editProfilePermission.rawValue), .text(settings.editMemberInfoPermission.rawValue),
            .text(settings.editSettingsPermission.rawValue), .text(settings.ownerQuit.rawValue),
            .text(settings.mentionAllPermission.rawValue), .int(settings.slowModeIntervalSeconds),
            .text(settings.inviteLinkPermission.rawValue),
            .text(mode), .text(roles), .integer(after.mute.until?.millisecondsSince1970),
            .text(after.mute.operatorID), .integer(after.updatedAt.millisecondsSince1970),
            .text(settings.pinPermission.rawValue),
            .text(after.pins.isEmpty ? nil : PinnedMessageCoding.encode(after.pins)),
            .text(EventJSON.encode(after.muteBypass)), .text(PermissionGroupCoding.encode(after.permissionGroups)),
        ]
    }

    /// The update of a group's row: `values` (``groupUpdateValues(_:)``), `next_join_order` moved
    /// past `insertedMembers`, the latest sequence, the member version (`nil`: kept), the
    /// dismissal time (`nil`: none), and (`stamp`, in the batch's tail) the ordinal of the event
    /// whose position becomes `info_event_id`.
    static func groupUpdateSQL(
        _ values: [PGValue], app: String, groupKey: Int64, insertedMembers: Int, latestSequence: Int64,
        memberVersion: Int64?, dismissedAt: Int64?, stamp: Int64?
    ) -> (sql: String, arguments: [PGValue]) {
        var sql = """
            UPDATE groups SET
                name = ?, introduction = ?, notification = ?, face_url = ?, owner_id = ?, max_members = ?,
                member_count = ?, join_option = ?, join_approvers = ?, invite_permission = ?,
                invitee_must_accept = ?, invitation_needs_approval = ?, remove_members_permission = ?,
                edit_profile_permission = ?, edit_member_info_permission = ?,
                edit_settings_permission = ?, owner_quit = ?, mention_all_permission = ?, slow_mode_interval = ?,
                invite_link_permission = ?,
                mute_mode = ?, mute_roles = ?, mute_until = ?, mute_operator = ?, updated_at = ?,
                pin_permission = ?, pins = ?, mute_bypass = ?, permission_groups = ?,
                next_join_order = next_join_order + ?, latest_seq = ?, member_version = coalesce(?, member_version)
            """
        var arguments = values + [.int(insertedMembers), .integer(latestSequence), .integer(memberVersion)]
        if let dismissedAt {
            sql += ", dismissed_at = ?"
            arguments.append(.integer(dismissedAt))
        }
        if let stamp {
            sql += ", info_event_id = (SELECT base FROM t) + ?"
            arguments.append(.integer(stamp))
        }
        return (sql + "\nWHERE app_id = ? AND group_key = ?", arguments + [.text(app), .integer(groupKey)])
    }

    /// Whether `writes`, a change of a group the batch holds rows of, can be held beside them
    /// without writing them first: the held rows are an update of the group row as the batch's
    /// changes left it (``HeldWrites/known``; the snapshot read the group from there), and the
    /// change neither dismisses the group nor changes its custom fields, nor names a user held
    /// rows touch. The group row's two updates then become one (``HeldWrites/GroupUpdate``), and
    /// no other row is written twice by one statement.
    private func mergesWithHeld(_ writes: WriteSet, over snapshot: StoreSnapshot) -> Bool {
        guard let change = writes.change, writes.newGroup == nil, !change.dismissesGroup, let group = snapshot.group,
              let known = held.known[PendingSends.GroupID(app: snapshot.app, id: group.id)],
              known.key == snapshot.groupRow?.value, change.group.custom == group.custom
        else { return false }
        let users = change.insertedMembers.map(\.userID) + change.updatedMembers.map(\.userID) + change.removedMembers
            + change.retainedMutes.keys
        return !held.touches(app: snapshot.app, users: users)
    }

    /// Refuses a write of `groupID` by a piece of work whose scope does not name it: another
    /// node could be writing that group at the same moment.
    private func checkScope(_ groupID: String?) throws {
        guard let groupID, let groups = scope?.groups, !groups.contains(groupID) else { return }
        throw GroupError.internal("a mutation scoped to \(groups) wrote the group \(groupID)")
    }

    /// Inserts the item, or updates it when its id exists in the app (SQLite's statement).
    private func upsert(_ a: Application, groupKey: Int64) async throws {
        try await session.execute(ApplicationRows.upsertSQL, ApplicationRows.upsertArguments(a, groupKey: groupKey).map(PGValue.init))
    }
}

extension PGValue {
    /// The PostgreSQL value of a SQLite argument (the shared row encoders produce those).
    init(_ argument: SQLArgument) {
        switch argument {
        case .integer(let value): self = .integer(value)
        case .text(let value): self = .text(value)
        case .blob(let value): self = .bytes(value)
        case .null: self = .null
        }
    }
}
