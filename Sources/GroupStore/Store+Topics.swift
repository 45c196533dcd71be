public import GroupModel

/// A community's topics: the one write path of topic creation, update and deletion, and the
/// reads that show topics with their community.
extension Store {
    /// Runs one planned write of a community's topics, atomically with its events.
    ///
    /// The snapshot is the community with the operator's membership and, when `topicID` is
    /// given, that live topic as stored; the plan returns the topic write and the events, which
    /// are the community's (its sequence, its members' stream).
    /// - Parameters:
    ///   - app: The app.
    ///   - communityID: The community.
    ///   - topicID: The topic to load (update, delete), or `nil` (create).
    ///   - operatorID: The acting user (`nil`: the backend).
    ///   - time: The write's time.
    ///   - plan: Pure: reads the snapshot, returns the write and its events (or throws a
    ///     `GroupError`, which rolls back and is rethrown) and a value for the caller.
    /// - Returns: The caller's value, the community, the topic after the write (`nil` once
    ///   deleted) and the committed events.
    /// - Throws: `GROUP_NOT_FOUND` when the community does not exist (or is dismissed); the
    ///   plan's error; `INTERNAL` on storage failure.
    public func mutateTopic<Value: Sendable>(
        app: String, communityID: String, topicID: String?, operatorID: String?, at time: Timestamp,
        plan: @escaping @Sendable (TopicSnapshot) throws -> (TopicPlan, Value)
    ) async throws -> TopicCommitted<Value> {
        try await mutate(
            "mutateTopic", scope: .groups([communityID] + [topicID].compactMap { $0 }, users: [operatorID].compactMap { $0 }, app: app)
        ) { transaction, effects in
            var request = SnapshotRequest(app: app, group: communityID, operatorID: operatorID, time: time, parts: .topicCount)
            request.topic = topicID
            let snapshot = try await transaction.load(request)
            let community = try Self.loadedGroup(snapshot)
            let topic = snapshot.topic.map { Group.topic($0, in: community) }
            let (planned, value) = try plan(TopicSnapshot(
                community: community, operatorMembership: operatorID.flatMap { snapshot.members[$0] }, topic: topic,
                topicCount: snapshot.topicCount))
            var writes = WriteSet(events: planned.events)
            writes.topic = planned.write
            let written = try await transaction.write(writes, over: snapshot)
            var after = community
            after.latestSequence = written.events.last?.sequence ?? community.latestSequence
            // The topic's events reach who sees it; a change of its privacy, who saw it before too.
            let audience = Self.audience(before: topic, after: planned.write, in: after)
            try await effects.wrote(written, to: after, audience: audience, transaction: transaction)
            var stored: Group?
            switch planned.write {
            case .create(let row), .update(let row): stored = row
            case .delete: stored = nil
            }
            if let row = stored {
                var cached = row
                cached.parentID = nil
                cached.communityMute = .unmuted
                effects.replaced(app: app, id: row.id, with: cached)
            } else {
                effects.replaced(app: app, id: planned.write.topicID, with: nil)
            }
            return TopicCommitted(
                value: value, community: after, topic: stored.map { Group.topic($0, in: after) }, events: written.events)
        }
    }

    /// The audience of a topic write's `TOPIC_*` events (`LoggedEvent.audience`): who sees the
    /// topic after the write (a deletion: before it), joined with who saw it before.
    static func audience(before: Group?, after write: TopicWrite, in community: Group) -> Set<String>? {
        var audiences: [Set<String>?] = []
        if let before { audiences.append(before.audience) }
        switch write {
        case .create(let row), .update(let row): audiences.append(Group.topic(row, in: community).audience)
        case .delete: break
        }
        var joined: Set<String> = []
        for audience in audiences {
            guard let audience else { return nil }
            joined.formUnion(audience)
        }
        return joined
    }

