import Foundation
import GRDB
import GroupModel
import GroupStore
import GroupStoreSQL

extension Rows {
    /// The SQL reading one live (not dismissed) group by app and id.
    private static let liveGroupSQL = """
        SELECT \(GroupColumn.list()) FROM groups
        WHERE app_id = ? AND group_id = ? AND dismissed_at IS NULL
        """

    /// ``liveGroupSQL`` for a file migrated only up to before v8 (tests of older files).
    private static let liveGroupSQLBeforeV8 = """
        SELECT \(GroupColumn.list(ownerSettings: false)) FROM groups
        WHERE app_id = ? AND group_id = ? AND dismissed_at IS NULL
        """

    /// The row key of a group of `app`, read inside a transaction.
    /// - Parameter dismissedToo: Whether a dismissed group's key is returned too (history reads).
    /// - Throws: ``GroupError/groupNotFound(_:)`` when no such group is stored (or it is
    ///   dismissed and `dismissedToo` is false).
    static func groupKey(_ db: Database, app: String, groupID: String, dismissedToo: Bool = false) throws -> Int64 {
        let sql = dismissedToo
            ? "SELECT group_key FROM groups WHERE app_id = ? AND group_id = ?"
            : "SELECT group_key FROM groups WHERE app_id = ? AND group_id = ? AND dismissed_at IS NULL"
        guard let key = try RawStatement(db, sql).first([.text(app), .text(groupID)], { $0.int64(0) }) else {
            throw GroupError.groupNotFound(groupID)
        }
        return key
    }

    /// Reads one live group in the caller's transaction (without its custom fields).
    /// - Throws: ``GroupError/groupNotFound(_:)`` when it is not stored or is dismissed.
    static func liveGroup(_ db: Database, app: String, groupID: String, ownerSettings: Bool = true) throws -> GroupRow {
        let sql = ownerSettings ? liveGroupSQL : liveGroupSQLBeforeV8
        guard let read = try RawStatement(db, sql).first([.text(app), .text(groupID)], group) else {
            throw GroupError.groupNotFound(groupID)
        }
        return read
    }

    /// The member insert, with the origin columns of v6 and the invite link of v14.
    private static let insertMemberSQL = """
        INSERT INTO members (
            group_key, user_id, app_id, role, join_order, join_seq, joined_at, name_card,
            muted_until, receive_option, join_source, inviter_id, invite_link_id)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """

    /// The member insert of a file from v6 to before v14 (no invite link column).
    private static let insertMemberBeforeV14SQL = """
        INSERT INTO members (
            group_key, user_id, app_id, role, join_order, join_seq, joined_at, name_card,
            muted_until, receive_option, join_source, inviter_id)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """

    /// The member insert of a file before v6 (no origin columns).
    private static let insertMemberBeforeV6SQL = """
        INSERT INTO members (
            group_key, user_id, app_id, role, join_order, join_seq, joined_at, name_card,
            muted_until, receive_option)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """

    /// Inserts a member row and its custom fields.
    /// - Parameter origin: Whether the schema has the origin columns (``SQLiteBackend/storesMemberOrigin``).
    /// - Parameter inviteLinks: Whether the schema has `invite_link_id` (v14).
    static func insert(
        _ member: Member, groupKey: Int64, appID: String, origin: Bool, inviteLinks: Bool = true, db: Database
    ) throws {
        var arguments: [SQLArgument] = [
            .integer(groupKey), .text(member.userID), .text(appID), .text(member.role.rawValue), .integer(member.joinOrder),
            .integer(member.joinSequence), .integer(member.joinedAt.millisecondsSince1970), .text(member.nameCard),
            .integer(member.mutedUntil?.millisecondsSince1970), .text(member.receiveOption.rawValue),
        ]
        if origin { arguments += [.int(member.joinSource.rawValue), .text(member.inviterID)] }
        if origin, inviteLinks { arguments.append(.text(member.inviteLinkID)) }
        let sql = !origin ? insertMemberBeforeV6SQL : inviteLinks ? insertMemberSQL : insertMemberBeforeV14SQL
        try RawStatement(db, sql).execute(arguments)
        for (key, value) in member.custom {
            try RawStatement(db, "INSERT INTO member_custom (group_key, user_id, key, value) VALUES (?, ?, ?, ?)")
                .execute([.integer(groupKey), .text(member.userID), .text(key), .blob(value)])
        }
    }

    /// Number `drafts` after `sequence`, insert them and move the group's `latest_seq`.
    /// Must run inside the mutation's write transaction.
    static func appendEvents(
        _ drafts: [GroupEvent.Draft], groupKey: Int64, appID: String, groupID: String, after sequence: Int64,
        time: Timestamp, db: Database
    ) throws -> [GroupEvent] {
        var events: [GroupEvent] = []
        events.reserveCapacity(drafts.count)
        for (offset, draft) in drafts.enumerated() {
            let event = GroupEvent(
                draft: draft, appID: appID, groupID: groupID, sequence: sequence + Int64(offset) + 1, time: time)
            let (recipientKind, recipientUser): (String, String?) =
                switch event.recipient {
                case .group: ("group", nil)
                case .user(let user): ("user", user)
                case .approvers: ("approvers", nil)
                }
            try RawStatement(db, insertEventSQL).execute([
                .text(appID), .integer(groupKey), .text(groupID), .integer(event.sequence), .text(event.kind.rawValue),
                .integer(time.millisecondsSince1970), .text(event.operatorID),
                .text(EventJSON.encode(event.targets)), .text(EventJSON.encode(event.changes)),
                .text(recipientKind), .text(recipientUser),
            ])
            events.append(event)
        }
        if let last = events.last {
            try RawStatement(db, "UPDATE groups SET latest_seq = ? WHERE group_key = ?")
                .execute([.integer(last.sequence), .integer(groupKey)])
        }
        return events
    }

    private static let insertEventSQL = """
        INSERT INTO group_events (
            app_id, group_key, group_id, seq, kind, time, operator_id, targets, changes,
            recipient_kind, recipient_user)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """
}
