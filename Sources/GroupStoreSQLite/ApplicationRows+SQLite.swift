import Foundation
import GRDB
import GroupModel
import GroupStore
import GroupStoreSQL

extension ApplicationRows {
    static func fetchAll(_ db: Database, where condition: String, arguments: [SQLArgument]) throws -> [Application] {
        var result: [Application] = []
        try RawStatement(
            db, "SELECT \(columns) FROM applications a JOIN groups g ON g.group_key = a.group_key WHERE \(condition) ORDER BY a.app_key"
        ).rows(arguments) { result.append(try decode($0).application) }
        return result
    }

    static func fetchOne(_ db: Database, where condition: String, arguments: [SQLArgument]) throws -> Application? {
        try fetchAll(db, where: condition, arguments: arguments).first
    }

    /// Inserts the item, or updates it when its id exists in the app (its group and creation
    /// order never change).
    static func upsert(_ a: Application, groupKey: Int64, db: Database) throws {
        try RawStatement(db, upsertSQL).execute(upsertArguments(a, groupKey: groupKey))
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
