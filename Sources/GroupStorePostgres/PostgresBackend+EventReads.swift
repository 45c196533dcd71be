import Foundation
public import GroupModel
import GroupStore
import GroupStoreSQL

/// Event-log reads over PostgreSQL (``SQLiteBackend``'s, keyed by app). An app's "latest" is its
/// head in `app_event_heads`: `event_id`s come from one sequence shared by every app, and only an
/// app's own ids are in commit order.
extension PostgresBackend {
    public func events(app: String, groupID: String, after sequence: Int64, limit: Int) async throws -> [GroupEvent] {
        try await read { session in
            let groupKey = try await PostgresRows.groupKey(app: app, groupID: groupID, dismissedToo: true, session: session)
            var events: [GroupEvent] = []
            try await session.rows(
                """
                SELECT \(Rows.eventColumns) FROM group_events
                WHERE app_id = ? AND group_key = ? AND seq > ? ORDER BY seq LIMIT ?
                """, [.text(app), .integer(groupKey), .integer(sequence), .int(max(0, limit))]
            ) { events.append(try Rows.event($0)) }
            return events
        }
    }

    public func latestEventID() async throws -> Int64 {
        try await readStatement { session in
            try await session.first("SELECT coalesce(max(last_event_id), 0) FROM app_event_heads") { try $0.int64(0) } ?? 0
        }
    }

    public func latestEventID(app: String) async throws -> Int64 {
        try await readStatement { session in try await PostgresEventRows.head(session, app: app) }
    }

    public func appEvents(app: String, after eventID: Int64, limit: Int) async throws -> EventLogPage {
        let limit = max(1, limit)
        return try await read { session in
            let latest = try await PostgresEventRows.head(session, app: app)
            let events = try await PostgresEventRows.loggedEvents(
                session, app: app, where: "e.event_id > ? ORDER BY e.event_id LIMIT ?",
                arguments: [.integer(eventID), .int(limit)])
            let isLast = events.count < limit
            return EventLogPage(
                events: events, scannedThrough: isLast ? max(latest, eventID) : events.last?.eventID ?? eventID,
                isLast: isLast)
        }
    }

    public func userEvents(app: String, userID: String, after eventID: Int64, limit: Int) async throws -> EventLogPage {
        let limit = max(1, limit)
        return try await read { session in
            let latest = try await PostgresEventRows.head(session, app: app)
            let scope = try await PostgresEventRows.userScope(session, app: app, userID: userID, after: eventID)
            let candidates = try await PostgresEventRows.loggedEvents(
                session, app: app,
                // The candidates: the first `limit` rows after the cursor of each of the user's
                // groups and of their communities' topics (`group_events_by_group`) and of the rows addressed to the user
                // (`group_events_by_recipient`), merged in `event_id` order, the first `limit` of
                // them: a page costs what the user's groups wrote, not what the app wrote. Any
                // source that filled its `limit` holds the page's last row or a later one.
                where: """
                    e.event_id IN (
                        SELECT c.event_id FROM (
                            SELECT x.event_id FROM unnest(?::text[]) AS u(group_id)
                            CROSS JOIN LATERAL (
                                SELECT event_id FROM group_events
                                WHERE app_id = ? AND group_id = u.group_id AND event_id > ?
                                ORDER BY event_id LIMIT ?
                            ) x
                            UNION
                            SELECT r.event_id FROM (
                                SELECT event_id FROM group_events
                                WHERE app_id = ? AND recipient_user = ? AND event_id > ?
                                ORDER BY event_id LIMIT ?
                            ) r
                        ) c ORDER BY c.event_id LIMIT ?)
                    ORDER BY e.event_id
                    """,
                arguments: [
                    .texts(scope.candidateGroups), .text(app), .integer(eventID), .int(limit),
                    .text(app), .text(userID), .integer(eventID), .int(limit), .int(limit),
                ],
                resolveApprovers: false)
            let isLast = candidates.count < limit
            var events: [LoggedEvent] = []
            for candidate in candidates where scope.includes(candidate, userID: userID) {
                var event = candidate
                if case .approvers = event.event.recipient { event.approvers = [userID] }
                events.append(event)
            }
            return EventLogPage(
                events: events, scannedThrough: isLast ? max(latest, eventID) : candidates.last?.eventID ?? eventID,
                isLast: isLast)
        }
    }

