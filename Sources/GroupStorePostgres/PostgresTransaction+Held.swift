import GroupModel
import GroupStore
import GroupStoreSQL

/// The rows a creation, a join, a departure or a group update writes, held in memory and written
/// by the batch's last statement with its events (``PostgresStreamTail``), instead of a statement
/// each: a join is then its loads and that one statement, however many rows it changes.
///
/// What is held: group rows (a new group's insert, with a key taken from the group key sequence
/// beforehand; an update), group custom fields, inserted members and their custom fields, removed
/// members, the tombstones of removed members, and the tombstones and retained mutes an inserted
/// member ends. Each kind of row goes in one data-modifying CTE per app (arrays unnested), a group
/// row in one per group, so a statement's text depends on the number of groups only.
///
/// PostgreSQL runs every CTE of a statement over one snapshot, and one statement may change a row
/// only once. So held rows are written first, in a statement of their own (``PostgresTransaction/flushHeld()``),
/// before anything could read them or change them a second time:
/// - a load from the database that names a group or a user they touch (a group's rows, a user's
///   joined-group count) or reads applications or invite links;
/// - another write of a group they touch (another mutation of it, a send to it, a purge);
/// - a group row update beside a `latest_seq` move of the same group.
/// A dismissal is never held: the triggers that count a user's groups must see its member
/// deletions before the group is marked dismissed, as separate statements order them.
///
/// A group row held when the tail also stamps its `info_event_id` takes the stamp in its own
/// insert or update (the tail's stamp would not see an inserted row, and may not update a row the
/// same statement updates).
struct HeldWrites {
    /// A group row's insert or update, made into SQL once the stamp is known: `stamp` is the
    /// ordinal (within the tail) of the event whose position becomes `info_event_id`, or `nil`.
    struct GroupRow {
        var key: Int64
        var render: (_ stamp: Int64?) -> (sql: String, arguments: [PGValue])
    }

    /// A group row's held update. Every column but two is written as the batch's latest change
    /// of the group left it, so a later change of the same group in the batch replaces the
    /// update (``followed(by:)``) instead of writing the row a second time: `next_join_order`
    /// moves past every member the batch's changes inserted, and `member_version` takes the
    /// latest change of members'.
    struct GroupUpdate {
        /// The columns from `name` to `mute_bypass` (``PostgresTransaction/groupUpdateSQL(_:app:groupKey:insertedMembers:latestSequence:memberVersion:dismissedAt:stamp:)``).
        var values: [PGValue]
        /// How many members the batch's changes of the group inserted (their join orders follow
        /// the row's `next_join_order`).
        var insertedMembers: Int
        var latestSequence: Int64
        var memberVersion: Int64?

        /// This update followed by `later`, a change of the same group made after it.
        func followed(by later: GroupUpdate) -> GroupUpdate {
            var merged = later
            merged.insertedMembers += insertedMembers
            merged.memberVersion = later.memberVersion ?? memberVersion
            return merged
        }
    }

    /// A group as the batch's held changes left it (``PostgresTransaction/load(_:)`` answers its
    /// group row from here instead of writing the held rows first).
    struct KnownGroup {
        var group: Group
        var key: Int64
    }

    /// The held rows of one app.
    struct Rows {
        /// Group inserts (a creation's row).
        var groupRows: [GroupRow] = []
        /// Group updates, by group key: one per group, however many changes of it the batch made.
        var groupUpdates: [Int64: GroupUpdate] = [:]
        var customKeys: [Int64] = []
        var customNames: [String] = []
        var customValues: [[UInt8]] = []
        var customDeletedKeys: [Int64] = []
        var customDeletedNames: [String] = []
        var members = MemberColumns()
        var memberCustomKeys: [Int64] = []
        var memberCustomUsers: [String] = []
        var memberCustomNames: [String] = []
        var memberCustomValues: [[UInt8]] = []
        var removedKeys: [Int64] = []
        var removedUsers: [String] = []
        var tombstoneKeys: [Int64] = []
        var tombstoneUsers: [String] = []
        var tombstoneVersions: [Int64] = []
        var tombstoneTimes: [Int64] = []
        /// Inserted members whose tombstone and retained mute go.
        var returningKeys: [Int64] = []
        var returningUsers: [String] = []
    }

    /// The columns of inserted members. A member's join order is its own (`relative` 0: a new
    /// group's members) or the group's `next_join_order` plus it (`relative` 1), read by the
    /// insert before the statement's group update moves it (a key probe per row: a join to
    /// `groups` let the generic plan scan the whole table).
    struct MemberColumns {
        var keys: [Int64] = []
        var users: [String] = []
        var roles: [String] = []
        var relative: [Int64] = []
        var joinOrders: [Int64] = []
        var joinSequences: [Int64] = []
        var joinedAt: [Int64] = []
        var nameCards: [String] = []
        var mutedUntil: [Int64?] = []
        var receiveOptions: [String] = []
        var joinSources: [Int64] = []
        var inviters: [String?] = []
        var inviteLinks: [String?] = []
        var changedVersions: [Int64] = []
    }

