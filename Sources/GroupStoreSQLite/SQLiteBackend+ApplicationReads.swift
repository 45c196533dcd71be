import GRDB
public import GroupModel
import GroupStore
import GroupStoreSQL

/// Application reads over SQLite (tables of migration v4): listings newest first by
/// `(created_at, app_key)`, with an opaque cursor holding the last item's key and the highest
/// `app_key` when the listing began.
extension SQLiteBackend {
    public func application(app: String, id: String) async throws -> Application? {
        try await pool.read { db in
            try ApplicationRows.fetchOne(db, where: "a.app_id = ? AND a.application_id = ?", arguments: [.text(app), .text(id)])
        }
    }

    public func listApplications(
        app: String, query: ApplicationQuery, after cursor: String?, limit: Int
    ) async throws -> ApplicationListing {
        let position = try cursor.map { try Cursor.decode($0, count: 3) }
        let limit = max(1, limit)
        return try await pool.read { db in
            let filter = ApplicationRows.Filter(app: app, query: query)
            let mark = try position?[2] ?? Int64.fetchOne(db, sql: "SELECT MAX(app_key) FROM applications") ?? 0
            var arguments = filter.arguments
            arguments["mark"] = mark
            arguments["limit"] = limit + 1
            var sql = """
                SELECT \(ApplicationRows.columns), \(filter.senderFlag), \(filter.inviteeFlag), \(filter.approverFlag)
                FROM applications a JOIN groups g ON g.group_key = a.group_key
                WHERE \(filter.condition) AND a.app_key <= :mark
                """
            if let position {
                sql += " AND (a.created_at < :created OR (a.created_at = :created AND a.app_key < :key))"
                arguments["created"] = position[0]
                arguments["key"] = position[1]
            }
            sql += " ORDER BY a.created_at DESC, a.app_key DESC LIMIT :limit"
            var items: [ListedApplication] = []
            var keys: [Int64] = []
            let rows = try Row.fetchCursor(db, sql: sql, arguments: StatementArguments(arguments))
            let flags = ApplicationRows.columnCount
            while let row = try rows.next() {
                let (key, application, name) = try ApplicationRows.decode(row)
                var roles: Set<ApplicationRole> = []
                if try row.decode(Bool.self, atIndex: flags) { roles.insert(.sender) }
                if try row.decode(Bool.self, atIndex: flags + 1) { roles.insert(.invitee) }
                if try row.decode(Bool.self, atIndex: flags + 2) { roles.insert(.approver) }
                items.append(ListedApplication(application: application, groupName: name, roles: roles))
                keys.append(key)
            }
            var next: String?
            if items.count > limit {
                items.removeLast(items.count - limit)
                next = Cursor.encode([items[limit - 1].application.createdAt.millisecondsSince1970, keys[limit - 1], mark])
            }
            let readTime = try query.userID.flatMap { try ApplicationRows.readTime(app: app, userID: $0, db: db) }
            let unread = try ApplicationRows.unreadCount(filter, readTime: readTime, db: db)
            return ApplicationListing(page: Page(items: items, next: next), unreadCount: unread, readTime: readTime)
        }
    }

    public func groupsWithDueApplications(app: String, now: Timestamp, limit: Int) async throws -> [String] {
        try await pool.read { db in
            try String.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT DISTINCT g.group_id FROM applications a
                        JOIN groups g ON g.group_key = a.group_key
                        WHERE a.app_id = ? AND a.state = 'pending' AND a.expires_at <= ? AND g.dismissed_at IS NULL
                        LIMIT ?
                        """),
                arguments: [app, now.millisecondsSince1970, max(1, limit)])
        }
    }
}
