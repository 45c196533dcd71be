import Foundation
import GRDB
public import GroupModel

/// ``GroupOperationStore`` over SQLite (issue 3).
///
/// - ``mutateGroup(app:groupID:operatorID:targets:at:plan:)`` runs in one write transaction:
///   snapshot, plan, apply, events. The group's cache record is invalidated (`changesGroups`)
///   by every change that writes anything; an empty change writes nothing.
/// - Listings page with opaque cursors (base-36 numbers joined by `.`):
///   members by `join_order` (plus the group's `next_join_order` when the listing began, so a
///   user who quits and rejoins during a listing is not listed twice), joined groups by
///   `(joined_at, group_key)` descending, search results by `group_key`.
extension SQLiteGroupStore: GroupOperationStore {
    // MARK: Mutations

    public func mutateGroup<Value: Sendable>(
        app: String, groupID: String, operatorID: String?, targets: [String], at time: Timestamp,
        plan: @escaping @Sendable (GroupSnapshot) throws -> (GroupChange, Value)
    ) async throws -> Committed<(value: Value, group: Group)> {
        try await self.run { [commits] in
            try await commits.write { db in
                let loaded = try Operations.loadSnapshot(
                    app: app, groupID: groupID, operatorID: operatorID, targets: targets, time: time, db: db)
                let (change, value) = try plan(loaded.snapshot)
                let before = loaded.snapshot.group
                if change.isEmpty {
                    return Committed(value: (value: value, group: before), events: [])
                }
                self.changesGroups([GroupCache.Key(app: app, id: groupID)], in: db)
                let events = try Operations.apply(change, to: loaded, time: time, memberOrigin: self.storesMemberOrigin, db: db)
                try self.injectedFault("mutateGroup")
                var group = change.group
                group.appID = before.appID
                group.id = before.id
                group.type = before.type
                group.createdAt = before.createdAt
                group.latestSequence = events.last?.sequence ?? before.latestSequence
                return Committed(value: (value: value, group: group), events: events)
            }
        }
    }

    public func setRemark(app: String, groupID: String, plan: RemarkPlan, at time: Timestamp) async throws -> [GroupEvent] {
        try await self.run { [commits] in
            try await commits.write { db in
                guard let row = try Row.fetchOne(
                    db.cachedStatement(
                        sql: "SELECT group_key, latest_seq FROM groups WHERE app_id = ? AND group_id = ? AND dismissed_at IS NULL"),
                    arguments: [app, groupID])
                else { throw GroupError.groupNotFound(groupID) }
                let groupKey: Int64 = try row.decode(atIndex: 0)
                let latest: Int64 = try row.decode(atIndex: 1)
                if let remark = plan.remark {
                    try db.cachedStatement(
                        sql: """
                            INSERT INTO group_remarks (app_id, user_id, group_key, remark, updated_at)
                            VALUES (?, ?, ?, ?, ?)
                            ON CONFLICT (app_id, user_id, group_key)
                            DO UPDATE SET remark = excluded.remark, updated_at = excluded.updated_at
                            """
                    ).execute(arguments: [app, plan.userID, groupKey, remark, time.millisecondsSince1970])
                } else {
                    try db.cachedStatement(
                        sql: "DELETE FROM group_remarks WHERE app_id = ? AND user_id = ? AND group_key = ?"
                    ).execute(arguments: [app, plan.userID, groupKey])
                }
                var events: [GroupEvent] = []
                if !plan.events.isEmpty {
                    self.changesGroups([GroupCache.Key(app: app, id: groupID)], in: db)
                    events = try Rows.appendEvents(
                        plan.events, groupKey: groupKey, appID: app, groupID: groupID, after: latest, time: time, db: db)
                }
                try self.injectedFault("setRemark")
                return events
            }
        }
    }

    // MARK: Reads

    public func remark(app: String, groupID: String, userID: String) async throws -> String {
        try await self.run { [pool] in
            try await pool.read { db in
                guard let row = try Row.fetchOne(
                    db.cachedStatement(
                        sql: """
                            SELECT g.group_key, r.remark FROM groups g
                            LEFT JOIN group_remarks r
                                ON r.app_id = g.app_id AND r.user_id = ? AND r.group_key = g.group_key
                            WHERE g.app_id = ? AND g.group_id = ? AND g.dismissed_at IS NULL
                            """),
                    arguments: [userID, app, groupID])
                else { throw GroupError.groupNotFound(groupID) }
                return try row.decode(String?.self, atIndex: 1) ?? ""
            }
        }
    }

