import Foundation
import GroupModel
import GroupStore
import GroupStoreSQL

/// The snapshot a plan reads, in the batch's transaction: the group with the memberships it needs,
/// then what the request asks for, each part in as few statements as the SQL allows.
extension PostgresTransaction {
    /// The snapshot `request` asks for: from memory when it is a send's that the batch's preload
    /// (or an earlier send to the group) read (`PostgresTransaction+Sends.swift`), otherwise from
    /// the database, after the sends held in memory are written, and the other held rows when it
    /// could read them (`PostgresTransaction+Held.swift`).
    ///
    /// A load of a group the batch's held changes updated takes the group row from memory
    /// (``HeldWrites/knownGroup(for:)``) when the rest of what it asks is not in held rows, so
    /// a batch of joins into one group writes its rows once, in the tail. A load without a group
    /// (a creation's) corrects the joined-group counts it reads by what held rows will change
    /// (``HeldWrites/answersCounts(_:)``), so a batch of one owner's creations writes none first.
    func load(_ request: SnapshotRequest) async throws -> StoreSnapshot {
        if let snapshot = try cachedSnapshot(request) { return snapshot }
        if let topicID = request.group, let communityID = GroupID.communityID(ofTopic: topicID) {
            // Beside a send the preload read (above), a topic is read from the database, with
            // every held row written first: held rows are known by group, and a topic's snapshot
            // is its community's and its own row's.
            try await flushSends()
            try await flushHeld()
            return try await loadTopic(request, topicID: topicID, communityID: communityID)
        }
        try await flushSends()
        var known: HeldWrites.KnownGroup?
        var countsHeld = false
        if held.overlaps(request) {
            countsHeld = held.answersCounts(request)
            known = countsHeld ? nil : held.knownGroup(for: request)
            if known == nil && !countsHeld { try await flushHeld() }
        }
        var snapshot = try await loadFromDatabase(request, known: known)
        if countsHeld {
            for (user, count) in snapshot.joinedGroupCounts {
                snapshot.joinedGroupCounts[user] = held.joinedCount(app: request.app, user: user, stored: count)
            }
        }
        remember(snapshot, for: request)
        return snapshot
    }

    private func loadFromDatabase(_ request: SnapshotRequest, known: HeldWrites.KnownGroup?) async throws -> StoreSnapshot {
        let app = request.app
        var snapshot = StoreSnapshot(app: app, time: request.time)
        var groupID = request.group
        if let id = request.application {
            guard let item = try await PostgresApplicationRows.fetchAll(
                session, where: "a.app_id = ? AND a.application_id = ?", arguments: [.text(app), .text(id)]
            ).first else { throw GroupError.applicationNotFound(id) }
            snapshot.application = item
            groupID = groupID ?? item.groupID
        }
        let ms = request.time.millisecondsSince1970
        if let groupID {
            // The snapshot's statement also fills the pending and due items.
            let (read, memberRows, successor) = try await groupAndMembers(request, groupID: groupID, known: known, into: &snapshot)
            let group: Group
            let key: Int64
            if let known {
                (group, key) = (known.group, known.key)
            } else if let read {
                (group, key) = await (try PostgresRows.withCustom([read], app: app, session: session)[0], read.key)
            } else {
                throw GroupError.groupNotFound(groupID)
            }
            snapshot.group = group
            snapshot.groupRow = GroupRowID(key)
            let members = try await PostgresRows.withCustom(memberRows + [successor].compactMap { $0 }, app: app, groupKey: key, session: session)
            for member in members {
                snapshot.members[member.userID] = member
            }
            if successor != nil, let last = members.last { snapshot.successor = last }
            try await loadSuccessorAdmin(request, group: group, groupKey: key, into: &snapshot)
            if request.parts.contains(.banCount) {
                snapshot.banCount = try await session.first(
                    "SELECT COUNT(*) FROM group_bans WHERE app_id = ? AND group_key = ? AND (until_ms IS NULL OR until_ms > ?)",
                    [.text(app), .integer(key), .integer(ms)], { try $0.int64(0) }).map { Int($0) } ?? 0
            }
            if request.parts.contains(.managers) {
                try await session.rows(
                    """
                    SELECT user_id FROM members WHERE app_id = ? AND group_key = ? AND role IN ('owner', 'admin')
                    ORDER BY join_order
                    """, [.text(app), .integer(key)]
                ) { row in snapshot.managers.append(try row.text(0)) }
            }
            if request.parts.contains(.approvers) {
                snapshot.approvers = try await PostgresEventRows.approvers(session, app: app, groupKey: key)
            }
            if request.parts.contains(.attributes) {
                snapshot.attributes = try await PostgresAttributeRows.load(session, app: app, groupKey: key)
            }
            if request.parts.contains(.inviteLinks) {
                snapshot.inviteLinks = try await PostgresInviteLinkRows.live(session, app: app, groupKey: key, now: request.time)
            }
            if request.parts.contains(.presence), group.type == .avChatRoom {
                snapshot.presence = try await PostgresPresenceRows.read(
                    session, app: app, groupID: groupID, users: request.users, now: request.time)
            }
            if let topicID = request.topic {
                if let (row, stored) = try await topicRow(app: app, topicID: topicID, communityKey: key) {
                    snapshot.topic = stored
                    snapshot.topicRow = GroupRowID(row.key)
                }
            }
            if request.parts.contains(.topicCount) {
                snapshot.topicCount = try await session.first(
                    "SELECT COUNT(*) FROM groups WHERE app_id = ? AND parent_key = ? AND dismissed_at IS NULL",
                    [.text(app), .integer(key)], { try $0.int(0) }) ?? 0
            }
            try await loadMessageParts(request, groupID: groupID, key: key, group: group, into: &snapshot)
        }
        if let key = request.inviteLink {
            snapshot.inviteLink = try await PostgresInviteLinkRows.one(session, app: app, key: key)
        }
        if groupID == nil { try await loadUserFacts(request, into: &snapshot) }
        if request.parts.contains(.applicationReads), let reader = request.applicationReader {
            snapshot.applicationReadTime = try await PostgresApplicationRows.readTime(app: app, userID: reader, session: session)
            let filter = PostgresApplicationRows.Filter(app: app, query: ApplicationQuery(userID: reader, now: request.time))
            snapshot.unreadApplications = try await PostgresApplicationRows.unreadCount(
                filter, readTime: snapshot.applicationReadTime, session: session)
        }
        return snapshot
    }

