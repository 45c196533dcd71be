import Foundation
import GroupModel
import GroupStore
import GroupStoreSQL

/// The sends of a batch in a few statements, however many they are: their snapshots read together
/// before the first runs, their rows written together.
///
/// Alone, a send costs two statements (the group with the sender's membership; the body with the
/// group's `latest_seq`), so a batch of n sends costs 2n. Here:
/// - **One read for all.** After the locks, ``PostgresTransaction/preloadSends(_:)`` reads every group the batch's
///   sends go to with each sender's membership in one statement (their earlier messages by client
///   id in a second, senders' last send times in a third, and the messages replies answer in a
///   fourth, only when a send has a client id, a group is in slow mode, or a send is a reply). A send's ``PostgresTransaction/load(_:)`` is then answered from memory
///   (``PostgresTransaction/cachedSnapshot(_:)``), its group's `latest_seq` as the batch's earlier sends moved it.
/// - **One write for all, in the tail.** A send's body, its mention rows and its group's
///   `latest_seq` wait in memory (``PostgresTransaction/bufferSend(_:event:provisional:groupKey:)``) and are written
///   by the batch's last statement (``PostgresStreamTail``), the bodies with their final event ids.
///   Before any other statement that could read them (a load that memory cannot answer, another
///   kind of write, a purge) they go in one statement per app first (``PostgresTransaction/flushSends()``), with the
///   provisional ids (readers take a body's id from its event row).
///
/// What memory holds stays exact: it is what the preload read, changed only by the batch's sends,
/// which it follows; any other write drops what it holds of the groups the writing piece may write
/// (its scope), and those groups are read from the database again.
struct PendingSends {
    /// A group as the batch's sends see it.
    struct GroupState {
        var group: Group
        var key: Int64
        /// For a topic: its community as stored (``group`` is the topic in its view).
        var community: Group?
        /// The memberships read (a user absent from `members` but in `knownUsers` is no member).
        var members: [String: Member] = [:]
        var knownUsers: Set<String> = []
        /// Per sender and client id: the message found (`nil`: none), for the keys looked up.
        var earlier: [ClientKey: StoredMessage?] = [:]
        /// Per sender: when they last sent to the group (`nil`: never), for the senders looked up
        /// (only in slow mode).
        var lastSent: [String: Timestamp?] = [:]
        /// Per sequence: the stored message (`nil`: none), for the messages replies answer and the
        /// batch's own sends.
        var messages: [Int64: StoredMessage?] = [:]
    }

    struct ClientKey: Hashable {
        var sender: String
        var clientMessageID: String
    }

    struct GroupID: Hashable {
        var app: String
        var id: String
    }

    /// The groups read, by app and id (`nil`: no live group has the id).
    var groups: [GroupID: GroupState?] = [:]
    /// Per app, the rows waiting for ``PostgresTransaction/flushSends()``.
    var rows: [String: Rows] = [:]

    /// The columns of the rows of one app waiting to be written.
    struct Rows {
        var eventIDs: [Int64] = []
        var groupKeys: [Int64] = []
        var sequences: [Int64] = []
        var messageIDs: [String] = []
        var senders: [String] = []
        var clientIDs: [String?] = []
        var types: [String] = []
        var texts: [String] = []
        var payloads: [[UInt8]] = []
        var priorities: [String] = []
        var nameCards: [String] = []
        var times: [Int64] = []
        var mentionAll: [Int64] = []
        var mentionedIDs: [String] = []
        var replySequences: [Int64?] = []
        var replyMessageIDs: [String?] = []
        var replySenders: [String?] = []
        var replyTypes: [String?] = []
        var replyPreviews: [String?] = []
        var mentionKeys: [Int64] = []
        var mentionUsers: [String] = []
        var mentionSequences: [Int64] = []
        /// Per group key, the latest sequence.
        var latest: [Int64: Int64] = [:]
    }

    /// Rows are waiting.
    var isEmpty: Bool { rows.isEmpty }

