/// The events of a Community group's topics: `TOPIC_CREATED`, `TOPIC_UPDATED` and
/// `TOPIC_DELETED` are events of the community (its id and sequence, to every member of the
/// community); a topic's own items (messages, recalls, edits, pins, reactions, receipts) are
/// events of the topic (its id, its own sequence) that the event stream routes to the
/// community's members.
extension GroupEvent.Draft {
    /// The `changes` key naming the topic of a topic event.
    public static let topicIDKey = "topic_id"
    /// The prefix of the `changes` keys holding a topic's own mute (`mute_mode`, `mute_roles`,
    /// `mute_until`: the keys and values of a `GROUP_MUTED` event's changes).
    public static let topicMutePrefix = "mute_"
    /// The prefix of the `changes` keys naming a changed custom field (`custom.<key>`; the value
    /// is not carried: the stream encodes an item once for every reader, and which keys a reader
    /// may read depends on their role).
    public static let topicCustomPrefix = "custom."
    /// The `changes` key of a topic's ``Group/isPrivate`` (`is_private`: `true` or `false`): on `TOPIC_CREATED`
    /// of a private topic, and on `TOPIC_UPDATED` when it changed.
    public static let topicPrivateKey = "is_private"

    /// `TOPIC_CREATED` of `topic` (to be stored as an event of its community): `changes` hold
    /// ``topicIDKey``, the topic's `name`, `introduction`, `notification` and `face_url` (each,
    /// empty ones too), `custom.<key>` for each custom field it has (value empty), and its own
    /// mute (``topicMutePrefix`` keys) when it is created muted, and ``topicPrivateKey`` when it is
    /// private.
    /// - Parameters:
    ///   - topic: The new topic (its id is the topic id).
    ///   - operatorID: Who created it (`nil`: the app's backend).
    public static func topicCreated(_ topic: Group, operatorID: String?) -> GroupEvent.Draft {
        var changes = [
            topicIDKey: topic.id, "name": topic.name, "introduction": topic.introduction,
            "notification": topic.notification, "face_url": topic.faceURL,
        ]
        for key in topic.custom.keys { changes[topicCustomPrefix + key] = "" }
        if topic.mute.mode != .none { changes.merge(muteChanges(topic.mute)) { _, new in new } }
        if topic.isPrivate { changes[topicPrivateKey] = "true" }
        return GroupEvent.Draft(kind: .topicCreated, operatorID: operatorID, changes: changes, recipient: .group)
    }

    /// `TOPIC_UPDATED` of the topic `topicID` (to be stored as an event of its community): only
    /// the fields given (`nil`: unchanged) are in `changes`, with ``topicIDKey``.
    /// - Parameters:
    ///   - topicID: The topic.
    ///   - name: The new name, if it changed.
    ///   - introduction: The new introduction, if it changed.
    ///   - notification: The new notification, if it changed.
    ///   - faceURL: The new face URL (`face_url`), if it changed.
    ///   - mute: The topic's new own mute, if it changed (``topicMutePrefix`` keys; mode `none`:
    ///     unmuted).
    ///   - customKeys: The custom fields set or deleted (`custom.<key>`, value empty).
    ///   - isPrivate: Whether the topic is now private, if that changed (``topicPrivateKey``).
    ///   - operatorID: Who changed them (`nil`: the app's backend).
    public static func topicUpdated(
        topicID: String, name: String?, introduction: String?, notification: String?, faceURL: String?,
        mute: GroupMuteState?, customKeys: [String], isPrivate: Bool? = nil, operatorID: String?
    ) -> GroupEvent.Draft {
        var changes = [topicIDKey: topicID]
        if let name { changes["name"] = name }
        if let introduction { changes["introduction"] = introduction }
        if let notification { changes["notification"] = notification }
        if let faceURL { changes["face_url"] = faceURL }
        if let mute { changes.merge(muteChanges(mute)) { _, new in new } }
        for key in customKeys { changes[topicCustomPrefix + key] = "" }
        if let isPrivate { changes[topicPrivateKey] = isPrivate ? "true" : "false" }
        return GroupEvent.Draft(kind: .topicUpdated, operatorID: operatorID, changes: changes, recipient: .group)
    }

    /// `TOPIC_DELETED` of the topic `topicID` (to be stored as an event of its community):
    /// `changes` hold ``topicIDKey`` only.
    /// - Parameters:
    ///   - topicID: The deleted topic.
    ///   - operatorID: Who deleted it (`nil`: the app's backend).
    public static func topicDeleted(topicID: String, operatorID: String?) -> GroupEvent.Draft {
        GroupEvent.Draft(kind: .topicDeleted, operatorID: operatorID, changes: [topicIDKey: topicID], recipient: .group)
    }

    /// A mute state as topic event changes: `GROUP_MUTED`'s changes under ``topicMutePrefix``.
    static func muteChanges(_ state: GroupMuteState) -> [String: String] {
        Dictionary(uniqueKeysWithValues: GroupRules.muteChanges(state).map { (topicMutePrefix + $0.key, $0.value) })
    }
}

extension GroupEvent {
    /// A topic event's changed fields as the API names them: `name`, `introduction`,
    /// `notification`, `face_url`, `mute` (for the ``Draft/topicMutePrefix`` keys) and
    /// `custom.<key>`, sorted, without ``Draft/topicIDKey``.
    public static func topicChangedFields(_ changes: [String: String]) -> [String] {
        var fields: Set<String> = []
        for key in changes.keys where key != Draft.topicIDKey {
            fields.insert(key.hasPrefix(Draft.topicMutePrefix) ? "mute" : key)
        }
        return fields.sorted()
    }

    /// A topic event's mute (``Draft/topicMutePrefix`` keys), or `nil` when it carries none.
    public static func topicMute(_ changes: [String: String], operatorID: String?) -> GroupMuteState? {
        guard let modeText = changes[Draft.topicMutePrefix + "mode"] else { return nil }
        let roles = Set((changes[Draft.topicMutePrefix + "roles"] ?? "").split(separator: ",")
            .compactMap { MemberRole(rawValue: String($0)) })
        let mode: GroupMuteMode =
            switch modeText {
            case "all": .all
            case "ordinary_members": .ordinaryMembers
            case "roles": .roles(roles)
            default: .none
            }
        let until = Int64(changes[Draft.topicMutePrefix + "until"] ?? "") ?? 0
        return GroupMuteState(
            mode: mode, until: until > 0 ? Timestamp(millisecondsSince1970: until) : nil, operatorID: operatorID)
    }
}
