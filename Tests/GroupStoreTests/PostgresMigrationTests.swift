import Foundation
import GroupModel
@testable import GroupStore
@testable import GroupStorePostgres
@testable import GroupStoreSQL
@testable import GroupStoreSQLite
import GroupTestSupport
import Logging
import NIOPosix
import Testing

/// Runs `body` with a connection of its own to `settings`' database, closed afterwards.
private func withSession<T: Sendable>(
    _ settings: PostgresStoreSettings, _ body: (PostgresSession) async throws -> T
) async throws -> T {
    let session = PostgresSession(
        settings: settings, eventLoop: MultiThreadedEventLoopGroup.singleton.next(), logger: Logger(label: "test"), id: 900)
    do {
        let value = try await session.run(body)
        await session.disconnect()
        return value
    } catch {
        await session.disconnect()
        throw error
    }
}

/// The database's tables, columns, indexes and triggers, one line each, sorted.
private func shape(_ session: PostgresSession) async throws -> [String] {
    var lines: [String] = []
    try await session.rows(
        """
        SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' '
               || coalesce(column_default, '') FROM information_schema.columns WHERE table_schema = 'public'
        """
    ) { lines.append(try $0.text(0)) }
    try await session.rows("SELECT indexdef FROM pg_indexes WHERE schemaname = 'public'") { lines.append(try $0.text(0)) }
    try await session.rows(
        "SELECT trigger_name || ' ' || event_object_table FROM information_schema.triggers WHERE trigger_schema = 'public'"
    ) { lines.append(try $0.text(0)) }
    try await session.rows("SELECT id FROM groupd_migrations") { lines.append("migration " + (try $0.text(0))) }
    return lines.sorted()
}

/// v1's row trigger of `joined_counts` (which v12 replaced), as v1 created it.
private let memberCountedRowTrigger: String = {
    let v1 = PostgresSchema.v1
    let start = v1.range(of: "CREATE FUNCTION groupd_member_counted()")!.lowerBound
    let end = v1.range(of: "FOR EACH ROW EXECUTE FUNCTION groupd_member_counted()")!.upperBound
    return String(v1[start..<end])
}()

/// What v19 added, taken away: private topics (`groups.is_private`).
private let backToV18 = """
    ALTER TABLE groups DROP COLUMN is_private;
    DELETE FROM groupd_migrations WHERE id = 'v19'
    """

/// What v18 added, taken away (after v19): permission groups (`groups.permission_groups`,
/// `members.permission_groups`; the partial index goes with its column).
private let backToV17 = backToV18 + ";\n" + """
    ALTER TABLE groups DROP COLUMN permission_groups;
    ALTER TABLE members DROP COLUMN permission_groups;
    DELETE FROM groupd_migrations WHERE id = 'v18'
    """

/// What v17 added, taken away (after v18): topics (`groups.parent_key`, its index and foreign
/// key go with it; `topic_reads`).
private let backToV16 = backToV17 + ";\n" + """
    DROP TABLE topic_reads;
    ALTER TABLE groups DROP COLUMN parent_key;
    DELETE FROM groupd_migrations WHERE id = 'v17'
    """

/// What v16 changed, taken back (after v17): `groups.type` without `Community`.
private let backToV15 = backToV16 + ";\n" + """
    ALTER TABLE groups DROP CONSTRAINT groups_type_check,
        ADD CONSTRAINT groups_type_check CHECK (type IN ('Work', 'Public', 'Meeting', 'AVChatRoom'));
    DELETE FROM groupd_migrations WHERE id = 'v16'
    """

/// What v15 added, taken away (after v16): the reply columns of `group_messages` (their index goes
/// with them).
private let backToV14 = backToV15 + ";\n" + """
    ALTER TABLE group_messages DROP COLUMN reply_seq, DROP COLUMN reply_message_id, DROP COLUMN reply_sender_id,
        DROP COLUMN reply_type, DROP COLUMN reply_preview;
    DELETE FROM groupd_migrations WHERE id = 'v15'
    """

/// What v14 added, taken away (after v15): the edit columns of `group_messages`.
private let backToV13 = backToV14 + ";\n" + """
    ALTER TABLE group_messages DROP COLUMN edit_count, DROP COLUMN edited_by, DROP COLUMN edit_time;
    DELETE FROM groupd_migrations WHERE id = 'v14'
    """