    /// The live topics of several communities of one app, each in its community's view
    /// (`Group.topic(_:in:)`), oldest first; communities not found (or dismissed) are absent.
    public func topics(app: String, communityIDs: [String]) async throws -> [String: [Group]] {
        let ids = communityIDs.count > 1 ? Array(Set(communityIDs)) : communityIDs
        if ids.isEmpty { return [:] }
        let communities = try await rawGroups(app: app, ids: ids)
        let live = communities.keys.filter { communities[$0]?.type.preset.behaviour.topicsSupported == true }
        if live.isEmpty { return [:] }
        let stored = try await read { try await backend.topics(app: app, communities: live) }
        var topics: [String: [Group]] = [:]
        for (id, rows) in stored {
            guard let community = communities[id] else { continue }
            topics[id] = rows.map { Group.topic($0, in: community) }
        }
        return topics
    }

    /// The live topics of `communities` (Community groups as the caller read them) that `userID`
    /// belongs to, each in its community's view (`Group.topic(_:in:)`) with the user's read
    /// state in it, oldest first: one read for all, however many communities and topics (the
    /// joined-group list of a member of 50 communities of 20 topics each). Communities the user
    /// does not belong to, dismissed since, or without topics are absent.
    public func joinedTopics(app: String, userID: String, communities: [Group]) async throws -> [String: [JoinedTopic]] {
        var byID: [String: Group] = [:]
        for community in communities where community.type.preset.behaviour.topicsSupported {
            byID[community.id] = byID[community.id] ?? community
        }
        if byID.isEmpty { return [:] }
        let ids = Array(byID.keys)
        let stored = try await read { try await backend.joinedTopics(app: app, userID: userID, communities: ids) }
        var topics: [String: [JoinedTopic]] = [:]
        for (id, entries) in stored {
            guard let community = byID[id] else { continue }
            topics[id] = entries.map { JoinedTopic(topic: Group.topic($0.topic, in: community), read: $0.read) }
        }
        return topics
    }

    /// `groups` with each topic in its community's view (`Group.topic(_:in:)`), reading the
    /// communities not among them; a topic whose community is gone (dismissed) is dropped.
    func mergingTopics(_ groups: [String: Group], app: String) async throws -> [String: Group] {
        var parents: Set<String> = []
        for id in groups.keys { if let parent = GroupID.communityID(ofTopic: id) { parents.insert(parent) } }
        if parents.isEmpty { return groups }
        var communities = groups.filter { parents.contains($0.key) }
        let missing = parents.subtracting(communities.keys)
        if !missing.isEmpty {
            communities.merge(try await rawGroups(app: app, ids: Array(missing))) { first, _ in first }
        }
        var merged = groups
        for (id, group) in groups {
            guard let parent = GroupID.communityID(ofTopic: id) else { continue }
            merged[id] = communities[parent].map { Group.topic(group, in: $0) }
        }
        return merged
    }
}

/// What a topic plan reads (``Store/mutateTopic(app:communityID:topicID:operatorID:at:plan:)``).
public struct TopicSnapshot: Sendable {
    /// The community.
    public var community: Group
    /// The operator's membership of the community (`nil`: the backend, or not a member).
    public var operatorMembership: Member?
    /// The topic asked for, in the community's view (`nil`: not asked for, or no such live topic).
    public var topic: Group?
    /// How many live topics the community holds.
    public var topicCount: Int

    /// Creates a snapshot.
    public init(community: Group, operatorMembership: Member?, topic: Group?, topicCount: Int) {
        self.community = community
        self.operatorMembership = operatorMembership
        self.topic = topic
        self.topicCount = topicCount
    }
}

/// What a topic plan decided: the topic's write and the community's events.
public struct TopicPlan: Sendable {
    /// The write of the topic's row.
    public var write: TopicWrite
    /// The events, appended to the community.
    public var events: [GroupEvent.Draft]

    /// Creates a plan.
    public init(write: TopicWrite, events: [GroupEvent.Draft]) {
        self.write = write
        self.events = events
    }
}

/// The result of a topic write.
public struct TopicCommitted<Value: Sendable>: Sendable {
    /// The plan's value.
    public var value: Value
    /// The community after the write.
    public var community: Group
    /// The topic after the write, in the community's view (`nil`: deleted).
    public var topic: Group?
    /// The committed events (the community's).
    public var events: [GroupEvent]
}
