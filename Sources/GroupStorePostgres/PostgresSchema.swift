import Foundation
import GroupStore
import GroupStoreSQL

/// The PostgreSQL schema: numbered migrations, applied at start-up under an advisory lock.
///
/// The tables and columns are SQLite's (docs/STORE.md), with one rule added: **every table is
/// keyed by `app_id` first** (primary keys, unique constraints, indexes, foreign keys), and every
/// statement names the app. So the schema can be distributed by `app_id` (Citus-style: each app's
/// rows on one shard, every query and transaction of an app on that shard) without a change of
/// the SQL (docs/SCALING.md).
enum PostgresSchema {
    /// The advisory-lock class ids groupd uses (`pg_advisory_lock(class, object)`).
    enum Lock {
        /// Migrations (object 0): one node migrates; the others wait and find them applied.
        static let migrations: Int32 = 0x6770_0001
        /// An app's writes (object: `hashtext(app_id)`), held for a write transaction: shared by
        /// a batch whose mutations name their groups (which then take their groups' and users'
        /// 64-bit keys, `WriteScope.lockKeys`), exclusive by one with a mutation of the whole
        /// app (``PostgresSchema/v11``'s `groupd_lock_batch`, which spells it in decimal:
        /// 1735393282).
        static let appWrites: Int32 = 0x6770_0002
        /// A periodic pass (object: the pass), held while one node runs it.
        static let passes: Int32 = 0x6770_0003
        /// An app's relayed room messages (object: `hashtext(app_id)`), held by each insert
        /// (``PostgresSchema/v2``, which spells it in decimal: 1735393284).
        static let roomMessages: Int32 = 0x6770_0004
    }

    /// The notification channel a commit notifies with its app id (no other payload: the
    /// listeners read the events from the table).
    static let eventChannel = "groupd_events"

    /// The migrations in order. Append new ones; never edit a shipped one.
    static let migrations: [(id: String, sql: String)] = [
        ("v1", v1), ("v2", v2), ("v3", v3), ("v4", v4), ("v5", v5), ("v6", v6), ("v7", v7), ("v8", v8), ("v9", v9), ("v10", v10),
        ("v11", v11), ("v12", v12), ("v13", v13), ("v14", v14), ("v15", v15), ("v16", v16),
        ("v17", v17), ("v18", v18), ("v19", v19),
    ]

    /// The notification channel a relayed AVChatRoom message notifies with its app id.
    static let roomChannel = "groupd_rooms"

    /// Applies the migrations not yet applied, under the migration lock (two nodes starting at
    /// once migrate once: the second waits for the lock, then finds them applied).
    /// - Parameters:
    ///   - session: The connection that takes the migration lock and runs each migration in a
    ///     transaction of its own.
    ///   - lastMigration: Tests only: stop after this migration, as a database of an
    ///     older groupd would be (`nil`: apply them all).
    /// - Returns: The identifiers of the migrations applied, in order (all of them, not only
    ///   this call's).
    static func migrate(_ session: PostgresSession, upTo lastMigration: String? = nil) async throws -> [String] {
        let lock: [PGValue] = [.integer(Int64(Lock.migrations))]
        try await session.command("SELECT pg_advisory_lock(?::int4, 0)", lock)
        do {
            let applied = try await migrateLocked(session, upTo: lastMigration)
            try? await session.command("SELECT pg_advisory_unlock(?::int4, 0)", lock)
            return applied
        } catch {
            try? await session.command("SELECT pg_advisory_unlock(?::int4, 0)", lock)
            throw error
        }
    }

    /// ``migrate(_:upTo:)`` under the migration lock.
    private static func migrateLocked(_ session: PostgresSession, upTo lastMigration: String?) async throws -> [String] {
        try await session.command("""
            CREATE TABLE IF NOT EXISTS groupd_migrations (
                id TEXT PRIMARY KEY,
                applied_at TIMESTAMPTZ NOT NULL DEFAULT now())
            """)
        var applied: [String] = []
        try await session.rows("SELECT id FROM groupd_migrations ORDER BY id") { applied.append(try $0.text(0)) }
        let wanted = lastMigration.flatMap { last in migrations.firstIndex { $0.id == last } }.map { migrations[...$0] }
            ?? migrations[...]
        for migration in wanted where !applied.contains(migration.id) {
            try await session.begin()
            do {
                for statement in statements(of: migration.sql) { try await session.command(statement) }
                try await session.execute("INSERT INTO groupd_migrations (id) VALUES (?)", [.text(migration.id)])
                try await session.commit()
            } catch {
                await session.rollback()
                throw error
            }
            applied.append(migration.id)
        }
        // In the order of ``migrations`` (the table reads them by id, where "v10" sorts before "v2").
        let known = migrations.map(\.id)
        return known.filter(applied.contains) + applied.filter { !known.contains($0) }
    }

    /// The statements of a migration script, one by one (the extended query protocol runs one
    /// statement per query): split at `;` outside `$$`-quoted function bodies.
    static func statements(of script: String) -> [String] {
        var statements: [String] = []
        var current = ""
        var quoted = false
        var previous: Character = " "
        for character in script {
            if character == "$" && previous == "$" { quoted.toggle() }
            if character == ";" && !quoted {
                let statement = current.trimmingCharacters(in: .whitespacesAndNewlines)
                if !statement.isEmpty { statements.append(statement) }
                current = ""
            } else {
                current.append(character)
            }
            previous = character == "$" && previous == "$" ? " " : character
        }
        let last = current.trimmingCharacters(in: .whitespacesAndNewlines)
        if !last.isEmpty { statements.append(last) }
        return statements
    }
}
