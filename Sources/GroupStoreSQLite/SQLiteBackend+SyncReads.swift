import Foundation
import GRDB
public import GroupModel
import GroupStore
import GroupStoreSQL

/// Versioned member sync, joined-group sync and member search over SQLite.
///
/// Sync cursors are ``Cursor`` numbers: `from.target.phase.a.b` for members (phase 0: member rows
/// after `(changed_version, join_order) = (a, b)`; phase 1: tombstones after `(version, tomb_id)`),
/// `from.target.group_key` for joined groups. Member search cursors: `u` and the hex of the last
/// user id (prefix), or the last join order (name card).
extension SQLiteBackend {
    public func memberChanges(
        app: String, groupID: String, since version: Int64, after cursor: String?, limit: Int
    ) async throws -> SyncPage<Member> {
        let position = try cursor.map { try SyncCursor.member($0, from: version) }
        let limit = max(1, limit)
        return try await pool.read { db in
            guard let row = try Row.fetchOne(
                db.cachedStatement(
                    sql: """
                        SELECT group_key, member_version, member_floor FROM groups
                        WHERE app_id = ? AND group_id = ? AND dismissed_at IS NULL
                        """),
                arguments: [app, groupID])
            else { throw GroupError.groupNotFound(groupID) }
            let groupKey: Int64 = try row.decode(atIndex: 0)
            let current: Int64 = try row.decode(atIndex: 1)
            let floor: Int64 = try row.decode(atIndex: 2)
            let target = position?.target ?? current
            if version > target || (version > 0 && version < floor) { return .fullReload(version: current) }
            // Version 0 lists every row, those stored before versions were kept (0) included.
            let lower = version == 0 ? -1 : version
            var phase = position?.phase ?? 0
            var changed: [Member] = []
            var removed: [String] = []
            var next: String?
            if phase == 0 {
                // The row value alone bounds the range from below (the first cursor is
                // `(lower, max)`): with a separate `changed_version > ?` the planner seeks by it
                // and filters the row value, reading every earlier row of the version again.
                let statement = try db.cachedStatement(
                    sql: """
                        SELECT \(Rows.memberColumns), m.changed_version FROM members m
                        WHERE m.group_key = ? AND m.changed_version <= ?
                          AND (m.changed_version, m.join_order) > (?, ?)
                        ORDER BY m.changed_version, m.join_order LIMIT ?
                        """)
                var rows: [Rows.MemberRow] = []
                var versions: [Int64] = []
                let cursor = try Row.fetchCursor(
                    statement,
                    arguments: [groupKey, target, position?.a ?? lower, position?.b ?? Int64.max, limit + 1])
                while let read = try cursor.next() {
                    rows.append(try Rows.member(read))
                    versions.append(try read.decode(Int64.self, atIndex: Rows.memberColumnCount))
                }
                if rows.count > limit {
                    rows.removeLast(rows.count - limit)
                    next = SyncCursor.encode(from: version, target: target, phase: 0, versions[limit - 1], rows[limit - 1].member.joinOrder)
                }
                changed = try Operations.withCustom(rows, groupKey: groupKey, db: db)
                if next == nil { phase = 1 }
            }
            let room = limit - changed.count
            if phase == 1, version > 0, room > 0 {
                let resume = position?.phase == 1 ? (position!.a, position!.b) : (lower, Int64.max)
                var last: (Int64, Int64)?
                var count = 0
                let cursor = try Row.fetchCursor(
                    db.cachedStatement(
                        sql: """
                            SELECT user_id, version, tomb_id FROM member_tombstones
                            WHERE group_key = ? AND version <= ? AND (version, tomb_id) > (?, ?)
                            ORDER BY version, tomb_id LIMIT ?
                            """),
                    arguments: [groupKey, target, resume.0, resume.1, room + 1])
                while let read = try cursor.next() {
                    count += 1
                    if count > room { break }
                    removed.append(try read.decode(String.self, atIndex: 0))
                    last = (try read.decode(Int64.self, atIndex: 1), try read.decode(Int64.self, atIndex: 2))
                }
                if count > room, let last {
                    next = SyncCursor.encode(from: version, target: target, phase: 1, last.0, last.1)
                }
            } else if phase == 1, version > 0, room == 0 {
                // The page is full of members and the removals are still to read.
                next = SyncCursor.encode(from: version, target: target, phase: 1, lower, Int64.max)
            }
            return SyncPage(changed: changed, removed: removed, next: next, version: target)
        }
    }