/// What v13 added, taken away (after v14): the reaction tables.
private let backToV12 = backToV13 + ";\n" + """
    DROP TABLE message_reactions;
    DROP TABLE reaction_counts;
    DELETE FROM groupd_migrations WHERE id = 'v13'
    """

/// What v12 changed, taken back (after v13): the foreign keys of the appended tables to `groups`,
/// the row trigger of `joined_counts`.
private let backToV11 = backToV12 + ";\n" + """
    DROP TRIGGER members_joined_count_insert ON members;
    DROP TRIGGER members_joined_count_delete ON members;
    DROP FUNCTION groupd_members_inserted();
    DROP FUNCTION groupd_members_deleted();
    \(memberCountedRowTrigger);
    \(PostgresSchema.appendedTables.map {
        "ALTER TABLE \($0) ADD FOREIGN KEY (app_id, group_key) REFERENCES groups (app_id, group_key) ON DELETE CASCADE"
    }.joined(separator: ";\n"));
    DELETE FROM groupd_migrations WHERE id = 'v12'
    """

/// The foreign keys to `groups`, by table.
private func foreignKeysToGroups(_ session: PostgresSession) async throws -> Set<String> {
    var tables: Set<String> = []
    try await session.rows("SELECT conrelid::regclass::text FROM pg_constraint WHERE contype = 'f' AND confrelid = 'groups'::regclass") {
        tables.insert(try $0.text(0))
    }
    return tables
}

/// What v11 changed, taken back: event ids from one sequence shared by every app (set above
/// every id held), message bodies keyed by `event_id`, no batch lock function.
private let backToV10 = backToV11 + ";\n" + """
    DROP FUNCTION groupd_lock_batch(TEXT[], TEXT[], BIGINT[]);
    ALTER TABLE group_messages DROP CONSTRAINT group_messages_pkey;
    ALTER TABLE group_messages ADD PRIMARY KEY (app_id, event_id);
    CREATE INDEX group_messages_by_seq ON group_messages (app_id, group_key, seq, sender_id);
    CREATE SEQUENCE group_events_event_id_seq OWNED BY group_events.event_id;
    SELECT setval('group_events_event_id_seq', (SELECT coalesce(max(event_id), 0) + 1 FROM group_events));
    ALTER TABLE group_events ALTER COLUMN event_id SET DEFAULT nextval('group_events_event_id_seq');
    DELETE FROM groupd_migrations WHERE id = 'v11'
    """

/// What v6–v11 added, taken away again, newest first: a database as groupd before v6 left it.
private let backToV5 = backToV10 + ";\n" + """
    DROP TABLE joined_changes;
    DROP TABLE member_tombstones;
    DROP INDEX members_by_user_bytes;
    ALTER TABLE members DROP COLUMN changed_version;
    ALTER TABLE groups DROP COLUMN member_version, DROP COLUMN member_floor, DROP COLUMN info_event_id;
    DROP TABLE group_counters;
    DROP TABLE group_attributes;
    DROP TABLE invite_links;
    ALTER TABLE applications DROP COLUMN invite_link_id;
    ALTER TABLE members DROP COLUMN invite_link_id;
    ALTER TABLE groups DROP COLUMN invite_link_permission, DROP COLUMN pins, DROP COLUMN pin_permission,
        DROP COLUMN mention_all_permission, DROP COLUMN slow_mode_interval, DROP COLUMN mute_bypass;
    DROP TABLE message_mentions;
    DROP INDEX group_messages_by_sender;
    ALTER TABLE group_messages DROP COLUMN mention_all, DROP COLUMN mentioned_ids, DROP COLUMN recalled_by,
        DROP COLUMN recall_time;
    DROP TABLE group_bans;
    DELETE FROM groupd_migrations WHERE id IN ('v6', 'v7', 'v8', 'v9', 'v10')
    """

@Suite("PostgreSQL migrations over a database holding data", .enabled(if: PostgresTestServer.settings != nil))
struct PostgresMigrationTests {
    private let app = Fixture.app
    private let t0 = Fixture.t0
    private let types: [(id: String, type: GroupType)] = [("w", .work), ("p", .public), ("m", .meeting), ("r", .avChatRoom)]

