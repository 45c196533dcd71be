import GRDB
public import GroupModel

/// ``ApplicationStore`` over SQLite (issue 4; tables of migration v4).
///
/// - Every mutation is one write transaction: expire the group's due items (with their events),
///   load the snapshot, run the plan, write the group change, the items and the events. A plan
///   that throws rolls back everything but the expiry, which is committed on its own merit.
/// - Listings page newest first by `(created_at, app_key)` with an opaque cursor holding the last
///   item's key and the highest `app_key` when the listing began.
extension SQLiteGroupStore: ApplicationStore {
    /// A transaction's result: committed, or refused by the plan after expired items were marked.
    private enum Outcome<Value: Sendable>: Sendable {
        case committed(Committed<ApplicationCommit<Value>>)
        case refused(GroupError)
    }

    public func mutateApplications<Value: Sendable>(
        app: String, groupID: String, operatorID: String?, targets: [String], kind: ApplicationKind, at time: Timestamp,
        plan: @escaping @Sendable (ApplicationSnapshot) throws -> (ApplicationChange, Value)
    ) async throws -> Committed<ApplicationCommit<Value>> {
        let outcome: Outcome<Value> = try await self.run { [commits] in
            try await commits.write { db in
                let groupKey = try Rows.groupKey(db, app: app, groupID: groupID)
                let swept = try self.expireDue(groupKey: groupKey, app: app, groupID: groupID, now: time, db: db)
                let loaded = try Operations.loadSnapshot(
                    app: app, groupID: groupID, operatorID: operatorID, targets: targets, time: time, db: db)
                var pending: [String: Application] = [:]
                for subject in Set(targets) {
                    if let item = try ApplicationRows.fetchOne(
                        db, where: "a.group_key = ? AND a.kind = ? AND a.subject_id = ? AND a.state = 'pending'",
                        arguments: [groupKey, kind.rawValue, subject]) {
                        pending[subject] = item
                    }
                }
                let snapshot = ApplicationSnapshot(group: loaded.snapshot, pending: pending, application: nil)
                return try self.write(snapshot, loaded: loaded, swept: swept, time: time, db: db, plan: plan)
            }
        }
        switch outcome {
        case .committed(let committed): return committed
        case .refused(let error): throw error
        }
    }

    public func decideApplication<Value: Sendable>(
        app: String, id: String, operatorID: String?, at time: Timestamp,
        plan: @escaping @Sendable (ApplicationSnapshot) throws -> (ApplicationChange, Value)
    ) async throws -> Committed<ApplicationCommit<Value>> {
        let outcome: Outcome<Value> = try await self.run { [commits] in
            try await commits.write { db in
                guard let found = try ApplicationRows.fetchOne(
                    db, where: "a.app_id = ? AND a.application_id = ?", arguments: [app, id])
                else { throw GroupError.applicationNotFound(id) }
                let groupKey = try Rows.groupKey(db, app: app, groupID: found.groupID)
                let swept = try self.expireDue(groupKey: groupKey, app: app, groupID: found.groupID, now: time, db: db)
                let current = swept.isEmpty
                    ? found
                    : try ApplicationRows.fetchOne(db, where: "a.app_id = ? AND a.application_id = ?", arguments: [app, id]) ?? found
                let loaded = try Operations.loadSnapshot(
                    app: app, groupID: found.groupID, operatorID: operatorID, targets: [current.subjectID], time: time, db: db)
                let snapshot = ApplicationSnapshot(group: loaded.snapshot, pending: [:], application: current)
                return try self.write(snapshot, loaded: loaded, swept: swept, time: time, db: db, plan: plan)
            }
        }
        switch outcome {
        case .committed(let committed): return committed
        case .refused(let error): throw error
        }
    }

