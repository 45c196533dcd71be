public import GroupModel
import GroupStore
import GroupStoreSQL

/// Group and member reads over PostgreSQL, each one `REPEATABLE READ` snapshot on a pooled
/// connection (``PostgresBackend/read(_:)``).
///
/// The same semantics as SQLite's (`SQLiteBackend+GroupReads.swift`): listings page with opaque
/// cursors (base-36 numbers joined by `.`): members by `join_order` (plus the group's
/// `next_join_order` when the listing began, so a user who quits and rejoins during a listing is
/// not listed twice), joined groups by `(joined_at, group_key)` descending, search results by
/// `group_key`. Every statement names the app (the app-first keys of ``PostgresSchema``).
extension PostgresBackend {
    /// Concurrent calls are read together (``groupReads``).
    public func groups(app: String, ids: [String]) async throws -> [String: Group] {
        try await groupReads.read(GroupIDsRead(app: app, ids: ids))
    }

    public func topics(app: String, communities: [String]) async throws -> [String: [Group]] {
        if communities.isEmpty { return [:] }
        return try await read { session in
            var rows: [Rows.GroupRow] = []
            var parents: [String] = []
            // A topic's own columns only (the rest is its community's): a member of many
            // communities lists a thousand topics.
            try await session.rows(
                """
                SELECT \(Rows.topicColumns), c.group_id FROM groups c
                CROSS JOIN LATERAL (\(Self.topicsOfCommunity)) t
                WHERE c.app_id = ? AND c.group_id = ANY(?) AND c.dismissed_at IS NULL
                """,
                [.text(app), .texts(communities)]
            ) { row in
                rows.append(try Rows.topic(row))
                parents.append(try row.text(Rows.topicColumnCount))
            }
            var topics: [String: [Group]] = [:]
            for (parent, topic) in zip(parents, try await PostgresRows.withCustom(rows, app: app, session: session)) {
                topics[parent, default: []].append(topic)
            }
            return topics.mapValues { $0.sorted(by: Self.isOlder) }
        }
    }

    /// The live topics of community `c`, each by its own probe of `groups_by_parent` (`OFFSET 0`
    /// keeps the subquery from being flattened into a join): as a join, the statement's generic
    /// plan read every topic of the app in the index's order, or scanned the app's groups in
    /// `group_id` order to skip a sort. Unordered: the caller sorts (``isOlder(_:_:)``).
    static let topicsOfCommunity = """
        SELECT * FROM groups t WHERE t.app_id = c.app_id AND t.parent_key = c.group_key AND t.dismissed_at IS NULL OFFSET 0
        """

    /// Topic order: by creation time, then id.
    static func isOlder(_ a: Group, _ b: Group) -> Bool {
        (a.createdAt, a.id) < (b.createdAt, b.id)
    }

    public func joinedTopics(app: String, userID: String, communities: [String]) async throws -> [String: [JoinedTopic]] {
        if communities.isEmpty { return [:] }
        return try await read { session in
            var read: [(community: String, row: Rows.GroupRow, state: ReadState)] = []
            // The topics of the user's communities by their parent (no list of topic ids), each
            // with its read state (``topicStateColumns``); the user's member row read once per
            // community, not once per topic.
            try await session.rows(
                """
                SELECT c.group_id, \(Rows.topicColumns), \(Self.topicStateColumns) FROM groups c
                JOIN LATERAL \(Self.membershipProbe(app: "c.app_id", community: "c.group_key")) m ON true
                CROSS JOIN LATERAL (\(Self.topicsOfCommunity)) t
                \(Self.topicPosition)
                WHERE c.app_id = ? AND c.group_id = ANY(?) AND c.dismissed_at IS NULL
                """,
                [.text(userID), .text(app), .texts(communities)]
            ) { row in
                let topic = try Rows.topic(OffsetRow(row: row, offset: 1))
                read.append((try row.text(0), topic, try Self.readState(OffsetRow(row: row, offset: Rows.topicColumnCount))))
            }
            var topics: [String: [JoinedTopic]] = [:]
            for (entry, group) in zip(read, try await PostgresRows.withCustom(read.map(\.row), app: app, session: session)) {
                topics[entry.community, default: []].append(JoinedTopic(topic: group, read: entry.state))
            }
            return topics.mapValues { $0.sorted { Self.isOlder($0.topic, $1.topic) } }
        }
    }

