import Foundation
import GRDB
import GroupModel
import GroupStore
import GroupStoreSQL

/// The write transaction of one batch on the writer connection: loads snapshots and writes what
/// plans decided (only valid during the piece of work it is handed to).
struct SQLiteTransaction: StoreTransaction {
    let db: Database
    /// Whether member rows get their origin columns (``SQLiteBackend/storesMemberOrigin``).
    let storesMemberOrigin: Bool
    /// Whether the file keeps `joined_counts` (``SQLiteBackend/keepsJoinedCounts``).
    let keepsJoinedCounts: Bool
    /// Whether group rows have the owner settings columns (``SQLiteBackend/storesOwnerSettings``).
    var storesOwnerSettings = true
    /// Whether the file has invite links (``SQLiteBackend/storesInviteLinks``).
    var storesInviteLinks = true
    /// Whether the file keeps member versions and joined-group changes (``SQLiteBackend/storesSyncVersions``).
    var storesSyncVersions = true
    /// Whether the file has message reactions (``SQLiteBackend/storesReactions``).
    var storesReactions = true

    // MARK: Load

    func load(_ request: SnapshotRequest) throws -> StoreSnapshot {
        var snapshot = StoreSnapshot(app: request.app, time: request.time)
        var groupID = request.group
        if let id = request.application {
            guard let item = try ApplicationRows.fetchOne(
                db, where: "a.app_id = ? AND a.application_id = ?", arguments: [.text(request.app), .text(id)])
            else { throw GroupError.applicationNotFound(id) }
            snapshot.application = item
            groupID = groupID ?? item.groupID
        }
        let users = request.users
        if let groupID {
            let read = try Rows.liveGroup(db, app: request.app, groupID: groupID, ownerSettings: storesOwnerSettings)
            var group = try Operations.withCustom([read], db: db)[0]
            let key = read.key
            // A topic's own rows (messages, reads, pins) are under `key`; its members, bans,
            // applications, attributes and links are its community's, under `memberKey`.
            var memberKey = key
            if let communityID = GroupID.communityID(ofTopic: groupID) {
                let community = try loadCommunity(app: request.app, communityID: communityID, topicID: groupID)
                snapshot.community = community.group
                group = Group.topic(group, in: community.group)
                memberKey = community.key
            }
            snapshot.group = group
            snapshot.groupRow = GroupRowID(key)
            try loadMembers(request, group: group, groupKey: memberKey, into: &snapshot)
            if group.isTopic {
                // Community sequences mean nothing in a topic: its history has no join floor.
                for id in snapshot.members.keys { snapshot.members[id]?.joinSequence = 0 }
            }
            if request.parts.contains(.retainedMutes), !users.isEmpty {
                snapshot.retainedMutes = try retainedMutes(groupKey: memberKey, users: users, time: request.time)
            }
            // Files before v8 (tests of older files) have no ban table (v11).
            if request.parts.contains(.bans), !users.isEmpty, storesOwnerSettings {
                snapshot.bans = try BanRows.bans(db, groupKey: memberKey, users: users, time: request.time)
            }
            if request.parts.contains(.banCount), storesOwnerSettings {
                snapshot.banCount = try BanRows.count(db, groupKey: memberKey, time: request.time)
            }
            if request.parts.contains(.managers) {
                snapshot.managers = try String.fetchAll(
                    db.cachedStatement(
                        sql: "SELECT user_id FROM members WHERE group_key = ? AND role IN ('owner', 'admin') ORDER BY join_order"),
                    arguments: [memberKey])
            }
            if let kind = request.pendingApplications {
                for subject in Set(request.targets) {
                    snapshot.pendingApplications[subject] = try ApplicationRows.fetchOne(
                        db, where: "a.group_key = ? AND a.kind = ? AND a.subject_id = ? AND a.state = 'pending'",
                        arguments: [.integer(memberKey), .text(kind.rawValue), .text(subject)])
                }
            }
            if request.parts.contains(.dueApplications) {
                snapshot.dueApplications = try ApplicationRows.fetchAll(
                    db, where: "a.group_key = ? AND a.state = 'pending' AND a.expires_at <= ?",
                    arguments: [.integer(memberKey), .integer(request.time.millisecondsSince1970)])
            }
            if request.parts.contains(.approvers) {
                snapshot.approvers = try EventRows.approvers(db, groupKey: memberKey)
            }
            if request.parts.contains(.attributes) {
                snapshot.attributes = try AttributeRows.load(db, groupKey: memberKey)
            }
            if request.parts.contains(.inviteLinks) {
                snapshot.inviteLinks = try InviteLinkRows.live(db, groupKey: memberKey, now: request.time)
            }
            if let topicID = request.topic {
                try loadTopic(app: request.app, topicID: topicID, communityKey: key, into: &snapshot)
            }
            if request.parts.contains(.topicCount) {
                snapshot.topicCount = try topicCount(communityKey: key)
            }
            if request.parts.contains(.presence), group.type == .avChatRoom {
                snapshot.presence = RoomPresence(
                    present: try PresenceRows.present(db, app: request.app, groupID: groupID, users: users, now: request.time),
                    online: try PresenceRows.online(db, app: request.app, groupID: groupID, now: request.time))
            }
            if request.parts.contains(.readState), let reader = request.readState {
                if group.isTopic {
                    try loadTopicReadState(reader, topicKey: key, into: &snapshot)
                } else {
                    try loadReadState(reader, groupKey: key, into: &snapshot)
                }
            }
            if let sequence = request.messageSequence {
                snapshot.message = try MessageRows.message(
                    groupKey: key, appID: request.app, groupID: groupID, sequence: sequence, db: db)
            }
            if let reactions = request.reactionsOf {
                snapshot.reactions = try ReactionRows.state(
                    groupKey: key, sequence: reactions.sequence, userID: reactions.user, db: db)
            }
            if let sender = request.lastSentBy, group.settings.slowModeIntervalSeconds > 0 {
                snapshot.lastSentAt = try MessageRows.lastSent(groupKey: key, senderID: sender, db: db)
            }
            if let earlier = request.earlierMessage {
                snapshot.earlierMessage = try MessageRows.messageByClientID(
                    groupKey: key, appID: request.app, groupID: groupID, senderID: earlier.sender,
                    clientMessageID: earlier.clientMessageID, db: db)
            }
        }
        if let key = request.inviteLink {
            snapshot.inviteLink = try InviteLinkRows.one(db, app: request.app, key: key)
        }
        if request.parts.contains(.joinedGroupCounts) {
            snapshot.joinedGroupCounts = try Operations.joinedGroupCounts(
                app: request.app, users: users, countedTable: keepsJoinedCounts, db: db)
        }
        if request.parts.contains(.applicationReads), let reader = request.applicationReader {
            snapshot.applicationReadTime = try ApplicationRows.readTime(app: request.app, userID: reader, db: db)
            let filter = ApplicationRows.Filter(app: request.app, query: ApplicationQuery(userID: reader, now: request.time))
            snapshot.unreadApplications = try ApplicationRows.unreadCount(filter, readTime: snapshot.applicationReadTime, db: db)
        }
        return snapshot
    }