    /// Forgets what memory holds of the groups of `scope` (of its whole app when it has no group
    /// list).
    mutating func forget(_ scope: WriteScope?) {
        guard let scope else {
            groups = [:]
            return
        }
        guard let ids = scope.groups else {
            groups = groups.filter { $0.key.app != scope.app }
            return
        }
        for id in ids { groups[GroupID(app: scope.app, id: id)] = nil }
        // A topic's state holds its community's memberships, settings and mute: a write of the
        // community drops it too.
        if groups.keys.contains(where: { GroupModel.GroupID.isTopic($0.id) }) {
            let communities = Set(ids)
            groups = groups.filter { entry in
                guard entry.key.app == scope.app, let community = GroupModel.GroupID.communityID(ofTopic: entry.key.id) else { return true }
                return !communities.contains(community)
            }
        }
    }
}

extension PostgresTransaction {
    /// Whether `request` asks only what a send asks: its group, one user's membership, and
    /// perhaps that user's earlier message by client id and last send time, and the message a
    /// reply answers.
    private static func isSendShaped(_ request: SnapshotRequest) -> Bool {
        guard request.group != nil, request.application == nil, request.operatorID == nil, request.targets.count == 1,
              request.parts.isEmpty, request.pendingApplications == nil, request.readState == nil,
              request.applicationReader == nil, request.inviteLink == nil, request.reactionsOf == nil
        else { return false }
        let user = request.targets[0]
        return (request.lastSentBy ?? user) == user && (request.earlierMessage?.sender ?? user) == user
    }

    /// Reads what the sends of the batch (the scopes with `WriteScope.send`) will load, in one
    /// statement for the groups and memberships (and one each for earlier messages and last send
    /// times, when some send needs them).
    func preloadSends(_ scopes: [WriteScope]) async throws {
        var wanted: [String: [(group: String, send: WriteScope.Send)]] = [:]
        for scope in scopes {
            guard let send = scope.send, let group = scope.groups?.first else { continue }
            wanted[scope.app, default: []].append((group, send))
        }
        for (app, sends) in wanted.sorted(by: { $0.key < $1.key }) {
            try await preload(app: app, sends)
        }
    }

    private func preload(app: String, _ wanted: [(group: String, send: WriteScope.Send)]) async throws {
        var pairs = Set<[String]>()
        var seenGroups = Set<String>()
        var groupIDs: [String] = []
        var pairGroups: [String] = []
        var pairUsers: [String] = []
        var topicIDs: [String] = []
        var topicPairGroups: [String] = []
        var topicPairUsers: [String] = []
        for (group, send) in wanted where pairs.insert([group, send.sender]).inserted {
            if GroupID.isTopic(group) {
                // A topic's sends: its row with its community's (below).
                if seenGroups.insert(group).inserted { topicIDs.append(group) }
                topicPairGroups.append(group)
                topicPairUsers.append(send.sender)
                continue
            }
            if seenGroups.insert(group).inserted { groupIDs.append(group) }
            pairGroups.append(group)
            pairUsers.append(send.sender)
        }
        var states: [String: PendingSends.GroupState] = [:]
        if !groupIDs.isEmpty {
            try await preloadGroups(app: app, groupIDs: groupIDs, pairGroups: pairGroups, pairUsers: pairUsers, into: &states)
        }
        if !topicIDs.isEmpty {
            try await preloadTopics(app: app, topicIDs: topicIDs, pairGroups: topicPairGroups, pairUsers: topicPairUsers, into: &states)
        }
        groupIDs += topicIDs
        pairGroups += topicPairGroups
        pairUsers += topicPairUsers
        for (group, user) in zip(pairGroups, pairUsers) { states[group]?.knownUsers.insert(user) }
        try await preloadLookups(app: app, wanted, groupIDs: groupIDs, states: &states)
    }

