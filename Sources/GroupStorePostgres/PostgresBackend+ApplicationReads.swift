public import GroupModel
import GroupStore
import GroupStoreSQL

/// Application reads over PostgreSQL: listings newest first by `(created_at, app_key)`, with an
/// opaque cursor holding the last item's key and the app's highest `app_key` when the listing
/// began (as on SQLite, `SQLiteBackend+ApplicationReads.swift`).
extension PostgresBackend {
    public func application(app: String, id: String) async throws -> Application? {
        try await read { session in
            try await PostgresApplicationRows.fetchAll(
                session, where: "a.app_id = ? AND a.application_id = ?", arguments: [.text(app), .text(id)]
            ).first
        }
    }

    public func listApplications(
        app: String, query: ApplicationQuery, after cursor: String?, limit: Int
    ) async throws -> ApplicationListing {
        let position = try cursor.map { try Cursor.decode($0, count: 3) }
        let limit = max(1, limit)
        return try await read { session in
            let filter = PostgresApplicationRows.Filter(app: app, query: query)
            // The app's highest key: items created after the first page are left out. Keys come
            // from one sequence, so they follow creation; batches of different groups commit in
            // parallel, so an item whose batch commits just after the first page with a lower
            // key than the mark can still appear, on the page its creation time puts it (never
            // twice, never skipping another).
            let mark: Int64
            if let given = position?[2] {
                mark = given
            } else {
                mark = try await session.first(
                    "SELECT COALESCE(MAX(app_key), 0) FROM applications WHERE app_id = ?", [.text(app)], { try $0.int64(0) }) ?? 0
            }
            var arguments = filter.arguments
            arguments["mark"] = .integer(mark)
            arguments["limit"] = .int(limit + 1)
            var sql = """
                SELECT \(ApplicationRows.columns), \(filter.senderFlag), \(filter.inviteeFlag), \(filter.approverFlag)
                FROM \(PostgresApplicationRows.tables)
                WHERE \(filter.condition) AND a.app_key <= :mark
                """
            if let position {
                // `created_at < :created OR (created_at = :created AND app_key < :key)`.
                sql += " AND (a.created_at, a.app_key) < (:created, :key)"
                arguments["created"] = .integer(position[0])
                arguments["key"] = .integer(position[1])
            }
            sql += " ORDER BY a.created_at DESC, a.app_key DESC LIMIT :limit"
            let statement = try PostgresApplicationRows.positional(sql, arguments)
            var items: [ListedApplication] = []
            var keys: [Int64] = []
            let flags = ApplicationRows.columnCount
            try await session.rows(statement.sql, statement.arguments) { row in
                let (key, application, name) = try ApplicationRows.decode(row)
                var roles: Set<ApplicationRole> = []
                if try row.bool(flags) { roles.insert(.sender) }
                if try row.bool(flags + 1) { roles.insert(.invitee) }
                if try row.bool(flags + 2) { roles.insert(.approver) }
                items.append(ListedApplication(application: application, groupName: name, roles: roles))
                keys.append(key)
            }
            var next: String?
            if items.count > limit {
                items.removeLast(items.count - limit)
                next = Cursor.encode([items[limit - 1].application.createdAt.millisecondsSince1970, keys[limit - 1], mark])
            }
            var readTime: Timestamp?
            if let userID = query.userID {
                readTime = try await PostgresApplicationRows.readTime(app: app, userID: userID, session: session)
            }
            let unread = try await PostgresApplicationRows.unreadCount(filter, readTime: readTime, session: session)
            return ApplicationListing(page: Page(items: items, next: next), unreadCount: unread, readTime: readTime)
        }
    }

    public func groupsWithDueApplications(app: String, now: Timestamp, limit: Int) async throws -> [String] {
        try await read { session in
            var ids: [String] = []
            try await session.rows(
                """
                SELECT DISTINCT g.group_id FROM \(PostgresApplicationRows.tables)
                WHERE a.app_id = ? AND a.state = 'pending' AND a.expires_at <= ? AND g.dismissed_at IS NULL
                LIMIT ?
                """,
                [.text(app), .integer(now.millisecondsSince1970), .int(max(1, limit))]
            ) { ids.append(try $0.text(0)) }
            return ids
        }
    }
}

/// The SQL of the `applications` table over PostgreSQL, in the caller's transaction. Rows are
/// selected with `ApplicationRows.columns` and decoded by `ApplicationRows.decode(_:)`.
enum PostgresApplicationRows {
    /// The `FROM` of every read: the items with their groups (joined within the app).
    static let tables = "applications a JOIN groups g ON g.app_id = a.app_id AND g.group_key = a.group_key"

    /// The items matching `condition` (over ``tables``, with `?` placeholders), by `app_key`.
    static func fetchAll(_ session: PostgresSession, where condition: String, arguments: [PGValue]) async throws -> [Application] {
        var result: [Application] = []
        try await session.rows(
            "SELECT \(ApplicationRows.columns) FROM \(tables) WHERE \(condition) ORDER BY a.app_key", arguments
        ) { result.append(try ApplicationRows.decode($0).application) }
        return result
    }

    /// The WHERE clause of a listing (without paging) and its named arguments (`:app`, `:me`…,
    /// made positional by ``positional(_:_:)``), plus the SQL of the caller's three relations
    /// (boolean expressions).
    struct Filter {
        var condition: String
        var arguments: [String: PGValue]
        var senderFlag: String
        var inviteeFlag: String
        var approverFlag: String