    public func streamMemberships(app: String, userID: String) async throws -> MembershipSnapshot {
        try await read { session in
            let watermark = try await PostgresEventRows.head(session, app: app)
            var memberships: [StreamMembership] = []
            try await session.rows(
                """
                SELECT g.group_id, g.type, m.join_seq, m.receive_option, m.role, m.permission_groups FROM members m
                JOIN groups g ON g.app_id = m.app_id AND g.group_key = m.group_key
                WHERE m.app_id = ? AND m.user_id = ? AND g.dismissed_at IS NULL
                """, [.text(app), .text(userID)]
            ) { row in
                memberships.append(StreamMembership(
                    groupID: try row.text(0), groupType: try Rows.parse(row.text(1), GroupType.init(rawValue:)),
                    joinSequence: max(0, try row.int64(2) - 1),
                    receiveOption: try Rows.parse(row.text(3), ReceiveOption.init(rawValue:)),
                    role: try Rows.parse(row.text(4), MemberRole.init(rawValue:)),
                    permissionGroups: PermissionGroupCoding.decodeAssignments(try row.optionalText(5))))
            }
            return MembershipSnapshot(memberships: memberships, watermark: watermark)
        }
    }

    public func retainedStart(app: String, cutoff: Timestamp) async throws -> RetainedStart {
        try await read { session in
            if let (eventID, time) = try await session.first(
                """
                SELECT event_id, time FROM group_events
                WHERE app_id = ? AND time >= ? ORDER BY event_id LIMIT 1
                """, [.text(app), .integer(cutoff.millisecondsSince1970)], { (try $0.int64(0), try $0.int64(1)) })
            {
                return RetainedStart(afterEventID: eventID - 1, time: Timestamp(millisecondsSince1970: time))
            }
            return await RetainedStart(afterEventID: try PostgresEventRows.head(session, app: app), time: cutoff)
        }
    }
}

/// The SQL of `group_events` rows as the event stream reads them (`EventRows` on SQLite).
enum PostgresEventRows {
    /// `EventRows.loggedEventColumns`, a message body's event id being its event's (a body's own
    /// `event_id` keeps the provisional id it was inserted with; ``PostgresMessageRows/columns``),
    /// null without a body (the decoder tests that column).
    static let loggedEventColumns = EventRows.loggedEventColumns(
        messageColumns: MessageRows.columns(eventID: "CASE WHEN gm.seq IS NOT NULL THEN e.event_id END"))

    /// The app's highest committed `event_id` (0: none yet).
    static func head(_ session: PostgresSession, app: String) async throws -> Int64 {
        try await session.first("SELECT last_event_id FROM app_event_heads WHERE app_id = ?", [.text(app)]) { try $0.int64(0) } ?? 0
    }