    public func listMembers(
        app: String, groupID: String, filter: MemberListFilter, after cursor: String?, limit: Int
    ) async throws -> Page<Member> {
        let position = try cursor.map { try Cursor.decode($0, count: 2) }
        let limit = max(1, limit)
        return try await self.run { [pool] in
            try await pool.read { db in
                guard let row = try Row.fetchOne(
                    db.cachedStatement(
                        sql: """
                            SELECT group_key, next_join_order FROM groups
                            WHERE app_id = ? AND group_id = ? AND dismissed_at IS NULL
                            """),
                    arguments: [app, groupID])
                else { throw GroupError.groupNotFound(groupID) }
                let groupKey: Int64 = try row.decode(atIndex: 0)
                let after = position?[0] ?? 0
                // Only members who joined before the listing began: a later (re)join is not
                // listed, so nobody appears twice.
                let mark = try position?[1] ?? row.decode(Int64.self, atIndex: 1)
                let statement: Statement
                var arguments: [any DatabaseValueConvertible] = [groupKey]
                switch filter {
                case .all:
                    statement = try db.cachedStatement(
                        sql: """
                            SELECT \(Rows.memberColumns) FROM members m
                            WHERE m.group_key = ? AND m.join_order > ? AND m.join_order < ?
                            ORDER BY m.join_order LIMIT ?
                            """)
                case .owner, .admins, .ordinary:
                    statement = try db.cachedStatement(
                        sql: """
                            SELECT \(Rows.memberColumns) FROM members m
                            WHERE m.group_key = ? AND m.role = ? AND m.join_order > ? AND m.join_order < ?
                            ORDER BY m.join_order LIMIT ?
                            """)
                    arguments.append(filter.roles.first!.rawValue)
                }
                arguments += [after, mark, limit + 1]
                var rows = try Rows.MemberRow.fetchAll(statement, arguments: StatementArguments(arguments))
                var next: String?
                if rows.count > limit {
                    rows.removeLast(rows.count - limit)
                    next = Cursor.encode([rows[limit - 1].member.joinOrder, mark])
                }
                let members = try Operations.withCustom(rows, groupKey: groupKey, db: db)
                return Page(items: members, next: next)
            }
        }
    }

    public func members(app: String, groupID: String, userIDs: [String]) async throws -> [String: Member] {
        try await self.run { [pool] in
            try await pool.read { db in
                let groupKey = try Rows.groupKey(db, app: app, groupID: groupID)
                return try Operations.members(groupKey: groupKey, userIDs: userIDs, db: db)
            }
        }
    }

