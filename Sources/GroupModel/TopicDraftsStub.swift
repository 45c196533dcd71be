// Temporary until the topic event kinds land (branch topic-events replaces this file).
extension GroupEvent.Draft {
    static func topicCreated(_ topic: Group, operatorID: String?) -> GroupEvent.Draft {
        .init(kind: .groupInfoChanged, operatorID: operatorID, changes: ["topic_id": topic.id])
    }
    static func topicUpdated(
        topicID: String, name: String?, introduction: String?, notification: String?, faceURL: String?,
        mute: GroupMuteState?, customKeys: [String], operatorID: String?
    ) -> GroupEvent.Draft {
        .init(kind: .groupInfoChanged, operatorID: operatorID, changes: ["topic_id": topicID])
    }
    static func topicDeleted(topicID: String, operatorID: String?) -> GroupEvent.Draft {
        .init(kind: .groupInfoChanged, operatorID: operatorID, changes: ["topic_id": topicID])
    }
}