    /// Reads the app's events matching `condition` (over `group_events e` alone, with its
    /// `ORDER BY e.event_id` / `LIMIT`), with message bodies and, when asked, the approvers of
    /// approver-addressed events.
    ///
    /// The events are selected first (a materialized CTE, so the plan walks the app's
    /// `(app_id, event_id)` range and stops at the limit), then joined with their groups and
    /// bodies: joined in one query, the planner could start from the app's groups and probe the
    /// events of each.
    static func loggedEvents(
        _ session: PostgresSession, app: String, where condition: String, arguments: [PGValue], resolveApprovers: Bool = true
    ) async throws -> [LoggedEvent] {
        var events: [LoggedEvent] = []
        var applicationIDs: Set<String> = []
        var groupKeys: [Int] = []
        try await session.rows(
            """
            WITH e AS MATERIALIZED (SELECT * FROM group_events e WHERE e.app_id = ? AND \(condition))
            SELECT \(Self.loggedEventColumns) FROM e
            JOIN groups g ON g.app_id = e.app_id AND g.group_key = e.group_key
            LEFT JOIN group_messages gm ON gm.app_id = e.app_id AND gm.group_key = e.group_key AND gm.seq = e.seq
            ORDER BY e.event_id
            """, [.text(app)] + arguments
        ) { row in
            let event = try Rows.event(row)
            var logged = LoggedEvent(
                eventID: try row.int64(10), event: event, groupType: try Rows.parse(row.text(11), GroupType.init(rawValue:)),
                groupName: try row.text(13), memberCount: try row.int(14))
            if event.kind == .groupMessage, !row.isNull(EventRows.messageColumnOffset) {
                logged.message = try MessageRows.message(
                    OffsetRow(row: row, offset: EventRows.messageColumnOffset), appID: event.appID, groupID: event.groupID)
            }
            if LoggedEvent.applicationKinds.contains(event.kind), let id = event.changes["application_id"] {
                applicationIDs.insert(id)
            }
            groupKeys.append(try row.int(12))
            events.append(logged)
        }
        if resolveApprovers {
            var approversByGroup: [Int: [String]] = [:]
            for index in events.indices {
                guard case .approvers = events[index].event.recipient else { continue }
                let key = groupKeys[index]
                if approversByGroup[key] == nil { approversByGroup[key] = try await approvers(session, app: app, groupKey: Int64(key)) }
                events[index].approvers = approversByGroup[key] ?? []
            }
        }
        if !applicationIDs.isEmpty {
            var items: [String: Application] = [:]
            for item in try await PostgresApplicationRows.fetchAll(
                session, where: "a.app_id = ? AND a.application_id = ANY(?)",
                arguments: [.text(app), .texts(applicationIDs.sorted())])
            {
                items[item.id] = item
            }
            for index in events.indices where LoggedEvent.applicationKinds.contains(events[index].event.kind) {
                events[index].application = events[index].event.changes["application_id"].flatMap { items[$0] }
            }
        }
        let topics = EventRows.audienceTopics(of: events)
        if !topics.isEmpty {
            EventRows.setAudiences(&events, privateTopics: try await privateTopics(session, app: app, ids: topics))
        }
        return events
    }

    /// The private topics among `ids`, each with its community's permission groups (read now).
    static func privateTopics(_ session: PostgresSession, app: String, ids: [String]) async throws -> [String: [PermissionGroup]] {
        var topics: [String: [PermissionGroup]] = [:]
        try await session.rows(
            """
            SELECT t.group_id, c.permission_groups FROM groups t
            JOIN groups c ON c.app_id = t.app_id AND c.group_key = t.parent_key
            WHERE t.app_id = ? AND t.group_id = ANY(?) AND t.is_private = 1
            """, [.text(app), .texts(ids)]
        ) { row in
            topics[try row.text(0)] = try Rows.permissionGroups(row.optionalText(1))
        }
        return topics
    }

    /// The users who approve for a group now: the owner, and the admins when its
    /// `join_approvers` is `owner_and_admins`.
    static func approvers(_ session: PostgresSession, app: String, groupKey: Int64) async throws -> [String] {
        var users: [String] = []
        try await session.rows(
            """
            SELECT m.user_id FROM members m JOIN groups g ON g.app_id = m.app_id AND g.group_key = m.group_key
            WHERE m.app_id = ? AND m.group_key = ?
              AND (m.role = 'owner' OR (m.role = 'admin' AND g.join_approvers = 'owner_and_admins'))
            ORDER BY m.join_order
            """, [.text(app), .integer(groupKey)]
        ) { users.append(try $0.text(0)) }
        return users
    }