    public func joinedGroups(app: String, userID: String, after cursor: String?, limit: Int) async throws -> Page<JoinedGroup> {
        let position = try cursor.map { try Cursor.decode($0, count: 2) }
        let limit = max(1, limit)
        return try await self.run { [pool] in
            try await pool.read { db in
                let select = """
                    SELECT \(Rows.GroupColumn.list(table: "g")), \(Rows.memberColumns), r.remark
                    FROM members m
                    JOIN groups g ON g.group_key = m.group_key
                    LEFT JOIN group_remarks r
                        ON r.app_id = m.app_id AND r.user_id = m.user_id AND r.group_key = m.group_key
                    WHERE m.app_id = ? AND m.user_id = ? AND g.dismissed_at IS NULL AND g.type <> 'AVChatRoom'
                    """
                let rows: RowCursor
                if let position {
                    rows = try Row.fetchCursor(
                        db.cachedStatement(
                            sql: select + """

                                  AND (m.joined_at < ? OR (m.joined_at = ? AND m.group_key < ?))
                                ORDER BY m.joined_at DESC, m.group_key DESC LIMIT ?
                                """),
                        arguments: [app, userID, position[0], position[0], position[1], limit + 1])
                } else {
                    rows = try Row.fetchCursor(
                        db.cachedStatement(sql: select + "\nORDER BY m.joined_at DESC, m.group_key DESC LIMIT ?"),
                        arguments: [app, userID, limit + 1])
                }
                let memberOffset = Rows.GroupColumn.allCases.count
                var groups: [Rows.GroupRow] = []
                var memberships: [Rows.MemberRow] = []
                var remarks: [String] = []
                while let row = try rows.next() {
                    groups.append(try Rows.group(row))
                    memberships.append(try Rows.member(row, at: memberOffset))
                    remarks.append(try row.decode(String?.self, atIndex: memberOffset + Rows.memberColumnCount) ?? "")
                }
                var next: String?
                if groups.count > limit {
                    groups.removeLast(groups.count - limit)
                    memberships.removeLast(memberships.count - limit)
                    remarks.removeLast(remarks.count - limit)
                    next = Cursor.encode([memberships[limit - 1].member.joinedAt.millisecondsSince1970, groups[limit - 1].key])
                }
                let full = try Operations.withCustom(groups, db: db)
                let members = try Operations.withCustom(memberships, userID: userID, db: db)
                let items = (0..<full.count).map {
                    JoinedGroup(group: full[$0], membership: members[$0], remark: remarks[$0])
                }
                return Page(items: items, next: next)
            }
        }
    }

    public func searchGroups(
        app: String, keyword: String, userID: String?, matchNameCards: Bool, after cursor: String?, limit: Int
    ) async throws -> Page<Group> {
        if keyword.isEmpty { throw GroupError.invalidArgument(field: "keyword", "the search keyword must not be empty") }
        let after = try cursor.map { try Cursor.decode($0, count: 1)[0] } ?? 0
        let limit = max(1, limit)
        let long = keyword.unicodeScalars.count >= 3
        let pattern = "%" + Operations.escapeLike(keyword) + "%"
        let phrase = "\"" + keyword.replacingOccurrences(of: "\"", with: "\"\"") + "\""
        var candidates = ["SELECT group_key FROM groups WHERE app_id = :app AND group_id = :keyword"]
        if long {
            candidates.append("SELECT rowid FROM group_name_search WHERE group_name_search MATCH :phrase")
        } else {
            candidates.append("SELECT group_key FROM groups WHERE app_id = :app AND name LIKE :pattern ESCAPE '\\'")
        }
        var visibility = ""
        if userID != nil {
            visibility = """
                AND (g.type IN ('Public', 'Meeting', 'AVChatRoom')
                     OR EXISTS (SELECT 1 FROM members v WHERE v.group_key = g.group_key AND v.user_id = :user))
                """
            if matchNameCards {
                candidates.append("""
                    SELECT m.group_key FROM members m
                    WHERE m.app_id = :app AND m.user_id = :user AND EXISTS (
                        SELECT 1 FROM members c
                        WHERE c.group_key = m.group_key AND c.name_card <> '' AND c.name_card LIKE :pattern ESCAPE '\\')
                    """)
            }
        }
        // `+g.app_id`: the candidate keys drive the query (not a scan of the app's groups).
        let sql = """
            SELECT \(Rows.GroupColumn.list(table: "g")) FROM groups g
            WHERE g.group_key IN (\(candidates.joined(separator: "\nUNION ALL\n")))
              AND +g.app_id = :app AND g.dismissed_at IS NULL AND g.group_key > :after
              \(visibility)
            ORDER BY g.group_key LIMIT :limit
            """
        let usesPattern = sql.contains(":pattern")
        let usesPhrase = sql.contains(":phrase")
        return try await self.run { [pool] in
            try await pool.read { db in
                var arguments: [String: (any DatabaseValueConvertible)?] = [
                    "app": app, "keyword": keyword, "after": after, "limit": limit + 1,
                ]
                if let userID { arguments["user"] = userID }
                if usesPattern { arguments["pattern"] = pattern }
                if usesPhrase { arguments["phrase"] = phrase }
                var rows = try Row.fetchAll(db.cachedStatement(sql: sql), arguments: StatementArguments(arguments))
                    .map { try Rows.group($0) }
                var next: String?
                if rows.count > limit {
                    rows.removeLast(rows.count - limit)
                    next = Cursor.encode([rows[limit - 1].key])
                }
                return Page(items: try Operations.withCustom(rows, db: db), next: next)
            }
        }
    }
}

