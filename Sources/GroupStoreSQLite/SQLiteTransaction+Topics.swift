import Foundation
import GRDB
import GroupModel
import GroupStore
import GroupStoreSQL

/// Topics of communities in the write transaction: the community of a topic snapshot, a topic
/// asked for by id, the topic count, a member's read position in a topic, and the topic writes.
extension SQLiteTransaction {
    /// The live community of a topic (with custom fields) and its key.
    /// - Throws: `GROUP_NOT_FOUND` naming the topic when the community is gone.
    func loadCommunity(app: String, communityID: String, topicID: String) throws -> (group: Group, key: Int64) {
        do {
            let read = try Rows.liveGroup(db, app: app, groupID: communityID, ownerSettings: storesOwnerSettings)
            return (try Operations.withCustom([read], db: db)[0], read.key)
        } catch let error as GroupError where error.reason == .groupNotFound {
            throw GroupError.groupNotFound(topicID)
        }
    }

    /// The live topic `topicID` of the community under `communityKey`, as stored, into
    /// `StoreSnapshot.topic` (left `nil` when there is none).
    func loadTopic(app: String, topicID: String, communityKey: Int64, into snapshot: inout StoreSnapshot) throws {
        guard let read = try RawStatement(
            db,
            """
            SELECT \(Rows.GroupColumn.list()) FROM groups
            WHERE app_id = ? AND group_id = ? AND parent_key = ? AND dismissed_at IS NULL
            """
        ).first([.text(app), .text(topicID), .integer(communityKey)], Rows.group) else { return }
        var topic = try Operations.withCustom([read], db: db)[0]
        topic.parentID = snapshot.group?.id
        snapshot.topic = topic
        snapshot.topicRow = GroupRowID(read.key)
    }

    /// How many live topics the community under `communityKey` holds.
    func topicCount(communityKey: Int64) throws -> Int {
        try Int.fetchOne(
            db.cachedStatement(sql: "SELECT count(*) FROM groups WHERE parent_key = ? AND dismissed_at IS NULL"),
            arguments: [communityKey]) ?? 0
    }

    /// The reader's read position and counts in a topic (their membership is the community's),
    /// as ``TopicReads/states(app:userID:topicIDs:db:)`` reads them for the joined-group list.
    func loadTopicReadState(_ reader: (user: String, upTo: Int64?), topicKey: Int64, into snapshot: inout StoreSnapshot) throws {
        snapshot.latestMessageSequence = try Int64.fetchOne(
            db.cachedStatement(sql: "SELECT max(seq) FROM group_messages WHERE group_key = ? AND seq <= ?"),
            arguments: [topicKey, reader.upTo ?? Int64.max]) ?? 0
        guard let topicID = snapshot.group?.id,
            let state = try TopicReads.states(app: snapshot.app, userID: reader.user, topicIDs: [topicID], db: db)[topicID]
        else {
            // Not a member of the community: no position, nothing unread.
            snapshot.lastMessageAt = try MessageRows.lastMessageTime(groupKey: topicKey, db: db)
            return
        }
        snapshot.readSequence = state.readSequence
        snapshot.unreadCount = state.unreadCount
        snapshot.unreadMention = state.unreadMention
        snapshot.lastMessageAt = state.lastMessageAt
    }

    /// A member's new read position in a topic, kept with the membership's join time.
    func writeTopicRead(_ read: (user: String, sequence: Int64), topicKey: Int64, member: Member?) throws {
        guard let member else { return }
        try db.cachedStatement(
            sql: """
                INSERT INTO topic_reads (topic_key, user_id, last_read_seq, joined_at) VALUES (?, ?, ?, ?)
                ON CONFLICT (topic_key, user_id)
                DO UPDATE SET last_read_seq = excluded.last_read_seq, joined_at = excluded.joined_at
                """
        ).execute(arguments: [topicKey, read.user, read.sequence, member.joinedAt.millisecondsSince1970])
    }