    /// The live topic `topicID` of the community `communityKey` as stored (with its custom
    /// fields; ``Group/parentID`` unset), and its key; `nil` when there is none.
    private func topicRow(app: String, topicID: String, communityKey: Int64) async throws -> (Rows.GroupRow, Group)? {
        var read: Rows.GroupRow?
        try await session.rows(
            """
            SELECT \(Rows.GroupColumn.list(table: "g")) FROM groups g
            WHERE g.app_id = ? AND g.group_id = ? AND g.parent_key = ? AND g.dismissed_at IS NULL
            """, [.text(app), .text(topicID), .integer(communityKey)]
        ) { read = try Rows.group($0) }
        guard let read else { return nil }
        return (read, try await PostgresRows.withCustom([read], app: app, session: session)[0])
    }

    /// The snapshot of a topic (`request.group`, of the community `communityID`): the community's
    /// members, bans, retained mutes, managers, approvers, owner, successor and joined-group
    /// counts (the community's rows), the topic's messages, reactions, last send and read state
    /// (the topic's row); ``StoreSnapshot/group`` is `Group.topic(_:in:)`, ``StoreSnapshot/groupRow``
    /// the topic's key, ``StoreSnapshot/community`` the community as stored. Members' join
    /// sequences are the community's and mean nothing in the topic: they read 0.
    /// - Throws: `GROUP_NOT_FOUND` (the topic's id) when the topic or its community is not live.
    private func loadTopic(_ request: SnapshotRequest, topicID: String, communityID: String) async throws -> StoreSnapshot {
        var communityRequest = request
        communityRequest.group = communityID
        communityRequest.parts.subtract([.readState, .topicCount, .presence])
        communityRequest.readState = nil
        communityRequest.messageSequence = nil
        communityRequest.reactionsOf = nil
        communityRequest.lastSentBy = nil
        communityRequest.earlierMessage = nil
        communityRequest.topic = nil
        var snapshot: StoreSnapshot
        do {
            snapshot = try await loadFromDatabase(communityRequest, known: nil)
        } catch let error as GroupError where error.reason == .groupNotFound {
            throw GroupError.groupNotFound(topicID)
        }
        guard let community = snapshot.group, let communityKey = snapshot.groupRow?.value,
              let (row, stored) = try await topicRow(app: request.app, topicID: topicID, communityKey: communityKey)
        else { throw GroupError.groupNotFound(topicID) }
        let topic = Group.topic(stored, in: community)
        snapshot.community = community
        snapshot.group = topic
        snapshot.groupRow = GroupRowID(row.key)
        for user in Array(snapshot.members.keys) { snapshot.members[user]?.joinSequence = 0 }
        snapshot.successor?.joinSequence = 0
        snapshot.successorAdmin?.joinSequence = 0
        try await loadMessageParts(request, groupID: topicID, key: row.key, group: topic, communityKey: communityKey, into: &snapshot)
        return snapshot
    }

