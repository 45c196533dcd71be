import GroupAPI
import GroupModel
import GroupStore

/// GroupService topics of Community groups: CreateTopic, UpdateTopic, DeleteTopic, ListTopics,
/// and the topics a community carries in the joined-group list.
extension GroupServiceHandler {
    func createTopic(_ request: Groupd_V1_CreateTopicRequest, _ call: CallContext) async throws -> Groupd_V1_CreateTopicResponse {
        try GroupdService.requireGroupID(request.groupID)
        let profile = request.profile ?? Groupd_V1_GroupProfile()
        let id = GroupID.generateTopicID(in: request.groupID)
        // The moderation plugins see a new topic's profile as they see a profile update.
        var requested = ProfileUpdate(
            name: profile.name, introduction: profile.introduction, notification: profile.notification,
            faceURL: profile.faceURL, custom: request.custom)
        try await checkProfilePolicy(&requested, groupID: id, call)
        let creation = TopicCreation(
            name: requested.name ?? "", introduction: requested.introduction ?? "",
            notification: requested.notification ?? "", faceURL: requested.faceURL ?? "", custom: requested.custom,
            isPrivate: request.isPrivate)
        let (limits, schema, now, caller) = (call.limits, call.customFields, clock.now(), call.caller)
        let result = try await Self.profileFields {
            try await store.mutateTopic(
                app: caller.appID, communityID: request.groupID, topicID: nil, operatorID: caller.operatorID, at: now
            ) { snapshot in
                let op = GroupdService.groupOperator(caller, membership: snapshot.operatorMembership)
                let (topic, event) = try GroupRules.planTopicCreation(
                    creation, id: id, in: snapshot.community, by: op, topicCount: snapshot.topicCount, limits: limits,
                    customFields: schema, now: now)
                return (TopicPlan(write: .create(topic), events: [event]), snapshot.operatorMembership)
            }
        }
        guard let topic = result.topic else { throw GroupError.internal("a created topic missing from its write") }
        return .with { $0.topic = Self.topicView(topic, membership: result.value, read: nil, call: call) }
    }

    func updateTopic(_ request: Groupd_V1_UpdateTopicRequest, _ call: CallContext) async throws -> Groupd_V1_UpdateTopicResponse {
        let communityID = try Self.communityID(ofTopic: request.topicID)
        // `is_private` is the topic's own path; the others are UpdateGroupProfile's.
        var mask = request.updateMask
        let masksPrivacy = mask?.paths.contains(Self.isPrivatePath) ?? false
        mask?.paths.removeAll { $0 == Self.isPrivatePath }
        let isPrivate = masksPrivacy ? request.isPrivate : nil
        var requested = masksPrivacy && mask?.paths.isEmpty == true ? ProfileUpdate() : try Self.profileUpdate(.with {
            $0.groupID = request.topicID
            if let mask { $0.updateMask = mask }
            if let profile = request.profile { $0.profile = profile }
            $0.custom = request.custom
        })
        if requested != ProfileUpdate() { try await checkProfilePolicy(&requested, groupID: request.topicID, call) }
        let update = requested
        let (limits, schema, now, caller) = (call.limits, call.customFields, clock.now(), call.caller)
        let topicID = request.topicID
        let result = try await Self.profileFields {
            try await store.mutateTopic(
                app: caller.appID, communityID: communityID, topicID: topicID, operatorID: caller.operatorID, at: now
            ) { snapshot in
                let op = GroupdService.groupOperator(caller, membership: snapshot.operatorMembership)
                guard let topic = snapshot.topic else {
                    try GroupRules.authorize(.manageTopics, in: snapshot.community, by: op).get()
                    throw GroupError.groupNotFound(topicID)
                }
                let (after, event) = try GroupRules.planTopicUpdate(
                    update, isPrivate: isPrivate, of: topic, in: snapshot.community, by: op, limits: limits,
                    customFields: schema, now: now)
                return (TopicPlan(write: .update(after), events: event.map { [$0] } ?? []), snapshot.operatorMembership)
            }
        }
        guard let topic = result.topic else { throw GroupError.internal("an updated topic missing from its write") }
        return .with { $0.topic = Self.topicView(topic, membership: result.value, read: nil, call: call) }
    }