    /// Writes a topic of the community under `communityKey`; `eventID` (the write's last event)
    /// marks the community's profile as changed for versioned sync.
    func write(_ write: TopicWrite, communityKey: Int64, over snapshot: StoreSnapshot, eventID: Int64?) throws {
        switch write {
        case .create(var topic):
            topic.parentID = nil
            topic.memberCount = 0
            let inserted = try insertGroup(GroupCreationPlan(group: topic, members: [], events: [], idWasGenerated: true))
            try db.cachedStatement(sql: "UPDATE groups SET parent_key = ?, is_private = ? WHERE group_key = ?")
                .execute(arguments: [communityKey, topic.isPrivate, inserted.groupRow?.value])
        case .update(let topic):
            guard let key = snapshot.topicRow?.value, let before = snapshot.topic else {
                throw GroupError.internal("a topic update over a snapshot without the topic")
            }
            let (mode, roles) = Rows.encode(topic.mute.mode)
            try db.cachedStatement(
                sql: """
                    UPDATE groups SET introduction = ?, notification = ?, face_url = ?, mute_mode = ?, mute_roles = ?,
                        mute_until = ?, mute_operator = ?, updated_at = ?, is_private = ?
                    WHERE group_key = ?
                    """
            ).execute(arguments: [
                topic.introduction, topic.notification, topic.faceURL, mode, roles,
                topic.mute.until?.millisecondsSince1970, topic.mute.operatorID, topic.updatedAt.millisecondsSince1970,
                topic.isPrivate, key,
            ])
            // Set apart: the name search trigger re-indexes on any UPDATE OF name.
            if topic.name != before.name {
                try db.cachedStatement(sql: "UPDATE groups SET name = ? WHERE group_key = ?").execute(arguments: [topic.name, key])
            }
            try Operations.writeCustom(topic.custom, before: before.custom, groupKey: key, db: db)
        case .delete:
            guard let key = snapshot.topicRow?.value else {
                throw GroupError.internal("a topic deletion over a snapshot without the topic")
            }
            try db.cachedStatement(sql: "UPDATE groups SET dismissed_at = ? WHERE group_key = ?")
                .execute(arguments: [snapshot.time.millisecondsSince1970, key])
        }
        if storesSyncVersions, let eventID {
            try db.cachedStatement(sql: "UPDATE groups SET info_event_id = ? WHERE group_key = ?")
                .execute(arguments: [eventID, communityKey])
        }
    }
}

/// Read positions and unread counts in topics. A member's position counts while the membership
/// it was written in lasts (`topic_reads.joined_at` is the member's join time); without one, the
/// member's join time is the baseline: the topic's messages sent before it are not unread.
enum TopicReads {
    /// `ids` split into topic ids and the others.
    static func split(_ ids: [String]) -> (topics: [String], others: [String]) {
        var topics: [String] = []
        var others: [String] = []
        for id in ids {
            if GroupID.isTopic(id) { topics.append(id) } else { others.append(id) }
        }
        return (topics, others)
    }

    /// The member's position in topic `t` (of `topic_reads` row `r` of member row `m`): counting
    /// while the membership it was written in lasts, else 0.
    private static let position = "CASE WHEN r.joined_at = m.joined_at THEN r.last_read_seq ELSE 0 END"