    public func memberships(app: String, userID: String, groupIDs: [String]) async throws -> [String: Member] {
        try await readOne { session, inSnapshot in
            var groupIDList: [String] = []
            var rows: [Rows.MemberRow] = []
            try await session.rows(
                """
                SELECT g.group_id, \(Rows.memberColumns) FROM groups g
                JOIN \(PostgresRows.membershipProbe)
                WHERE g.app_id = ? AND g.group_id \(PostgresRows.oneOrAny(groupIDs).sql) AND g.dismissed_at IS NULL
                """,
                [.text(userID), .text(app), PostgresRows.oneOrAny(groupIDs).value]
            ) { row in
                groupIDList.append(try row.text(0))
                rows.append(try Rows.member(row, at: 1))
            }
            if !inSnapshot && rows.contains(where: \.hasCustom) { return nil }
            let members = try await PostgresRows.withCustom(rows, app: app, userID: userID, session: session)
            var result: [String: Member] = [:]
            for (offset, member) in members.enumerated() { result[groupIDList[offset]] = member }
            return result
        }
    }

    /// The groups, the user's membership, remark and unread mentions of each: one statement for
    /// every call that arrives together (``userGroupReads``), a second in one snapshot for a call
    /// whose groups or membership have custom fields.
    ///
    /// Topics among `ids` are answered apart, in a few reads (not one instant with the others):
    /// each in its community's view (`Group.topic(_:in:)`, absent when the community is not
    /// live), with the user's membership of the community and the unread mention of the topic.
    public func groupsForUser(app: String, userID: String, ids: [String]) async throws -> GroupsForUser {
        let topics = ids.filter(GroupID.isTopic)
        if topics.isEmpty { return try await userGroupReads.read(UserGroupsRead(app: app, userID: userID, ids: ids)) }
        let others = ids.filter { !GroupID.isTopic($0) }
        var answer = others.isEmpty
            ? GroupsForUser(unreadMentions: [:])
            : try await userGroupReads.read(UserGroupsRead(app: app, userID: userID, ids: others))
        let communities = Array(Set(topics.compactMap(GroupID.communityID(ofTopic:))))
        let rows = try await groups(app: app, ids: topics + communities)
        let memberships = try await memberships(app: app, userID: userID, groupIDs: communities)
        let member = topics.filter { topic in GroupID.communityID(ofTopic: topic).map { memberships[$0] != nil } ?? false }
        let states = member.isEmpty ? [:] : try await readStates(app: app, userID: userID, groupIDs: member)
        let remarks = member.isEmpty ? [:] : try await remarks(app: app, userID: userID, groupIDs: member)
        for topic in topics {
            guard let communityID = GroupID.communityID(ofTopic: topic), let row = rows[topic],
                  let community = rows[communityID]
            else { continue }
            answer.groups[topic] = Group.topic(row, in: community)
            guard let membership = memberships[communityID] else { continue }
            answer.memberships[topic] = membership
            if let remark = remarks[topic] { answer.remarks[topic] = remark }
            if answer.unreadMentions != nil { answer.unreadMentions?[topic] = states[topic]?.unreadMention ?? UnreadMention.none }
        }
        return answer
    }

    public func remark(app: String, groupID: String, userID: String) async throws -> String {
        try await readStatement { session in
            guard let remark = try await session.first(
                """
                SELECT g.group_key, r.remark FROM groups g
                LEFT JOIN group_remarks r
                    ON r.app_id = g.app_id AND r.user_id = ? AND r.group_key = g.group_key
                WHERE g.app_id = ? AND g.group_id = ? AND g.dismissed_at IS NULL
                """,
                [.text(userID), .text(app), .text(groupID)],
                { try $0.optionalText(1) ?? "" })
            else { throw GroupError.groupNotFound(groupID) }
            return remark
        }
    }

    public func permissionAssignments(app: String, groupID: String) async throws -> [PermissionAssignment] {
        try await read { session in
            let key = try await PostgresRows.groupKey(app: app, groupID: groupID, session: session)
            // The partial index `members_in_permission_groups` holds only these rows.
            var assignments: [PermissionAssignment] = []
            try await session.rows(
                """
                SELECT user_id, permission_groups FROM members
                WHERE app_id = ? AND group_key = ? AND permission_groups IS NOT NULL ORDER BY user_id COLLATE "C"
                """,
                [.text(app), .integer(key)]
            ) { row in
                assignments.append(PermissionAssignment(
                    userID: try row.text(0), permissionGroups: PermissionGroupCoding.decodeAssignments(try row.optionalText(1))))
            }
            return assignments
        }
    }

    public func attributes(app: String, groupID: String) async throws -> GroupAttributeSet {
        try await read { session in
            let key = try await PostgresRows.groupKey(app: app, groupID: groupID, session: session)
            return try await PostgresAttributeRows.load(session, app: app, groupKey: key)
        }
    }

