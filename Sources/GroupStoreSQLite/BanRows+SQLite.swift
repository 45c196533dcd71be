import GRDB
import GroupModel
import GroupStore
import GroupStoreSQL

extension BanRows {
    /// The bans of `users` in the group still running at `time`, by user.
    static func bans(_ db: Database, groupKey: Int64, users: [String], time: Timestamp) throws -> [String: GroupBan] {
        var found: [String: GroupBan] = [:]
        let padded = Rows.padded(users)
        try RawStatement(
            db,
            """
            SELECT \(columns) FROM group_bans
            WHERE group_key = ? AND (until_ms IS NULL OR until_ms > ?) AND user_id IN (\(Rows.placeholders(padded.count)))
            """
        ).rows([.integer(groupKey), .integer(time.millisecondsSince1970)] + padded.map { .text($0) }) { row in
            let ban = try Self.ban(row)
            found[ban.userID] = ban
        }
        return found
    }

    /// How many bans of the group still run at `time`.
    static func count(_ db: Database, groupKey: Int64, time: Timestamp) throws -> Int {
        try Int.fetchOne(
            db.cachedStatement(
                sql: "SELECT COUNT(*) FROM group_bans WHERE group_key = ? AND (until_ms IS NULL OR until_ms > ?)"),
            arguments: [groupKey, time.millisecondsSince1970]) ?? 0
    }

    /// One page of the group's running bans, by user id after `after`.
    static func page(_ db: Database, groupKey: Int64, after: String?, limit: Int, time: Timestamp) throws -> [GroupBan] {
        var found: [GroupBan] = []
        try RawStatement(
            db,
            """
            SELECT \(columns) FROM group_bans
            WHERE group_key = ? AND (until_ms IS NULL OR until_ms > ?) AND user_id > ?
            ORDER BY user_id LIMIT ?
            """
        ).rows([.integer(groupKey), .integer(time.millisecondsSince1970), .text(after ?? ""), .integer(Int64(limit))]) { row in
            found.append(try Self.ban(row))
        }
        return found
    }
}