    /// What `request` asks of the group's (or topic's) own rows: read state, a message by
    /// sequence, reactions, the last send (slow mode), an earlier message by client id.
    /// `communityKey`: the group is a topic of that community (its read positions are in
    /// `topic_reads`, its members in the community).
    private func loadMessageParts(
        _ request: SnapshotRequest, groupID: String, key: Int64, group: Group, communityKey: Int64? = nil,
        into snapshot: inout StoreSnapshot
    ) async throws {
        let app = request.app
        if request.parts.contains(.readState), let reader = request.readState {
            if let communityKey {
                try await loadTopicReadState(reader, app: app, topicKey: key, communityKey: communityKey, into: &snapshot)
            } else {
                try await loadReadState(reader, app: app, groupKey: key, into: &snapshot)
            }
        }
        if let sequence = request.messageSequence {
            snapshot.message = try await session.first(
                "SELECT \(PostgresMessageRows.columns) FROM group_messages gm WHERE gm.app_id = ? AND gm.group_key = ? AND gm.seq = ?",
                [.text(app), .integer(key), .integer(sequence)],
                { try MessageRows.message($0, appID: app, groupID: groupID) })
        }
        if let reactions = request.reactionsOf {
            snapshot.reactions = try await PostgresReactionRows.state(
                session, app: app, groupKey: key, sequence: reactions.sequence, userID: reactions.user)
        }
        if let sender = request.lastSentBy, group.settings.slowModeIntervalSeconds > 0 {
            snapshot.lastSentAt = try await session.first(
                """
                SELECT time FROM group_messages WHERE app_id = ? AND group_key = ? AND sender_id = ?
                ORDER BY seq DESC LIMIT 1
                """,
                [.text(app), .integer(key), .text(sender)], { Timestamp(millisecondsSince1970: try $0.int64(0)) })
        }
        if let earlier = request.earlierMessage {
            snapshot.earlierMessage = try await PostgresMessageRows.messageByClientID(
                app: app, groupKey: key, groupID: groupID, senderID: earlier.sender,
                clientMessageID: earlier.clientMessageID, session: session)
        }
    }

    /// What the snapshot asks about its users (their running bans and retained mutes in the group,
    /// how many groups of the app each is in), as `UNION ALL` branches of rows tagged by kind: a
    /// ban's ``BanRows/columns`` after the tag and `padding`, a mute's user and end, a count's user
    /// and count. `groupKey` is the SQL of the group's key (a parameter, or a column of the
    /// statement), with its arguments. The users are the statement's CTE `u` and the time its CTE
    /// `now` (``factCTEs``): see there.
    private func userFactBranches(
        _ request: SnapshotRequest, groupKey: (sql: String, from: String, arguments: [PGValue])?, padding: String,
        trailing: String = ""
    ) -> (parts: [String], arguments: [PGValue]) {
        let users = request.users
        if users.isEmpty { return ([], []) }
        let app = request.app
        var parts: [String] = []
        var arguments: [PGValue] = []
        // Each user's row is a key probe (`LATERAL … LIMIT 1`, which PostgreSQL does not flatten
        // into a join): joined to `u` as a table, the generic plan (which guesses ten users)
        // hashed the app's whole `joined_counts`, a cost that grew with the app's users.
        if let key = groupKey, request.parts.contains(.bans) {
            parts.append("""
                SELECT 'ban', \(padding)b.user_id, b.until_ms, b.reason, b.operator_id, b.banned_at\(trailing) FROM now, u, \(key.from)
                LATERAL (SELECT * FROM group_bans WHERE app_id = ? AND group_key = \(key.sql) AND user_id = u.user_id LIMIT 1) b
                WHERE b.until_ms IS NULL OR b.until_ms > now.ms
                """)
            arguments += [.text(app)] + key.arguments
        }
        if let key = groupKey, request.parts.contains(.retainedMutes) {
            parts.append("""
                SELECT 'mute', \(padding)r.user_id, r.muted_until, NULL, NULL, NULL\(trailing) FROM now, u, \(key.from)
                LATERAL (SELECT * FROM retained_mutes WHERE app_id = ? AND group_key = \(key.sql) AND user_id = u.user_id LIMIT 1) r
                WHERE r.muted_until > now.ms
                """)
            arguments += [.text(app)] + key.arguments
        }
        if request.parts.contains(.joinedGroupCounts) {
            parts.append("""
                SELECT 'count', \(padding)c.user_id, c.count, NULL, NULL, NULL\(trailing) FROM u,
                LATERAL (SELECT * FROM joined_counts WHERE app_id = ? AND user_id = u.user_id LIMIT 1) c
                """)
            arguments.append(.text(app))
        }
        return (parts, arguments)
    }