// MARK: - Creation with a limit check, counts, name-card matches

extension SQLiteGroupStore {
    public func createGroup<Value: Sendable>(
        _ plan: GroupCreationPlan,
        revise: @escaping @Sendable (_ joinedGroupCounts: [String: Int]) throws -> (GroupCreationPlan, Value)
    ) async throws -> Committed<(value: Value, group: Group)> {
        try await self.run { [commits] in
            try await commits.write { db in
                let counts = try Operations.joinedGroupCounts(
                    app: plan.group.appID, users: plan.members.map(\.userID), db: db)
                let (revised, value) = try revise(counts)
                let committed = try self.insertGroup(revised, db: db)
                return Committed(value: (value: value, group: committed.value), events: committed.events)
            }
        }
    }

    public func joinedGroupCount(app: String, userID: String, types: Set<GroupType>) async throws -> Int {
        let names = types.map(\.name).sorted()
        return try await self.run { [pool] in
            try await pool.read { db in
                var sql = """
                    SELECT COUNT(*) FROM members m JOIN groups g ON g.group_key = m.group_key
                    WHERE m.app_id = ? AND m.user_id = ? AND g.dismissed_at IS NULL
                    """
                var arguments: [any DatabaseValueConvertible] = [app, userID]
                if !names.isEmpty {
                    sql += " AND g.type IN (\(Rows.placeholders(names.count)))"
                    arguments += names.map { $0 as any DatabaseValueConvertible }
                }
                return try Int.fetchOne(db, sql: sql, arguments: StatementArguments(arguments)) ?? 0
            }
        }
    }

    public func nameCardMatches(
        app: String, groupIDs: [String], keyword: String, limit: Int
    ) async throws -> [String: [Member]] {
        let groupIDs = Array(Set(groupIDs))
        if groupIDs.isEmpty || keyword.isEmpty || limit < 1 { return [:] }
        let pattern = "%" + Operations.escapeLike(keyword) + "%"
        return try await self.run { [pool] in
            try await pool.read { db in
                let padded = Rows.padded(groupIDs)
                let keys = try Row.fetchAll(
                    db.cachedStatement(
                        sql: """
                            SELECT group_key, group_id FROM groups
                            WHERE app_id = ? AND group_id IN (\(Rows.placeholders(padded.count))) AND dismissed_at IS NULL
                            """),
                    arguments: StatementArguments([app] + padded))
                var result: [String: [Member]] = [:]
                for row in keys {
                    let groupKey: Int64 = try row.decode(atIndex: 0)
                    let rows = try Rows.MemberRow.fetchAll(
                        db.cachedStatement(
                            sql: """
                                SELECT \(Rows.memberColumns) FROM members m
                                WHERE m.group_key = ? AND m.name_card <> '' AND m.name_card LIKE ? ESCAPE '\\'
                                ORDER BY m.join_order LIMIT ?
                                """),
                        arguments: [groupKey, pattern, limit])
                    if rows.isEmpty { continue }
                    result[try row.decode(String.self, atIndex: 1)] = try Operations.withCustom(rows, groupKey: groupKey, db: db)
                }
                return result
            }
        }
    }
}

// MARK: - Cursors

/// Opaque page cursors: numbers in base 36 joined by `.`.
enum Cursor {
    static func encode(_ values: [Int64]) -> String {
        values.map { String($0, radix: 36) }.joined(separator: ".")
    }

    /// - Throws: `INVALID_ARGUMENT` naming `page_token` unless `text` holds exactly `count` numbers.
    static func decode(_ text: String, count: Int) throws -> [Int64] {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        let values = parts.compactMap { $0.count <= 14 ? Int64($0, radix: 36) : nil }
        guard parts.count == count, values.count == count else {
            throw GroupError.invalidArgument(field: "page_token", "the page token is not valid")
        }
        return values
    }
}

// MARK: - Snapshot and apply

