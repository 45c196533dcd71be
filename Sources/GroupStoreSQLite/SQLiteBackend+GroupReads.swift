import Foundation
import GRDB
public import GroupModel
import GroupStore
import GroupStoreSQL

/// Group and member reads over SQLite, each one read transaction on a reader connection.
///
/// Listings page with opaque cursors (base-36 numbers joined by `.`): members by `join_order`
/// (plus the group's `next_join_order` when the listing began, so a user who quits and rejoins
/// during a listing is not listed twice), joined groups by `(joined_at, group_key)` descending,
/// search results by `group_key`.
extension SQLiteBackend {
    public func topics(app: String, communities: [String]) async throws -> [String: [Group]] {
        if communities.isEmpty || !storesTopics { return [:] }
        return try await pool.read { db in
            let padded = Rows.padded(communities)
            var read: [(community: String, row: Rows.GroupRow)] = []
            // Raw rows: a member of many communities lists a thousand topics.
            try RawStatement(
                db,
                """
                SELECT c.group_id, \(Rows.topicColumns) FROM groups c
                JOIN groups t ON t.parent_key = c.group_key AND t.dismissed_at IS NULL
                WHERE c.app_id = ? AND c.group_id IN (\(Rows.placeholders(padded.count))) AND c.dismissed_at IS NULL
                ORDER BY c.group_key, t.created_at, t.group_id
                """
            ).rows([.text(app)] + padded.map { .text($0) }) { row in
                read.append((row.text(0), try Rows.topic(OffsetRow(row: row, offset: 1))))
            }
            let groups = try Operations.withCustom(read.map(\.row), db: db)
            var topics: [String: [Group]] = [:]
            for (entry, group) in zip(read, groups) { topics[entry.community, default: []].append(group) }
            return topics
        }
    }

    public func joinedTopics(app: String, userID: String, communities: [String]) async throws -> [String: [JoinedTopic]] {
        if communities.isEmpty || !storesTopics { return [:] }
        return try await pool.read { db in
            let padded = Rows.padded(communities)
            var read: [(community: String, row: Rows.GroupRow, state: ReadState)] = []
            try RawStatement(
                db,
                """
                SELECT c.group_id, \(Rows.topicColumns), \(TopicReads.stateColumns) FROM groups c
                JOIN members m ON m.group_key = c.group_key AND m.user_id = ?
                JOIN groups t ON t.parent_key = c.group_key AND t.dismissed_at IS NULL
                LEFT JOIN topic_reads r ON r.topic_key = t.group_key AND r.user_id = m.user_id
                WHERE c.app_id = ? AND c.group_id IN (\(Rows.placeholders(padded.count))) AND c.dismissed_at IS NULL
                ORDER BY c.group_key, t.created_at, t.group_id
                """
            ).rows([.text(userID), .text(app)] + padded.map { .text($0) }) { row in
                let topic = try Rows.topic(OffsetRow(row: row, offset: 1))
                read.append((row.text(0), topic, TopicReads.state(row, at: 1 + Rows.topicColumnCount)))
            }
            let groups = try Operations.withCustom(read.map(\.row), db: db)
            var topics: [String: [JoinedTopic]] = [:]
            for (entry, group) in zip(read, groups) {
                topics[entry.community, default: []].append(JoinedTopic(topic: group, read: entry.state))
            }
            return topics
        }
    }

    public func groups(app: String, ids: [String]) async throws -> [String: Group] {
        let ownerSettings = storesOwnerSettings
        return try await pool.read { db in try Self.readGroups(app: app, ids: ids, ownerSettings: ownerSettings, db: db) }
    }

    /// The `SELECT` of ``readGroups(app:ids:ownerSettings:db:)`` for `count` ids (a padded count).
    private static func groupsSQL(count: Int, ownerSettings: Bool) -> String {
        if !ownerSettings { return makeGroupsSQL(count: count, ownerSettings: false) }
        if count <= 64, count.nonzeroBitCount == 1 { return groupsSQLByPowerOfTwo[count.trailingZeroBitCount] }
        return makeGroupsSQL(count: count)
    }

    private static let groupsSQLByPowerOfTwo = (0...6).map { makeGroupsSQL(count: 1 << $0) }