    /// The preload's groups (none a topic) with each sender's membership, in one statement.
    ///
    /// Each sender's member row is its own index lookup (`members_by_user_bytes`, hence the
    /// `COLLATE "C"`; the `LIMIT 1` subquery is not flattened into a join): the statement's
    /// generic plan, which knows neither the group nor the senders, read every member row of the
    /// group otherwise (41 ms a send in a group of 100,000 members, against 0.25 ms).
    private func preloadGroups(
        app: String, groupIDs: [String], pairGroups: [String], pairUsers: [String],
        into states: inout [String: PendingSends.GroupState]
    ) async throws {
        var groupRows: [String: PostgresRowsBox] = [:]
        let offset = Rows.GroupColumn.allCases.count
        try await session.rows(
            """
            SELECT \(Rows.GroupColumn.list(table: "g")), \(Rows.memberColumns) FROM groups g
            LEFT JOIN LATERAL (
                SELECT m.* FROM unnest(?::text[], ?::text[]) AS p(group_id, user_id)
                CROSS JOIN LATERAL (
                    SELECT * FROM members
                    WHERE app_id = g.app_id AND group_key = g.group_key AND user_id COLLATE "C" = p.user_id LIMIT 1
                ) m
                WHERE p.group_id = g.group_id
            ) m ON true
            WHERE g.app_id = ? AND g.group_id = ANY(?) AND g.dismissed_at IS NULL
            """,
            [.texts(pairGroups), .texts(pairUsers), .text(app), .texts(groupIDs)]
        ) { row in
            let read = try Rows.group(row)
            let box = groupRows[read.group.id] ?? PostgresRowsBox(group: read)
            if !row.isNull(offset) { box.members.append(try Rows.member(row, at: offset)) }
            groupRows[read.group.id] = box
        }
        let boxes = Array(groupRows.values)
        let groups = try await PostgresRows.withCustom(boxes.map(\.group), app: app, session: session)
        for (box, group) in zip(boxes, groups) {
            var state = PendingSends.GroupState(group: group, key: box.group.key)
            for member in try await PostgresRows.withCustom(box.members, app: app, groupKey: box.group.key, session: session) {
                state.members[member.userID] = member
            }
            states[group.id] = state
        }
    }

    /// The preload's topics, each with its live community and each sender's membership of the
    /// community, in one statement: the state is the topic in its community's view
    /// (`Group.topic(_:in:)`, as ``PostgresTransaction/load(_:)`` reads a topic), keyed by the
    /// topic's row, its members' join sequences 0. A topic whose community is not live is absent.
    private func preloadTopics(
        app: String, topicIDs: [String], pairGroups: [String], pairUsers: [String],
        into states: inout [String: PendingSends.GroupState]
    ) async throws {
        var topicRows: [String: (topic: PostgresRowsBox, community: Rows.GroupRow)] = [:]
        let columns = Rows.GroupColumn.allCases.count
        try await session.rows(
            """
            SELECT \(Rows.GroupColumn.list(table: "t")), \(Rows.GroupColumn.list(table: "c")), \(Rows.memberColumns)
            FROM groups t
            JOIN groups c ON c.app_id = t.app_id AND c.group_key = t.parent_key AND c.dismissed_at IS NULL
            LEFT JOIN LATERAL (
                SELECT m.* FROM unnest(?::text[], ?::text[]) AS p(group_id, user_id)
                CROSS JOIN LATERAL (
                    SELECT * FROM members
                    WHERE app_id = c.app_id AND group_key = c.group_key AND user_id COLLATE "C" = p.user_id LIMIT 1
                ) m
                WHERE p.group_id = t.group_id
            ) m ON true
            WHERE t.app_id = ? AND t.group_id = ANY(?) AND t.dismissed_at IS NULL
            """,
            [.texts(pairGroups), .texts(pairUsers), .text(app), .texts(topicIDs)]
        ) { row in
            let topic = try Rows.group(row)
            var entry = topicRows[topic.group.id]
            if entry == nil { entry = (PostgresRowsBox(group: topic), try Rows.group(OffsetRow(row: row, offset: columns))) }
            guard let entry else { return }
            if !row.isNull(2 * columns) { entry.topic.members.append(try Rows.member(row, at: 2 * columns)) }
            topicRows[topic.group.id] = entry
        }
        let entries = Array(topicRows.values)
        let topics = try await PostgresRows.withCustom(entries.map(\.topic.group), app: app, session: session)
        for (entry, stored) in zip(entries, topics) {
            let community = entry.community.group
            var state = PendingSends.GroupState(
                group: Group.topic(stored, in: community), key: entry.topic.group.key, community: community)
            for var member in try await PostgresRows.withCustom(
                entry.topic.members, app: app, groupKey: entry.community.key, session: session)
            {
                member.joinSequence = 0
                state.members[member.userID] = member
            }
            states[stored.id] = state
        }
    }