/// The SQL of ``SQLiteGroupStore``'s operations, run inside the caller's transaction.
enum Operations {
    /// A snapshot and what applying a change needs besides it.
    struct Loaded {
        var snapshot: GroupSnapshot
        var groupKey: Int64
        /// Every member row the snapshot read (operator, targets, owner, successor), with custom fields.
        var members: [String: Member]
    }

    static func loadSnapshot(
        app: String, groupID: String, operatorID: String?, targets: [String], time: Timestamp, db: Database
    ) throws -> Loaded {
        let read = try Rows.liveGroup(db, app: app, groupID: groupID)
        let group = try withCustom([read], db: db)[0]
        let groupKey = read.key

        var people = targets
        if let operatorID { people.append(operatorID) }
        let users = Array(Set(people))
        var wanted = Set(users)
        if let owner = group.ownerID { wanted.insert(owner) }
        var members = try self.members(groupKey: groupKey, userIDs: Array(wanted), db: db)

        let successorRows = try Rows.MemberRow.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT \(Rows.memberColumns) FROM members m
                    WHERE m.group_key = ? AND m.user_id <> ? ORDER BY m.join_order LIMIT 1
                    """),
            arguments: [groupKey, operatorID ?? ""])
        let successor = try withCustom(successorRows, groupKey: groupKey, db: db).first
        if let successor { members[successor.userID] = successor }

        var counts: [String: Int] = [:]
        var retained: [String: Timestamp] = [:]
        if !users.isEmpty {
            let padded = Rows.padded(users)
            counts = try joinedGroupCounts(app: app, users: users, db: db)
            let muteRows = try Row.fetchCursor(
                db.cachedStatement(
                    sql: """
                        SELECT user_id, muted_until FROM retained_mutes
                        WHERE group_key = ? AND muted_until > ? AND user_id IN (\(Rows.placeholders(padded.count)))
                        """),
                arguments: StatementArguments([groupKey, time.millisecondsSince1970] + padded.map { $0 as any DatabaseValueConvertible }))
            while let row = try muteRows.next() {
                retained[try row.decode(String.self, atIndex: 0)] =
                    Timestamp(millisecondsSince1970: try row.decode(Int64.self, atIndex: 1))
            }
        }

        var targetMembers: [String: Member] = [:]
        for user in targets { if let member = members[user] { targetMembers[user] = member } }
        let snapshot = GroupSnapshot(
            group: group, operatorMembership: operatorID.flatMap { members[$0] }, targets: targetMembers,
            owner: group.ownerID.flatMap { members[$0] }, successor: successor, joinedGroupCounts: counts,
            retainedMutes: retained)
        return Loaded(snapshot: snapshot, groupKey: groupKey, members: members)
    }

    /// Per user (0 when none), how many undismissed groups of the app other than AVChatRooms they are in.
    static func joinedGroupCounts(app: String, users: [String], db: Database) throws -> [String: Int] {
        var counts: [String: Int] = [:]
        if users.isEmpty { return counts }
        for user in users { counts[user] = 0 }
        let padded = Rows.padded(Array(Set(users)))
        let countRows = try Row.fetchCursor(
            db.cachedStatement(
                sql: """
                    SELECT m.user_id, COUNT(*) FROM members m JOIN groups g ON g.group_key = m.group_key
                    WHERE m.app_id = ? AND m.user_id IN (\(Rows.placeholders(padded.count)))
                      AND g.dismissed_at IS NULL AND g.type <> 'AVChatRoom'
                    GROUP BY m.user_id
                    """),
            arguments: StatementArguments([app] + padded))
        while let row = try countRows.next() {
            counts[try row.decode(String.self, atIndex: 0)] = try row.decode(Int.self, atIndex: 1)
        }
        return counts
    }

    /// Write `change` (not empty) and its events; returns the numbered events.
    static func apply(
        _ change: GroupChange, to loaded: Loaded, time: Timestamp, memberOrigin: Bool, db: Database
    ) throws -> [GroupEvent] {
        let key = loaded.groupKey
        let before = loaded.snapshot.group
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
            try db.cachedStatement(sql: "DELETE FROM members WHERE group_key = ? AND user_id = ?")
                .execute(arguments: [key, user])
        }

        for member in change.updatedMembers {
            try db.cachedStatement(
                sql: """
                    UPDATE members SET role = ?, name_card = ?, muted_until = ?, receive_option = ?
                    WHERE group_key = ? AND user_id = ?
                    """
            ).execute(arguments: [
                member.role.rawValue, member.nameCard, member.mutedUntil?.millisecondsSince1970,
                member.receiveOption.rawValue, key, member.userID,
            ])
            guard db.changesCount == 1 else {
                throw GroupError.internal("the change updates \(member.userID), who is not a member")
            }
            let old = try loaded.members[member.userID]?.custom ?? memberCustom(groupKey: key, userID: member.userID, db: db)
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
            var next = try Int64.fetchOne(
                db.cachedStatement(sql: "SELECT next_join_order FROM groups WHERE group_key = ?"), arguments: [key]) ?? 1
            for var member in change.insertedMembers {
                member.joinOrder = next
                next += 1
                if let sequence = joinSequences[member.userID] { member.joinSequence = sequence }
                try Rows.insert(member, groupKey: key, appID: before.appID, origin: memberOrigin, db: db)
                try db.cachedStatement(sql: "DELETE FROM retained_mutes WHERE group_key = ? AND user_id = ?")
                    .execute(arguments: [key, member.userID])
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

        let settings = after.settings
        let (mode, roles) = Rows.encode(after.mute.mode)
        try db.cachedStatement(
            sql: """
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
        ).execute(arguments: [
            after.introduction, after.notification, after.faceURL, after.ownerID, after.maxMembers,
            after.memberCount, settings.joinOption.rawValue, settings.joinApprovers.rawValue,
            settings.invitePermission.rawValue, settings.inviteeMustAccept, settings.invitationNeedsApproval,
            settings.removeMembersPermission.rawValue, settings.editProfilePermission.rawValue,
            settings.editMemberInfoPermission.rawValue, mode, roles, after.mute.until?.millisecondsSince1970,
            after.updatedAt.millisecondsSince1970, nextJoinOrder, change.dismissesGroup, ms, key,
        ])
        // Set apart: the name search trigger re-indexes on any UPDATE OF name.
        if after.name != before.name {
            try db.cachedStatement(sql: "UPDATE groups SET name = ? WHERE group_key = ?")
                .execute(arguments: [after.name, key])
        }
        if after.custom != before.custom {
            for name in before.custom.keys where after.custom[name] == nil {
                try db.cachedStatement(sql: "DELETE FROM group_custom WHERE group_key = ? AND key = ?")
                    .execute(arguments: [key, name])
            }
            for (name, value) in after.custom where before.custom[name] != value {
                try db.cachedStatement(
                    sql: """
                        INSERT INTO group_custom (group_key, key, value) VALUES (?, ?, ?)
                        ON CONFLICT (group_key, key) DO UPDATE SET value = excluded.value
                        """
                ).execute(arguments: [key, name, Data(value)])
            }
        }

