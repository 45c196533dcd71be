import Foundation
import GroupModel

/// The snapshot a plan reads, in the batch's transaction: the group with the memberships it needs,
/// then what the request asks for, each part in as few statements as the SQL allows.
extension PostgresTransaction {
    /// The snapshot `request` asks for: from memory when it is a send's that the batch's preload
    /// (or an earlier send to the group) read (`PostgresTransaction+Sends.swift`), otherwise from
    /// the database, after the sends held in memory are written, and the other held rows when it
    /// could read them (`PostgresTransaction+Held.swift`).
    func load(_ request: SnapshotRequest) throws -> StoreSnapshot {
        if let snapshot = try cachedSnapshot(request) { return snapshot }
        try flushSends()
        if held.overlaps(request) { try flushHeld() }
        let snapshot = try loadFromDatabase(request)
        remember(snapshot, for: request)
        return snapshot
    }

    private func loadFromDatabase(_ request: SnapshotRequest) throws -> StoreSnapshot {
        let app = request.app
        var snapshot = StoreSnapshot(app: app, time: request.time)
        var groupID = request.group
        if let id = request.application {
            guard let item = try PostgresApplicationRows.fetchAll(
                session, where: "a.app_id = ? AND a.application_id = ?", arguments: [.text(app), .text(id)]
            ).first else { throw GroupError.applicationNotFound(id) }
            snapshot.application = item
            groupID = groupID ?? item.groupID
        }
        let ms = request.time.millisecondsSince1970
        if let groupID {
            let (read, memberRows) = try groupAndMembers(request, groupID: groupID)
            let group = try PostgresRows.withCustom([read], app: app, session: session)[0]
            let key = read.key
            snapshot.group = group
            snapshot.groupRow = GroupRowID(key)
            for member in try PostgresRows.withCustom(memberRows, app: app, groupKey: key, session: session) {
                snapshot.members[member.userID] = member
            }
            try loadSuccessor(request, group: group, groupKey: key, into: &snapshot)
            try loadUserFacts(request, groupKey: key, into: &snapshot)
            if request.parts.contains(.banCount) {
                snapshot.banCount = try session.first(
                    "SELECT COUNT(*) FROM group_bans WHERE app_id = ? AND group_key = ? AND (until_ms IS NULL OR until_ms > ?)",
                    [.text(app), .integer(key), .integer(ms)], { try $0.int64(0) }).map { Int($0) } ?? 0
            }
            if request.parts.contains(.managers) {
                try session.rows(
                    """
                    SELECT user_id FROM members WHERE app_id = ? AND group_key = ? AND role IN ('owner', 'admin')
                    ORDER BY join_order
                    """, [.text(app), .integer(key)]
                ) { row in snapshot.managers.append(try row.text(0)) }
            }
            // The targets' pending items of a kind and the group's due items: one statement.
            let pendingKind = request.targets.isEmpty ? nil : request.pendingApplications
            let due = request.parts.contains(.dueApplications)
            if pendingKind != nil || due {
                let targets = Set(request.targets)
                var conditions: [String] = []
                var arguments: [PGValue] = [.text(app), .integer(key)]
                if let kind = pendingKind {
                    conditions.append("(a.kind = ? AND a.subject_id = ANY(?))")
                    arguments += [.text(kind.rawValue), .texts(targets.sorted())]
                }
                if due {
                    conditions.append("a.expires_at <= ?")
                    arguments.append(.integer(ms))
                }
                for item in try PostgresApplicationRows.fetchAll(
                    session,
                    where: "a.app_id = ? AND a.group_key = ? AND a.state = 'pending' AND (\(conditions.joined(separator: " OR ")))",
                    arguments: arguments)
                {
                    if let kind = pendingKind, item.kind == kind, targets.contains(item.subjectID) {
                        snapshot.pendingApplications[item.subjectID] = item
                    }
                    if due, item.expiresAt.millisecondsSince1970 <= ms { snapshot.dueApplications.append(item) }
                }
            }
            if request.parts.contains(.approvers) {
                snapshot.approvers = try PostgresEventRows.approvers(session, app: app, groupKey: key)
            }
            if request.parts.contains(.attributes) {
                snapshot.attributes = try PostgresAttributeRows.load(session, app: app, groupKey: key)
            }
            if request.parts.contains(.inviteLinks) {
                snapshot.inviteLinks = try PostgresInviteLinkRows.live(session, app: app, groupKey: key, now: request.time)
            }
            if request.parts.contains(.readState), let reader = request.readState {
                try loadReadState(reader, app: app, groupKey: key, into: &snapshot)
            }
            if let sequence = request.messageSequence {
                snapshot.message = try session.first(
                    "SELECT \(PostgresMessageRows.columns) FROM group_messages gm WHERE gm.app_id = ? AND gm.group_key = ? AND gm.seq = ?",
                    [.text(app), .integer(key), .integer(sequence)],
                    { try MessageRows.message($0, appID: app, groupID: groupID) })
            }
            if let sender = request.lastSentBy, let group = snapshot.group, group.settings.slowModeIntervalSeconds > 0 {
                snapshot.lastSentAt = try session.first(
                    """
                    SELECT time FROM group_messages WHERE app_id = ? AND group_key = ? AND sender_id = ?
                    ORDER BY seq DESC LIMIT 1
                    """,
                    [.text(app), .integer(key), .text(sender)], { Timestamp(millisecondsSince1970: try $0.int64(0)) })
            }
            if let earlier = request.earlierMessage {
                snapshot.earlierMessage = try PostgresMessageRows.messageByClientID(
                    app: app, groupKey: key, groupID: groupID, senderID: earlier.sender,
                    clientMessageID: earlier.clientMessageID, session: session)
            }
        }
        if let key = request.inviteLink {
            snapshot.inviteLink = try PostgresInviteLinkRows.one(session, app: app, key: key)
        }
        if groupID == nil { try loadUserFacts(request, groupKey: nil, into: &snapshot) }
        if request.parts.contains(.applicationReads), let reader = request.applicationReader {
            snapshot.applicationReadTime = try PostgresApplicationRows.readTime(app: app, userID: reader, session: session)
            let filter = PostgresApplicationRows.Filter(app: app, query: ApplicationQuery(userID: reader, now: request.time))
            snapshot.unreadApplications = try PostgresApplicationRows.unreadCount(
                filter, readTime: snapshot.applicationReadTime, session: session)
        }
        return snapshot
    }