    public func inviteLink(app: String, tokenHash: String) async throws -> InviteLink? {
        try await read { session in try await PostgresInviteLinkRows.one(session, app: app, key: .tokenHash(tokenHash)) }
    }

    public func inviteLinks(app: String, groupID: String, now: Timestamp) async throws -> [InviteLink] {
        try await read { session in
            let key = try await PostgresRows.groupKey(app: app, groupID: groupID, session: session)
            return try await PostgresInviteLinkRows.live(session, app: app, groupKey: key, now: now)
        }
    }

    public func remarks(app: String, userID: String, groupIDs: [String]) async throws -> [String: String] {
        try await readStatement { session in
            var result: [String: String] = [:]
            try await session.rows(
                """
                SELECT g.group_id, r.remark FROM groups g
                JOIN group_remarks r ON r.app_id = g.app_id AND r.user_id = ? AND r.group_key = g.group_key
                WHERE g.app_id = ? AND g.group_id \(PostgresRows.oneOrAny(groupIDs).sql) AND g.dismissed_at IS NULL
                """,
                [.text(userID), .text(app), PostgresRows.oneOrAny(groupIDs).value]
            ) { row in result[try row.text(0)] = try row.text(1) }
            return result
        }
    }

    public func listMembers(
        app: String, groupID: String, filter: MemberListFilter, after cursor: String?, limit: Int
    ) async throws -> Page<Member> {
        let position = try cursor.map { try Cursor.decode($0, count: 2) }
        let limit = max(1, limit)
        return try await read { session in
            guard let group = try await session.first(
                """
                SELECT group_key, next_join_order FROM groups
                WHERE app_id = ? AND group_id = ? AND dismissed_at IS NULL
                """,
                [.text(app), .text(groupID)],
                { (try $0.int64(0), try $0.int64(1)) })
            else { throw GroupError.groupNotFound(groupID) }
            let (groupKey, nextJoinOrder) = group
            let after = position?[0] ?? 0
            // Only members who joined before the listing began: a later (re)join is not
            // listed, so nobody appears twice.
            let mark = position?[1] ?? nextJoinOrder
            let sql: String
            var arguments: [PGValue] = [.text(app), .integer(groupKey)]
            switch filter {
            case .all:
                sql = """
                    SELECT \(Rows.memberColumns) FROM members m
                    WHERE m.app_id = ? AND m.group_key = ? AND m.join_order > ? AND m.join_order < ?
                    ORDER BY m.join_order LIMIT ?
                    """
            case .owner, .admins, .ordinary:
                sql = """
                    SELECT \(Rows.memberColumns) FROM members m
                    WHERE m.app_id = ? AND m.group_key = ? AND m.role = ? AND m.join_order > ? AND m.join_order < ?
                    ORDER BY m.join_order LIMIT ?
                    """
                arguments.append(.text(filter.roles.first!.rawValue))
            }
            arguments += [.integer(after), .integer(mark), .int(limit + 1)]
            var rows: [Rows.MemberRow] = []
            try await session.rows(sql, arguments) { rows.append(try Rows.member($0)) }
            var next: String?
            if rows.count > limit {
                rows.removeLast(rows.count - limit)
                next = Cursor.encode([rows[limit - 1].member.joinOrder, mark])
            }
            let members = try await PostgresRows.withCustom(rows, app: app, groupKey: groupKey, session: session)
            return Page(items: members, next: next)
        }
    }

    public func members(app: String, groupID: String, userIDs: [String]) async throws -> [String: Member] {
        try await read { session in
            let groupKey = try await PostgresRows.groupKey(app: app, groupID: groupID, session: session)
            return try await PostgresRows.members(app: app, groupKey: groupKey, userIDs: userIDs, session: session)
        }
    }

