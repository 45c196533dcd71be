/// A new topic's profile and custom fields (`CreateTopic`).
public struct TopicCreation: Sendable, Hashable {
    /// The name (required, within ``AppLimits/groupNameBytes``).
    public var name: String
    /// The introduction.
    public var introduction: String
    /// The notification (announcement).
    public var notification: String
    /// The avatar URL.
    public var faceURL: String
    /// Custom fields (the app's group keys).
    public var custom: [String: [UInt8]]
    /// Whether the topic is private (``Group/isPrivate``).
    public var isPrivate: Bool

    /// Creates a creation request.
    public init(
        name: String, introduction: String = "", notification: String = "", faceURL: String = "",
        custom: [String: [UInt8]] = [:], isPrivate: Bool = false
    ) {
        self.isPrivate = isPrivate
        self.name = name
        self.introduction = introduction
        self.notification = notification
        self.faceURL = faceURL
        self.custom = custom
    }
}

extension GroupError {
    /// `FAILED_PRECONDITION` / `NOT_ALLOWED_ON_TOPIC`: the operation acts on members, roles,
    /// settings or the group as a whole, and `topicID` names a topic of `community`.
    public static func notAllowedOnTopic(_ topicID: String, community: String) -> GroupError {
        GroupError(
            code: .failedPrecondition, reason: .notAllowedOnTopic,
            message: "\(topicID) is a topic; this operation names its community \(community)",
            metadata: ["community_id": community])
    }
}

extension GroupRules {
    /// Check a `CreateTopic` call and plan the topic.
    ///
    /// - Permission: ``GroupAction/manageTopics`` on the community (its owner and admins, the
    ///   backend; `TOPICS_NOT_SUPPORTED` for a type without topics).
    /// - Limits: the community holds fewer than ``AppLimits/maxTopicsPerCommunity`` live topics
    ///   (`FAILED_PRECONDITION` / `TOO_MANY_TOPICS`, metadata `limit`); the profile within the
    ///   group profile limits (name required); custom keys as `schema` defines group keys.
    /// - Returns: The topic as stored (its own row: profile, custom fields, no mute, sequence 0;
    ///   the community's type, settings and owner) and its event (`TOPIC_CREATED`, on the community).
    public static func planTopicCreation(
        _ request: TopicCreation, id: String, in community: Group, by op: GroupOperator, topicCount: Int,
        limits: AppLimits, customFields schema: CustomFieldSchema?, now: Timestamp
    ) throws -> (topic: Group, event: GroupEvent.Draft) {
        try authorize(.manageTopics, in: community, by: op).get()
        if topicCount >= limits.maxTopicsPerCommunity {
            throw GroupError(
                code: .failedPrecondition, reason: .tooManyTopics,
                message: "the community holds \(topicCount) topics, the limit is \(limits.maxTopicsPerCommunity)",
                metadata: ["limit": String(limits.maxTopicsPerCommunity)])
        }
        var topic = Group(
            appID: community.appID, id: id, type: community.type, name: "", settings: community.settings,
            ownerID: community.ownerID, maxMembers: community.maxMembers, createdAt: now, updatedAt: now)
        let update = ProfileUpdate(
            name: request.name, introduction: request.introduction, notification: request.notification,
            faceURL: request.faceURL, custom: request.custom.filter { !$0.value.isEmpty })
        (topic, _) = try applyProfile(update, to: topic, actor: op.role, limits: limits, customFields: schema, now: now)
        topic.parentID = community.id
        topic.isPrivate = request.isPrivate
        return (topic, .topicCreated(topic, operatorID: op.userID))
    }

