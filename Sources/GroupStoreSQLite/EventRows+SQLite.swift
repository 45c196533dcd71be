import Foundation
import GRDB
import GroupModel
import GroupStore
import GroupStoreSQL

extension EventRows {
    /// The highest `event_id` ever given (deleted rows included), from AUTOINCREMENT's counter.
    static func latestEventID(_ db: Database) throws -> Int64 {
        try RawStatement(db, "SELECT seq FROM sqlite_sequence WHERE name = 'group_events'").first([]) { $0.int64(0) } ?? 0
    }

    /// Read events matching `condition` (a `WHERE` clause over `group_events e` joined with
    /// `groups g`, with its `ORDER BY` / `LIMIT`), with message bodies (one query: the body is
    /// joined) and, when asked, the approvers of approver-addressed events.
    static func loggedEvents(
        _ db: Database, where condition: String, arguments: [SQLArgument], resolveApprovers: Bool = true
    ) throws -> [LoggedEvent] {
        var events: [LoggedEvent] = []
        var applicationKeys: Set<ApplicationKey> = []
        var approversByGroup: [Int64: [String]] = [:]
        try RawStatement(
            db,
            """
            SELECT \(loggedEventColumns) FROM group_events e JOIN groups g ON g.group_key = e.group_key
            LEFT JOIN group_messages gm ON gm.event_id = e.event_id
            WHERE \(condition)
            """
        ).rows(arguments) { row in
            let event = try Rows.event(row)
            let groupKey = row.int64(12)
            var logged = LoggedEvent(
                eventID: row.int64(10), event: event, groupType: try Rows.parse(row.text(11), GroupType.init(rawValue:)),
                groupName: row.text(13), memberCount: row.int(14))
            if event.kind == .groupMessage, !row.isNull(messageColumnOffset) {
                logged.message = try MessageRows.message(
                    OffsetRow(row: row, offset: messageColumnOffset), appID: event.appID, groupID: event.groupID)
            }
            if LoggedEvent.applicationKinds.contains(event.kind), let id = event.changes["application_id"] {
                applicationKeys.insert(ApplicationKey(app: event.appID, id: id))
            }
            if resolveApprovers, case .approvers = event.recipient {
                if approversByGroup[groupKey] == nil { approversByGroup[groupKey] = try approvers(db, groupKey: groupKey) }
                logged.approvers = approversByGroup[groupKey] ?? []
            }
            events.append(logged)
        }
        if !applicationKeys.isEmpty {
            // One read per app in the batch, and only when it holds application events.
            let items = try applications(db, keys: applicationKeys)
            for index in events.indices where LoggedEvent.applicationKinds.contains(events[index].event.kind) {
                let event = events[index].event
                events[index].application = event.changes["application_id"].flatMap {
                    items[ApplicationKey(app: event.appID, id: $0)]
                }
            }
        }
        if events.contains(where: { audienceTopic(of: $0.event) != nil }) {
            setAudiences(&events, privateTopics: try privateTopics(db, events: events))
        }
        return events
    }

    /// The private topics `events` belong to (``EventRows/audienceTopic(of:)``), each with its
    /// community's permission groups (read now); one read per app.
    static func privateTopics(_ db: Database, events: [LoggedEvent]) throws -> [String: [PermissionGroup]] {
        var topics: [String: [PermissionGroup]] = [:]
        let byApp = Dictionary(grouping: events.compactMap { logged in
            audienceTopic(of: logged.event).map { (app: logged.event.appID, topic: $0) }
        }, by: \.app)
        for (app, entries) in byApp {
            try RawStatement(
                db,
                """
                SELECT t.group_id, c.permission_groups FROM groups t JOIN groups c ON c.group_key = t.parent_key
                WHERE t.app_id = ? AND t.group_id IN (SELECT value FROM json_each(?)) AND t.is_private = 1
                """
            ).rows([.text(app), .text(try Rows.jsonArray(Array(Set(entries.map(\.topic))).sorted()))]) { row in
                topics[row.text(0)] = try Rows.permissionGroups(row.optionalText(1))
            }
        }
        return topics
    }