    /// The CTEs a statement of ``userFactBranches(_:groupKey:padding:)`` begins with: `now`, the
    /// time, and `u`, the users, with their two arguments. Both are read through a subquery, not
    /// compared in place: the rows are found by key, and a statement whose custom plans (made with
    /// the values) look cheaper than its generic plan (a parameter's array is guessed at ten
    /// elements) is planned again on every call, which cost PostgreSQL more than running it. Hidden
    /// this way, the values make no difference to the plan, and PostgreSQL keeps the generic one.
    private static let factCTEs = "now AS (SELECT ?::int8 AS ms), u AS (SELECT unnest((SELECT ?::text[])) AS user_id)"

    /// Reads a fact row of ``userFactBranches`` whose tag is column 0 and whose fact starts at
    /// column `first`.
    private func readFact(_ row: PGRow, tag: String, at first: Int, into snapshot: inout StoreSnapshot) throws {
        let facts = OffsetRow(row: row, offset: first)
        switch tag {
        case "ban":
            let ban = try BanRows.ban(facts)
            snapshot.bans[ban.userID] = ban
        case "mute":
            snapshot.retainedMutes[try facts.text(0)] = Timestamp(millisecondsSince1970: try facts.int64(1))
        default:
            snapshot.joinedGroupCounts[try facts.text(0)] = Int(try facts.int64(1))
        }
    }

    /// The users' facts of a snapshot without a group (a creation's joined-group counts), and
    /// for a creation (``SnapshotRequest/newGroup``) in the same statement a key for the group
    /// from its sequence and whether the id is taken (kept for the creation's write).
    private func loadUserFacts(_ request: SnapshotRequest, into snapshot: inout StoreSnapshot) async throws {
        if request.parts.contains(.joinedGroupCounts) {
            for user in request.users { snapshot.joinedGroupCounts[user] = 0 }
        }
        var (parts, arguments) = userFactBranches(request, groupKey: nil, padding: "")
        if let id = request.newGroup {
            parts.append("""
                SELECT 'new', NULL::text, nextval('groups_group_key_seq'), NULL::text, NULL::text,
                    (EXISTS (SELECT 1 FROM groups WHERE app_id = ? AND group_id = ?))::int::int8
                """)
            arguments += [.text(request.app), .text(id)]
        }
        if parts.isEmpty { return }
        try await session.rows(
            "SELECT * FROM (WITH \(Self.factCTEs)\n" + parts.joined(separator: "\nUNION ALL\n") + ") facts",
            [.integer(request.time.millisecondsSince1970), .texts(request.users)] + arguments
        ) { row in
            let tag = try row.text(0)
            if tag == "new", let id = request.newGroup {
                reservedGroupKeys[PendingSends.GroupID(app: request.app, id: id)] = (try row.int64(2), try row.bool(5))
            } else {
                try readFact(row, tag: tag, at: 1, into: &snapshot)
            }
        }
    }