    /// Check an `UpdateTopic` call and plan it: ``GroupAction/manageTopics`` on the community
    /// (or ``Permission/manageTopics`` in a permission group's value for this topic),
    /// then the profile update's checks (as ``planProfileUpdate(_:of:by:limits:customFields:now:)``).
    /// A private topic the operator does not see answers `GROUP_NOT_FOUND`. `isPrivate` is the
    /// topic's new ``Group/isPrivate`` (`nil`: unchanged).
    /// - Returns: The topic after the update and its event (`TOPIC_UPDATED`, on the community),
    ///   `nil` when nothing changed.
    public static func planTopicUpdate(
        _ update: ProfileUpdate, isPrivate: Bool? = nil, of topic: Group, in community: Group, by op: GroupOperator,
        limits: AppLimits, customFields schema: CustomFieldSchema?, now: Timestamp
    ) throws -> (topic: Group, event: GroupEvent.Draft?) {
        try checkManagedTopicVisible(topic, in: community, by: op)
        try authorizeTopicManagement(topic.id, in: community, by: op)
        // A change of privacy alone is no profile update (which needs a field).
        var (after, changes) = isPrivate != nil && update == ProfileUpdate()
            ? (topic, [:])
            : try applyProfile(update, to: topic, actor: op.role, limits: limits, customFields: schema, now: now)
        let privacyChanged = isPrivate.map { $0 != topic.isPrivate } ?? false
        if changes.isEmpty && !privacyChanged { return (topic, nil) }
        if privacyChanged, let isPrivate {
            after.isPrivate = isPrivate
            after.updatedAt = now
        }
        let customKeys = changes.keys.filter { $0.hasPrefix("custom.") }.map { String($0.dropFirst("custom.".count)) }.sorted()
        return (after, .topicUpdated(
            topicID: topic.id, name: changes["name"], introduction: changes["introduction"],
            notification: changes["notification"], faceURL: changes["face_url"], mute: nil, customKeys: customKeys,
            isPrivate: privacyChanged ? isPrivate : nil, operatorID: op.userID))
    }

    /// For a private topic `op` does not see (``Group/isVisible(to:)``), what `UpdateTopic` and
    /// `DeleteTopic` answer for a topic that does not exist: ``GroupAction/manageTopics`` on the
    /// community decides first, then `GROUP_NOT_FOUND` naming the topic. Nothing for a topic `op`
    /// sees.
    public static func checkManagedTopicVisible(_ topic: Group, in community: Group, by op: GroupOperator) throws {
        if !topic.isPrivate || topic.isVisible(to: op) { return }
        try authorize(.manageTopics, in: community, by: op).get()
        throw GroupError.groupNotFound(topic.id)
    }

    /// ``GroupAction/manageTopics`` on `community`, or, where that refuses an admin or an ordinary
    /// member with `PERMISSION_DENIED`, ``Permission/manageTopics`` in one of their permission
    /// groups' values for the topic `topicID`.
    static func authorizeTopicManagement(_ topicID: String, in community: Group, by op: GroupOperator) throws {
        let decision = authorize(.manageTopics, in: community, by: op)
        if decision.isAllowed { return }
        if op.role == .admin || op.role == .member, decision.error?.reason == .permissionDenied,
            community.grantedPermissions(to: op.membership, topic: topicID).contains(.manageTopics) {
            return
        }
        try decision.get()
    }

    /// `FAILED_PRECONDITION` / `TOPICS_NOT_SUPPORTED` unless `group`'s type holds topics.
    public static func checkTopicsSupported(_ group: Group) throws {
        if !group.type.preset.behaviour.topicsSupported {
            throw notSupported(.topicsNotSupported, "topics", group.type)
        }
    }

    /// Check a `DeleteTopic` call: ``GroupAction/manageTopics`` on the community (or
    /// ``Permission/manageTopics`` in a permission group's value for this topic); the handler
    /// checks the topic's visibility first (``checkManagedTopicVisible(_:in:by:)``).
    /// - Returns: The topic's event (`TOPIC_DELETED`, on the community).
    public static func planTopicDeletion(_ topicID: String, in community: Group, by op: GroupOperator) throws -> GroupEvent.Draft {
        try authorizeTopicManagement(topicID, in: community, by: op)
        return .topicDeleted(topicID: topicID, operatorID: op.userID)
    }
}