    public func joinedGroups(app: String, userID: String, after cursor: String?, limit: Int) async throws -> Page<JoinedGroup> {
        let position = try cursor.map { try Cursor.decode($0, count: 2) }
        let limit = max(1, limit)
        return try await read { session in
            // The user's member rows in `members_by_user_joined` order, each group by one probe of
            // its key (a lateral subquery kept apart by `OFFSET 0`): as a join, a table without
            // statistics yet (a new database's first minute) had each member row scan every group
            // of the app: 22 ms for a page of 50 in `make bench-topics`, 0.4 ms probed
            // (docs/PERFORMANCE.md).
            var sql = """
                SELECT \(Rows.GroupColumn.list(table: "g")), \(Rows.memberColumns), r.remark
                FROM members m
                CROSS JOIN LATERAL (SELECT * FROM groups g WHERE g.app_id = m.app_id AND g.group_key = m.group_key
                    AND g.dismissed_at IS NULL AND g.type <> 'AVChatRoom' OFFSET 0) g
                LEFT JOIN group_remarks r
                    ON r.app_id = m.app_id AND r.user_id = m.user_id AND r.group_key = m.group_key
                WHERE m.app_id = ? AND m.user_id = ?
                """
            var arguments: [PGValue] = [.text(app), .text(userID)]
            if let position {
                // The row comparison is `joined_at < ? OR (joined_at = ? AND group_key < ?)`, in
                // the order of `members_by_user_joined`.
                sql += "\n  AND (m.joined_at, m.group_key) < (?, ?)"
                arguments += [.integer(position[0]), .integer(position[1])]
            }
            sql += "\nORDER BY m.joined_at DESC, m.group_key DESC LIMIT ?"
            arguments.append(.int(limit + 1))
            let memberOffset = Rows.GroupColumn.allCases.count
            var groups: [Rows.GroupRow] = []
            var memberships: [Rows.MemberRow] = []
            var remarks: [String] = []
            try await session.rows(sql, arguments) { row in
                groups.append(try Rows.group(row))
                memberships.append(try Rows.member(row, at: memberOffset))
                remarks.append(try row.optionalText(memberOffset + Rows.memberColumnCount) ?? "")
            }
            var next: String?
            if groups.count > limit {
                groups.removeLast(groups.count - limit)
                memberships.removeLast(memberships.count - limit)
                remarks.removeLast(remarks.count - limit)
                next = Cursor.encode([memberships[limit - 1].member.joinedAt.millisecondsSince1970, groups[limit - 1].key])
            }
            let full = try await PostgresRows.withCustom(groups, app: app, session: session)
            let members = try await PostgresRows.withCustom(memberships, app: app, userID: userID, session: session)
            let items = (0..<full.count).map {
                JoinedGroup(group: full[$0], membership: members[$0], remark: remarks[$0])
            }
            return Page(items: items, next: next)
        }
    }

    public func searchGroups(
        app: String, keyword: String, userID: String?, matchNameCards: Bool, after cursor: String?, limit: Int
    ) async throws -> Page<Group> {
        if keyword.isEmpty { throw GroupError.invalidArgument(field: "keyword", "the search keyword must not be empty") }
        let after = try cursor.map { try Cursor.decode($0, count: 1)[0] } ?? 0
        let limit = max(1, limit)
        let pattern = SQLDialect.containsPattern(keyword)
        // The candidates, each through its own index: the id, exact or prefix (a range of
        // `groups_by_id_bytes`, in byte order whatever the database's collation), the name (a
        // keyword of 3 characters or more through the trigram index `groups_name_trigram`; a
        // shorter one scans the app's names), the caller's groups where a name card matches.
        // `ILIKE`: case-insensitive, as SQLite's `LIKE` and FTS5 trigram are.
        let idRange = PrefixRange(prefix: keyword)
        var candidates = [
            idRange.upper == nil
                ? "SELECT group_key FROM groups WHERE app_id = ? AND group_id COLLATE \"C\" >= ?"
                : "SELECT group_key FROM groups WHERE app_id = ? AND group_id COLLATE \"C\" >= ? AND group_id COLLATE \"C\" < ?",
            "SELECT group_key FROM groups WHERE app_id = ? AND \(SQLDialect.postgres.contains("name"))",
        ]
        var candidateArguments: [PGValue] = [.text(app), .text(keyword)]
        if let end = idRange.upper { candidateArguments.append(.text(end)) }
        candidateArguments += [.text(app), .text(pattern)]
        var visibility = ""
        var visibilityArguments: [PGValue] = []
        if let userID {
            visibility = """
                AND (g.type <> 'Work'
                     OR EXISTS (SELECT 1 FROM members v
                                WHERE v.app_id = g.app_id AND v.group_key = g.group_key AND v.user_id = ?))
                """
            visibilityArguments = [.text(userID)]
            if matchNameCards {
                candidates.append("""
                    SELECT m.group_key FROM members m
                    WHERE m.app_id = ? AND m.user_id = ? AND EXISTS (
                        SELECT 1 FROM members c
                        WHERE c.app_id = m.app_id AND c.group_key = m.group_key
                          AND c.name_card <> '' AND \(SQLDialect.postgres.contains("c.name_card")))
                    """)
                candidateArguments += [.text(app), .text(userID), .text(pattern)]
            }
        }
        let sql = """
            SELECT \(Rows.GroupColumn.list(table: "g")) FROM groups g
            WHERE g.app_id = ? AND g.group_key IN (\(candidates.joined(separator: "\nUNION ALL\n")))
              AND g.dismissed_at IS NULL AND g.parent_key IS NULL AND g.group_key > ?
              \(visibility)
            ORDER BY g.group_key LIMIT ?
            """
        let arguments: [PGValue] =
            [.text(app)] + candidateArguments + [.integer(after)] + visibilityArguments + [.int(limit + 1)]
        return try await read { session in
            // The trigram index serves bitmap scans only, which the store's sessions price out.
            try await session.command("SET LOCAL enable_bitmapscan = on")
            var rows: [Rows.GroupRow] = []
            try await session.rows(sql, arguments) { rows.append(try Rows.group($0)) }
            var next: String?
            if rows.count > limit {
                rows.removeLast(rows.count - limit)
                next = Cursor.encode([rows[limit - 1].key])
            }
            return await Page(items: try PostgresRows.withCustom(rows, app: app, session: session), next: next)
        }
    }