    func deleteTopic(_ request: Groupd_V1_DeleteTopicRequest, _ call: CallContext) async throws -> Groupd_V1_DeleteTopicResponse {
        let communityID = try Self.communityID(ofTopic: request.topicID)
        let (now, caller, topicID) = (clock.now(), call.caller, request.topicID)
        _ = try await store.mutateTopic(
            app: caller.appID, communityID: communityID, topicID: topicID, operatorID: caller.operatorID, at: now
        ) { snapshot in
            let op = GroupdService.groupOperator(caller, membership: snapshot.operatorMembership)
            if let topic = snapshot.topic { try GroupRules.checkManagedTopicVisible(topic, in: snapshot.community, by: op) }
            let event = try GroupRules.planTopicDeletion(topicID, in: snapshot.community, by: op)
            guard snapshot.topic != nil else { throw GroupError.groupNotFound(topicID) }
            return (TopicPlan(write: .delete(topicID), events: [event]), ())
        }
        return Groupd_V1_DeleteTopicResponse()
    }

    func listTopics(_ request: Groupd_V1_ListTopicsRequest, _ call: CallContext) async throws -> Groupd_V1_ListTopicsResponse {
        if GroupID.isTopic(request.groupID) {
            throw GroupError.invalidArgument(field: "group_id", "group_id names a topic; name its community")
        }
        if request.topicIds.count > call.limits.maxGroupsPerRequest {
            throw GroupError.invalidArgument(
                field: "topic_ids", "\(request.topicIds.count) topic ids exceed the limit of \(call.limits.maxGroupsPerRequest)",
                limit: call.limits.maxGroupsPerRequest)
        }
        let (community, membership) = try await service.loadGroup(call, groupID: request.groupID)
        let actor = call.caller.actingRole(membership: membership?.role)
        if GroupRules.visibility(of: community.type, for: actor) == .hidden { throw GroupError.groupNotFound(community.id) }
        try GroupRules.checkTopicsSupported(community)
        var topics = try await store.topics(app: call.caller.appID, communityIDs: [community.id])[community.id] ?? []
        let op = GroupdService.groupOperator(call.caller, membership: membership)
        if !request.topicIds.isEmpty {
            let wanted = Set(request.topicIds)
            topics = topics.filter { wanted.contains($0.id) && $0.isVisible(to: op) }
        } else {
            topics = topics.filter { $0.isVisible(to: op) }
        }
        let views = try await topicViews(topics, membership: membership, call: call)
        return .with { $0.topics = views }
    }

    // MARK: Views

    /// Fills `topics` on the views of the Community groups of `joined` (the caller's groups, one
    /// view each), each topic with the caller's read state: one read for all the views
    /// (``joinedTopics(of:call:)``).
    func fillTopics(_ views: inout [Groupd_V1_Group], joined: [JoinedGroup], call: CallContext) async throws {
        Self.fillTopics(&views, topics: try await joinedTopics(of: joined, call: call), joined: joined, call: call)
    }

    /// The topics of the Community groups of `joined` with the caller's read state in each
    /// (`Store.joinedTopics(app:userID:communities:)`), by community id.
    func joinedTopics(of joined: [JoinedGroup], call: CallContext) async throws -> [String: [JoinedTopic]] {
        guard let user = call.caller.operatorID else { return [:] }
        let communities = joined.filter { $0.group.type == .community }.map(\.group)
        if communities.isEmpty { return [:] }
        return try await store.joinedTopics(app: call.caller.appID, userID: user, communities: communities)
    }

