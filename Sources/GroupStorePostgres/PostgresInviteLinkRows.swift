import GroupModel
import GroupStore
import GroupStoreSQL

/// The reads and writes of `invite_links` (migration v9) over PostgreSQL, with the columns,
/// decoder and upsert of `InviteLinkRows`; groups are joined by app as well.
enum PostgresInviteLinkRows {
    /// Links of live groups matching `condition` (on `l` and `g`), oldest first.
    static func fetch(_ session: PostgresSession, where condition: String, _ arguments: [PGValue]) async throws -> [InviteLink] {
        var links: [InviteLink] = []
        try await session.rows(
            """
            SELECT \(InviteLinkRows.columns)
            FROM invite_links l JOIN groups g ON g.app_id = l.app_id AND g.group_key = l.group_key
            WHERE g.dismissed_at IS NULL AND \(condition) ORDER BY l.created_at, l.link_id
            """, arguments
        ) { links.append(try InviteLinkRows.decode($0)) }
        return links
    }

    /// One link by its token's hash or its id.
    static func one(_ session: PostgresSession, app: String, key: SnapshotRequest.InviteLinkKey) async throws -> InviteLink? {
        switch key {
        case .tokenHash(let hash):
            try await fetch(session, where: "l.app_id = ? AND l.token_hash = ?", [.text(app), .text(hash)]).first
        case .id(let id):
            try await fetch(session, where: "l.app_id = ? AND l.link_id = ?", [.text(app), .text(id)]).first
        }
    }

    /// A group's links live at `now`.
    static func live(_ session: PostgresSession, app: String, groupKey: Int64, now: Timestamp) async throws -> [InviteLink] {
        try await fetch(
            session,
            where: """
                l.app_id = ? AND l.group_key = ? AND l.revoked_at IS NULL
                AND (l.expires_at IS NULL OR l.expires_at > ?) AND (l.max_uses = 0 OR l.use_count < l.max_uses)
                """,
            [.text(app), .integer(groupKey), .integer(now.millisecondsSince1970)])
    }

    /// Inserts a link, or updates its use count and revocation.
    static func upsert(_ link: InviteLink, groupKey: Int64, session: PostgresSession) async throws {
        _ = try await session.execute(
            InviteLinkRows.upsertSQL, InviteLinkRows.upsertArguments(link, groupKey: groupKey).map(PGValue.init))
    }
}