    struct UserID: Hashable {
        var app: String
        var user: String
    }

    var rows: [String: Rows] = [:]
    /// The groups with held rows, by key and by app and id.
    private(set) var groupKeys: Set<Int64> = []
    private(set) var groups: Set<PendingSends.GroupID> = []
    /// The users whose memberships held rows insert or delete.
    private(set) var users: Set<UserID> = []
    /// The groups whose held rows are an update of the group row (no creation, no dismissal), as
    /// the batch's changes left them.
    var known: [PendingSends.GroupID: KnownGroup] = [:]
    /// Per user, the memberships of counted groups (AVChatRooms are not) held rows insert, less
    /// those they delete: what the user's `joined_counts` row gains when they are written.
    private(set) var joinedCountChanges: [UserID: Int] = [:]

    var isEmpty: Bool { rows.isEmpty }

    /// Marks the group (and the users) as touched by held rows of `app`.
    mutating func touch(app: String, groupKey: Int64, groupID: String, users touched: some Sequence<String>) {
        groupKeys.insert(groupKey)
        groups.insert(PendingSends.GroupID(app: app, id: groupID))
        for user in touched { users.insert(UserID(app: app, user: user)) }
    }

    /// Counts memberships of a counted group that held rows insert and delete.
    mutating func countJoined(app: String, inserted: some Sequence<String>, removed: some Sequence<String>) {
        for user in inserted { joinedCountChanges[UserID(app: app, user: user), default: 0] += 1 }
        for user in removed { joinedCountChanges[UserID(app: app, user: user), default: 0] -= 1 }
    }

    /// Whether a load of `request` reads nothing of held rows but its users' joined-group
    /// counts, which it can read from the database and correct with ``joinedCountChanges`` (a
    /// creation's load, in a batch whose earlier creations or joins named its users).
    func answersCounts(_ request: SnapshotRequest) -> Bool {
        request.group == nil && request.application == nil && request.inviteLink == nil
            && !request.parts.contains(.applicationReads)
    }

    /// The joined-group count of `user` once held rows are written, from `stored`, the database's.
    func joinedCount(app: String, user: String, stored: Int) -> Int {
        stored + (joinedCountChanges[UserID(app: app, user: user)] ?? 0)
    }

    /// Takes the held rows, leaving none.
    mutating func take() -> [String: Rows] {
        defer { self = HeldWrites() }
        return rows
    }

    /// Whether a load of `request` could read a held row.
    func overlaps(_ request: SnapshotRequest) -> Bool {
        if isEmpty { return false }
        if request.application != nil || request.inviteLink != nil || request.parts.contains(.applicationReads) { return true }
        if let group = request.group, groups.contains(PendingSends.GroupID(app: request.app, id: group)) { return true }
        return touches(app: request.app, users: request.users)
    }

    /// Whether held rows insert or delete a membership of one of `users`.
    func touches(app: String, users named: some Sequence<String>) -> Bool {
        named.contains { users.contains(UserID(app: app, user: $0)) }
    }

    /// What a load of `request` reads beside the group row when its group is ``known``: rows no
    /// held row writes (memberships and facts of users held rows do not touch, bans, items, a
    /// room's presences, which a mutation writes at once).
    static let partsBesideHeldRows: SnapshotRequest.Parts = [
        .owner, .joinedGroupCounts, .retainedMutes, .bans, .banCount, .dueApplications, .presence,
    ]

    /// The group of `request` as the batch's held changes left it, when the load can take the
    /// group row from memory and read the rest from the database without the held rows written:
    /// it asks nothing but ``partsBesideHeldRows`` (and messages), and names no user (the owner
    /// included, when asked) whose membership held rows insert or delete.
    func knownGroup(for request: SnapshotRequest) -> KnownGroup? {
        guard let id = request.group, request.application == nil, request.inviteLink == nil, request.readState == nil,
              request.applicationReader == nil, Self.partsBesideHeldRows.isSuperset(of: request.parts),
              let group = known[PendingSends.GroupID(app: request.app, id: id)]
        else { return nil }
        var named = request.users
        if request.parts.contains(.owner), let owner = group.group.ownerID { named.append(owner) }
        return touches(app: request.app, users: named) ? nil : group
    }
}