    /// Runs `plan` and writes its change; a `GroupError` from the plan rolls back unless items
    /// were just marked expired, in which case those are committed and the error returned.
    private func write<Value: Sendable>(
        _ snapshot: ApplicationSnapshot, loaded: Operations.Loaded, swept: [GroupEvent], time: Timestamp, db: Database,
        plan: (ApplicationSnapshot) throws -> (ApplicationChange, Value)
    ) throws -> Outcome<Value> {
        let change: ApplicationChange
        let value: Value
        do {
            (change, value) = try plan(snapshot)
        } catch let error as GroupError where !swept.isEmpty {
            return .refused(error)
        }
        let before = loaded.snapshot.group
        var events = swept
        if !change.group.isEmpty {
            self.changesGroups([GroupCache.Key(app: before.appID, id: before.id)], in: db)
            events += try Operations.apply(
                change.group, to: loaded, time: time, memberOrigin: self.storesMemberOrigin, db: db)
        }
        for application in change.applications {
            try ApplicationRows.upsert(application, groupKey: loaded.groupKey, db: db)
        }
        try self.injectedFault("mutateApplications")
        var group = change.group.group
        group.appID = before.appID
        group.id = before.id
        group.type = before.type
        group.createdAt = before.createdAt
        group.latestSequence = events.last?.sequence ?? before.latestSequence
        if change.group.isEmpty { group = before }
        return .committed(Committed(
            value: ApplicationCommit(value: value, group: group, applications: change.applications), events: events))
    }

    /// Marks the group's pending items whose expiry passed by `now` as expired and appends their
    /// events; returns the events.
    func expireDue(groupKey: Int64, app: String, groupID: String, now: Timestamp, db: Database) throws -> [GroupEvent] {
        let due = try ApplicationRows.fetchAll(
            db, where: "a.group_key = ? AND a.state = 'pending' AND a.expires_at <= ?",
            arguments: [groupKey, now.millisecondsSince1970])
        if due.isEmpty { return [] }
        let (expired, drafts) = GroupRules.planExpiry(of: due, now: now)
        for application in expired { try ApplicationRows.upsert(application, groupKey: groupKey, db: db) }
        let latest = try Int64.fetchOne(
            db.cachedStatement(sql: "SELECT latest_seq FROM groups WHERE group_key = ?"), arguments: [groupKey]) ?? 0
        self.changesGroups([GroupCache.Key(app: app, id: groupID)], in: db)
        return try Rows.appendEvents(drafts, groupKey: groupKey, appID: app, groupID: groupID, after: latest, time: now, db: db)
    }

    public func expireApplications(app: String, now: Timestamp, limit: Int) async throws -> [GroupEvent] {
        let groups: [(Int64, String)] = try await self.run { [pool] in
            try await pool.read { db in
                try Row.fetchAll(
                    db.cachedStatement(
                        sql: """
                            SELECT DISTINCT a.group_key, g.group_id FROM applications a
                            JOIN groups g ON g.group_key = a.group_key
                            WHERE a.app_id = ? AND a.state = 'pending' AND a.expires_at <= ? AND g.dismissed_at IS NULL
                            LIMIT ?
                            """),
                    arguments: [app, now.millisecondsSince1970, max(1, limit)]
                ).map { (try $0.decode(Int64.self, atIndex: 0), try $0.decode(String.self, atIndex: 1)) }
            }
        }
        var events: [GroupEvent] = []
        for (groupKey, groupID) in groups {
            events += try await self.run { [commits] in
                try await commits.write { db in
                    try self.expireDue(groupKey: groupKey, app: app, groupID: groupID, now: now, db: db)
                }
            }
        }
        return events
    }

    // MARK: Reads

    public func application(app: String, id: String) async throws -> Application? {
        try await self.run { [pool] in
            try await pool.read { db in
                try ApplicationRows.fetchOne(db, where: "a.app_id = ? AND a.application_id = ?", arguments: [app, id])
            }
        }
    }

    public func listApplications(
        app: String, query: ApplicationQuery, after cursor: String?, limit: Int
    ) async throws -> ApplicationListing {
        let position = try cursor.map { try Cursor.decode($0, count: 3) }
        let limit = max(1, limit)
        return try await self.run { [pool] in
            try await pool.read { db in
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
                let readTime = try query.userID.flatMap { try Self.readTime(app: app, userID: $0, db: db) }
                let unread = try Self.unreadCount(filter, readTime: readTime, db: db)
                return ApplicationListing(page: Page(items: items, next: next), unreadCount: unread, readTime: readTime)
            }
        }
    }