        return try Rows.appendEvents(
            change.events, groupKey: key, appID: before.appID, groupID: before.id, after: before.latestSequence,
            time: time, db: db)
    }

    // MARK: Reading rows

    /// Members of one group by user id, with custom fields.
    static func members(groupKey: Int64, userIDs: [String], db: Database) throws -> [String: Member] {
        let userIDs = userIDs.count > 1 ? Array(Set(userIDs)) : userIDs
        if userIDs.isEmpty { return [:] }
        let padded = Rows.padded(userIDs)
        let rows = try Rows.MemberRow.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT \(Rows.memberColumns) FROM members m
                    WHERE m.group_key = ? AND m.user_id IN (\(Rows.placeholders(padded.count)))
                    """),
            arguments: StatementArguments([groupKey] + padded.map { $0 as any DatabaseValueConvertible }))
        var result: [String: Member] = [:]
        for member in try withCustom(rows, groupKey: groupKey, db: db) { result[member.userID] = member }
        return result
    }

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

    /// `text` with LIKE's wildcards and the escape character (`\`) escaped.
    static func escapeLike(_ text: String) -> String {
        var escaped = ""
        for character in text {
            if character == "\\" || character == "%" || character == "_" { escaped.append("\\") }
            escaped.append(character)
        }
        return escaped
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