    /// The live group, the memberships of the operator, the targets and (when asked) the owner,
    /// the successor (when asked: the longest-standing member other than the operator) and the
    /// users' facts (``userFactBranches(_:groupKey:padding:)``), in one statement (one round trip):
    /// rows tagged `g` (the group's columns), `m` (a membership found: the member columns), `s`
    /// (the successor's) or by fact, each kind's columns after the ones before it.
    /// And, when asked, the targets' pending items of the request's kind and the group's due items
    /// (rows tagged `a`, the item's columns after the facts'), put in `snapshot` in `app_key` order.
    /// - Throws: `GROUP_NOT_FOUND`.
    /// With `known`, the group row is not read: `g` is the group's app, key, owner, id and name.
    private func groupAndMembers(
        _ request: SnapshotRequest, groupID: String, known: HeldWrites.KnownGroup?, into snapshot: inout StoreSnapshot
    ) async throws -> (Rows.GroupRow?, [Rows.MemberRow], successor: Rows.MemberRow?) {
        var group: Rows.GroupRow?
        var members: [Rows.MemberRow] = []
        var successor: Rows.MemberRow?
        var items: [(key: Int64, item: Application)] = []
        let groupColumns = Rows.GroupColumn.allCases.count
        let memberOffset = 1 + groupColumns
        let factOffset = memberOffset + Rows.memberColumnCount
        let itemOffset = factOffset + 5
        let groupNulls = String(repeating: "NULL, ", count: groupColumns)
        let memberNulls = String(repeating: "NULL, ", count: Rows.memberColumnCount)
        // The items' branch, when the request asks for items: its conditions and arguments.
        let pendingKind = request.targets.isEmpty ? nil : request.pendingApplications
        let due = request.parts.contains(.dueApplications)
        let targets = Set(request.targets)
        var itemConditions: [String] = []
        var itemArguments: [PGValue] = []
        // The values are read through subqueries, so PostgreSQL keeps the generic plan (its
        // custom plans, made with them, looked cheaper: it planned the items on every join).
        if let kind = pendingKind {
            itemConditions.append("(a.kind = (SELECT ?::text) AND a.subject_id = ANY((SELECT ?::text[])::text[]))")
            itemArguments += [.text(kind.rawValue), .texts(targets.sorted())]
        }
        if due { itemConditions.append("a.expires_at <= now.ms") }
        // Typed: a `UNION ALL` chain matches types pair by pair, and two untyped NULLs make `text`.
        let itemNulls = itemConditions.isEmpty ? "" : Self.itemNulls
        let factTypedNulls = "NULL::text, NULL::int8, NULL::text, NULL::text, NULL::int8"
        let factNulls = ", " + factTypedNulls + itemNulls
        // Each user's membership is one key probe (`LATERAL … LIMIT 1`), the owner's another: a join
        // on `user_id = ANY(…) OR user_id = owner_id` let the generic plan, made while the group
        // was small, read every membership of the group (thousands per join into a big group).
        var sql: String
        var arguments: [PGValue] = [.integer(request.time.millisecondsSince1970), .texts(request.users)]
        if let known {
            sql = """
                WITH \(Self.factCTEs),
                g AS (SELECT ?::text AS app_id, ?::int8 AS group_key, ?::text AS owner_id, ?::text AS group_id, ?::text AS name)

                """
            arguments += [
                .text(request.app), .integer(known.key), .text(known.group.ownerID), .text(known.group.id),
                .text(known.group.name),
            ]
        } else {
            sql = """
                WITH \(Self.factCTEs),
                g AS (SELECT * FROM groups WHERE app_id = ? AND group_id = ? AND dismissed_at IS NULL)
                SELECT 'g', \(Rows.GroupColumn.list(table: "g")), \(memberNulls.dropLast(2))\(factNulls) FROM g
                UNION ALL

                """
            arguments += [.text(request.app), .text(groupID)]
        }
        sql += """
            SELECT 'm', \(groupNulls)\(Rows.memberColumns)\(factNulls) FROM g, u,
            LATERAL (\(Self.memberProbe("u.user_id"))) m
            """
        if request.parts.contains(.owner) {
            sql += """

                UNION ALL
                SELECT 'm', \(groupNulls)\(Rows.memberColumns)\(factNulls) FROM g,
                LATERAL (\(Self.memberProbe("g.owner_id"))) m
                """
        }
        if request.parts.contains(.successor) {
            sql += """

                UNION ALL
                SELECT 's', \(groupNulls)\(Rows.memberColumns)\(factNulls) FROM g, LATERAL (
                    SELECT * FROM members WHERE app_id = g.app_id AND group_key = g.group_key AND user_id <> ?
                    ORDER BY join_order LIMIT 1) m
                """
            arguments.append(.text(request.operatorID ?? ""))
        }
        if request.parts.contains(.joinedGroupCounts) {
            for user in request.users { snapshot.joinedGroupCounts[user] = 0 }
        }
        let facts = userFactBranches(
            request, groupKey: ("g.group_key", "g, ", []), padding: groupNulls + memberNulls, trailing: itemNulls)
        for part in facts.parts { sql += "\nUNION ALL\n" + part }
        arguments += facts.arguments
        if !itemConditions.isEmpty {
            sql += """

                UNION ALL
                SELECT 'a', \(groupNulls)\(memberNulls)\(factTypedNulls),
                    \(ApplicationRows.columns)
                FROM now, g JOIN applications a ON a.app_id = g.app_id AND a.group_key = g.group_key
                WHERE a.state = 'pending' AND (\(itemConditions.joined(separator: " OR ")))
                """
            arguments += itemArguments
        }
        var found: StoreSnapshot = snapshot
        // Wrapped in a `SELECT`: a statement that begins with `WITH` counts as a write
        // (``PostgresSession/writeCount``).
        try await session.rows("SELECT * FROM (" + sql + ") snapshot", arguments) { row in
            let tag = try row.text(0)
            switch tag {
            case "g":
                group = try Rows.group(OffsetRow(row: row, offset: 1))
            case "m":
                members.append(try Rows.member(row, at: memberOffset))
            case "s":
                successor = try Rows.member(row, at: memberOffset)
            case "a":
                let decoded = try ApplicationRows.decode(OffsetRow(row: row, offset: itemOffset))
                items.append((decoded.key, decoded.application))
            default:
                try readFact(row, tag: tag, at: factOffset, into: &found)
            }
        }
        if group == nil && known == nil { throw GroupError.groupNotFound(groupID) }
        for (_, item) in items.sorted(by: { $0.key < $1.key }) {
            if let kind = pendingKind, item.kind == kind, targets.contains(item.subjectID) {
                found.pendingApplications[item.subjectID] = item
            }
            if due, item.expiresAt.millisecondsSince1970 <= request.time.millisecondsSince1970 {
                found.dueApplications.append(item)
            }
        }
        snapshot = found
        return (group, members, successor)
    }

