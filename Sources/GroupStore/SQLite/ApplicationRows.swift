import Foundation
import GRDB
import GroupModel

/// The SQL of the `applications` table.
enum ApplicationRows {
    /// The selected columns, `applications a` joined with `groups g`.
    static let columns = """
        a.app_key, a.application_id, a.app_id, g.group_id, a.kind, a.state, a.sender_id, a.subject_id, a.message,
        a.created_at, a.updated_at, a.expires_at, a.approval_state, a.approval_by, a.approval_message, a.approval_at,
        a.consent_state, a.consent_by, a.consent_message, a.consent_at, a.handled_by, a.handle_message, a.handled_at,
        a.invite_link_id, g.name
        """
    /// How many columns ``columns`` selects.
    static let columnCount = 25

    /// The row's key, item and group name.
    static func decode(_ row: some ColumnReader) throws -> (key: Int64, application: Application, groupName: String) {
        func time(_ index: Int) throws -> Timestamp? {
            try row.optionalInt64(index).map { Timestamp(millisecondsSince1970: $0) }
        }
        func enumValue<E: RawRepresentable>(_ type: E.Type, _ index: Int) throws -> E where E.RawValue == String {
            let text = try row.text(index)
            guard let value = E(rawValue: text) else { throw GroupError.internal("unknown stored value \(text)") }
            return value
        }
        func decision(_ index: Int) throws -> ApplicationDecision {
            ApplicationDecision(
                state: try enumValue(DecisionState.self, index), decidedBy: try row.optionalText(index + 1),
                message: try row.text(index + 2), decidedAt: try time(index + 3))
        }
        var application = Application(
            id: try row.text(1), appID: try row.text(2), groupID: try row.text(3), kind: try enumValue(ApplicationKind.self, 4),
            storedState: try enumValue(ApplicationState.self, 5), senderID: try row.text(6),
            subjectID: try row.text(7), message: try row.text(8),
            createdAt: Timestamp(millisecondsSince1970: try row.int64(9)),
            updatedAt: Timestamp(millisecondsSince1970: try row.int64(10)),
            expiresAt: Timestamp(millisecondsSince1970: try row.int64(11)),
            approval: try decision(12), consent: try decision(16), handledBy: try row.optionalText(20),
            handleMessage: try row.text(21), handledAt: try time(22))
        application.inviteLinkID = try row.optionalText(23)
        return (try row.int64(0), application, try row.text(24))
    }

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

    /// The upsert of ``upsert(_:groupKey:db:)``, the same SQL on SQLite and PostgreSQL.
    static let upsertSQL = """
        INSERT INTO applications (
            app_id, application_id, group_key, kind, state, sender_id, subject_id, message,
            created_at, updated_at, expires_at,
            approval_state, approval_by, approval_message, approval_at,
            consent_state, consent_by, consent_message, consent_at,
            handled_by, handle_message, handled_at, invite_link_id)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (app_id, application_id) DO UPDATE SET
            state = excluded.state, sender_id = excluded.sender_id, message = excluded.message,
            updated_at = excluded.updated_at, expires_at = excluded.expires_at,
            approval_state = excluded.approval_state, approval_by = excluded.approval_by,
            approval_message = excluded.approval_message, approval_at = excluded.approval_at,
            consent_state = excluded.consent_state, consent_by = excluded.consent_by,
            consent_message = excluded.consent_message, consent_at = excluded.consent_at,
            handled_by = excluded.handled_by, handle_message = excluded.handle_message,
            handled_at = excluded.handled_at, invite_link_id = excluded.invite_link_id
        """

    /// The arguments of ``upsertSQL`` for `a` in the group row `groupKey`.
    static func upsertArguments(_ a: Application, groupKey: Int64) -> [SQLArgument] {
        [
            .text(a.appID), .text(a.id), .integer(groupKey), .text(a.kind.rawValue), .text(a.storedState.rawValue),
            .text(a.senderID), .text(a.subjectID), .text(a.message), .integer(a.createdAt.millisecondsSince1970),
            .integer(a.updatedAt.millisecondsSince1970), .integer(a.expiresAt.millisecondsSince1970),
            .text(a.approval.state.rawValue), .text(a.approval.decidedBy), .text(a.approval.message),
            .integer(a.approval.decidedAt?.millisecondsSince1970),
            .text(a.consent.state.rawValue), .text(a.consent.decidedBy), .text(a.consent.message),
            .integer(a.consent.decidedAt?.millisecondsSince1970),
            .text(a.handledBy), .text(a.handleMessage), .integer(a.handledAt?.millisecondsSince1970),
            .text(a.inviteLinkID),
        ]
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
