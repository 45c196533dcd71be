import GroupModel

/// The SQL of ban lists (`group_bans`, v11), run inside the caller's transaction or read.
package enum BanRows {
    /// The columns ``ban(_:)`` decodes, in order.
    package static let columns = "user_id, until_ms, reason, operator_id, banned_at"

    /// Decode a row selected with ``columns``.
    package static func ban(_ row: some ColumnReader) throws -> GroupBan {
        GroupBan(
            userID: try row.text(0), until: try row.optionalInt64(1).map(Timestamp.init(millisecondsSince1970:)),
            reason: try row.text(2), operatorID: try row.optionalText(3),
            bannedAt: Timestamp(millisecondsSince1970: try row.int64(4)))
    }
}