    public func joinedGroupCount(app: String, userID: String, types: Set<GroupType>) async throws -> Int {
        let names = types.map(\.name).sorted()
        return try await read { session in
            var sql = """
                SELECT COUNT(*) FROM members m JOIN groups g ON g.app_id = m.app_id AND g.group_key = m.group_key
                WHERE m.app_id = ? AND m.user_id = ? AND g.dismissed_at IS NULL
                """
            var arguments: [PGValue] = [.text(app), .text(userID)]
            if !names.isEmpty {
                sql += " AND g.type = ANY(?)"
                arguments.append(.texts(names))
            }
            return try await session.first(sql, arguments) { try $0.int(0) } ?? 0
        }
    }

    public func nameCardMatches(
        app: String, groupIDs: [String], keyword: String, limit: Int
    ) async throws -> [String: [Member]] {
        let groupIDs = Array(Set(groupIDs))
        if groupIDs.isEmpty || keyword.isEmpty || limit < 1 { return [:] }
        let pattern = SQLDialect.containsPattern(keyword)
        return try await read { session in
            // Each group's first `limit` matches by join order, all groups in one statement.
            var found: [(groupID: String, groupKey: Int64, rows: [Rows.MemberRow])] = []
            try await session.rows(
                """
                SELECT g.group_id, \(Rows.memberColumns) FROM groups g
                CROSS JOIN LATERAL (
                    SELECT \(Rows.memberColumns) FROM members m
                    WHERE m.app_id = g.app_id AND m.group_key = g.group_key
                      AND m.name_card <> '' AND \(SQLDialect.postgres.contains("m.name_card"))
                    ORDER BY m.join_order LIMIT ?) m
                WHERE g.app_id = ? AND g.group_id \(PostgresRows.oneOrAny(groupIDs).sql) AND g.dismissed_at IS NULL
                ORDER BY g.group_key, m.join_order
                """,
                [.text(pattern), .int(limit), .text(app), PostgresRows.oneOrAny(groupIDs).value]
            ) { row in
                let member = try Rows.member(row, at: 1)
                if let last = found.indices.last, found[last].groupKey == member.groupKey {
                    found[last].rows.append(member)
                } else {
                    found.append((try row.text(0), member.groupKey, [member]))
                }
            }
            var result: [String: [Member]] = [:]
            for entry in found {
                result[entry.groupID] = try await PostgresRows.withCustom(
                    entry.rows, app: app, groupKey: entry.groupKey, session: session)
            }
            return result
        }
    }
}

/// Group and member rows over PostgreSQL, read in the caller's transaction (a read snapshot or
/// the writer's transaction): the PostgreSQL counterparts of `Rows.groupKey` and
/// `Operations.withCustom`/`members`. Rows are decoded by the shared decoders of `Rows`.
enum PostgresRows {
    /// For `JOIN` or `LEFT JOIN` after `groups g`: the membership of the user `?` in `g`, as one
    /// probe of the members key per group. A plain join lets a generic plan (the one a prepared
    /// statement switches to, made without the values) of `g.group_id = ANY($n)` guess ten groups
    /// and a few memberships per user, and hash every membership of the user to answer one
    /// group: 1 ms a call for a user in a hundred groups. `LIMIT 1` (a user has one membership
    /// of a group) keeps the subquery from being merged into the join. The user id is compared in
    /// byte order so that the `(app_id, group_key, user_id COLLATE "C")` index serves the whole
    /// condition (``PostgresTransaction/memberProbe(_:)``): compared in the database's collation,
    /// the plan took that index for the group alone and filtered its memberships.
    static let membershipProbe = membershipProbe(of: "?")