    public func markApplicationsRead(
        app: String, userID: String, upTo time: Timestamp, now: Timestamp
    ) async throws -> (readTime: Timestamp, unreadCount: Int) {
        try await self.run { [commits] in
            try await commits.write { db in
                try db.cachedStatement(
                    sql: """
                        INSERT INTO application_reads (app_id, user_id, read_at) VALUES (?, ?, ?)
                        ON CONFLICT (app_id, user_id) DO UPDATE SET read_at = max(read_at, excluded.read_at)
                        """
                ).execute(arguments: [app, userID, time.millisecondsSince1970])
                let readTime = try Self.readTime(app: app, userID: userID, db: db) ?? time
                let filter = ApplicationRows.Filter(app: app, query: ApplicationQuery(userID: userID, now: now))
                return (readTime, try Self.unreadCount(filter, readTime: readTime, db: db))
            }
        }
    }

    static func readTime(app: String, userID: String, db: Database) throws -> Timestamp? {
        try Int64.fetchOne(
            db.cachedStatement(sql: "SELECT read_at FROM application_reads WHERE app_id = ? AND user_id = ?"),
            arguments: [app, userID]
        ).map { Timestamp(millisecondsSince1970: $0) }
    }

    static func unreadCount(_ filter: ApplicationRows.Filter, readTime: Timestamp?, db: Database) throws -> Int {
        var arguments = filter.arguments
        arguments["read"] = readTime?.millisecondsSince1970 ?? Int64.min
        return try Int.fetchOne(
            db,
            sql: """
                SELECT COUNT(*) FROM applications a JOIN groups g ON g.group_key = a.group_key
                WHERE \(filter.condition) AND a.created_at > :read
                """,
            arguments: StatementArguments(arguments)) ?? 0
    }
}

/// The SQL of the `applications` table.
enum ApplicationRows {
    /// The selected columns, `applications a` joined with `groups g`.
    static let columns = """
        a.app_key, a.application_id, a.app_id, g.group_id, a.kind, a.state, a.sender_id, a.subject_id, a.message,
        a.created_at, a.updated_at, a.expires_at, a.approval_state, a.approval_by, a.approval_message, a.approval_at,
        a.consent_state, a.consent_by, a.consent_message, a.consent_at, a.handled_by, a.handle_message, a.handled_at,
        g.name
        """
    /// How many columns ``columns`` selects.
    static let columnCount = 24

    /// The row's key, item and group name.
    static func decode(_ row: Row) throws -> (key: Int64, application: Application, groupName: String) {
        func time(_ index: Int) throws -> Timestamp? {
            try row.decode(Int64?.self, atIndex: index).map { Timestamp(millisecondsSince1970: $0) }
        }
        func enumValue<E: RawRepresentable>(_ type: E.Type, _ index: Int) throws -> E where E.RawValue == String {
            let text = try row.decode(String.self, atIndex: index)
            guard let value = E(rawValue: text) else { throw GroupError.internal("unknown stored value \(text)") }
            return value
        }
        func decision(_ index: Int) throws -> ApplicationDecision {
            ApplicationDecision(
                state: try enumValue(DecisionState.self, index), decidedBy: try row.decode(String?.self, atIndex: index + 1),
                message: try row.decode(String.self, atIndex: index + 2), decidedAt: try time(index + 3))
        }
        let application = Application(
            id: try row.decode(String.self, atIndex: 1), appID: try row.decode(String.self, atIndex: 2),
            groupID: try row.decode(String.self, atIndex: 3), kind: try enumValue(ApplicationKind.self, 4),
            storedState: try enumValue(ApplicationState.self, 5), senderID: try row.decode(String.self, atIndex: 6),
            subjectID: try row.decode(String.self, atIndex: 7), message: try row.decode(String.self, atIndex: 8),
            createdAt: try time(9)!, updatedAt: try time(10)!, expiresAt: try time(11)!,
            approval: try decision(12), consent: try decision(16), handledBy: try row.decode(String?.self, atIndex: 20),
            handleMessage: try row.decode(String.self, atIndex: 21), handledAt: try time(22))
        return (try row.decode(Int64.self, atIndex: 0), application, try row.decode(String.self, atIndex: 23))
    }

    static func fetchAll(_ db: Database, where condition: String, arguments: StatementArguments) throws -> [Application] {
        let rows = try Row.fetchCursor(
            db.cachedStatement(
                sql: "SELECT \(columns) FROM applications a JOIN groups g ON g.group_key = a.group_key WHERE \(condition) ORDER BY a.app_key"),
            arguments: arguments)
        var result: [Application] = []
        while let row = try rows.next() { result.append(try decode(row).application) }
        return result
    }