    /// Which group rows a user's stream carries after `eventID`
    /// (`EventRows.userScope(_:app:userID:after:topics:)`): with a membership of a Community,
    /// also its `event_id` interval and the community's topics, read only for a user in a
    /// community.
    static func userScope(_ session: PostgresSession, app: String, userID: String, after eventID: Int64) async throws -> UserScope {
        var scope = UserScope()
        let community = GroupType.community.rawValue
        var currentCommunities: [(id: String, key: Int64, joinSequence: Int64)] = []
        var communityKeys: [String: Int64] = [:]
        try await session.rows(
            """
            SELECT g.group_id, m.join_seq, m.role, g.join_approvers, m.receive_option, g.type, g.group_key FROM members m
            JOIN groups g ON g.app_id = m.app_id AND g.group_key = m.group_key
            WHERE m.app_id = ? AND m.user_id = ?
            """, [.text(app), .text(userID)]
        ) { row in
            let key = try row.text(0)
            let joinSequence = try row.int64(1)
            scope.intervals[key, default: []].append(UserScope.Interval(after: max(0, joinSequence - 1), through: nil))
            let role = try row.text(2)
            let approvers = try row.text(3)
            if role == "owner" || (role == "admin" && approvers == "owner_and_admins") { scope.approverOf.insert(key) }
            if try row.text(4) == ReceiveOption.notReceive.rawValue { scope.notReceiving.insert(key) }
            if try row.text(5) == community {
                let groupKey = try row.int64(6)
                currentCommunities.append((key, groupKey, joinSequence))
                communityKeys[key] = groupKey
            }
        }
        // A current community membership's interval by `event_id`: after its join's row (the
        // start of the log for an initial member, or when the row was purged).
        for membership in currentCommunities {
            var joinEventID: Int64 = 0
            if membership.joinSequence > 0 {
                joinEventID = try await session.first(
                    "SELECT event_id FROM group_events WHERE app_id = ? AND group_key = ? AND seq = ?",
                    [.text(app), .integer(membership.key), .integer(membership.joinSequence)]
                ) { try $0.int64(0) } ?? 0
            }
            scope.topicIntervals[membership.id, default: []].append(UserScope.Interval(after: joinEventID, through: nil))
        }
        var leaves: [String: [(sequence: Int64, eventID: Int64)]] = [:]
        var leftCommunities: Set<String> = []
        try await session.rows(
            """
            SELECT e.group_id, e.seq, e.event_id, g.type, e.group_key FROM group_events e
            JOIN groups g ON g.app_id = e.app_id AND g.group_key = e.group_key
            WHERE e.app_id = ? AND e.recipient_user = ? AND e.event_id > ? AND e.kind IN ('KICKED_FROM_GROUP', 'QUIT_GROUP')
            """, [.text(app), .text(userID), .integer(eventID)]
        ) { row in
            let key = try row.text(0)
            leaves[key, default: []].append((try row.int64(1), try row.int64(2)))
            if try row.text(3) == community {
                leftCommunities.insert(key)
                communityKeys[key] = try row.int64(4)
            }
        }
        for (key, ended) in leaves {
            var joins: [(sequence: Int64, eventID: Int64)] = []
            try await session.rows(
                """
                SELECT seq, targets, event_id FROM group_events
                WHERE app_id = ? AND group_id = ? AND event_id > ?
                  AND kind IN ('GROUP_CREATED', 'MEMBER_JOINED', 'MEMBER_INVITED')
                """, [.text(app), .text(key), .integer(eventID)]
            ) { row in
                if try EventJSON.strings(row.text(1)).contains(userID) { joins.append((try row.int64(0), try row.int64(2))) }
            }
            scope.recordEnded(key, leaves: ended, joins: joins, isCommunity: leftCommunities.contains(key))
        }
        // The communities' topics, deleted ones too (their rows in the window count).
        if !communityKeys.isEmpty {
            try await session.rows(
                "SELECT group_id FROM groups WHERE app_id = ? AND parent_key = ANY(?)",
                [.text(app), .integers(communityKeys.values.sorted())]
            ) { scope.topics.append(try $0.text(0)) }
        }
        return scope
    }
}