    /// ``membershipProbe`` for the user `user` names (a placeholder or a column).
    static func membershipProbe(of user: String) -> String {
        """
        LATERAL (SELECT m.* FROM members m WHERE m.app_id = g.app_id AND m.group_key = g.group_key AND m.user_id COLLATE "C" = \(user) LIMIT 1) m
        ON true
        """
    }
    /// The condition on a group id column for `ids` (`= ?` for one, `= ANY(?)` for several) and
    /// its value. A generic plan guesses ten elements in an array, so a statement prepared with
    /// `= ANY(?)` and run with one id costs ten times what the custom plan for one id costs, and
    /// PostgreSQL keeps planning it on every call (0.3 ms here); with `= ?` the generic plan is the
    /// custom one, and is kept after the fifth call.
    static func oneOrAny(_ ids: [String]) -> (sql: String, value: PGValue) {
        ids.count == 1 ? ("= ?", .text(ids[0])) : ("= ANY(?)", .texts(ids))
    }

    /// For `LEFT JOIN` after `groups g`: the remark of the user `?` for `g`, one probe per group
    /// (as ``membershipProbe``).
    static let remarkProbe = remarkProbe(of: "?")

    /// ``remarkProbe`` for the user `user` names (a placeholder or a column).
    static func remarkProbe(of user: String) -> String {
        """
        LATERAL (SELECT r.remark FROM group_remarks r WHERE r.app_id = g.app_id AND r.user_id = \(user) AND r.group_key = g.group_key
            LIMIT 1) r
        ON true
        """
    }

    /// Answers reads of groups by id together: their ids merged per app, one statement per app
    /// (``groups(_:session:inSnapshot:)``), each read given the groups it asked for.
    static func groups(answering reads: [GroupIDsRead], readers: PostgresReaders) async throws -> [[String: Group]] {
        var wanted: [String: [String]] = [:]
        var seen: [String: Set<String>] = [:]
        for read in reads {
            for id in read.ids where seen[read.app, default: []].insert(id).inserted { wanted[read.app, default: []].append(id) }
        }
        let merged = wanted
        let found = try await readers.runOne { session, inSnapshot in try await groups(merged, session: session, inSnapshot: inSnapshot) }
        return reads.map { read in
            let groups = found[read.app] ?? [:]
            var answer: [String: Group] = [:]
            for id in read.ids { if let group = groups[id] { answer[id] = group } }
            return answer
        }
    }

    /// Answers users' views of groups together: one statement for all of `reads` (its pairs of
    /// user and group as arrays, each group probed by id, then the user's membership, remark and
    /// unread mentions in it), then one snapshot for the reads whose groups or memberships have
    /// custom fields (``groupsForUsers(_:session:inSnapshot:)`` again, with their custom values).
    static func groupsForUsers(_ reads: [UserGroupsRead], session: PostgresSession) async throws -> [GroupsForUser] {
        var answers = try await groupsForUsers(reads, session: session, inSnapshot: false)
        let again = answers.indices.filter { answers[$0] == nil }
        if !again.isEmpty {
            let redone = try await session.readTransaction {
                try await groupsForUsers(again.map { reads[$0] }, session: session, inSnapshot: true)
            }
            for (index, answer) in zip(again, redone) { answers[index] = answer }
        }
        return try answers.map { answer in
            guard let answer else { throw GroupError.internal("a user's view of groups read in a snapshot asked for one") }
            return answer
        }
    }

