import GRDB
import GroupModel
import GroupStore
import GroupStoreSQL

extension InviteLinkRows {
    /// Links of live groups matching `condition` (on `l` and `g`).
    static func fetch(_ db: Database, where condition: String, _ arguments: [SQLArgument]) throws -> [InviteLink] {
        var links: [InviteLink] = []
        try RawStatement(
            db,
            """
            SELECT \(columns) FROM invite_links l JOIN groups g ON g.group_key = l.group_key
            WHERE g.dismissed_at IS NULL AND \(condition) ORDER BY l.created_at, l.link_id
            """
        ).rows(arguments) { links.append(try decode($0)) }
        return links
    }

    /// One link by its token's hash or its id.
    static func one(_ db: Database, app: String, key: SnapshotRequest.InviteLinkKey) throws -> InviteLink? {
        switch key {
        case .tokenHash(let hash):
            try fetch(db, where: "l.app_id = ? AND l.token_hash = ?", [.text(app), .text(hash)]).first
        case .id(let id):
            try fetch(db, where: "l.app_id = ? AND l.link_id = ?", [.text(app), .text(id)]).first
        }
    }

    /// A group's links live at `now`.
    static func live(_ db: Database, groupKey: Int64, now: Timestamp) throws -> [InviteLink] {
        try fetch(
            db,
            where: """
                l.group_key = ? AND l.revoked_at IS NULL AND (l.expires_at IS NULL OR l.expires_at > ?)
                AND (l.max_uses = 0 OR l.use_count < l.max_uses)
                """,
            [.integer(groupKey), .integer(now.millisecondsSince1970)])
    }

    /// Inserts a link, or updates its use count and revocation.
    static func upsert(_ link: InviteLink, groupKey: Int64, db: Database) throws {
        try RawStatement(db, upsertSQL).execute(upsertArguments(link, groupKey: groupKey))
    }
}
