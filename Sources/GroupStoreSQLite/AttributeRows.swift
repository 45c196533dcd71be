import GRDB
import GroupModel
import GroupStore
import GroupStoreSQL

/// The rows of `group_attributes` and `group_counters` (migration v14), shared by the write
/// transaction and the reads.
enum AttributeRows {
    /// A group's attributes and counters.
    static func load(_ db: Database, groupKey: Int64) throws -> GroupAttributeSet {
        var set = GroupAttributeSet()
        try RawStatement(
            db, "SELECT key, value, version, updated_at, updated_by FROM group_attributes WHERE group_key = ?"
        ).rows([.integer(groupKey)]) { row in
            let key = row.text(0)
            set.attributes[key] = GroupAttribute(
                key: key, value: row.blob(1), version: row.int64(2),
                updatedAt: Timestamp(millisecondsSince1970: row.int64(3)), updatedBy: row.optionalText(4))
        }
        try RawStatement(db, "SELECT key, value FROM group_counters WHERE group_key = ?")
            .rows([.integer(groupKey)]) { row in set.counters[row.text(0)] = row.int64(1) }
        return set
    }

    /// Writes a change's attributes, deletions and counters.
    static func write(_ change: AttributeChange, groupKey: Int64, db: Database) throws {
        for attribute in change.upserts {
            try RawStatement(
                db,
                """
                INSERT INTO group_attributes (group_key, key, value, version, updated_at, updated_by)
                VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT (group_key, key) DO UPDATE SET value = excluded.value, version = excluded.version,
                    updated_at = excluded.updated_at, updated_by = excluded.updated_by
                """
            ).execute([
                .integer(groupKey), .text(attribute.key), .blob(attribute.value), .integer(attribute.version),
                .integer(attribute.updatedAt.millisecondsSince1970), .text(attribute.updatedBy),
            ])
        }
        for key in change.deletions {
            try RawStatement(db, "DELETE FROM group_attributes WHERE group_key = ? AND key = ?")
                .execute([.integer(groupKey), .text(key)])
        }
        for (key, value) in change.counters {
            try RawStatement(
                db,
                """
                INSERT INTO group_counters (group_key, key, value) VALUES (?, ?, ?)
                ON CONFLICT (group_key, key) DO UPDATE SET value = excluded.value
                """
            ).execute([.integer(groupKey), .text(key), .integer(value)])
        }
    }
}