    /// Fills `topics` on the views of the Community groups of `joined` from `topics`
    /// (``joinedTopics(of:call:)``).
    static func fillTopics(
        _ views: inout [Groupd_V1_Group], topics: [String: [JoinedTopic]], joined: [JoinedGroup], call: CallContext
    ) {
        if topics.isEmpty { return }
        var memberships: [String: Member] = [:]
        for item in joined where item.group.type == .community { memberships[item.group.id] = item.membership }
        for index in views.indices {
            guard let list = topics[views[index].groupID], let membership = memberships[views[index].groupID] else { continue }
            let op = GroupdService.groupOperator(call.caller, membership: membership)
            views[index].topics = list.compactMap { item in
                item.topic.isVisible(to: op) ? topicView(item.topic, membership: membership, read: item.read, call: call) : nil
            }
        }
    }

    /// `topics` as the caller sees them, with the caller's read states when a member.
    func topicViews(_ topics: [Group], membership: Member?, call: CallContext) async throws -> [Groupd_V1_Topic] {
        var reads: [String: ReadState] = [:]
        if membership != nil, let user = call.caller.operatorID, !topics.isEmpty {
            reads = try await store.readStates(app: call.caller.appID, userID: user, groupIDs: topics.map(\.id))
        }
        return topics.map { Self.topicView($0, membership: membership, read: reads[$0.id], call: call) }
    }

    /// A topic as the caller sees it: members and the backend all of it, others the public subset.
    static func topicView(_ topic: Group, membership: Member?, read: ReadState?, call: CallContext) -> Groupd_V1_Topic {
        let actor = call.caller.actingRole(membership: membership?.role)
        var visibility = GroupRules.visibility(of: topic.type, for: actor)
        if visibility == .hidden { visibility = .publicProfile }
        let shows = visibility.includes
        return .with {
            $0.topicID = topic.id
            $0.groupID = topic.parentID ?? GroupID.communityID(ofTopic: topic.id) ?? ""
            $0.profile = .with {
                if shows(.name) { $0.name = topic.name }
                if shows(.introduction) { $0.introduction = topic.introduction }
                if shows(.notification) { $0.notification = topic.notification }
                if shows(.faceURL) { $0.faceURL = topic.faceURL }
            }
            if shows(.custom) {
                $0.custom = call.customFields.map { $0.readable(topic.custom, scope: .group, for: actor) } ?? topic.custom
            }
            if shows(.createdAt) { $0.createTime = APIMapping.timestamp(topic.createdAt) }
            if shows(.updatedAt) { $0.lastInfoTime = APIMapping.timestamp(topic.updatedAt) }
            if shows(.latestSequence) { $0.latestSequence = UInt64(max(topic.latestSequence, 0)) }
            if shows(.mute), let mute = APIMapping.muteState(topic.mute, now: call.now) { $0.mute = mute }
            if shows(.pins) { $0.pinnedMessages = topic.pins.map(APIMapping.pin) }
            $0.publicViewOnly = visibility != .full
            $0.isPrivate = topic.isPrivate
            if let read {
                $0.readSequence = UInt64(max(read.readSequence, 0))
                $0.unreadCount = UInt32(clamping: read.unreadCount)
                $0.unreadMention = MessageMapping.unreadMention(read.unreadMention)
                if let last = read.lastMessageAt { $0.lastMessageTime = APIMapping.timestamp(last) }
            }
        }
    }

    /// UpdateTopic's mask path of `Group.isPrivate`.
    static let isPrivatePath = "is_private"

    /// The community of a topic id, or `INVALID_ARGUMENT` naming `topic_id`.
    static func communityID(ofTopic id: String) throws -> String {
        if id.isEmpty { throw GroupError.invalidArgument(field: "topic_id", "topic_id must not be empty") }
        guard let community = GroupID.communityID(ofTopic: id) else {
            throw GroupError.invalidArgument(field: "topic_id", "topic_id is not a topic id (<group id>\(GroupID.topicMarker)…)")
        }
        return community
    }

    /// Runs `body`, naming the profile fields of a refusal as the request does (`profile.name`):
    /// UpdateGroupProfile, CreateTopic and UpdateTopic carry them in a `GroupProfile`.
    static func profileFields<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch var error as GroupError {
            if let field = error.metadata["field"], ["name", "introduction", "notification", "face_url"].contains(field) {
                error.metadata["field"] = "profile.\(field)"
            }
            throw error
        }
    }
}