extension HeldWrites.Rows {
    /// The data-modifying CTEs (for a `WITH`) writing these rows of `app`, named `h…`; `stamps`
    /// maps a group key to the ordinal of the event that stamps its `info_event_id` (only in the
    /// tail, where the CTE `t` gives the batch's base position); a group row that takes its stamp
    /// removes it from `stamps`.
    func statement(app: String, stamps: inout [Int64: Int64]) -> (sql: String, arguments: [PGValue]) {
        var parts: [String] = []
        var arguments: [PGValue] = []
        for (index, row) in groupRows.enumerated() {
            let stamp = stamps.removeValue(forKey: row.key)
            let (sql, values) = row.render(stamp)
            parts.append("hg\(index) AS (\(sql))")
            arguments += values
        }
        for (index, (key, update)) in groupUpdates.sorted(by: { $0.key < $1.key }).enumerated() {
            let (sql, values) = PostgresTransaction.groupUpdateSQL(
                update.values, app: app, groupKey: key, insertedMembers: update.insertedMembers,
                latestSequence: update.latestSequence, memberVersion: update.memberVersion, dismissedAt: nil,
                stamp: stamps.removeValue(forKey: key))
            parts.append("hu\(index) AS (\(sql))")
            arguments += values
        }
        /// A CTE deleting the rows of `table` of `app` named by the pairs (group key, `column`).
        func deletion(_ name: String, from table: String, by column: String, keys: [Int64], values: [String]) {
            parts.append("""
                \(name) AS (
                    DELETE FROM \(table) x USING unnest((SELECT ?::int8[]), (SELECT ?::text[])) AS d(group_key, \(column))
                    WHERE x.app_id = ? AND x.group_key = d.group_key AND x.\(column) = d.\(column))
                """)
            arguments += [.integers(keys), .texts(values), .text(app)]
        }
        if !customDeletedKeys.isEmpty {
            deletion("hcx", from: "group_custom", by: "key", keys: customDeletedKeys, values: customDeletedNames)
        }
        if !customKeys.isEmpty {
            parts.append("""
                hc AS (
                    INSERT INTO group_custom (app_id, group_key, key, value)
                    SELECT ?, c.group_key, c.key, c.value FROM unnest((SELECT ?::int8[]), (SELECT ?::text[]), (SELECT ?::bytea[])) AS c(group_key, key, value)
                    ON CONFLICT (app_id, group_key, key) DO UPDATE SET value = excluded.value)
                """)
            arguments += [.text(app), .integers(customKeys), .texts(customNames), .byteArrays(customValues)]
        }
        if !removedKeys.isEmpty {
            deletion("hmx", from: "members", by: "user_id", keys: removedKeys, values: removedUsers)
        }
        if !tombstoneKeys.isEmpty {
            parts.append("""
                ht AS (
                    INSERT INTO member_tombstones (app_id, group_key, user_id, version, removed_at)
                    SELECT ?, d.group_key, d.user_id, d.version, d.removed_at
                    FROM unnest((SELECT ?::int8[]), (SELECT ?::text[]), (SELECT ?::int8[]), (SELECT ?::int8[])) AS d(group_key, user_id, version, removed_at)
                    ON CONFLICT (app_id, group_key, user_id) DO UPDATE
                        SET version = excluded.version, removed_at = excluded.removed_at)
                """)
            arguments += [
                .text(app), .integers(tombstoneKeys), .texts(tombstoneUsers), .integers(tombstoneVersions),
                .integers(tombstoneTimes),
            ]
        }
        let m = members
        if !m.keys.isEmpty {
            parts.append("""
                hm AS (
                    INSERT INTO members (
                        app_id, group_key, user_id, role, join_order, join_seq, joined_at, name_card,
                        muted_until, receive_option, join_source, inviter_id, invite_link_id, changed_version)
                    SELECT ?, m.group_key, m.user_id, m.role,
                        CASE WHEN m.relative = 1 THEN (
                            SELECT g.next_join_order FROM groups g WHERE g.app_id = ? AND g.group_key = m.group_key
                        ) + m.join_order ELSE m.join_order END,
                        m.join_seq, m.joined_at, m.name_card, m.muted_until, m.receive_option, m.join_source,
                        m.inviter_id, m.invite_link_id, m.changed_version
                    FROM unnest((SELECT ?::int8[]), (SELECT ?::text[]), (SELECT ?::text[]), (SELECT ?::int8[]), (SELECT ?::int8[]), (SELECT ?::int8[]), (SELECT ?::int8[]), (SELECT ?::text[]),
                        (SELECT ?::int8[]), (SELECT ?::text[]), (SELECT ?::int8[]), (SELECT ?::text[]), (SELECT ?::text[]), (SELECT ?::int8[])) AS m(
                        group_key, user_id, role, relative, join_order, join_seq, joined_at, name_card, muted_until,
                        receive_option, join_source, inviter_id, invite_link_id, changed_version))
                """)
            arguments += [
                .text(app), .text(app), .integers(m.keys), .texts(m.users), .texts(m.roles), .integers(m.relative),
                .integers(m.joinOrders), .integers(m.joinSequences), .integers(m.joinedAt), .texts(m.nameCards),
                .optionalIntegers(m.mutedUntil), .texts(m.receiveOptions), .integers(m.joinSources),
                .optionalTexts(m.inviters), .optionalTexts(m.inviteLinks), .integers(m.changedVersions),
            ]
        }
        if !memberCustomKeys.isEmpty {
            parts.append("""
                hmc AS (
                    INSERT INTO member_custom (app_id, group_key, user_id, key, value)
                    SELECT ?, c.group_key, c.user_id, c.key, c.value
                    FROM unnest((SELECT ?::int8[]), (SELECT ?::text[]), (SELECT ?::text[]), (SELECT ?::bytea[])) AS c(group_key, user_id, key, value))
                """)
            arguments += [
                .text(app), .integers(memberCustomKeys), .texts(memberCustomUsers), .texts(memberCustomNames),
                .byteArrays(memberCustomValues),
            ]
        }
        if !returningKeys.isEmpty {
            deletion("htx", from: "member_tombstones", by: "user_id", keys: returningKeys, values: returningUsers)
            deletion("hrx", from: "retained_mutes", by: "user_id", keys: returningKeys, values: returningUsers)
        }
        return (parts.joined(separator: ",\n"), arguments)
    }
}