    /// The typed nulls of the item columns (``ApplicationRows/columns``) in a snapshot's other rows.
    private static let itemNulls = """
        , NULL::int8, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text,
        NULL::int8, NULL::int8, NULL::int8, NULL::text, NULL::text, NULL::text, NULL::int8,
        NULL::text, NULL::text, NULL::text, NULL::int8, NULL::text, NULL::text, NULL::int8, NULL::text, NULL::text
        """

    /// The membership of the user `user` (an SQL expression) in the group `g`, as one key probe. The
    /// user id is compared in byte order (`COLLATE "C"`, the same equality) so that the index on
    /// `(app_id, group_key, user_id COLLATE "C")` serves the whole condition: compared in the
    /// database's collation, the planner could take that index for the group alone and filter its
    /// memberships one by one (it estimates a group's memberships from when the table was last
    /// analyzed, and both indexes then cost the same).
    static func memberProbe(_ user: String) -> String {
        "SELECT * FROM members WHERE app_id = g.app_id AND group_key = g.group_key AND user_id COLLATE \"C\" = \(user) LIMIT 1"
    }

    /// The longest-standing other admin's membership, when the group's owner-quit setting asks for
    /// one and the operator is the owner quitting (with the successor, ``groupAndMembers``).
    private func loadSuccessorAdmin(_ request: SnapshotRequest, group: Group, groupKey: Int64, into snapshot: inout StoreSnapshot) async throws {
        guard request.parts.contains(.successor), group.settings.ownerQuit == .longestStandingAdminElseMember,
              let op = request.operatorID, group.ownerID == op
        else { return }
        var admins: [Rows.MemberRow] = []
        try await session.rows(
            """
            SELECT \(Rows.memberColumns) FROM members m
            WHERE m.app_id = ? AND m.group_key = ? AND m.role = 'admin' AND m.user_id <> ?
            ORDER BY m.join_order LIMIT 1
            """, [.text(request.app), .integer(groupKey), .text(op)]
        ) { admins.append(try Rows.member($0)) }
        if let admin = try await PostgresRows.withCustom(admins, app: request.app, groupKey: groupKey, session: session).first {
            snapshot.successorAdmin = admin
            snapshot.members[admin.userID] = admin
        }
    }