    /// The users' views of `reads` from one statement; outside a snapshot (`inSnapshot` false) a
    /// read whose groups or membership have custom fields is `nil` (they are a second statement).
    /// The statement is the same text for any number of reads: each group a `LATERAL … LIMIT 1`
    /// probe by id, so its plan probes indexes whatever it guesses of the arrays' lengths.
    static func groupsForUsers(_ reads: [UserGroupsRead], session: PostgresSession, inSnapshot: Bool) async throws -> [GroupsForUser?] {
        var apps: [String] = []
        var users: [String] = []
        var groupIDs: [String] = []
        var readOfPair: [Int] = []
        for (index, read) in reads.enumerated() {
            for id in read.ids {
                apps.append(read.app)
                users.append(read.userID)
                groupIDs.append(id)
                readOfPair.append(index)
            }
        }
        struct Found {
            var groups: [Rows.GroupRow] = []
            var members: [Rows.MemberRow] = []
            var memberGroupIDs: [String] = []
            var answer = GroupsForUser(unreadMentions: [:])
        }
        var found = Array(repeating: Found(), count: reads.count)
        let remarkColumn = Rows.GroupColumn.allCases.count
        let mentionColumn = remarkColumn + 1 + Rows.memberColumnCount
        try await session.rows(
            """
            SELECT \(Rows.GroupColumn.list(table: "g")), r.remark, \(Rows.memberColumns), \(PostgresBackend.unreadMentionColumns), q.n
            FROM unnest(?::text[], ?::text[], ?::text[]) WITH ORDINALITY AS q(app_id, user_id, group_id, n)
            JOIN LATERAL (SELECT g.* FROM groups g
                WHERE g.app_id = q.app_id AND g.group_id = q.group_id AND g.dismissed_at IS NULL LIMIT 1) g
            ON true
            LEFT JOIN \(membershipProbe(of: "q.user_id"))
            LEFT JOIN \(remarkProbe(of: "q.user_id"))
                AND (m.user_id IS NOT NULL OR g.type = 'AVChatRoom')
            """,
            [.texts(apps), .texts(users), .texts(groupIDs)]
        ) { row in
            let pair = Int(try row.int64(mentionColumn + 2)) - 1
            guard readOfPair.indices.contains(pair) else { throw GroupError.internal("a user's view of groups answered pair \(pair)") }
            let index = readOfPair[pair]
            let group = try Rows.group(row)
            found[index].groups.append(group)
            if let remark = try row.optionalText(remarkColumn) { found[index].answer.remarks[group.group.id] = remark }
            if !row.isNull(remarkColumn + 1) {
                found[index].members.append(try Rows.member(row, at: remarkColumn + 1))
                found[index].memberGroupIDs.append(group.group.id)
                found[index].answer.unreadMentions?[group.group.id] =
                    UnreadMention(me: try row.bool(mentionColumn), all: try row.bool(mentionColumn + 1))
            }
        }
        var answers: [GroupsForUser?] = []
        answers.reserveCapacity(reads.count)
        for (read, found) in zip(reads, found) {
            if !inSnapshot && (found.groups.contains { $0.hasCustom } || found.members.contains { $0.hasCustom }) {
                answers.append(nil)
                continue
            }
            var answer = found.answer
            for group in try await withCustom(found.groups, app: read.app, session: session) { answer.groups[group.id] = group }
            let members = try await withCustom(found.members, app: read.app, userID: read.userID, session: session)
            for (offset, member) in members.enumerated() { answer.memberships[found.memberGroupIDs[offset]] = member }
            answers.append(answer)
        }
        return answers
    }

    /// The live groups among `wanted` (group ids per app), per app then by id: one statement
    /// per app. `nil` when a group has custom fields and the read is not in a snapshot (they are
    /// a second statement).
    static func groups(_ wanted: [String: [String]], session: PostgresSession, inSnapshot: Bool) async throws -> [String: [String: Group]]? {
        var result: [String: [String: Group]] = [:]
        for (app, ids) in wanted.sorted(by: { $0.key < $1.key }) {
            var rows: [Rows.GroupRow] = []
            rows.reserveCapacity(ids.count)
            try await session.rows(
                """
                SELECT \(Rows.GroupColumn.list()) FROM groups
                WHERE app_id = ? AND group_id \(PostgresRows.oneOrAny(ids).sql) AND dismissed_at IS NULL
                """,
                [.text(app), PostgresRows.oneOrAny(ids).value]
            ) { rows.append(try Rows.group($0)) }
            if !inSnapshot && rows.contains(where: \.hasCustom) { return nil }
            var groups: [String: Group] = [:]
            groups.reserveCapacity(rows.count)
            for group in try await withCustom(rows, app: app, session: session) { groups[group.id] = group }
            result[app] = groups
        }
        return result
    }

    /// The row key of a group of `app`.
    /// - Parameters:
    ///   - app: The app.
    ///   - groupID: The group's id in the app.
    ///   - dismissedToo: Whether a dismissed group's key is returned too (history reads).
    ///   - session: The connection the query runs on (in the caller's transaction, if any).
    /// - Throws: `GroupError.groupNotFound(_:)` when no such group is stored (or it is
    ///   dismissed and `dismissedToo` is false).
    static func groupKey(app: String, groupID: String, dismissedToo: Bool = false, session: PostgresSession) async throws -> Int64 {
        let sql = dismissedToo
            ? "SELECT group_key FROM groups WHERE app_id = ? AND group_id = ?"
            : "SELECT group_key FROM groups WHERE app_id = ? AND group_id = ? AND dismissed_at IS NULL"
        guard let key = try await session.first(sql, [.text(app), .text(groupID)], { try $0.int64(0) }) else {
            throw GroupError.groupNotFound(groupID)
        }
        return key
    }