    static func fetchOne(_ db: Database, where condition: String, arguments: StatementArguments) throws -> Application? {
        try fetchAll(db, where: condition, arguments: arguments).first
    }

    /// Inserts the item, or updates it when its id exists in the app (its group and creation
    /// order never change).
    static func upsert(_ a: Application, groupKey: Int64, db: Database) throws {
        func ms(_ time: Timestamp?) -> Int64? { time?.millisecondsSince1970 }
        try db.cachedStatement(
            sql: """
                INSERT INTO applications (
                    app_id, application_id, group_key, kind, state, sender_id, subject_id, message,
                    created_at, updated_at, expires_at,
                    approval_state, approval_by, approval_message, approval_at,
                    consent_state, consent_by, consent_message, consent_at,
                    handled_by, handle_message, handled_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (app_id, application_id) DO UPDATE SET
                    state = excluded.state, sender_id = excluded.sender_id, message = excluded.message,
                    updated_at = excluded.updated_at, expires_at = excluded.expires_at,
                    approval_state = excluded.approval_state, approval_by = excluded.approval_by,
                    approval_message = excluded.approval_message, approval_at = excluded.approval_at,
                    consent_state = excluded.consent_state, consent_by = excluded.consent_by,
                    consent_message = excluded.consent_message, consent_at = excluded.consent_at,
                    handled_by = excluded.handled_by, handle_message = excluded.handle_message,
                    handled_at = excluded.handled_at
                """
        ).execute(arguments: [
            a.appID, a.id, groupKey, a.kind.rawValue, a.storedState.rawValue, a.senderID, a.subjectID, a.message,
            a.createdAt.millisecondsSince1970, a.updatedAt.millisecondsSince1970, a.expiresAt.millisecondsSince1970,
            a.approval.state.rawValue, a.approval.decidedBy, a.approval.message, ms(a.approval.decidedAt),
            a.consent.state.rawValue, a.consent.decidedBy, a.consent.message, ms(a.consent.decidedAt),
            a.handledBy, a.handleMessage, ms(a.handledAt),
        ])
    }

    /// The WHERE clause of a listing (without paging) and its named arguments, plus the SQL of
    /// the caller's three relations.
    struct Filter {
        var condition: String
        var arguments: [String: (any DatabaseValueConvertible)?]
        var senderFlag: String
        var inviteeFlag: String
        var approverFlag: String

        init(app: String, query: ApplicationQuery) {
            arguments = ["app": app, "now": query.now.millisecondsSince1970]
            var parts = ["g.dismissed_at IS NULL"]
            if let user = query.userID {
                arguments["me"] = user
                senderFlag = "(a.sender_id = :me)"
                inviteeFlag = """
                    (a.kind = 'invitation' AND a.subject_id = :me AND a.consent_state <> 'none'
                     AND a.approval_state IN ('none', 'accepted'))
                    """
                approverFlag = """
                    (a.approval_state <> 'none' AND EXISTS (
                        SELECT 1 FROM members am WHERE am.group_key = a.group_key AND am.user_id = :me
                          AND (am.role = 'owner' OR (am.role = 'admin' AND g.join_approvers = 'owner_and_admins'))))
                    """
                // The candidates, each branch through its own index, all of the app (an OR, or
                // `a.app_id = :app` here, would scan every item of the app).
                parts.append("""
                    a.app_key IN (
                        SELECT s.app_key FROM applications s WHERE s.app_id = :app AND s.sender_id = :me
                        UNION ALL
                        SELECT i.app_key FROM applications i WHERE i.app_id = :app AND i.subject_id = :me
                        UNION ALL
                        SELECT p.app_key FROM members cm JOIN applications p ON p.group_key = cm.group_key
                        WHERE cm.app_id = :app AND cm.user_id = :me AND cm.role IN ('owner', 'admin'))
                    """)
            } else {
                parts.append("a.app_id = :app")
                senderFlag = "0"
                inviteeFlag = "0"
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
                arguments["group"] = group
                parts.append("g.group_id = :group")
            }
            condition = parts.joined(separator: " AND ")
        }
    }
}