    /// The preload's earlier messages by client id, messages replied to and last send times in
    /// slow mode (each only when asked), then its states kept (`nil`: no live group).
    private func preloadLookups(
        app: String, _ wanted: [(group: String, send: WriteScope.Send)], groupIDs: [String],
        states: inout [String: PendingSends.GroupState]
    ) async throws {
        // Earlier messages by client id, and last send times in slow mode: only when asked.
        var lookups: [(key: Int64, group: String, sender: String, client: String)] = []
        var slow: [(key: Int64, group: String, sender: String)] = []
        var seenLookups = Set<[String]>()
        var seenSlow = Set<[String]>()
        var replied: [(key: Int64, group: String, sequence: Int64)] = []
        var seenReplied = Set<[String]>()
        for (group, send) in wanted {
            guard let state = states[group] else { continue }
            if let sequence = send.replyTo, seenReplied.insert([group, String(sequence)]).inserted {
                replied.append((state.key, group, sequence))
            }
            if let client = send.clientMessageID, seenLookups.insert([group, send.sender, client]).inserted {
                lookups.append((state.key, group, send.sender, client))
            }
            if state.group.settings.slowModeIntervalSeconds > 0, seenSlow.insert([group, send.sender]).inserted {
                slow.append((state.key, group, send.sender))
            }
        }
        if !lookups.isEmpty {
            for lookup in lookups {
                states[lookup.group]?.earlier[PendingSends.ClientKey(sender: lookup.sender, clientMessageID: lookup.client)] =
                    .some(nil)
            }
            try await session.rows(
                """
                SELECT q.group_id, \(PostgresMessageRows.columns)
                FROM unnest(?::int8[], ?::text[], ?::text[], ?::text[]) AS q(group_key, group_id, sender_id, client_id)
                JOIN group_messages gm ON gm.app_id = ? AND gm.group_key = q.group_key AND gm.sender_id = q.sender_id
                    AND gm.client_message_id = q.client_id
                """,
                [
                    .integers(lookups.map(\.key)), .texts(lookups.map(\.group)), .texts(lookups.map(\.sender)),
                    .texts(lookups.map(\.client)), .text(app),
                ]
            ) { row in
                let group = try row.text(0)
                let stored = try MessageRows.message(OffsetRow(row: row, offset: 1), appID: app, groupID: group)
                if let client = stored.message.content.clientMessageID {
                    states[group]?.earlier[PendingSends.ClientKey(sender: stored.message.senderID, clientMessageID: client)] = stored
                }
            }
        }
        if !replied.isEmpty {
            for lookup in replied { states[lookup.group]?.messages[lookup.sequence] = .some(nil) }
            try await session.rows(
                """
                SELECT q.group_id, \(PostgresMessageRows.columns)
                FROM unnest(?::int8[], ?::text[], ?::int8[]) AS q(group_key, group_id, seq)
                JOIN group_messages gm ON gm.app_id = ? AND gm.group_key = q.group_key AND gm.seq = q.seq
                """,
                [.integers(replied.map(\.key)), .texts(replied.map(\.group)), .integers(replied.map(\.sequence)), .text(app)]
            ) { row in
                let group = try row.text(0)
                let stored = try MessageRows.message(OffsetRow(row: row, offset: 1), appID: app, groupID: group)
                states[group]?.messages[stored.message.sequence] = stored
            }
        }
        if !slow.isEmpty {
            try await session.rows(
                """
                SELECT q.group_id, q.sender_id, (SELECT time FROM group_messages
                    WHERE app_id = ? AND group_key = q.group_key AND sender_id = q.sender_id ORDER BY seq DESC LIMIT 1)
                FROM unnest(?::int8[], ?::text[], ?::text[]) AS q(group_key, group_id, sender_id)
                """,
                [.text(app), .integers(slow.map(\.key)), .texts(slow.map(\.group)), .texts(slow.map(\.sender))]
            ) { row in
                states[try row.text(0)]?.lastSent[try row.text(1)] = try row.optionalInt64(2).map(Timestamp.init(millisecondsSince1970:))
            }
        }
        for group in groupIDs {
            sends.groups[PendingSends.GroupID(app: app, id: group)] = .some(states[group])
        }
    }