    private static func makeGroupsSQL(count: Int, ownerSettings: Bool = true) -> String {
        """
        SELECT \(Rows.GroupColumn.list(ownerSettings: ownerSettings)) FROM groups
        WHERE app_id = ? AND group_id IN (\(Rows.placeholders(count))) AND dismissed_at IS NULL
        """
    }

    /// Read groups (not dismissed) with their custom fields, in the caller's transaction.
    private static func readGroups(app: String, ids: [String], ownerSettings: Bool, db: Database) throws -> [String: Group] {
        let padded = Rows.padded(ids)
        let statement = try db.cachedStatement(sql: groupsSQL(count: padded.count, ownerSettings: ownerSettings))
        let rows = try Row.fetchCursor(statement, arguments: StatementArguments([app] + padded))
        var result: [String: Group] = [:]
        result.reserveCapacity(ids.count)
        var idByKey: [Int64: String] = [:]
        while let row = try rows.next() {
            let read = try Rows.group(row)
            result[read.group.id] = read.group
            if read.hasCustom { idByKey[read.key] = read.group.id }
        }
        if !idByKey.isEmpty {
            let keys = Rows.padded(Array(idByKey.keys))
            let statement = try db.cachedStatement(
                sql: "SELECT group_key, key, value FROM group_custom WHERE group_key IN (\(Rows.placeholders(keys.count)))")
            let customRows = try Row.fetchCursor(statement, arguments: StatementArguments(keys))
            while let row = try customRows.next() {
                guard let id = idByKey[try row.decode(atIndex: 0)] else { continue }
                let value: Data = try row.decode(atIndex: 2)
                result[id]?.custom[try row.decode(String.self, atIndex: 1)] = [UInt8](value)
            }
        }
        return result
    }

    public func memberships(app: String, userID: String, groupIDs: [String]) async throws -> [String: Member] {
        try await pool.read { db in try Self.memberships(app: app, userID: userID, groupIDs: groupIDs, db: db) }
    }

    /// ``memberships(app:userID:groupIDs:)`` inside a read.
    static func memberships(app: String, userID: String, groupIDs: [String], db: Database) throws -> [String: Member] {
        let padded = Rows.padded(groupIDs)
        let statement = try db.cachedStatement(
            sql: """
                SELECT g.group_id, \(Rows.memberColumns) FROM groups g
                JOIN members m ON m.group_key = g.group_key AND m.user_id = ?
                WHERE g.app_id = ? AND g.group_id IN (\(Rows.placeholders(padded.count)))
                  AND g.dismissed_at IS NULL
                """)
        let rows = try Row.fetchCursor(statement, arguments: StatementArguments([userID, app] + padded))
        var result: [String: Member] = [:]
        var groupIDByKey: [Int64: String] = [:]
        while let row = try rows.next() {
            let groupID: String = try row.decode(atIndex: 0)
            let read = try Rows.member(row, at: 1)
            result[groupID] = read.member
            if read.hasCustom { groupIDByKey[read.groupKey] = groupID }
        }
        if !groupIDByKey.isEmpty {
            let keys = Rows.padded(Array(groupIDByKey.keys))
            let statement = try db.cachedStatement(
                sql: """
                    SELECT group_key, key, value FROM member_custom
                    WHERE user_id = ? AND group_key IN (\(Rows.placeholders(keys.count)))
                    """)
            let customRows = try Row.fetchCursor(
                statement,
                arguments: StatementArguments([userID] + keys.map { $0 as any DatabaseValueConvertible }))
            while let row = try customRows.next() {
                guard let groupID = groupIDByKey[try row.decode(atIndex: 0)] else { continue }
                let value: Data = try row.decode(atIndex: 2)
                result[groupID]?.custom[try row.decode(String.self, atIndex: 1)] = [UInt8](value)
            }
        }
        return result
    }