extension PostgresTransaction {
    /// Writes the rows held in memory, per app in one statement (group rows without their
    /// `info_event_id` stamps: the tail writes those). A failure fails the whole batch (the rows
    /// belong to earlier mutations of it).
    func flushHeld() async throws {
        guard !held.isEmpty else { return }
        for (app, rows) in held.take().sorted(by: { $0.key < $1.key }) {
            var none: [Int64: Int64] = [:]
            try await writeHeld(rows.statement(app: app, stamps: &none))
        }
    }

    /// Runs `statement`, the data-modifying CTEs of rows held for the tail (sends or others), as a
    /// statement of its own. A refusal fails the whole batch (the rows belong to earlier pieces of
    /// work): it is ``PostgresStoreError/heldRowsRefused(_:)``, unless the store's own errors or a
    /// retryable one (the batch runs again).
    func writeHeld(_ statement: (sql: String, arguments: [PGValue])) async throws {
        do {
            try await session.command("WITH \(statement.sql) SELECT 1", statement.arguments)
        } catch let error as PostgresStoreError {
            throw error
        } catch where PGState.isRetryable(error) {
            throw error
        } catch {
            throw PostgresStoreError.heldRowsRefused(error)
        }
    }

    /// Writes the held rows first when `groupKey` has some.
    func flushHeld(touching groupKey: Int64) async throws {
        if held.groupKeys.contains(groupKey) { try await flushHeld() }
    }

    /// Holds `member`'s insert into the group `groupKey` (with its custom fields).
    func holdInsert(
        _ member: Member, app: String, groupKey: Int64, relativeOrder: Int64?, changedVersion: Int64
    ) {
        var rows = held.rows[app] ?? HeldWrites.Rows()
        rows.members.keys.append(groupKey)
        rows.members.users.append(member.userID)
        rows.members.roles.append(member.role.rawValue)
        rows.members.relative.append(relativeOrder == nil ? 0 : 1)
        rows.members.joinOrders.append(relativeOrder ?? member.joinOrder)
        rows.members.joinSequences.append(member.joinSequence)
        rows.members.joinedAt.append(member.joinedAt.millisecondsSince1970)
        rows.members.nameCards.append(member.nameCard)
        rows.members.mutedUntil.append(member.mutedUntil?.millisecondsSince1970)
        rows.members.receiveOptions.append(member.receiveOption.rawValue)
        rows.members.joinSources.append(Int64(member.joinSource.rawValue))
        rows.members.inviters.append(member.inviterID)
        rows.members.inviteLinks.append(member.inviteLinkID)
        rows.members.changedVersions.append(changedVersion)
        for (key, value) in member.custom.sorted(by: { $0.key < $1.key }) {
            rows.memberCustomKeys.append(groupKey)
            rows.memberCustomUsers.append(member.userID)
            rows.memberCustomNames.append(key)
            rows.memberCustomValues.append(value)
        }
        held.rows[app] = rows
        bufferedWrites += 1
    }

    /// Holds a change to one app's rows.
    func hold(app: String, _ change: (inout HeldWrites.Rows) -> Void) {
        var rows = held.rows[app] ?? HeldWrites.Rows()
        change(&rows)
        held.rows[app] = rows
        bufferedWrites += 1
    }
}
