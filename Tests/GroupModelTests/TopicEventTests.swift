import GroupModel
import Testing

@Suite("Topic events: the drafts of TOPIC_CREATED, TOPIC_UPDATED and TOPIC_DELETED")
struct TopicEventTests {
    private let now = Timestamp(millisecondsSince1970: 1_700_000_000_000)

    private func topic(custom: [String: [UInt8]] = [:], mute: GroupMuteState = .unmuted) -> Group {
        Group(
            appID: "app", id: GroupID.generateTopicID(in: "c"), type: .community, name: "General",
            introduction: "intro", notification: "", faceURL: "https://f/1.png",
            settings: GroupType.community.preset.defaultSettings, ownerID: "alice", maxMembers: nil,
            createdAt: now, updatedAt: now, custom: custom, mute: mute)
    }

    @Test("TOPIC_CREATED: the topic id, its profile (empty fields too), its custom keys without values, to the group")
    func created() {
        let topic = topic(custom: ["k1": [1], "k2": []])
        let draft = GroupEvent.Draft.topicCreated(topic, operatorID: "alice")
        #expect(draft.kind == .topicCreated && draft.recipient == .group && draft.operatorID == "alice")
        #expect(draft.targets.isEmpty)
        #expect(draft.changes == [
            "topic_id": topic.id, "name": "General", "introduction": "intro", "notification": "",
            "face_url": "https://f/1.png", "custom.k1": "", "custom.k2": "",
        ])
        #expect(GroupEvent.Draft.topicIDKey == "topic_id")
        #expect(GroupEvent.topicChangedFields(draft.changes)
            == ["custom.k1", "custom.k2", "face_url", "introduction", "name", "notification"])
        #expect(GroupEvent.topicMute(draft.changes, operatorID: "alice") == nil)
        #expect(GroupEvent.Kind.topicCreated.isTip)
    }

    @Test("TOPIC_CREATED of a topic created muted carries its mute")
    func createdMuted() {
        let until = Timestamp(millisecondsSince1970: 1_700_000_600_000)
        let draft = GroupEvent.Draft.topicCreated(
            topic(mute: GroupMuteState(mode: .ordinaryMembers, until: until)), operatorID: nil)
        #expect(draft.operatorID == nil)
        #expect(draft.changes["mute_mode"] == "ordinary_members" && draft.changes["mute_until"] == "1700000600000")
        #expect(GroupEvent.topicChangedFields(draft.changes).contains("mute"))
        #expect(GroupEvent.topicMute(draft.changes, operatorID: nil) == GroupMuteState(mode: .ordinaryMembers, until: until))
    }

    @Test("TOPIC_UPDATED: only the fields given, with the topic id")
    func updated() {
        let id = GroupID.generateTopicID(in: "c")
        let renamed = GroupEvent.Draft.topicUpdated(
            topicID: id, name: "Renamed", introduction: nil, notification: nil, faceURL: nil, mute: nil,
            customKeys: [], operatorID: "bob")
        #expect(renamed.kind == .topicUpdated && renamed.recipient == .group && renamed.operatorID == "bob")
        #expect(renamed.changes == ["topic_id": id, "name": "Renamed"])
        #expect(GroupEvent.topicChangedFields(renamed.changes) == ["name"])

        // An empty value is a change (cleared), unlike nil.
        let cleared = GroupEvent.Draft.topicUpdated(
            topicID: id, name: nil, introduction: "", notification: "n", faceURL: "", mute: nil,
            customKeys: ["a", "b"], operatorID: nil)
        #expect(cleared.changes == [
            "topic_id": id, "introduction": "", "notification": "n", "face_url": "", "custom.a": "", "custom.b": "",
        ])
        #expect(GroupEvent.topicChangedFields(cleared.changes)
            == ["custom.a", "custom.b", "face_url", "introduction", "notification"])
    }

    @Test("TOPIC_UPDATED of the topic's own mute: muted by roles, then unmuted, as GROUP_MUTED's changes")
    func updatedMute() {
        let id = GroupID.generateTopicID(in: "c")
        let muted = GroupEvent.Draft.topicUpdated(
            topicID: id, name: nil, introduction: nil, notification: nil, faceURL: nil,
            mute: GroupMuteState(mode: .roles([.member, .admin]), until: nil), customKeys: [], operatorID: "alice")
        #expect(muted.changes == ["topic_id": id, "mute_mode": "roles", "mute_roles": "admin,member", "mute_until": "0"])
        #expect(GroupEvent.topicChangedFields(muted.changes) == ["mute"])
        #expect(GroupEvent.topicMute(muted.changes, operatorID: "alice")
            == GroupMuteState(mode: .roles([.member, .admin]), until: nil, operatorID: "alice"))

        let unmuted = GroupEvent.Draft.topicUpdated(
            topicID: id, name: nil, introduction: nil, notification: nil, faceURL: nil, mute: .unmuted, customKeys: [],
            operatorID: "alice")
        #expect(unmuted.changes["mute_mode"] == "none")
        #expect(GroupEvent.topicMute(unmuted.changes, operatorID: "alice")?.mode == GroupMuteMode.none)
    }

    @Test("TOPIC_DELETED: the topic id only")
    func deleted() {
        let id = GroupID.generateTopicID(in: "c")
        let draft = GroupEvent.Draft.topicDeleted(topicID: id, operatorID: "alice")
        #expect(draft.kind == .topicDeleted && draft.recipient == .group && draft.operatorID == "alice")
        #expect(draft.changes == ["topic_id": id])
        #expect(GroupEvent.topicChangedFields(draft.changes).isEmpty)
    }

    @Test("the topic kinds are named as the API names them")
    func kindNames() {
        #expect([GroupEvent.Kind.topicCreated, .topicUpdated, .topicDeleted].map(\.rawValue)
            == ["TOPIC_CREATED", "TOPIC_UPDATED", "TOPIC_DELETED"])
    }
}