    /// What the snapshot asks about its users, in one statement (one round trip): their running
    /// bans and retained mutes in the group, and how many groups of the app each is in, as rows
    /// tagged by kind (a ban's columns after the tag; a mute's end or a count in the first).
    private func loadUserFacts(_ request: SnapshotRequest, groupKey key: Int64?, into snapshot: inout StoreSnapshot) throws {
        let users = request.users
        if users.isEmpty { return }
        let app = request.app
        let ms = request.time.millisecondsSince1970
        var parts: [String] = []
        var arguments: [PGValue] = []
        if let key, request.parts.contains(.bans) {
            parts.append("""
                SELECT 'ban', \(BanRows.columns) FROM group_bans
                WHERE app_id = ? AND group_key = ? AND (until_ms IS NULL OR until_ms > ?) AND user_id = ANY(?)
                """)
            arguments += [.text(app), .integer(key), .integer(ms), .texts(users)]
        }
        if let key, request.parts.contains(.retainedMutes) {
            parts.append("""
                SELECT 'mute', user_id, muted_until, NULL, NULL, NULL FROM retained_mutes
                WHERE app_id = ? AND group_key = ? AND muted_until > ? AND user_id = ANY(?)
                """)
            arguments += [.text(app), .integer(key), .integer(ms), .texts(users)]
        }
        if request.parts.contains(.joinedGroupCounts) {
            for user in users { snapshot.joinedGroupCounts[user] = 0 }
            parts.append("SELECT 'count', user_id, count, NULL, NULL, NULL FROM joined_counts WHERE app_id = ? AND user_id = ANY(?)")
            arguments += [.text(app), .texts(users)]
        }
        if parts.isEmpty { return }
        try session.rows(parts.joined(separator: "\nUNION ALL\n"), arguments) { row in
            let facts = OffsetRow(row: row, offset: 1)
            switch try row.text(0) {
            case "ban":
                let ban = try BanRows.ban(facts)
                snapshot.bans[ban.userID] = ban
            case "mute":
                snapshot.retainedMutes[try facts.text(0)] = Timestamp(millisecondsSince1970: try facts.int64(1))
            default:
                snapshot.joinedGroupCounts[try facts.text(0)] = Int(try facts.int64(1))
            }
        }
    }