    /// The read-state columns of topic `t` for member row `m` (its community's) and its
    /// `topic_reads` row `r`, in ``state(_:at:)`` order: the position, the last message's time,
    /// and the unread count and mentions after the position and the member's join. The message
    /// subqueries run only for a topic whose latest sequence is past the position (a topic
    /// without messages has no last message time): a member of a thousand topics, most of them
    /// read, costs a thousand probes, not four thousand.
    static let stateColumns = """
        \(position),
        CASE WHEN t.latest_seq > 0 THEN
        (SELECT time FROM group_messages WHERE group_key = t.group_key ORDER BY seq DESC LIMIT 1) END,
        CASE WHEN t.latest_seq > \(position) THEN
        (SELECT count(*) FROM group_messages u WHERE u.group_key = t.group_key AND u.seq > \(position)
            AND u.sender_id <> m.user_id AND u.time >= m.joined_at) ELSE 0 END,
        t.latest_seq > \(position) AND EXISTS (SELECT 1 FROM message_mentions mm
            JOIN group_messages gm ON gm.group_key = mm.group_key AND gm.seq = mm.seq
            WHERE mm.group_key = t.group_key AND mm.user_id = m.user_id AND mm.seq > \(position)
                AND gm.time >= m.joined_at),
        t.latest_seq > \(position) AND EXISTS (SELECT 1 FROM group_messages a
            WHERE a.group_key = t.group_key AND a.mention_all = 1
            AND a.seq > \(position) AND a.sender_id <> m.user_id AND a.time >= m.joined_at)
        """

    /// The read state of ``stateColumns`` starting at column `index`.
    static func state(_ row: RawRow, at index: Int) -> ReadState {
        let count = row.int(index + 2)
        let mention = count == 0 ? UnreadMention.none : UnreadMention(me: row.bool(index + 3), all: row.bool(index + 4))
        return ReadState(
            readSequence: row.int64(index), unreadCount: count,
            lastMessageAt: row.optionalInt64(index + 1).map(Timestamp.init(millisecondsSince1970:)), unreadMention: mention)
    }

    /// The user's read state in each live topic of `topicIDs` whose community they are a member
    /// of, in one statement (``stateColumns``).
    static func states(app: String, userID: String, topicIDs: [String], db: Database) throws -> [String: ReadState] {
        if topicIDs.isEmpty { return [:] }
        let padded = Rows.padded(topicIDs)
        var states: [String: ReadState] = [:]
        states.reserveCapacity(topicIDs.count)
        try RawStatement(
            db,
            """
            SELECT t.group_id, \(stateColumns)
            FROM groups t
            JOIN members m ON m.group_key = t.parent_key AND m.user_id = ?
            LEFT JOIN topic_reads r ON r.topic_key = t.group_key AND r.user_id = m.user_id
            WHERE t.app_id = ? AND t.group_id IN (\(Rows.placeholders(padded.count))) AND t.dismissed_at IS NULL
            """
        ).rows([.text(userID), .text(app)] + padded.map { .text($0) }) { row in
            states[row.text(0)] = state(row, at: 1)
        }
        return states
    }

    /// Every member of the topic's community with their position in the topic; their join
    /// sequence is the topic's latest message sent before they joined (0: none).
    static func readPositions(topicKey: Int64, db: Database) throws -> [MemberReadPosition] {
        let rows = try Row.fetchCursor(
            db.cachedStatement(
                sql: """
                    SELECT m.user_id, m.joined_at, r.last_read_seq, r.joined_at,
                        (SELECT coalesce(max(seq), 0) FROM group_messages WHERE group_key = t.group_key AND time < m.joined_at)
                    FROM groups t JOIN members m ON m.group_key = t.parent_key
                    LEFT JOIN topic_reads r ON r.topic_key = t.group_key AND r.user_id = m.user_id
                    WHERE t.group_key = ? ORDER BY m.user_id
                    """),
            arguments: [topicKey])
        var positions: [MemberReadPosition] = []
        while let row = try rows.next() {
            let joinedAt: Int64 = try row.decode(atIndex: 1)
            let readJoinedAt: Int64? = try row.decode(atIndex: 3)
            let read: Int64 = readJoinedAt == joinedAt ? (try row.decode(atIndex: 2) ?? 0) : 0
            positions.append(MemberReadPosition(
                userID: try row.decode(atIndex: 0), joinSequence: try row.decode(atIndex: 4), readSequence: read))
        }
        return positions
    }
}
