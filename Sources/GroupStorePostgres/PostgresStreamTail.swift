import GroupModel
import GroupStore
import GroupStoreSQL

/// What one batch appends to one app's event stream, held until the batch's last statement
/// (``PostgresBackend``'s tail), which numbers it.
///
/// An app's positions (`event_id`) are dense and in commit order across every node, yet the
/// bodies of batches writing different groups of the app run in parallel: a batch numbers its
/// events only at its end, in one statement that takes the app's ticket row
/// (`app_event_heads.last_event_id`, moved by the batch's event count) and inserts the events
/// and writes the joined-group sync rows with the positions it got. The
/// ticket's row lock is held from that statement to `COMMIT`, so the next batch of the app (on
/// any node) takes its positions after this one's commit, and no position becomes visible after a
/// higher one.
///
/// Until then the events carry *provisional* ids: the n-th event of the app in this batch is
/// `-n`. They stand in wherever a mutation needs an id before the end (a message body's
/// `event_id`, which keeps it: readers take a body's id from its event row,
/// ``PostgresMessageRows/columns``; the events handed to the commit feed); the batch's `EventPositions` (`base`
/// per app) turn them into the final ones (`base + n`) before anyone sees them.
struct PostgresStreamTail {
    let app: String
    private var groupKeys: [Int64] = []
    private var groupIDs: [String] = []
    private var sequences: [Int64] = []
    private var kinds: [String] = []
    private var times: [Int64] = []
    private var operators: [String?] = []
    private var targets: [String] = []
    private var changes: [String] = []
    private var recipientKinds: [String] = []
    private var recipientUsers: [String?] = []
    /// The joined-group sync rows: per user and group, the ordinal of the latest event (one row
    /// each: an upsert may not touch a row twice in one statement).
    private var joinedChanges: [JoinedChange: Int64] = [:]
    /// Per group, the ordinal of its latest event that changed what a joined-group list shows.
    private var infoStamps: [Int64: Int64] = [:]
    /// The batch's sends not written yet (their bodies take their final ids here).
    var sends = PendingSends.Rows()
    /// The batch's other rows of this app not written yet (``HeldWrites``): group rows, members,
    /// custom fields, tombstones.
    var held: HeldWrites.Rows?

    /// The groups whose `info_event_id` the statement moves (it may not also move their
    /// `latest_seq`: one statement updates a row once).
    var stampedGroups: Set<Int64> { Set(infoStamps.keys) }

    private struct JoinedChange: Hashable {
        var user: String
        var groupKey: Int64
    }

    init(app: String) {
        self.app = app
    }

    /// How many events the batch appended to the app.
    var count: Int { sequences.count }

    /// Adds an event of the group `groupKey`; returns its provisional id.
    mutating func append(_ event: GroupEvent, groupKey: Int64) -> Int64 {
        let (recipientKind, recipientUser): (String, String?) =
            switch event.recipient {
            case .group: ("group", nil)
            case .user(let user): ("user", user)
            case .approvers: ("approvers", nil)
            }
        groupKeys.append(groupKey)
        groupIDs.append(event.groupID)
        sequences.append(event.sequence)
        kinds.append(event.kind.rawValue)
        times.append(event.time.millisecondsSince1970)
        operators.append(event.operatorID)
        targets.append(EventJSON.encode(event.targets))
        changes.append(EventJSON.encode(event.changes))
        recipientKinds.append(recipientKind)
        recipientUsers.append(recipientUser)
        return -Int64(sequences.count)
    }

    /// `user`'s joined-group sync row of the group takes the final id of `provisional`.
    mutating func joinedChange(user: String, groupKey: Int64, provisional: Int64) {
        joinedChanges[JoinedChange(user: user, groupKey: groupKey)] = -provisional
    }

    /// The group's `info_event_id` takes the final id of `provisional`.
    mutating func stampInfo(groupKey: Int64, provisional: Int64) {
        infoStamps[groupKey] = -provisional
    }

    /// The tail statement: takes the app's next ``count`` positions from its ticket row (created
    /// at 0 for an app's first events), inserts the events with them, writes the sends held in
    /// memory (``sends``: bodies with their final ids, mention rows, `latest_seq`) and the other
    /// held rows (``held``; a held group row takes its group's `info_event_id` stamp), upserts the
    /// joined-group sync rows and moves the other groups' `info_event_id`; returns the position
    /// before the first (the app's head before this batch).
    var statement: (sql: String, arguments: [PGValue]) {
        let joined = joinedChanges.sorted { ($0.key.groupKey, $0.key.user) < ($1.key.groupKey, $1.key.user) }
        var unstamped = infoStamps
        let rows = held.map { $0.statement(app: app, stamps: &unstamped) }
        let stamps = unstamped.sorted { $0.key < $1.key }
        let bodies = sends.statement(app: app, from: "t, ", eventID: "t.base - b.event_id")
        return (
            """
            WITH t AS (
                INSERT INTO app_event_heads AS h (app_id, last_event_id) VALUES (?, ?)
                ON CONFLICT (app_id) DO UPDATE SET last_event_id = h.last_event_id + excluded.last_event_id
                RETURNING h.last_event_id - ? AS base),
            ev AS (
                INSERT INTO group_events (
                    app_id, event_id, group_key, group_id, seq, kind, time, operator_id, targets, changes,
                    recipient_kind, recipient_user)
                SELECT ?, t.base + e.ord, e.group_key, e.group_id, e.seq, e.kind, e.time, e.operator_id, e.targets,
                    e.changes, e.recipient_kind, e.recipient_user
                FROM t, unnest(?::int8[], ?::text[], ?::int8[], ?::text[], ?::int8[], ?::text[], ?::text[], ?::text[],
                    ?::text[], ?::text[]) WITH ORDINALITY AS e(
                    group_key, group_id, seq, kind, time, operator_id, targets, changes, recipient_kind, recipient_user, ord)),
            \(bodies.sql),
            joined AS (
                INSERT INTO joined_changes (app_id, user_id, group_key, event_id)
                SELECT ?, j.user_id, j.group_key, t.base + j.ord
                FROM t, unnest(?::text[], ?::int8[], ?::int8[]) AS j(user_id, group_key, ord)
                ON CONFLICT (app_id, user_id, group_key) DO UPDATE SET event_id = excluded.event_id),
            info AS (
                UPDATE groups g SET info_event_id = t.base + i.ord
                FROM t, unnest(?::int8[], ?::int8[]) AS i(group_key, ord)
                WHERE g.app_id = ? AND g.group_key = i.group_key)\(rows.map { ",\n" + $0.sql } ?? "")
            SELECT base FROM t
            """,
            [
                .text(app), .int(count), .int(count),
                .text(app), .integers(groupKeys), .texts(groupIDs), .integers(sequences), .texts(kinds), .integers(times),
                .optionalTexts(operators), .texts(targets), .texts(changes), .texts(recipientKinds),
                .optionalTexts(recipientUsers),
            ] + bodies.arguments + [
                .text(app), .texts(joined.map(\.key.user)), .integers(joined.map(\.key.groupKey)), .integers(joined.map(\.value)),
                .integers(stamps.map(\.key)), .integers(stamps.map(\.value)), .text(app),
            ] + (rows?.arguments ?? [])
        )
    }
}