    @Test("v6–v12 apply over groups, members and messages written before them; each type gets its defaults")
    func migrationsOverData() async throws {
        // The data, written by this groupd, then the schema taken back to v5 (checked against a
        // database migrated to v5 alone), so the migrations run over rows as an older groupd left them.
        let old = try await TemporaryStore(postgres: try #require(PostgresTestServer.settings))
        let settings = try #require(old.postgres)
        for (id, type) in types {
            let request = GroupCreationRequest(
                type: type, groupID: id, name: "team \(id)",
                members: type == .avChatRoom ? [] : ["bob", "carol"].map { InitialMember(userID: $0) })
            _ = try await old.store.createGroup(
                try GroupRules.planCreation(request, appID: app, creatorID: "alice", limits: .defaults, now: t0))
        }
        try await Fixture.send(old.store, "p", from: "bob")
        try await old.store.close()
        let v5Name = "groupd_test_v5_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let server = try #require(PostgresTestServer.settings)
        try await PostgresBackend.createDatabase(named: v5Name, settings: server)
        var v5 = server
        v5.url = PostgresTestServer.url(server.url, database: v5Name)
        let (applied, expected) = try await withSession(v5) { session in
            await (try PostgresSchema.migrate(session, upTo: "v5"), try shape(session))
        }
        #expect(applied == ["v1", "v2", "v3", "v4", "v5"])
        let taken = try await withSession(settings) { session in
            for statement in PostgresSchema.statements(of: backToV5) { try await session.command(statement) }
            return try await shape(session)
        }
        #expect(taken == expected)

        let withKeys = try await withSession(settings) { try await foreignKeysToGroups($0) }
        let backend = try await PostgresBackend.open(settings: settings)
        #expect(backend.appliedMigrations == PostgresSchema.migrations.map(\.id))
        // v12: the appended tables' keys to groups are gone, the others' kept.
        let keys = try await withSession(settings) { try await foreignKeysToGroups($0) }
        #expect(withKeys.isSuperset(of: ["members", "group_events", "group_messages"]))
        #expect(keys.isDisjoint(with: PostgresSchema.appendedTables))
        #expect(keys.isSuperset(of: withKeys.subtracting(PostgresSchema.appendedTables)))
        #expect(keys.isSuperset(of: ["group_custom", "applications", "group_bans", "invite_links"]))
        let store = Store(backend: backend, cacheCapacity: 0)
        let groups = try await store.groups(app: app, ids: types.map(\.id))
        for (id, type) in types {
            let group = try #require(groups[id], "\(id)")
            let defaults = type.preset.defaultSettings
            #expect(group.settings.mentionAllPermission == defaults.mentionAllPermission, "\(id)")
            #expect(group.settings.inviteLinkPermission == defaults.inviteLinkPermission, "\(id)")
            #expect(group.settings.pinPermission == defaults.pinPermission, "\(id)")
            #expect(group.settings.slowModeIntervalSeconds == 0, "\(id)")
            #expect(group.muteBypass.isEmpty && group.pins.isEmpty && group.memberVersion == 0, "\(id)")
        }
        let history = try await store.messages(app: app, groupID: "p", range: MessageRange(direction: .older, anchor: nil, floor: 0), limit: 10)
        let message = try #require(history.messages.first)
        #expect(history.messages.count == 1 && message.content.text == "hi")
        #expect(message.content.mentionedUserIDs.isEmpty && !message.content.mentionAll && message.recall == nil)
        let all = try await store.memberChanges(app: app, groupID: "p", since: 0, after: nil, limit: 10)
        #expect(Set(all.changed.map(\.userID)) == ["alice", "bob", "carol"] && all.version == 0)

        // The new columns and tables take writes over the old rows.
        try await Fixture.join(store, "p", "dave")
        try await Fixture.quit(store, "w", "carol")
        // Joined-group counts kept across v12's change of triggers: rows counted before it, a
        // join and a quit after it (the AVChatRoom has no stored audience and is not counted).
        let every = Set(GroupType.allCases)
        #expect(try await store.joinedGroupCount(app: app, userID: "bob", types: every) == 3)
        #expect(try await store.joinedGroupCount(app: app, userID: "carol", types: every) == 2)
        #expect(try await store.joinedGroupCount(app: app, userID: "dave", types: every) == 1)
        let delta = try await store.memberChanges(app: app, groupID: "p", since: 0, after: nil, limit: 10)
        #expect(delta.version == 1 && Set(delta.changed.map(\.userID)) == ["alice", "bob", "carol", "dave"])
        _ = try await store.mutateGroup(
            app: app, groupID: "p", operatorID: nil, targets: ["erin"], at: t0,
            parts: Store.groupSnapshotParts.union([.banCount])
        ) { snapshot in
            var change = GroupChange(group: snapshot.group)
            change.group.muteBypass = ["bob"]
            change.bans = [GroupBan(userID: "erin", until: nil, operatorID: nil, bannedAt: t0)]
            return (change, ())
        }
        #expect(try await store.groups(app: app, ids: ["p"])["p"]?.muteBypass == ["bob"])
        #expect(try await store.bans(app: app, groupID: "p", after: nil, limit: 5, now: t0).items.map(\.userID) == ["erin"])
        let mention = GroupMessage(
            appID: app, groupID: "p", sequence: 0, messageID: UUID().uuidString, senderID: "bob",
            content: MessageContent(text: "@carol", mentionedUserIDs: ["carol"]), time: t0)
        _ = try await store.appendMessage(mention, at: t0) { _, member, _ in try #require(member).nameCard }
        #expect(try await store.unreadMentions(app: app, userID: "carol", groupIDs: ["p"])["p"] == .me)
        try await store.close()
    }

    @Test("v11 over a stream numbered by the shared sequence: each app's positions continue above every id it holds; a cursor from before resumes after")
    func positionsContinueAfterV11() async throws {
        let old = try await TemporaryStore(postgres: try #require(PostgresTestServer.settings))
        let settings = try #require(old.postgres)
        try await Fixture.create(old.store, "g", members: ["bob"])
        try await old.store.close()
        // As groupd before v11 left it: ids from one sequence, which other apps moved far ahead,
        // the app's head its highest id.
        let before = try await withSession(settings) { session -> (head: Int64, ids: [Int64]) in
            for statement in PostgresSchema.statements(of: backToV10) { try await session.command(statement) }
            try await session.command("SELECT setval('group_events_event_id_seq', 5000)")
            for _ in 0..<3 {
                try await session.command("""
                    WITH ins AS (
                        INSERT INTO group_events (app_id, group_key, group_id, seq, kind, time, recipient_kind)
                        SELECT app_id, group_key, group_id, latest_seq + 1, 'GROUP_INFO_CHANGED', 0, 'group'
                        FROM groups WHERE app_id = 'app' AND group_id = 'g' RETURNING event_id, seq),
                    latest AS (UPDATE groups SET latest_seq = (SELECT seq FROM ins) WHERE app_id = 'app' AND group_id = 'g')
                    UPDATE app_event_heads SET last_event_id = (SELECT event_id FROM ins) WHERE app_id = 'app'
                    """)
                try await session.command("SELECT nextval('group_events_event_id_seq')")  // another app's id
            }
            var ids: [Int64] = []
            try await session.rows("SELECT event_id FROM group_events WHERE app_id = 'app' ORDER BY event_id") { ids.append(try $0.int64(0)) }
            let head = try await session.first("SELECT last_event_id FROM app_event_heads WHERE app_id = 'app'") { try $0.int64(0) }
            return (try #require(head), ids)
        }
        #expect(before.head == 5005 && before.ids.suffix(3) == [5001, 5003, 5005])

        let backend = try await PostgresBackend.open(settings: settings)
        #expect(backend.appliedMigrations.suffix(9) == ["v11", "v12", "v13", "v14", "v15", "v16", "v17", "v18", "v19"])
        let store = Store(backend: backend, cacheCapacity: 0)
        #expect(try await store.latestEventID(app: Fixture.app) == before.head)
        try await Fixture.send(store, "g", from: "bob")
        try await Fixture.join(store, "g", "carol")
        let resumed = try await store.appEvents(app: Fixture.app, after: before.head, limit: 10)
        #expect(resumed.events.map(\.eventID) == [5006, 5007])
        #expect(resumed.events.map(\.event.kind) == [.groupMessage, .memberJoined])
        #expect(resumed.events.first?.message?.eventID == 5006)
        let older = try await store.appEvents(app: Fixture.app, after: 5002, limit: 10)
        #expect(older.events.map(\.eventID) == [5003, 5005, 5006, 5007])
        #expect(try await store.latestEventID(app: Fixture.app) == 5007)
        let sequences = try await Fixture.events(store, "g").map(\.sequence)
        #expect(sequences == (1...Int64(sequences.count)).map { $0 })
        try await store.close()
    }
}