    /// The live group and, in the same statement (one round trip), the memberships of the
    /// operator, the targets and (when asked) the owner: a row per member found, or one row with
    /// NULL member columns.
    /// - Throws: `GROUP_NOT_FOUND`.
    private func groupAndMembers(_ request: SnapshotRequest, groupID: String) throws -> (Rows.GroupRow, [Rows.MemberRow]) {
        var group: Rows.GroupRow?
        var members: [Rows.MemberRow] = []
        let offset = Rows.GroupColumn.allCases.count
        try session.rows(
            """
            SELECT \(Rows.GroupColumn.list(table: "g")), \(Rows.memberColumns) FROM groups g
            LEFT JOIN members m ON m.app_id = g.app_id AND m.group_key = g.group_key
                AND (m.user_id = ANY(?) OR (? = 1 AND m.user_id = g.owner_id))
            WHERE g.app_id = ? AND g.group_id = ? AND g.dismissed_at IS NULL
            """,
            [.texts(request.users), .bool(request.parts.contains(.owner)), .text(request.app), .text(groupID)]
        ) { row in
            if group == nil { group = try Rows.group(row) }
            if !row.isNull(offset) { members.append(try Rows.member(row, at: offset)) }
        }
        guard let group else { throw GroupError.groupNotFound(groupID) }
        return (group, members)
    }

    /// The successor's membership (and the longest-standing other admin's, when the group's
    /// owner-quit setting asks for one), when asked.
    private func loadSuccessor(_ request: SnapshotRequest, group: Group, groupKey: Int64, into snapshot: inout StoreSnapshot) throws {
        if request.parts.contains(.successor) {
            var rows: [Rows.MemberRow] = []
            try session.rows(
                """
                SELECT \(Rows.memberColumns) FROM members m
                WHERE m.app_id = ? AND m.group_key = ? AND m.user_id <> ? ORDER BY m.join_order LIMIT 1
                """, [.text(request.app), .integer(groupKey), .text(request.operatorID ?? "")]
            ) { rows.append(try Rows.member($0)) }
            if let successor = try PostgresRows.withCustom(rows, app: request.app, groupKey: groupKey, session: session).first {
                snapshot.successor = successor
                snapshot.members[successor.userID] = successor
            }
            if group.settings.ownerQuit == .longestStandingAdminElseMember, let op = request.operatorID,
               group.ownerID == op {
                var admins: [Rows.MemberRow] = []
                try session.rows(
                    """
                    SELECT \(Rows.memberColumns) FROM members m
                    WHERE m.app_id = ? AND m.group_key = ? AND m.role = 'admin' AND m.user_id <> ?
                    ORDER BY m.join_order LIMIT 1
                    """, [.text(request.app), .integer(groupKey), .text(op)]
                ) { admins.append(try Rows.member($0)) }
                if let admin = try PostgresRows.withCustom(admins, app: request.app, groupKey: groupKey, session: session).first {
                    snapshot.successorAdmin = admin
                    snapshot.members[admin.userID] = admin
                }
            }
        }
    }

    private func loadReadState(
        _ reader: (user: String, upTo: Int64?), app: String, groupKey: Int64, into snapshot: inout StoreSnapshot
    ) throws {
        var joinSequence: Int64 = 0
        if let (read, join) = try session.first(
            "SELECT last_read_seq, join_seq FROM members WHERE app_id = ? AND group_key = ? AND user_id = ?",
            [.text(app), .integer(groupKey), .text(reader.user)], { (try $0.int64(0), try $0.int64(1)) })
        {
            snapshot.readSequence = read
            joinSequence = join
        }
        snapshot.latestMessageSequence = try session.first(
            "SELECT max(seq) FROM group_messages WHERE app_id = ? AND group_key = ? AND seq <= ?",
            [.text(app), .integer(groupKey), .integer(reader.upTo ?? Int64.max)], { try $0.optionalInt64(0) }
        ).flatMap { $0 } ?? 0
        snapshot.unreadCount = try PostgresMessageRows.unreadCount(
            app: app, groupKey: groupKey, userID: reader.user, after: max(snapshot.readSequence, joinSequence), session: session)
        snapshot.lastMessageAt = try PostgresMessageRows.lastMessageTime(app: app, groupKey: groupKey, session: session)
        try session.rows(
            """
            SELECT (EXISTS (SELECT 1 FROM message_mentions WHERE app_id = ? AND group_key = ? AND user_id = ? AND seq > ?))::int::int8,
                (EXISTS (SELECT 1 FROM group_messages
                    WHERE app_id = ? AND group_key = ? AND mention_all = 1 AND seq > ? AND sender_id <> ?))::int::int8
            """,
            [
                .text(app), .integer(groupKey), .text(reader.user), .integer(max(snapshot.readSequence, joinSequence)),
                .text(app), .integer(groupKey), .integer(max(snapshot.readSequence, joinSequence)), .text(reader.user),
            ]
        ) { row in snapshot.unreadMention = UnreadMention(me: try row.bool(0), all: try row.bool(1)) }
    }
}