    /// The operator's, the targets' and (when asked) the owner's and the successor's memberships.
    private func loadMembers(_ request: SnapshotRequest, group: Group, groupKey: Int64, into snapshot: inout StoreSnapshot) throws {
        var wanted = Set(request.users)
        if request.parts.contains(.owner), let owner = group.ownerID { wanted.insert(owner) }
        if !wanted.isEmpty {
            snapshot.members = try Operations.members(
                groupKey: groupKey, userIDs: Array(wanted), inviteLinks: storesInviteLinks, db: db)
        }
        if request.parts.contains(.successor) {
            let rows = try Rows.MemberRow.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT \(Rows.memberColumns(inviteLinks: storesInviteLinks)) FROM members m
                        WHERE m.group_key = ? AND m.user_id <> ? ORDER BY m.join_order LIMIT 1
                        """),
                arguments: [groupKey, request.operatorID ?? ""])
            if let successor = try Operations.withCustom(rows, groupKey: groupKey, db: db).first {
                snapshot.successor = successor
                snapshot.members[successor.userID] = successor
            }
            if group.settings.ownerQuit == .longestStandingAdminElseMember, let op = request.operatorID,
               group.ownerID == op {
                let admins = try Rows.MemberRow.fetchAll(
                    db.cachedStatement(
                        sql: """
                            SELECT \(Rows.memberColumns(inviteLinks: storesInviteLinks)) FROM members m
                            WHERE m.group_key = ? AND m.role = 'admin' AND m.user_id <> ? ORDER BY m.join_order LIMIT 1
                            """),
                    arguments: [groupKey, op])
                if let admin = try Operations.withCustom(admins, groupKey: groupKey, db: db).first {
                    snapshot.successorAdmin = admin
                    snapshot.members[admin.userID] = admin
                }
            }
        }
    }

    private func retainedMutes(groupKey: Int64, users: [String], time: Timestamp) throws -> [String: Timestamp] {
        var retained: [String: Timestamp] = [:]
        let padded = Rows.padded(users)
        try RawStatement(
            db,
            """
            SELECT user_id, muted_until FROM retained_mutes
            WHERE group_key = ? AND muted_until > ? AND user_id IN (\(Rows.placeholders(padded.count)))
            """
        ).rows([.integer(groupKey), .integer(time.millisecondsSince1970)] + padded.map { .text($0) }) { row in
            retained[row.text(0)] = Timestamp(millisecondsSince1970: row.int64(1))
        }
        return retained
    }

    private func loadReadState(_ reader: (user: String, upTo: Int64?), groupKey: Int64, into snapshot: inout StoreSnapshot) throws {
        var joinSequence: Int64 = 0
        if let row = try Row.fetchOne(
            db.cachedStatement(sql: "SELECT last_read_seq, join_seq FROM members WHERE group_key = ? AND user_id = ?"),
            arguments: [groupKey, reader.user])
        {
            snapshot.readSequence = try row.decode(atIndex: 0)
            joinSequence = try row.decode(atIndex: 1)
        }
        snapshot.latestMessageSequence = try Int64.fetchOne(
            db.cachedStatement(sql: "SELECT max(seq) FROM group_messages WHERE group_key = ? AND seq <= ?"),
            arguments: [groupKey, reader.upTo ?? Int64.max]) ?? 0
        snapshot.unreadCount = try MessageRows.unreadCount(
            groupKey: groupKey, userID: reader.user, after: max(snapshot.readSequence, joinSequence), db: db)
        snapshot.lastMessageAt = try MessageRows.lastMessageTime(groupKey: groupKey, db: db)
        snapshot.unreadMention = try MessageRows.unreadMention(
            groupKey: groupKey, userID: reader.user, after: max(snapshot.readSequence, joinSequence), db: db)
    }

    // MARK: Write

    func write(_ writes: WriteSet, over snapshot: StoreSnapshot) throws -> WriteResult {
        if let plan = writes.newGroup { return try insertGroup(plan) }
        let time = snapshot.time
        var result = WriteResult(events: [], eventIDs: [])
        if let key = snapshot.groupRow?.value, let group = snapshot.group {
            var latest = group.latestSequence
            if let change = writes.change {
                result.events = try Operations.apply(
                    change, groupKey: key, before: group, members: snapshot.members, time: time,
                    memberOrigin: storesMemberOrigin, ownerSettings: storesOwnerSettings,
                    inviteLinks: storesInviteLinks, db: db)
                result.eventIDs = insertedIDs(count: result.events.count)
                latest = result.events.last?.sequence ?? latest
            }
            if !writes.events.isEmpty {
                let appended = try Rows.appendEvents(
                    writes.events, groupKey: key, appID: group.appID, groupID: group.id, after: latest, time: time, db: db)
                let ids = insertedIDs(count: appended.count)
                if let message = writes.message {
                    try insert(message, sequence: appended[0].sequence, eventID: ids[0], groupKey: key)
                    result.messageEventID = ids[0]
                    try MessageRows.insertMentions(message, sequence: appended[0].sequence, groupKey: key, db: db)
                }
                result.events += appended
                result.eventIDs += ids
            }
            for application in writes.applications {
                try ApplicationRows.upsert(application, groupKey: key, db: db)
            }
            if let remark = writes.remark { try write(remark, app: group.appID, groupKey: key, time: time) }
            if let attributes = writes.attributes { try AttributeRows.write(attributes, groupKey: key, db: db) }
            for link in writes.inviteLinks { try InviteLinkRows.upsert(link, groupKey: key, db: db) }
            if let read = writes.readSequence {
                if group.isTopic {
                    try writeTopicRead(read, topicKey: key, member: snapshot.members[read.user])
                } else {
                    try db.cachedStatement(sql: "UPDATE members SET last_read_seq = ? WHERE group_key = ? AND user_id = ?")
                        .execute(arguments: [read.sequence, key, read.user])
                }
            }
            if let topic = writes.topic {
                try write(topic, communityKey: key, over: snapshot, eventID: result.eventIDs.last)
            }
            if let recall = writes.recall {
                try MessageRows.recall(sequence: recall.sequence, recall.recall, groupKey: key, db: db)
            }
            if let edit = writes.edit { try MessageRows.edit(edit, groupKey: key, db: db) }
            if let reaction = writes.reaction {
                try ReactionRows.write(reaction, groupKey: key, time: time, db: db)
            }
            if let presence = writes.presence {
                try PresenceRows.hold(db, app: group.appID, groupID: group.id, users: presence.hold, until: presence.until)
                if !presence.drop.isEmpty {
                    try PresenceRows.drop(db, app: group.appID, groupID: group.id, users: presence.drop)
                }
            }
            if storesSyncVersions {
                if let change = writes.change {
                    try SyncRows.record(change, groupKey: key, before: group, time: time, eventID: result.eventIDs.last, db: db)
                }
                if let remark = writes.remark, let eventID = result.eventIDs.last, group.type != .avChatRoom {
                    try SyncRows.joinedChange(app: group.appID, user: remark.user, groupKey: key, eventID: eventID, db: db)
                }
            }
        } else if writes.writesGroupRows {
            throw GroupError.internal("a write of a group's rows over a snapshot without a group")
        }
        if let read = writes.applicationReadTime {
            try db.cachedStatement(
                sql: """
                    INSERT INTO application_reads (app_id, user_id, read_at) VALUES (?, ?, ?)
                    ON CONFLICT (app_id, user_id) DO UPDATE SET read_at = max(read_at, excluded.read_at)
                    """
            ).execute(arguments: [snapshot.app, read.user, read.time.millisecondsSince1970])
        }
        return result
    }

    /// Inserts a group (row, custom fields, members, events).
    func insertGroup(_ plan: GroupCreationPlan) throws -> WriteResult {
        let group = plan.group
        do {
            var values = Rows.groupInsertValues(group, nextJoinOrder: plan.members.count + 1)
            var columns =
                "latest_seq, next_join_order, edit_settings_permission, owner_quit, mention_all_permission, slow_mode_interval"
            var placeholders = "0, ?, ?, ?, ?, ?"
            if !storesOwnerSettings {  // a file before v8 (tests of older files)
                values.removeLast(4)
                columns = "latest_seq, next_join_order"
                placeholders = "0, ?"
            }
            try RawStatement(
                db,
                """
                INSERT INTO groups (
                    app_id, group_id, type, name, introduction, notification, face_url,
                    owner_id, max_members, member_count,
                    join_option, join_approvers, invite_permission, invitee_must_accept,
                    invitation_needs_approval, remove_members_permission,
                    edit_profile_permission, edit_member_info_permission,
                    mute_mode, mute_roles, mute_until, created_at, updated_at,
                    \(columns))
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, \(placeholders))
                """
            ).execute(values)
        } catch let error as DatabaseError where error.extendedResultCode == .SQLITE_CONSTRAINT_UNIQUE {
            throw GroupError.groupIDTaken(group.id)
        }
        let groupKey = db.lastInsertedRowID
        if storesInviteLinks {
            try db.cachedStatement(sql: "UPDATE groups SET invite_link_permission = ? WHERE group_key = ?")
                .execute(arguments: [group.settings.inviteLinkPermission.rawValue, groupKey])
        }
        // NULL stands for the type's default (v13); a file before v8 has no such column.
        if storesOwnerSettings, group.settings.pinPermission != group.type.preset.defaultSettings.pinPermission {
            try db.cachedStatement(sql: "UPDATE groups SET pin_permission = ? WHERE group_key = ?")
                .execute(arguments: [group.settings.pinPermission.rawValue, groupKey])
        }
        for (key, value) in group.custom {
            try RawStatement(db, "INSERT INTO group_custom (group_key, key, value) VALUES (?, ?, ?)")
                .execute([.integer(groupKey), .text(key), .blob(value)])
        }
        for member in plan.members {
            try Rows.insert(
                member, groupKey: groupKey, appID: group.appID, origin: storesMemberOrigin, inviteLinks: storesInviteLinks,
                db: db)
        }
        let events = try Rows.appendEvents(
            plan.events, groupKey: groupKey, appID: group.appID, groupID: group.id, after: 0, time: group.updatedAt, db: db)
        let eventIDs = insertedIDs(count: events.count)
        if storesSyncVersions { try SyncRows.recordCreation(plan, groupKey: groupKey, eventID: eventIDs.last, db: db) }
        return WriteResult(events: events, eventIDs: eventIDs, groupRow: GroupRowID(groupKey))
    }

    /// The `event_id`s of the last `count` rows inserted into `group_events`: consecutive, since
    /// one writer inserts them with AUTOINCREMENT (call right after `Rows.appendEvents`, before
    /// any other insert).
    func insertedIDs(count: Int) -> [Int64] {
        let last = db.lastInsertedRowID
        return (0..<Int64(count)).map { last - Int64(count) + 1 + $0 }
    }

    /// Inserts a message body under its event row.
    private func insert(_ message: GroupMessage, sequence: Int64, eventID: Int64, groupKey: Int64) throws {
        let content = message.content
        try RawStatement(
            db,
            """
            INSERT INTO group_messages (
                event_id, group_key, seq, message_id, sender_id, client_message_id, type, text,
                payload, priority, sender_name_card, time, mention_all, mentioned_ids,
                reply_seq, reply_message_id, reply_sender_id, reply_type, reply_preview)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """
        ).execute([
            .integer(eventID), .integer(groupKey), .integer(sequence), .text(message.messageID), .text(message.senderID),
            .text(content.clientMessageID), .text(content.type), .text(content.text), .blob(content.payload),
            .text(content.priority.rawValue), .text(message.senderNameCard), .integer(message.time.millisecondsSince1970),
            .bool(content.mentionAll), .text(MessageRows.encodeIDs(content.mentionedUserIDs)),
            .integer(message.replyTo?.sequence), .text(message.replyTo?.messageID), .text(message.replyTo?.senderID),
            .text(message.replyTo?.type), .text(message.replyTo?.preview),
        ])
    }

    private func write(_ remark: (user: String, remark: String?), app: String, groupKey: Int64, time: Timestamp) throws {
        if let text = remark.remark {
            try db.cachedStatement(
                sql: """
                    INSERT INTO group_remarks (app_id, user_id, group_key, remark, updated_at)
                    VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT (app_id, user_id, group_key)
                    DO UPDATE SET remark = excluded.remark, updated_at = excluded.updated_at
                    """
            ).execute(arguments: [app, remark.user, groupKey, text, time.millisecondsSince1970])
        } else {
            try db.cachedStatement(sql: "DELETE FROM group_remarks WHERE app_id = ? AND user_id = ? AND group_key = ?")
                .execute(arguments: [app, remark.user, groupKey])
        }
    }

    // MARK: Purge

    func purge(_ request: PurgeRequest) throws -> Int {
        let cutoff = request.before.millisecondsSince1970
        switch request.kind {
        case .events:
            try db.cachedStatement(
                sql: """
                    DELETE FROM group_events WHERE event_id IN (
                        SELECT event_id FROM group_events
                        WHERE app_id = ? AND time < ? AND kind <> 'GROUP_MESSAGE'
                        ORDER BY event_id LIMIT ?)
                    """
            ).execute(arguments: [request.app, cutoff, request.limit])
            return db.changesCount
        case .messages:
            let ids = try Int64.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT event_id FROM group_events
                        WHERE time < ? AND app_id = ? AND kind = 'GROUP_MESSAGE' LIMIT ?
                        """),
                arguments: [cutoff, request.app, request.limit])
            if ids.isEmpty { return 0 }
            let list = try Rows.jsonArray(ids)
            try db.cachedStatement(
                sql: """
                    DELETE FROM message_mentions WHERE (group_key, seq) IN (
                        SELECT group_key, seq FROM group_messages WHERE event_id IN (SELECT value FROM json_each(?)))
                    """
            ).execute(arguments: [list])
            if storesReactions {
                for table in ["message_reactions", "reaction_counts"] {
                    try db.cachedStatement(
                        sql: """
                            DELETE FROM \(table) WHERE (group_key, seq) IN (
                                SELECT group_key, seq FROM group_messages WHERE event_id IN (SELECT value FROM json_each(?)))
                            """
                    ).execute(arguments: [list])
                }
            }
            try db.cachedStatement(sql: "DELETE FROM group_messages WHERE event_id IN (SELECT value FROM json_each(?))")
                .execute(arguments: [list])
            try db.cachedStatement(sql: "DELETE FROM group_events WHERE event_id IN (SELECT value FROM json_each(?))")
                .execute(arguments: [list])
            return ids.count
        case .memberTombstones:
            guard storesSyncVersions else { return 0 }
            return try SyncRows.purgeTombstones(app: request.app, before: request.before, limit: request.limit, db: db)
        }
    }
}
