import GroupModel
import GroupStore
import GroupStoreSQL

/// The rows of `group_attributes` and `group_counters` (migration v9), shared by the write
/// transaction and the reads.
enum PostgresAttributeRows {
    /// A group's attributes and counters.
    static func load(_ session: PostgresSession, app: String, groupKey: Int64) async throws -> GroupAttributeSet {
        var set = GroupAttributeSet()
        try await session.rows(
            """
            SELECT key, value, version, updated_at, updated_by FROM group_attributes
            WHERE app_id = ? AND group_key = ?
            """, [.text(app), .integer(groupKey)]
        ) { row in
            let key = try row.text(0)
            set.attributes[key] = GroupAttribute(
                key: key, value: try row.blob(1), version: try row.int64(2),
                updatedAt: Timestamp(millisecondsSince1970: try row.int64(3)), updatedBy: try row.optionalText(4))
        }
        try await session.rows(
            "SELECT key, value FROM group_counters WHERE app_id = ? AND group_key = ?", [.text(app), .integer(groupKey)]
        ) { row in set.counters[try row.text(0)] = try row.int64(1) }
        return set
    }

    /// Writes a change's attributes, deletions and counters.
    static func write(_ change: AttributeChange, app: String, groupKey: Int64, session: PostgresSession) async throws {
        for attribute in change.upserts {
            _ = try await session.execute(
                """
                INSERT INTO group_attributes (app_id, group_key, key, value, version, updated_at, updated_by)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (app_id, group_key, key) DO UPDATE SET value = excluded.value, version = excluded.version,
                    updated_at = excluded.updated_at, updated_by = excluded.updated_by
                """,
                [
                    .text(app), .integer(groupKey), .text(attribute.key), .bytes(attribute.value),
                    .integer(attribute.version), .integer(attribute.updatedAt.millisecondsSince1970),
                    .text(attribute.updatedBy),
                ])
        }
        if !change.deletions.isEmpty {
            _ = try await session.execute(
                "DELETE FROM group_attributes WHERE app_id = ? AND group_key = ? AND key = ANY(?)",
                [.text(app), .integer(groupKey), .texts(change.deletions)])
        }
        for (key, value) in change.counters {
            _ = try await session.execute(
                """
                INSERT INTO group_counters (app_id, group_key, key, value) VALUES (?, ?, ?, ?)
                ON CONFLICT (app_id, group_key, key) DO UPDATE SET value = excluded.value
                """, [.text(app), .integer(groupKey), .text(key), .integer(value)])
        }
    }
}