        init(app: String, query: ApplicationQuery) {
            arguments = ["app": .text(app), "now": .integer(query.now.millisecondsSince1970)]
            var parts = ["g.dismissed_at IS NULL"]
            if let user = query.userID {
                arguments["me"] = .text(user)
                senderFlag = "(a.sender_id = :me)"
                inviteeFlag = """
                    (a.kind = 'invitation' AND a.subject_id = :me AND a.consent_state <> 'none'
                     AND a.approval_state IN ('none', 'accepted'))
                    """
                approverFlag = """
                    (a.approval_state <> 'none' AND EXISTS (
                        SELECT 1 FROM members am
                        WHERE am.app_id = a.app_id AND am.group_key = a.group_key AND am.user_id = :me
                          AND (am.role = 'owner' OR (am.role = 'admin' AND g.join_approvers = 'owner_and_admins'))))
                    """
                // The candidates, each branch through its own index (an OR would not use them).
                parts.append("""
                    a.app_id = :app AND a.app_key IN (
                        SELECT s.app_key FROM applications s WHERE s.app_id = :app AND s.sender_id = :me
                        UNION ALL
                        SELECT i.app_key FROM applications i WHERE i.app_id = :app AND i.subject_id = :me
                        UNION ALL
                        SELECT p.app_key FROM members cm
                        JOIN applications p ON p.app_id = cm.app_id AND p.group_key = cm.group_key
                        WHERE cm.app_id = :app AND cm.user_id = :me AND cm.role IN ('owner', 'admin'))
                    """)
            } else {
                parts.append("a.app_id = :app")
                senderFlag = "false"
                inviteeFlag = "false"
                approverFlag = "(a.approval_state <> 'none')"
            }
            let roles = query.roles.isEmpty ? Set(ApplicationRole.allCases) : query.roles
            var relation: [String] = []
            if roles.contains(.sender) { relation.append(senderFlag) }
            if roles.contains(.invitee) { relation.append(inviteeFlag) }
            if roles.contains(.approver) { relation.append(approverFlag) }
            parts.append("(" + relation.joined(separator: " OR ") + ")")
            if !query.kinds.isEmpty, query.kinds.count < ApplicationKind.allCases.count {
                parts.append("a.kind IN (" + query.kinds.map { "'\($0.rawValue)'" }.sorted().joined(separator: ", ") + ")")
            }
            if !query.states.isEmpty, query.states.count < ApplicationState.allCases.count {
                parts.append(
                    "(CASE WHEN a.state = 'pending' AND a.expires_at <= :now THEN 'expired' ELSE a.state END) IN ("
                        + query.states.map { "'\($0.rawValue)'" }.sorted().joined(separator: ", ") + ")")
            }
            if let group = query.groupID {
                arguments["group"] = .text(group)
                parts.append("g.group_id = :group")
            }
            condition = parts.joined(separator: " AND ")
        }
    }

    /// The user's read time of the app's items (`nil`: never reported).
    static func readTime(app: String, userID: String, session: PostgresSession) async throws -> Timestamp? {
        try await session.first(
            "SELECT read_at FROM application_reads WHERE app_id = ? AND user_id = ?", [.text(app), .text(userID)],
            { Timestamp(millisecondsSince1970: try $0.int64(0)) })
    }

    /// How many items match `filter` created after `readTime` (all of them when `nil`).
    static func unreadCount(_ filter: Filter, readTime: Timestamp?, session: PostgresSession) async throws -> Int {
        var arguments = filter.arguments
        arguments["read"] = .integer(readTime?.millisecondsSince1970 ?? Int64.min)
        let statement = try positional(
            "SELECT COUNT(*) FROM \(tables) WHERE \(filter.condition) AND a.created_at > :read", arguments)
        return try await session.first(statement.sql, statement.arguments) { try $0.int(0) } ?? 0
    }

    /// `sql` written with named parameters (`:name`) as positional `?` ones, with the arguments
    /// in order (a name used twice is bound twice). `::` casts and quoted literals are left alone.
    /// - Throws: An internal error naming a parameter `named` lacks.
    static func positional(_ sql: String, _ named: [String: PGValue]) throws -> (sql: String, arguments: [PGValue]) {
        func isNameStart(_ scalar: Unicode.Scalar) -> Bool {
            (scalar >= "a" && scalar <= "z") || (scalar >= "A" && scalar <= "Z") || scalar == "_"
        }
        func isName(_ scalar: Unicode.Scalar) -> Bool { isNameStart(scalar) || (scalar >= "0" && scalar <= "9") }
        let scalars = Array(sql.unicodeScalars)
        var result = String.UnicodeScalarView()
        var arguments: [PGValue] = []
        var quoted = false
        var index = 0
        while index < scalars.count {
            let scalar = scalars[index]
            if scalar == "'" { quoted.toggle() }
            if !quoted, scalar == ":", index + 1 < scalars.count, isNameStart(scalars[index + 1]),
               index == 0 || scalars[index - 1] != ":" {
                var end = index + 1
                while end < scalars.count, isName(scalars[end]) { end += 1 }
                let name = String(String.UnicodeScalarView(scalars[(index + 1)..<end]))
                guard let value = named[name] else { throw GroupError.internal("no argument for the SQL parameter :\(name)") }
                arguments.append(value)
                result.append("?")
                index = end
                continue
            }
            result.append(scalar)
            index += 1
        }
        return (String(result), arguments)
    }
}