    /// An application's app-wide identity.
    struct ApplicationKey: Hashable {
        /// The app.
        var app: String
        /// `applications.application_id`.
        var id: String
    }

    /// The applications with the given keys (one indexed read per app).
    static func applications(_ db: Database, keys: Set<ApplicationKey>) throws -> [ApplicationKey: Application] {
        var result: [ApplicationKey: Application] = [:]
        for (app, appKeys) in Dictionary(grouping: keys, by: \.app) {
            let list = try Rows.jsonArray(appKeys.map(\.id).sorted())
            let found = try ApplicationRows.fetchAll(
                db, where: "a.app_id = ? AND a.application_id IN (SELECT value FROM json_each(?))", arguments: [.text(app), .text(list)])
            for application in found { result[ApplicationKey(app: app, id: application.id)] = application }
        }
        return result
    }

    /// The users who approve for a group now: the owner, and the admins when its
    /// `join_approvers` is `owner_and_admins`.
    static func approvers(_ db: Database, groupKey: Int64) throws -> [String] {
        try String.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT m.user_id FROM members m JOIN groups g ON g.group_key = m.group_key
                    WHERE m.group_key = ?
                      AND (m.role = 'owner' OR (m.role = 'admin' AND g.join_approvers = 'owner_and_admins'))
                    ORDER BY m.join_order
                    """),
            arguments: [groupKey])
    }

    /// The `event_id`s of a user's stream candidates after `eventID`, the first `limit` in order:
    /// the rows of `groups` (by `group_events_by_group`) and the rows addressed to the user (by
    /// `group_events_by_recipient`), each read up to `limit`, merged. A page costs what the
    /// user's groups wrote after the cursor, not what the app wrote.
    static func userCandidateIDs(
        _ db: Database, app: String, userID: String, groups: [String], after eventID: Int64, limit: Int
    ) throws -> [Int64] {
        var ids: Set<Int64> = []
        let byGroup = try db.cachedStatement(
            sql: "SELECT event_id FROM group_events WHERE app_id = ? AND group_id = ? AND event_id > ? ORDER BY event_id LIMIT ?")
        for group in groups {
            let rows = try Int64.fetchCursor(byGroup, arguments: [app, group, eventID, limit])
            while let id = try rows.next() { ids.insert(id) }
        }
        let addressed = try Int64.fetchCursor(
            db.cachedStatement(
                sql: """
                    SELECT event_id FROM group_events
                    WHERE app_id = ? AND recipient_user = ? AND event_id > ? ORDER BY event_id LIMIT ?
                    """),
            arguments: [app, userID, eventID, limit])
        while let id = try addressed.next() { ids.insert(id) }
        return Array(ids.sorted().prefix(limit))
    }

    /// Which group rows a user's stream carries after `eventID`: per group, the sequence
    /// intervals of the user's memberships (the current one, and those ended by a kick or quit
    /// after `eventID`), and the groups where the user approves now.
    ///
    /// For a membership of a Community, also its `event_id` interval and the community's
    /// topics (deleted ones too), whose rows the stream carries as the community's: the
    /// interval starts after the join's row (the community's row at `join_seq`; the start of the
    /// log for an initial member) and ends with the leave's. Those reads (the topics in one
    /// statement, a current membership's join row in one each) run only for a user in a
    /// community, and only when the file has topics (`topics`, v21).
    static func userScope(
        _ db: Database, app: String, userID: String, after eventID: Int64, topics: Bool
    ) throws -> UserScope {
        var scope = UserScope()
        let community = GroupType.community.rawValue
        // The current community memberships: group key and the join's sequence.
        var currentCommunities: [(id: String, key: Int64, joinSequence: Int64)] = []
        // The group key of each community with a membership in the scope.
        var communityKeys: [String: Int64] = [:]
        let rows = try Row.fetchCursor(
            db.cachedStatement(
                sql: """
                    SELECT g.group_id, m.join_seq, m.role, g.join_approvers, m.receive_option, g.type, g.group_key
                    FROM members m JOIN groups g ON g.group_key = m.group_key
                    WHERE m.app_id = ? AND m.user_id = ?
                    """),
            arguments: [app, userID])
        while let row = try rows.next() {
            let key: String = try row.decode(atIndex: 0)
            // `join_seq` is the sequence of the member's join event (0 for initial members).
            let joinSequence: Int64 = try row.decode(atIndex: 1)
            scope.intervals[key, default: []].append(UserScope.Interval(after: max(0, joinSequence - 1), through: nil))
            let role: String = try row.decode(atIndex: 2)
            let approvers: String = try row.decode(atIndex: 3)
            if role == "owner" || (role == "admin" && approvers == "owner_and_admins") { scope.approverOf.insert(key) }
            if try row.decode(String.self, atIndex: 4) == ReceiveOption.notReceive.rawValue { scope.notReceiving.insert(key) }
            if topics, try row.decode(String.self, atIndex: 5) == community {
                let groupKey: Int64 = try row.decode(atIndex: 6)
                currentCommunities.append((key, groupKey, joinSequence))
                communityKeys[key] = groupKey
            }
        }
        // A current community membership's interval by `event_id`: after its join's row.
        for membership in currentCommunities {
            var joinEventID: Int64 = 0
            if membership.joinSequence > 0 {
                // No row (purged with the rows before it): from the start of what is kept.
                joinEventID = try Int64.fetchOne(
                    db.cachedStatement(sql: "SELECT event_id FROM group_events WHERE group_key = ? AND seq = ?"),
                    arguments: [membership.key, membership.joinSequence]) ?? 0
            }
            scope.topicIntervals[membership.id, default: []].append(UserScope.Interval(after: joinEventID, through: nil))
        }
        // Memberships ended since `eventID`: each KICKED_FROM_GROUP / QUIT_GROUP addressed to
        // the user closes one; it began at the user's latest join before it in the window, or
        // before the window.
        var leaves: [String: [(sequence: Int64, eventID: Int64)]] = [:]
        var leftCommunities: Set<String> = []
        let leaveRows = try Row.fetchCursor(
            db.cachedStatement(
                sql: """
                    SELECT e.group_id, e.seq, e.event_id, g.type, e.group_key
                    FROM group_events e JOIN groups g ON g.group_key = e.group_key
                    WHERE e.app_id = ? AND e.recipient_user = ? AND e.event_id > ?
                      AND e.kind IN ('KICKED_FROM_GROUP', 'QUIT_GROUP')
                    """),
            arguments: [app, userID, eventID])
        while let row = try leaveRows.next() {
            let key: String = try row.decode(atIndex: 0)
            leaves[key, default: []].append((try row.decode(Int64.self, atIndex: 1), try row.decode(Int64.self, atIndex: 2)))
            if topics, try row.decode(String.self, atIndex: 3) == community {
                leftCommunities.insert(key)
                communityKeys[key] = try row.decode(Int64.self, atIndex: 4)
            }
        }
        for (key, ended) in leaves {
            var joins: [(sequence: Int64, eventID: Int64)] = []
            let joinRows = try Row.fetchCursor(
                db.cachedStatement(
                    sql: """
                        SELECT seq, targets, event_id FROM group_events
                        WHERE app_id = ? AND group_id = ? AND event_id > ?
                          AND kind IN ('GROUP_CREATED', 'MEMBER_JOINED', 'MEMBER_INVITED')
                        """),
                arguments: [app, key, eventID])
            while let row = try joinRows.next() {
                let targets = try EventJSON.strings(try row.decode(String.self, atIndex: 1))
                if targets.contains(userID) { joins.append((try row.decode(Int64.self, atIndex: 0), try row.decode(Int64.self, atIndex: 2))) }
            }
            scope.recordEnded(key, leaves: ended, joins: joins, isCommunity: leftCommunities.contains(key))
        }
        // The communities' topics, deleted ones too (their rows in the window count).
        if !communityKeys.isEmpty {
            scope.topics = try String.fetchAll(
                db.cachedStatement(sql: "SELECT group_id FROM groups WHERE parent_key IN (SELECT value FROM json_each(?))"),
                arguments: [try Rows.jsonArray(communityKeys.values.sorted())])
        }
        return scope
    }
}
