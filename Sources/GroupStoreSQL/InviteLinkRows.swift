import GroupModel

/// The rows of `invite_links` (SQLite migration v14, PostgreSQL v9), shared by the write
/// transaction and the reads; the column list, the decoder and the upsert serve both backends.
package enum InviteLinkRows {
    package static let columns = """
        l.link_id, l.app_id, g.group_id, l.token_hash, l.created_by, l.created_at, l.expires_at, l.max_uses,
        l.use_count, l.requires_approval, l.revoked_at, l.revoked_by
        """

    /// A link from a row of ``columns``.
    package static func decode(_ row: some ColumnReader) throws -> InviteLink {
        InviteLink(
            id: try row.text(0), appID: try row.text(1), groupID: try row.text(2), tokenHash: try row.text(3),
            createdBy: try row.optionalText(4), createdAt: Timestamp(millisecondsSince1970: try row.int64(5)),
            expiresAt: try row.optionalInt64(6).map(Timestamp.init(millisecondsSince1970:)),
            maxUses: Int(try row.int64(7)), useCount: Int(try row.int64(8)), requiresApproval: try row.int64(9) != 0,
            revokedAt: try row.optionalInt64(10).map(Timestamp.init(millisecondsSince1970:)),
            revokedBy: try row.optionalText(11))
    }

    package static let upsertSQL = """
        INSERT INTO invite_links (
            app_id, link_id, group_key, token_hash, created_by, created_at, expires_at, max_uses, use_count,
            requires_approval, revoked_at, revoked_by)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (app_id, link_id) DO UPDATE SET use_count = excluded.use_count,
            revoked_at = excluded.revoked_at, revoked_by = excluded.revoked_by
        """

    /// The arguments of ``upsertSQL`` for `link` in the group row `groupKey`.
    package static func upsertArguments(_ link: InviteLink, groupKey: Int64) -> [SQLArgument] {
        [
            .text(link.appID), .text(link.id), .integer(groupKey), .text(link.tokenHash), .text(link.createdBy),
            .integer(link.createdAt.millisecondsSince1970), .integer(link.expiresAt?.millisecondsSince1970),
            .integer(Int64(link.maxUses)), .integer(Int64(link.useCount)), .integer(link.requiresApproval ? 1 : 0),
            .integer(link.revokedAt?.millisecondsSince1970), .text(link.revokedBy),
        ]
    }
}
