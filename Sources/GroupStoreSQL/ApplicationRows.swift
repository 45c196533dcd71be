import Foundation
import GroupModel

/// The SQL of the `applications` table.
package enum ApplicationRows {
    /// The selected columns, `applications a` joined with `groups g`.
    package static let columns = """
        a.app_key, a.application_id, a.app_id, g.group_id, a.kind, a.state, a.sender_id, a.subject_id, a.message,
        a.created_at, a.updated_at, a.expires_at, a.approval_state, a.approval_by, a.approval_message, a.approval_at,
        a.consent_state, a.consent_by, a.consent_message, a.consent_at, a.handled_by, a.handle_message, a.handled_at,
        a.invite_link_id, g.name
        """
    /// How many columns ``columns`` selects.
    package static let columnCount = 25

    /// The row's key, item and group name.
    package static func decode(_ row: some ColumnReader) throws -> (key: Int64, application: Application, groupName: String) {
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

    /// The upsert of an item, the same SQL on SQLite (`upsert(_:groupKey:db:)`) and PostgreSQL.
    package static let upsertSQL = """
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
    package static func upsertArguments(_ a: Application, groupKey: Int64) -> [SQLArgument] {
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
}
