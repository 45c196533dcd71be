import Foundation
public import GroupModel
import GroupStore
import GroupStoreSQL

/// Versioned member sync, joined-group sync and member search over PostgreSQL: the SQL and
/// cursors of SQLite's (``SQLiteBackend``), keyed by app. The joined-group version is the app's
/// head in `app_event_heads` (its highest committed `event_id`).
extension PostgresBackend {
    public func memberChanges(
        app: String, groupID: String, since version: Int64, after cursor: String?, limit: Int
    ) async throws -> SyncPage<Member> {
        let position = try cursor.map { try SyncCursor.member($0, from: version) }
        let limit = max(1, limit)
        return try await read { session in
            guard let group = try await session.first(
                """
                SELECT group_key, member_version, member_floor FROM groups
                WHERE app_id = ? AND group_id = ? AND dismissed_at IS NULL
                """,
                [.text(app), .text(groupID)],
                { (try $0.int64(0), try $0.int64(1), try $0.int64(2)) })
            else { throw GroupError.groupNotFound(groupID) }
            let (groupKey, current, floor) = group
            let target = position?.target ?? current
            if version > target || (version > 0 && version < floor) { return .fullReload(version: current) }
            let lower = version == 0 ? -1 : version
            var phase = position?.phase ?? 0
            var changed: [Member] = []
            var removed: [String] = []
            var next: String?
            if phase == 0 {
                var rows: [Rows.MemberRow] = []
                var versions: [Int64] = []
                try await session.rows(
                    """
                    SELECT \(Rows.memberColumns), m.changed_version FROM members m
                    WHERE m.app_id = ? AND m.group_key = ? AND m.changed_version <= ?
                      AND (m.changed_version, m.join_order) > (?, ?)
                    ORDER BY m.changed_version, m.join_order LIMIT ?
                    """,
                    [
                        .text(app), .integer(groupKey), .integer(target),
                        .integer(position?.a ?? lower), .integer(position?.b ?? Int64.max), .int(limit + 1),
                    ]
                ) { row in
                    rows.append(try Rows.member(row))
                    versions.append(try row.int64(Rows.memberColumnCount))
                }
                if rows.count > limit {
                    rows.removeLast(rows.count - limit)
                    next = SyncCursor.encode(
                        from: version, target: target, phase: 0, versions[limit - 1], rows[limit - 1].member.joinOrder)
                }
                changed = try await PostgresRows.withCustom(rows, app: app, groupKey: groupKey, session: session)
                if next == nil { phase = 1 }
            }
            let room = limit - changed.count
            if phase == 1, version > 0, room > 0 {
                let resume = position?.phase == 1 ? (position!.a, position!.b) : (lower, Int64.max)
                var found: [(user: String, version: Int64, id: Int64)] = []
                try await session.rows(
                    """
                    SELECT user_id, version, tomb_id FROM member_tombstones
                    WHERE app_id = ? AND group_key = ? AND version <= ? AND (version, tomb_id) > (?, ?)
                    ORDER BY version, tomb_id LIMIT ?
                    """,
                    [
                        .text(app), .integer(groupKey), .integer(target), .integer(resume.0),
                        .integer(resume.1), .int(room + 1),
                    ]
                ) { found.append((try $0.text(0), try $0.int64(1), try $0.int64(2))) }
                if found.count > room {
                    found.removeLast(found.count - room)
                    let last = found[room - 1]
                    next = SyncCursor.encode(from: version, target: target, phase: 1, last.version, last.id)
                }
                removed = found.map(\.user)
            } else if phase == 1, version > 0, room == 0 {
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
        return try await read { session in
            let latest = try await session.first(
                "SELECT last_event_id FROM app_event_heads WHERE app_id = ?", [.text(app)]) { try $0.int64(0) } ?? 0
            let target = position?.target ?? latest
            if version > target { return .fullReload(version: latest) }
            let after = position?.groupKey ?? 0
            var keys: [Int64] = []
            if version == 0 {
                try await session.rows(
                    """
                    SELECT m.group_key FROM members m JOIN groups g ON g.app_id = m.app_id AND g.group_key = m.group_key
                    WHERE m.app_id = ? AND m.user_id = ? AND m.group_key > ?
                      AND g.dismissed_at IS NULL AND g.type <> 'AVChatRoom'
                    ORDER BY m.group_key LIMIT ?
                    """, [.text(app), .text(userID), .integer(after), .int(limit + 1)]
                ) { keys.append(try $0.int64(0)) }
            } else {
                try await session.rows(
                    """
                    SELECT group_key FROM joined_changes
                    WHERE app_id = ? AND user_id = ? AND event_id > ? AND event_id <= ? AND group_key > ?
                    UNION
                    SELECT m.group_key FROM members m JOIN groups g ON g.app_id = m.app_id AND g.group_key = m.group_key
                    WHERE m.app_id = ? AND m.user_id = ? AND m.group_key > ?
                      AND g.info_event_id > ? AND g.info_event_id <= ? AND g.type <> 'AVChatRoom'
                    ORDER BY 1 LIMIT ?
                    """,
                    [
                        .text(app), .text(userID), .integer(version), .integer(target), .integer(after),
                        .text(app), .text(userID), .integer(after), .integer(version), .integer(target), .int(limit + 1),
                    ]
                ) { keys.append(try $0.int64(0)) }
            }
            var next: String?
            if keys.count > limit {
                keys.removeLast(keys.count - limit)
                next = Cursor.encode([version, target, keys[limit - 1]])
            }
            if keys.isEmpty { return SyncPage(changed: [], removed: [], next: nil, version: target) }
            let offset = Rows.GroupColumn.allCases.count
            var groups: [Rows.GroupRow] = []
            var memberships: [Rows.MemberRow] = []
            var remarks: [String] = []
            var removed: [String] = []
            try await session.rows(
                """
                SELECT \(Rows.GroupColumn.list(table: "g")),
                    CASE WHEN g.dismissed_at IS NULL AND g.type <> 'AVChatRoom' THEN 1 ELSE 0 END,
                    CASE WHEN m.user_id IS NULL THEN 0 ELSE 1 END,
                    \(Rows.memberColumns), r.remark
                FROM groups g
                LEFT JOIN \(PostgresRows.membershipProbe)
                LEFT JOIN \(PostgresRows.remarkProbe)
                WHERE g.app_id = ? AND g.group_key = ANY(?)
                ORDER BY g.group_key
                """, [.text(userID), .text(userID), .text(app), .integers(keys)]
            ) { row in
                let group = try Rows.group(row)
                guard try row.bool(offset), try row.bool(offset + 1) else {
                    removed.append(group.group.id)
                    return
                }
                groups.append(group)
                memberships.append(try Rows.member(row, at: offset + 2))
                remarks.append(try row.optionalText(offset + 2 + Rows.memberColumnCount) ?? "")
            }
            let full = try await PostgresRows.withCustom(groups, app: app, session: session)
            let members = try await PostgresRows.withCustom(memberships, app: app, userID: userID, session: session)
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
            return try await read { session in
                let groupKey = try await PostgresRows.groupKey(app: app, groupID: groupID, session: session)
                var rows: [Rows.MemberRow] = []
                // `COLLATE "C"`: byte order whatever the database's collation (the primary key's
                // order under it).
                try await session.rows(
                    """
                    SELECT \(Rows.memberColumns) FROM members m
                    WHERE m.app_id = ? AND m.group_key = ? AND m.user_id COLLATE "C" >= ? AND m.user_id COLLATE "C" > ?
                      \(range.upper == nil ? "" : "AND m.user_id COLLATE \"C\" < ?")
                    ORDER BY m.user_id COLLATE "C" LIMIT ?
                    """,
                    [.text(app), .integer(groupKey), .text(range.lower), .text(after)]
                        + (range.upper.map { [PGValue.text($0)] } ?? []) + [.int(limit + 1)]
                ) { rows.append(try Rows.member($0)) }
                var next: String?
                if rows.count > limit {
                    rows.removeLast(rows.count - limit)
                    next = SyncCursor.encode(userID: rows[limit - 1].member.userID)
                }
                return await Page(items: try PostgresRows.withCustom(rows, app: app, groupKey: groupKey, session: session), next: next)
            }
        case .nameCard:
            let after = try cursor.map { try Cursor.decode($0, count: 1)[0] } ?? 0
            let pattern = SQLDialect.containsPattern(keyword)
            return try await read { session in
                let groupKey = try await PostgresRows.groupKey(app: app, groupID: groupID, session: session)
                var rows: [Rows.MemberRow] = []
                try await session.rows(
                    """
                    SELECT \(Rows.memberColumns) FROM members m
                    WHERE m.app_id = ? AND m.group_key = ? AND m.join_order > ? AND m.name_card <> ''
                      AND \(SQLDialect.postgres.contains("m.name_card"))
                    ORDER BY m.join_order LIMIT ?
                    """, [.text(app), .integer(groupKey), .integer(after), .text(pattern), .int(limit + 1)]
                ) { rows.append(try Rows.member($0)) }
                var next: String?
                if rows.count > limit {
                    rows.removeLast(rows.count - limit)
                    next = Cursor.encode([rows[limit - 1].member.joinOrder])
                }
                return await Page(items: try PostgresRows.withCustom(rows, app: app, groupKey: groupKey, session: session), next: next)
            }
        }
    }
}