    public func joinedGroupChanges(
        app: String, userID: String, since version: Int64, after cursor: String?, limit: Int
    ) async throws -> SyncPage<JoinedGroup> {
        let position = try cursor.map { try SyncCursor.joined($0, from: version) }
        let limit = max(1, limit)
        let ownerSettings = storesOwnerSettings
        return try await pool.read { db in
            let latest = try Int64.fetchOne(
                db.cachedStatement(sql: "SELECT seq FROM sqlite_sequence WHERE name = 'group_events'")) ?? 0
            let target = position?.target ?? latest
            if version > target { return .fullReload(version: latest) }
            let after = position?.groupKey ?? 0
            let keys: [Int64]
            if version == 0 {
                keys = try Int64.fetchAll(
                    db.cachedStatement(
                        sql: """
                            SELECT m.group_key FROM members m JOIN groups g ON g.group_key = m.group_key
                            WHERE m.app_id = ? AND m.user_id = ? AND m.group_key > ?
                              AND g.dismissed_at IS NULL AND g.type <> 'AVChatRoom'
                            ORDER BY m.group_key LIMIT ?
                            """),
                    arguments: [app, userID, after, limit + 1])
            } else {
                keys = try Int64.fetchAll(
                    db.cachedStatement(
                        sql: """
                            SELECT group_key FROM joined_changes
                            WHERE app_id = ? AND user_id = ? AND event_id > ? AND event_id <= ? AND group_key > ?
                            UNION
                            SELECT m.group_key FROM members m JOIN groups g ON g.group_key = m.group_key
                            WHERE m.app_id = ? AND m.user_id = ? AND m.group_key > ?
                              AND g.info_event_id > ? AND g.info_event_id <= ? AND g.type <> 'AVChatRoom'
                            ORDER BY 1 LIMIT ?
                            """),
                    arguments: [app, userID, version, target, after, app, userID, after, version, target, limit + 1])
            }
            var page = keys
            var next: String?
            if page.count > limit {
                page.removeLast(page.count - limit)
                next = Cursor.encode([version, target, page[limit - 1]])
            }
            if page.isEmpty { return SyncPage(changed: [], removed: [], next: nil, version: target) }
            let rows = try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT \(Rows.GroupColumn.list(table: "g", ownerSettings: ownerSettings)),
                            g.dismissed_at IS NULL AND g.type <> 'AVChatRoom', m.user_id IS NOT NULL,
                            \(Rows.memberColumns), r.remark
                        FROM groups g
                        LEFT JOIN members m ON m.group_key = g.group_key AND m.user_id = ?
                        LEFT JOIN group_remarks r ON r.app_id = g.app_id AND r.user_id = ? AND r.group_key = g.group_key
                        WHERE g.group_key IN (SELECT value FROM json_each(?))
                        ORDER BY g.group_key
                        """),
                arguments: [userID, userID, try Rows.jsonArray(page)])
            let offset = Rows.GroupColumn.allCases.count
            var groups: [Rows.GroupRow] = []
            var memberships: [Rows.MemberRow] = []
            var remarks: [String] = []
            var removed: [String] = []
            for row in rows {
                let group = try Rows.group(row)
                let live: Bool = try row.decode(atIndex: offset)
                let member: Bool = try row.decode(atIndex: offset + 1)
                guard live, member else {
                    removed.append(group.group.id)
                    continue
                }
                groups.append(group)
                memberships.append(try Rows.member(row, at: offset + 2))
                remarks.append(try row.decode(String?.self, atIndex: offset + 2 + Rows.memberColumnCount) ?? "")
            }
            let full = try Operations.withCustom(groups, db: db)
            let members = try Operations.withCustom(memberships, userID: userID, db: db)
            let changed = (0..<full.count).map { JoinedGroup(group: full[$0], membership: members[$0], remark: remarks[$0]) }
            return SyncPage(changed: changed, removed: removed, next: next, version: target)
        }
    }

    public func searchMembers(
        app: String, groupID: String, keyword: String, field: MemberSearchField, after cursor: String?, limit: Int
    ) async throws -> Page<Member> {
        if keyword.isEmpty { throw GroupError.invalidArgument(field: "keyword", "the search keyword must not be empty") }
        let limit = max(1, limit)
        switch field {
        case .userIDPrefix:
            let after = try cursor.map(SyncCursor.userID) ?? ""
            let range = PrefixRange(prefix: keyword)
            return try await pool.read { db in
                let groupKey = try Rows.groupKey(db, app: app, groupID: groupID)
                var arguments: [any DatabaseValueConvertible] = [groupKey, range.lower, after]
                if let upper = range.upper { arguments.append(upper) }
                arguments.append(limit + 1)
                var rows = try Rows.MemberRow.fetchAll(
                    db.cachedStatement(
                        sql: """
                            SELECT \(Rows.memberColumns) FROM members m
                            WHERE m.group_key = ? AND m.user_id >= ? AND m.user_id > ?
                              \(range.upper == nil ? "" : "AND m.user_id < ?")
                            ORDER BY m.user_id LIMIT ?
                            """),
                    arguments: StatementArguments(arguments))
                var next: String?
                if rows.count > limit {
                    rows.removeLast(rows.count - limit)
                    next = SyncCursor.encode(userID: rows[limit - 1].member.userID)
                }
                return Page(items: try Operations.withCustom(rows, groupKey: groupKey, db: db), next: next)
            }
        case .nameCard:
            let after = try cursor.map { try Cursor.decode($0, count: 1)[0] } ?? 0
            let pattern = SQLDialect.containsPattern(keyword)
            return try await pool.read { db in
                let groupKey = try Rows.groupKey(db, app: app, groupID: groupID)
                var rows = try Rows.MemberRow.fetchAll(
                    db.cachedStatement(
                        sql: """
                            SELECT \(Rows.memberColumns) FROM members m
                            WHERE m.group_key = ? AND m.join_order > ? AND m.name_card <> ''
                              AND \(SQLDialect.sqlite.contains("m.name_card"))
                            ORDER BY m.join_order LIMIT ?
                            """),
                    arguments: [groupKey, after, pattern, limit + 1])
                var next: String?
                if rows.count > limit {
                    rows.removeLast(rows.count - limit)
                    next = Cursor.encode([rows[limit - 1].member.joinOrder])
                }
                return Page(items: try Operations.withCustom(rows, groupKey: groupKey, db: db), next: next)
            }
        }
    }
}