    /// The snapshot of `request` from memory, when it asks only what a send asks and memory holds
    /// all of it; `nil` otherwise.
    /// - Throws: `GROUP_NOT_FOUND` when the preload found no live group with the id.
    func cachedSnapshot(_ request: SnapshotRequest) throws -> StoreSnapshot? {
        guard Self.isSendShaped(request), let groupID = request.group,
              let entry = sends.groups[PendingSends.GroupID(app: request.app, id: groupID)]
        else { return nil }
        guard let state = entry else { throw GroupError.groupNotFound(groupID) }
        let user = request.targets[0]
        guard state.knownUsers.contains(user) else { return nil }
        var snapshot = StoreSnapshot(app: request.app, time: request.time)
        if let earlier = request.earlierMessage {
            guard let found = state.earlier[PendingSends.ClientKey(sender: earlier.sender, clientMessageID: earlier.clientMessageID)]
            else { return nil }
            snapshot.earlierMessage = found
        }
        if request.lastSentBy != nil, state.group.settings.slowModeIntervalSeconds > 0 {
            guard let last = state.lastSent[user] else { return nil }
            snapshot.lastSentAt = last
        }
        if let sequence = request.messageSequence {
            guard let found = state.messages[sequence] else { return nil }
            snapshot.message = found
        }
        snapshot.group = state.group
        snapshot.groupRow = GroupRowID(state.key)
        snapshot.community = state.community
        snapshot.members[user] = state.members[user]
        return snapshot
    }

    /// Remembers what a send-shaped load read from the database (after ``flushSends()``), so the
    /// batch's next sends to the group are answered from memory.
    func remember(_ snapshot: StoreSnapshot, for request: SnapshotRequest) {
        guard Self.isSendShaped(request), let group = snapshot.group, let key = snapshot.groupRow?.value else { return }
        let id = PendingSends.GroupID(app: request.app, id: group.id)
        var state = (sends.groups[id] ?? nil) ?? PendingSends.GroupState(group: group, key: key)
        state.group = group
        let user = request.targets[0]
        state.members[user] = snapshot.members[user]
        state.knownUsers.insert(user)
        if let earlier = request.earlierMessage {
            state.earlier[PendingSends.ClientKey(sender: earlier.sender, clientMessageID: earlier.clientMessageID)] =
                .some(snapshot.earlierMessage)
        }
        if request.lastSentBy != nil, group.settings.slowModeIntervalSeconds > 0 { state.lastSent[user] = .some(snapshot.lastSentAt) }
        if let sequence = request.messageSequence { state.messages[sequence] = .some(snapshot.message) }
        sends.groups[id] = .some(state)
    }

    /// Whether `writes` is a send alone: one event and a message, nothing else.
    static func isSend(_ writes: WriteSet) -> Bool {
        writes.message != nil && writes.events.count == 1 && writes.newGroup == nil && writes.applicationReadTime == nil
            && !writes.changesGroupRows
    }

    /// Holds a send's rows for ``flushSends()`` and moves what memory holds of its group.
    func bufferSend(_ message: GroupMessage, event: GroupEvent, provisional: Int64, groupKey: Int64) {
        let app = event.appID
        var rows = sends.rows[app] ?? PendingSends.Rows()
        let content = message.content
        rows.eventIDs.append(provisional)
        rows.groupKeys.append(groupKey)
        rows.sequences.append(event.sequence)
        rows.messageIDs.append(message.messageID)
        rows.senders.append(message.senderID)
        rows.clientIDs.append(content.clientMessageID)
        rows.types.append(content.type)
        rows.texts.append(content.text)
        rows.payloads.append(content.payload)
        rows.priorities.append(content.priority.rawValue)
        rows.nameCards.append(message.senderNameCard)
        rows.times.append(message.time.millisecondsSince1970)
        rows.mentionAll.append(content.mentionAll ? 1 : 0)
        rows.mentionedIDs.append(MessageRows.encodeIDs(content.mentionedUserIDs))
        rows.replySequences.append(message.replyTo?.sequence)
        rows.replyMessageIDs.append(message.replyTo?.messageID)
        rows.replySenders.append(message.replyTo?.senderID)
        rows.replyTypes.append(message.replyTo?.type)
        rows.replyPreviews.append(message.replyTo?.preview)
        for user in MessageRows.mentionRows(message) {
            rows.mentionKeys.append(groupKey)
            rows.mentionUsers.append(user)
            rows.mentionSequences.append(event.sequence)
        }
        rows.latest[groupKey] = event.sequence
        sends.rows[app] = rows
        bufferedWrites += 1
        let id = PendingSends.GroupID(app: app, id: event.groupID)
        guard var state = sends.groups[id] ?? nil else { return }
        state.group.latestSequence = event.sequence
        var stored = message
        stored.sequence = event.sequence
        if let client = content.clientMessageID {
            state.earlier[PendingSends.ClientKey(sender: message.senderID, clientMessageID: client)] =
                .some(StoredMessage(eventID: provisional, message: stored))
        }
        if state.group.settings.slowModeIntervalSeconds > 0 { state.lastSent[message.senderID] = .some(message.time) }
        sends.groups[id] = .some(state)
    }