    private func loadReadState(
        _ reader: (user: String, upTo: Int64?), app: String, groupKey: Int64, into snapshot: inout StoreSnapshot
    ) async throws {
        var joinSequence: Int64 = 0
        if let (read, join) = try await session.first(
            "SELECT last_read_seq, join_seq FROM members WHERE app_id = ? AND group_key = ? AND user_id COLLATE \"C\" = ?",
            [.text(app), .integer(groupKey), .text(reader.user)], { (try $0.int64(0), try $0.int64(1)) })
        {
            snapshot.readSequence = read
            joinSequence = join
        }
        snapshot.latestMessageSequence = try await session.first(
            "SELECT max(seq) FROM group_messages WHERE app_id = ? AND group_key = ? AND seq <= ?",
            [.text(app), .integer(groupKey), .integer(reader.upTo ?? Int64.max)], { try $0.optionalInt64(0) }
        ).flatMap { $0 } ?? 0
        snapshot.unreadCount = try await PostgresMessageRows.unreadCount(
            app: app, groupKey: groupKey, userID: reader.user, after: max(snapshot.readSequence, joinSequence), session: session)
        snapshot.lastMessageAt = try await PostgresMessageRows.lastMessageTime(app: app, groupKey: groupKey, session: session)
        try await session.rows(
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

    /// The read state of `reader` in a topic: the position `topic_reads` holds for the member's
    /// current membership of the community (0 when it was written for an earlier one, or never),
    /// counting the topic's messages after it sent since the member joined the community (at or after the join time), not by
    /// the member.
    private func loadTopicReadState(
        _ reader: (user: String, upTo: Int64?), app: String, topicKey: Int64, communityKey: Int64,
        into snapshot: inout StoreSnapshot
    ) async throws {
        var joinedAt: Int64 = 0
        if let (read, joined) = try await session.first(
            """
            SELECT coalesce(r.last_read_seq, 0), m.joined_at FROM members m
            LEFT JOIN topic_reads r ON r.app_id = m.app_id AND r.topic_key = ? AND r.user_id = m.user_id
                AND r.joined_at = m.joined_at
            WHERE m.app_id = ? AND m.group_key = ? AND m.user_id COLLATE "C" = ?
            """,
            [.integer(topicKey), .text(app), .integer(communityKey), .text(reader.user)], { (try $0.int64(0), try $0.int64(1)) })
        {
            snapshot.readSequence = read
            joinedAt = joined
        }
        snapshot.latestMessageSequence = try await session.first(
            "SELECT max(seq) FROM group_messages WHERE app_id = ? AND group_key = ? AND seq <= ?",
            [.text(app), .integer(topicKey), .integer(reader.upTo ?? Int64.max)], { try $0.optionalInt64(0) }
        ).flatMap { $0 } ?? 0
        snapshot.lastMessageAt = try await PostgresMessageRows.lastMessageTime(app: app, groupKey: topicKey, session: session)
        try await session.rows(
            """
            SELECT (SELECT COUNT(*) FROM group_messages
                    WHERE app_id = ? AND group_key = ? AND seq > ? AND time >= ? AND sender_id <> ?),
                (EXISTS (SELECT 1 FROM message_mentions mm JOIN group_messages gm
                        ON gm.app_id = mm.app_id AND gm.group_key = mm.group_key AND gm.seq = mm.seq
                    WHERE mm.app_id = ? AND mm.group_key = ? AND mm.user_id = ? AND mm.seq > ? AND gm.time >= ?))::int::int8,
                (EXISTS (SELECT 1 FROM group_messages
                    WHERE app_id = ? AND group_key = ? AND mention_all = 1 AND seq > ? AND time >= ? AND sender_id <> ?))::int::int8
            """,
            [
                .text(app), .integer(topicKey), .integer(snapshot.readSequence), .integer(joinedAt), .text(reader.user),
                .text(app), .integer(topicKey), .text(reader.user), .integer(snapshot.readSequence), .integer(joinedAt),
                .text(app), .integer(topicKey), .integer(snapshot.readSequence), .integer(joinedAt), .text(reader.user),
            ]
        ) { row in
            snapshot.unreadCount = try row.int(0)
            snapshot.unreadMention = UnreadMention(me: try row.bool(1), all: try row.bool(2))
        }
    }
}