    public func remark(app: String, groupID: String, userID: String) async throws -> String {
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

    public func permissionAssignments(app: String, groupID: String) async throws -> [PermissionAssignment] {
        try await pool.read { db in
            let key = try Rows.groupKey(db, app: app, groupID: groupID)
            // The partial index `members_in_permission_groups` holds only these rows.
            return try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT user_id, permission_groups FROM members
                        WHERE group_key = ? AND permission_groups IS NOT NULL ORDER BY user_id
                        """),
                arguments: [key]
            ).map { row in
                PermissionAssignment(
                    userID: row[0], permissionGroups: PermissionGroupCoding.decodeAssignments(row[1] as String?))
            }
        }
    }

    public func attributes(app: String, groupID: String) async throws -> GroupAttributeSet {
        try await pool.read { db in
            let key = try Rows.groupKey(db, app: app, groupID: groupID)
            return try AttributeRows.load(db, groupKey: key)
        }
    }

    public func inviteLink(app: String, tokenHash: String) async throws -> InviteLink? {
        try await pool.read { db in try InviteLinkRows.one(db, app: app, key: .tokenHash(tokenHash)) }
    }

    public func inviteLinks(app: String, groupID: String, now: Timestamp) async throws -> [InviteLink] {
        try await pool.read { db in
            let key = try Rows.groupKey(db, app: app, groupID: groupID)
            return try InviteLinkRows.live(db, groupKey: key, now: now)
        }
    }

    public func remarks(app: String, userID: String, groupIDs: [String]) async throws -> [String: String] {
        try await pool.read { db in try Self.remarks(app: app, userID: userID, groupIDs: groupIDs, db: db) }
    }

    /// ``remarks(app:userID:groupIDs:)`` inside a read.
    static func remarks(app: String, userID: String, groupIDs: [String], db: Database) throws -> [String: String] {
        let padded = Rows.padded(groupIDs)
        let statement = try db.cachedStatement(
            sql: """
                SELECT g.group_id, r.remark FROM groups g
                JOIN group_remarks r ON r.app_id = g.app_id AND r.user_id = ? AND r.group_key = g.group_key
                WHERE g.app_id = ? AND g.group_id IN (\(Rows.placeholders(padded.count)))
                  AND g.dismissed_at IS NULL
                """)
        var result: [String: String] = [:]
        let rows = try Row.fetchCursor(statement, arguments: StatementArguments([userID, app] + padded))
        while let row = try rows.next() {
            result[try row.decode(String.self, atIndex: 0)] = try row.decode(String.self, atIndex: 1)
        }
        return result
    }

    /// The user's view of `groups` (read through the store's group cache): memberships, remarks
    /// and unread mentions in one read, with every view asked meanwhile (``userViews``: three
    /// reads of their own before, each a turn of the pool's queues).
    public func userView(app: String, userID: String, of groups: [String: Group]) async throws -> GroupsForUser {
        if groups.isEmpty { return GroupsForUser() }
        return try await userViews.read(SQLiteUserView(app: app, userID: userID, groups: groups))
    }

    /// One user's view inside a read.
    static func userView(_ view: SQLiteUserView, db: Database) throws -> GroupsForUser {
        let (app, userID, groups) = (view.app, view.userID, view.groups)
        let members = try memberships(app: app, userID: userID, groupIDs: Array(groups.keys), db: db)
        let remarkable = groups.values.filter { members[$0.id] != nil || $0.type == .avChatRoom }.map { $0.id }
        return GroupsForUser(
            groups: groups, memberships: members,
            remarks: remarkable.isEmpty ? [:] : try remarks(app: app, userID: userID, groupIDs: remarkable, db: db),
            unreadMentions: members.isEmpty ? [:] : try unreadMentions(app: app, userID: userID, groupIDs: Array(members.keys), db: db))
    }

    public func listMembers(
        app: String, groupID: String, filter: MemberListFilter, after cursor: String?, limit: Int
    ) async throws -> Page<Member> {
        let position = try cursor.map { try Cursor.decode($0, count: 2) }
        let limit = max(1, limit)
        return try await pool.read { db in
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

    public func members(app: String, groupID: String, userIDs: [String]) async throws -> [String: Member] {
        try await pool.read { db in
            let groupKey = try Rows.groupKey(db, app: app, groupID: groupID)
            return try Operations.members(groupKey: groupKey, userIDs: userIDs, db: db)
        }
    }

    public func joinedGroups(app: String, userID: String, after cursor: String?, limit: Int) async throws -> Page<JoinedGroup> {
        let position = try cursor.map { try Cursor.decode($0, count: 2) }
        let limit = max(1, limit)
        let ownerSettings = storesOwnerSettings
        return try await pool.read { db in
            let select = """
                SELECT \(Rows.GroupColumn.list(table: "g", ownerSettings: ownerSettings)), \(Rows.memberColumns), r.remark
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

    public func searchGroups(
        app: String, keyword: String, userID: String?, matchNameCards: Bool, after cursor: String?, limit: Int
    ) async throws -> Page<Group> {
        if keyword.isEmpty { throw GroupError.invalidArgument(field: "keyword", "the search keyword must not be empty") }
        let after = try cursor.map { try Cursor.decode($0, count: 1)[0] } ?? 0
        let limit = max(1, limit)
        let long = keyword.unicodeScalars.count >= 3
        let pattern = SQLDialect.containsPattern(keyword)
        let phrase = "\"" + keyword.replacingOccurrences(of: "\"", with: "\"\"") + "\""
        // The id: exact or prefix, one range of the (app_id, group_id) index in byte order.
        let idRange = PrefixRange(prefix: keyword)
        var candidates = [
            idRange.upper == nil
                ? "SELECT group_key FROM groups WHERE app_id = :app AND group_id >= :keyword"
                : "SELECT group_key FROM groups WHERE app_id = :app AND group_id >= :keyword AND group_id < :idEnd",
        ]
        if long {
            candidates.append("SELECT rowid FROM group_name_search WHERE group_name_search MATCH :phrase")
        } else {
            candidates.append("SELECT group_key FROM groups WHERE app_id = :app AND \(SQLDialect.sqlite.contains("name", ":pattern"))")
        }
        var visibility = ""
        if userID != nil {
            visibility = """
                AND (g.type <> 'Work'
                     OR EXISTS (SELECT 1 FROM members v WHERE v.group_key = g.group_key AND v.user_id = :user))
                """
            if matchNameCards {
                candidates.append("""
                    SELECT m.group_key FROM members m
                    WHERE m.app_id = :app AND m.user_id = :user AND EXISTS (
                        SELECT 1 FROM members c
                        WHERE c.group_key = m.group_key AND c.name_card <> '' AND \(SQLDialect.sqlite.contains("c.name_card", ":pattern")))
                    """)
            }
        }
        // `+g.app_id`: the candidate keys drive the query (not a scan of the app's groups).
        let sql = """
            SELECT \(Rows.GroupColumn.list(table: "g", ownerSettings: storesOwnerSettings)) FROM groups g
            WHERE g.group_key IN (\(candidates.joined(separator: "\nUNION ALL\n")))
              AND +g.app_id = :app AND g.dismissed_at IS NULL AND g.group_key > :after
              \(storesTopics ? "AND g.parent_key IS NULL" : "")
              \(visibility)
            ORDER BY g.group_key LIMIT :limit
            """
        let usesPattern = sql.contains(":pattern")
        let usesPhrase = sql.contains(":phrase")
        return try await pool.read { db in
            var arguments: [String: (any DatabaseValueConvertible)?] = [
                "app": app, "keyword": keyword, "after": after, "limit": limit + 1,
            ]
            if let userID { arguments["user"] = userID }
            if let end = idRange.upper { arguments["idEnd"] = end }
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

    public func joinedGroupCount(app: String, userID: String, types: Set<GroupType>) async throws -> Int {
        let names = types.map(\.name).sorted()
        return try await pool.read { db in
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

    public func nameCardMatches(
        app: String, groupIDs: [String], keyword: String, limit: Int
    ) async throws -> [String: [Member]] {
        let groupIDs = Array(Set(groupIDs))
        if groupIDs.isEmpty || keyword.isEmpty || limit < 1 { return [:] }
        let pattern = SQLDialect.containsPattern(keyword)
        return try await pool.read { db in
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
                            WHERE m.group_key = ? AND m.name_card <> '' AND \(SQLDialect.sqlite.contains("m.name_card"))
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

extension SQLiteBackend {
    public func bans(app: String, groupID: String, after cursor: String?, limit: Int, now: Timestamp) async throws -> Page<GroupBan> {
        try await pool.read { db in
            let key = try Rows.groupKey(db, app: app, groupID: groupID)
            var items = try BanRows.page(db, groupKey: key, after: cursor, limit: limit + 1, time: now)
            var next: String?
            if items.count > limit {
                items.removeLast(items.count - limit)
                next = items.last?.userID
            }
            return Page(items: items, next: next)
        }
    }
}

/// A user's view of groups the store read through its cache (``SQLiteBackend/userView(app:userID:of:)``).
struct SQLiteUserView: Sendable {
    var app: String
    var userID: String
    var groups: [String: Group]
}