    /// Writes the sends held in memory: per app, their bodies, their mention rows and their groups'
    /// `latest_seq`, in one statement. A failure fails the whole batch (the rows belong to earlier
    /// pieces of work).
    func flushSends() async throws {
        guard !sends.isEmpty else { return }
        let pending = sends.rows
        sends.rows = [:]
        for (app, rows) in pending.sorted(by: { $0.key < $1.key }) {
            try await writeHeld(rows.statement(app: app, from: "", eventID: "b.event_id"))
        }
    }
}

extension PendingSends.Rows {
    /// The data-modifying CTEs (for a `WITH`; PostgreSQL runs each once, referenced or not) that
    /// write these rows of `app`: the groups' `latest_seq`, the mention rows, the bodies. `from`
    /// precedes the bodies' `unnest` in their `FROM`, and `eventID` is a body's `event_id`, an
    /// expression over its provisional one (`b.event_id`).
    func statement(app: String, from: String, eventID: String) -> (sql: String, arguments: [PGValue]) {
        let latest = self.latest.sorted { $0.key < $1.key }
        return (
            """
            latest AS (
                UPDATE groups g SET latest_seq = l.seq FROM unnest(?::int8[], ?::int8[]) AS l(group_key, seq)
                WHERE g.app_id = ? AND g.group_key = l.group_key),
            mentions AS (
                INSERT INTO message_mentions (app_id, group_key, user_id, seq)
                SELECT ?, x.group_key, x.user_id, x.seq FROM unnest(?::int8[], ?::text[], ?::int8[]) AS x(group_key, user_id, seq)
                ON CONFLICT DO NOTHING),
            bodies AS (
                INSERT INTO group_messages (
                    app_id, event_id, group_key, seq, message_id, sender_id, client_message_id, type, text,
                    payload, priority, sender_name_card, time, mention_all, mentioned_ids,
                    reply_seq, reply_message_id, reply_sender_id, reply_type, reply_preview)
                SELECT ?, \(eventID), b.group_key, b.seq, b.message_id, b.sender_id, b.client_message_id, b.type, b.text,
                    b.payload, b.priority, b.sender_name_card, b.time, b.mention_all, b.mentioned_ids,
                    b.reply_seq, b.reply_message_id, b.reply_sender_id, b.reply_type, b.reply_preview
                FROM \(from)unnest(?::int8[], ?::int8[], ?::int8[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[],
                    ?::bytea[], ?::text[], ?::text[], ?::int8[], ?::int8[], ?::text[],
                    ?::int8[], ?::text[], ?::text[], ?::text[], ?::text[]) AS b(
                    event_id, group_key, seq, message_id, sender_id, client_message_id, type, text, payload, priority,
                    sender_name_card, time, mention_all, mentioned_ids,
                    reply_seq, reply_message_id, reply_sender_id, reply_type, reply_preview))
            """,
            [
                .integers(latest.map(\.key)), .integers(latest.map(\.value)), .text(app),
                .text(app), .integers(mentionKeys), .texts(mentionUsers), .integers(mentionSequences),
                .text(app), .integers(eventIDs), .integers(groupKeys), .integers(sequences),
                .texts(messageIDs), .texts(senders), .optionalTexts(clientIDs), .texts(types),
                .texts(texts), .byteArrays(payloads), .texts(priorities), .texts(nameCards),
                .integers(times), .integers(mentionAll), .texts(mentionedIDs),
                .optionalIntegers(replySequences), .optionalTexts(replyMessageIDs), .optionalTexts(replySenders),
                .optionalTexts(replyTypes), .optionalTexts(replyPreviews),
            ]
        )
    }
}

/// A group row of the preload and its members' rows, gathered row by row.
private final class PostgresRowsBox {
    let group: Rows.GroupRow
    var members: [Rows.MemberRow] = []

    init(group: Rows.GroupRow) {
        self.group = group
    }
}