    /// The groups of `rows` (all of `app`), in order, with their custom fields.
    static func withCustom(_ rows: [Rows.GroupRow], app: String, session: PostgresSession) async throws -> [Group] {
        var groups = rows.map(\.group)
        let needing = rows.filter(\.hasCustom).map(\.key)
        if needing.isEmpty { return groups }
        var index: [Int64: [Int]] = [:]
        for (offset, row) in rows.enumerated() where row.hasCustom { index[row.key, default: []].append(offset) }
        try await session.rows(
            "SELECT group_key, key, value FROM group_custom WHERE app_id = ? AND group_key = ANY(?)",
            [.text(app), .integers(Array(Set(needing)))]
        ) { row in
            guard let offsets = index[try row.int64(0)] else { return }
            let key = try row.text(1)
            let value = try row.blob(2)
            for offset in offsets { groups[offset].custom[key] = value }
        }
        return groups
    }

    /// The members of `rows` (all of group `groupKey` of `app`), in order, with their custom fields.
    static func withCustom(_ rows: [Rows.MemberRow], app: String, groupKey: Int64, session: PostgresSession) async throws -> [Member] {
        var members = rows.map(\.member)
        let needing = rows.filter(\.hasCustom).map(\.member.userID)
        if needing.isEmpty { return members }
        var index: [String: [Int]] = [:]
        for (offset, row) in rows.enumerated() where row.hasCustom {
            index[row.member.userID, default: []].append(offset)
        }
        try await session.rows(
            "SELECT user_id, key, value FROM member_custom WHERE app_id = ? AND group_key = ? AND user_id = ANY(?)",
            [.text(app), .integer(groupKey), .texts(Array(Set(needing)))]
        ) { row in
            guard let offsets = index[try row.text(0)] else { return }
            let key = try row.text(1)
            let value = try row.blob(2)
            for offset in offsets { members[offset].custom[key] = value }
        }
        return members
    }

    /// One user's memberships `rows` (of several groups of `app`), in order, with their custom fields.
    static func withCustom(_ rows: [Rows.MemberRow], app: String, userID: String, session: PostgresSession) async throws -> [Member] {
        var members = rows.map(\.member)
        let needing = rows.filter(\.hasCustom).map(\.groupKey)
        if needing.isEmpty { return members }
        var index: [Int64: [Int]] = [:]
        for (offset, row) in rows.enumerated() where row.hasCustom { index[row.groupKey, default: []].append(offset) }
        try await session.rows(
            "SELECT group_key, key, value FROM member_custom WHERE app_id = ? AND user_id = ? AND group_key = ANY(?)",
            [.text(app), .text(userID), .integers(Array(Set(needing)))]
        ) { row in
            guard let offsets = index[try row.int64(0)] else { return }
            let key = try row.text(1)
            let value = try row.blob(2)
            for offset in offsets { members[offset].custom[key] = value }
        }
        return members
    }

    /// Members of one group of `app` by user id, with custom fields (users who are not members
    /// are absent).
    static func members(app: String, groupKey: Int64, userIDs: [String], session: PostgresSession) async throws -> [String: Member] {
        let userIDs = userIDs.count > 1 ? Array(Set(userIDs)) : userIDs
        if userIDs.isEmpty { return [:] }
        var rows: [Rows.MemberRow] = []
        try await session.rows(
            """
            SELECT \(Rows.memberColumns) FROM members m
            WHERE m.app_id = ? AND m.group_key = ? AND m.user_id = ANY(?)
            """,
            [.text(app), .integer(groupKey), .texts(userIDs)]
        ) { rows.append(try Rows.member($0)) }
        var result: [String: Member] = [:]
        for member in try await withCustom(rows, app: app, groupKey: groupKey, session: session) { result[member.userID] = member }
        return result
    }
}

extension PostgresBackend {
    public func bans(app: String, groupID: String, after cursor: String?, limit: Int, now: Timestamp) async throws -> Page<GroupBan> {
        try await read { session in
            let key = try await PostgresRows.groupKey(app: app, groupID: groupID, session: session)
            var items: [GroupBan] = []
            try await session.rows(
                """
                SELECT \(BanRows.columns) FROM group_bans
                WHERE app_id = ? AND group_key = ? AND (until_ms IS NULL OR until_ms > ?) AND user_id COLLATE "C" > ?
                ORDER BY user_id COLLATE "C" LIMIT ?
                """,
                [.text(app), .integer(key), .integer(now.millisecondsSince1970), .text(cursor ?? ""), .int(limit + 1)]
            ) { items.append(try BanRows.ban($0)) }
            var next: String?
            if items.count > limit {
                items.removeLast(items.count - limit)
                next = items.last?.userID
            }
            return Page(items: items, next: next)
        }
    }
}

/// A read of groups by id (``PostgresBackend/groups(app:ids:)``).
struct GroupIDsRead: Sendable {
    var app: String
    var ids: [String]
}

/// A user's view of groups by id (``PostgresBackend/groupsForUser(app:userID:ids:)``).
struct UserGroupsRead: Sendable {
    var app: String
    var userID: String
    var ids: [String]
}
