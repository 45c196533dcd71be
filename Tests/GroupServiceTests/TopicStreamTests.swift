@testable import GRPCProtocol
import GroupAPI
import GroupModel
@testable import GroupService
import GroupStore
import Logging
import NIOCore
import Synchronization
import Testing

/// What a test stream was given, decoded.
private final class Received: Sendable {
    private let items = Mutex<[Groupd_V1_SubscribeResponse]>([])
    func append(_ buffer: ByteBuffer) {
        guard let item = try? Groupd_V1_SubscribeResponse(serializedBytes: Array(buffer.readableBytesView)) else { return }
        items.withLock { $0.append(item) }
    }
    /// The group ids and sequences of the events and messages received (no marker).
    var delivered: [String] {
        items.withLock { items in
            items.compactMap { item -> String? in
                switch item.item {
                case .event(let event)?: "\(event.groupID)#\(event.sequence)"
                case .message(let message)?: "\(message.groupID)#\(message.sequence)"
                default: nil
                }
            }
        }
    }
}

/// Topic items on the event stream: the three kinds' details, and the hub routing a topic's
/// items (its own id and sequence) to the community's members.
@Suite("Topics on the event stream: TOPIC_* details, routing by the community's membership, group_ids filters")
struct TopicStreamTests {
    private let now = Timestamp(millisecondsSince1970: 1_700_000_000_000)
    /// The memberships' watermark: every live item below is after it.
    private let watermark: Int64 = 100

    private func logged(
        _ eventID: Int64, _ groupID: String, sequence: Int64, kind: GroupEvent.Kind, operatorID: String? = "alice",
        targets: [String] = [], changes: [String: String] = [:]
    ) -> LoggedEvent {
        let event = GroupEvent(
            appID: "app", groupID: groupID, sequence: sequence, kind: kind, time: now, operatorID: operatorID,
            targets: targets, changes: changes)
        var message: StoredMessage?
        if kind == .groupMessage {
            message = StoredMessage(eventID: eventID, message: GroupMessage(
                appID: "app", groupID: groupID, sequence: sequence, messageID: "m\(eventID)", senderID: operatorID ?? "",
                content: MessageContent(type: "text", text: "hi"), time: now))
        }
        return LoggedEvent(eventID: eventID, event: event, groupType: .community, message: message, groupName: "C")
    }

    /// A live stream of `user` (`nil`: the backend firehose) with `memberships` as stored at
    /// ``watermark``, filtered by `groups`.
    private func stream(
        _ hub: EventHub, id: Int, user: String?, memberships: [StreamMembership] = [], groups: Set<String> = []
    ) -> Received {
        let received = Received()
        let writer = ServerStreamWriter(capacity: 64, deliver: { received.append($0) })
        let filter = StreamFilter(userID: user, groupIDs: groups, kinds: [], excludeMessages: false)
        let subscriber = EventSubscriber(
            id: id, app: "app", filter: filter, writer: writer, start: EventCursor(eventID: watermark, time: now),
            pendingLimit: 64)
        #expect(hub.register(subscriber))
        if user != nil { hub.install(subscriber, snapshot: MembershipSnapshot(memberships: memberships, watermark: watermark)) }
        #expect(subscriber.goLive(caughtUp: EventHub.caughtUp) == nil)
        return received
    }

    private func member(of group: String, joinSequence: Int64 = 5, option: ReceiveOption = .receive) -> StreamMembership {
        StreamMembership(groupID: group, groupType: .community, joinSequence: joinSequence, receiveOption: option)
    }

    @Test("TOPIC_CREATED / TOPIC_UPDATED / TOPIC_DELETED map to their API kinds with a topic detail")
    func details() throws {
        #expect(EventMapping.kind(.topicCreated) == .topicCreated)
        #expect(EventMapping.kind(.topicUpdated) == .topicUpdated)
        #expect(EventMapping.kind(.topicDeleted) == .topicDeleted)
        #expect(try EventMapping.kinds([.topicCreated, .topicUpdated, .topicDeleted]) == [.topicCreated, .topicUpdated, .topicDeleted])

        let topicID = GroupID.generateTopicID(in: "c")
        let topic = Group(
            appID: "app", id: topicID, type: .community, name: "General", introduction: "intro", faceURL: "https://f",
            settings: GroupType.community.preset.defaultSettings, ownerID: "alice", maxMembers: nil, createdAt: now,
            updatedAt: now, custom: ["k": [1]])
        func api(_ draft: GroupEvent.Draft, sequence: Int64) -> Groupd_V1_GroupEvent {
            EventMapping.event(LoggedEvent(
                eventID: sequence, event: GroupEvent(draft: draft, appID: "app", groupID: "c", sequence: sequence, time: now),
                groupType: .community, groupName: "C"))
        }

        let created = api(.topicCreated(topic, operatorID: "alice"), sequence: 7)
        #expect(created.kind == .topicCreated && created.groupID == "c" && created.sequence == 7)
        #expect(created.operatorUserID == "alice" && created.recipientUserIds.isEmpty)
        guard case .topic(let createdDetail)? = created.detail else {
            Issue.record("no topic detail: \(created)")
            return
        }
        #expect(createdDetail.topicID == topicID && createdDetail.name == "General" && createdDetail.introduction == "intro")
        #expect(createdDetail.notification == "" && createdDetail.faceURL == "https://f" && createdDetail.mute == nil)
        #expect(createdDetail.changedFields == ["custom.k", "face_url", "introduction", "name", "notification"])

        let until = Timestamp(millisecondsSince1970: 1_700_000_600_000)
        let updated = api(.topicUpdated(
            topicID: topicID, name: "Renamed", introduction: nil, notification: nil, faceURL: nil,
            mute: GroupMuteState(mode: .ordinaryMembers, until: until), customKeys: ["k"], operatorID: "bob"), sequence: 8)
        #expect(updated.kind == .topicUpdated && updated.operatorUserID == "bob")
        guard case .topic(let updatedDetail)? = updated.detail else {
            Issue.record("no topic detail: \(updated)")
            return
        }
        #expect(updatedDetail.topicID == topicID && updatedDetail.name == "Renamed" && updatedDetail.introduction == "")
        #expect(updatedDetail.changedFields == ["custom.k", "mute", "name"])
        #expect(updatedDetail.mute?.mode == .ordinaryMembers && updatedDetail.mute?.operatorUserID == "bob")
        #expect(updatedDetail.mute?.muteUntil?.seconds == 1_700_000_600)

        let unmuted = api(.topicUpdated(
            topicID: topicID, name: nil, introduction: nil, notification: nil, faceURL: nil, mute: .unmuted,
            customKeys: [], operatorID: "bob"), sequence: 9)
        guard case .topic(let unmutedDetail)? = unmuted.detail else {
            Issue.record("no topic detail: \(unmuted)")
            return
        }
        #expect(unmutedDetail.changedFields == ["mute"] && unmutedDetail.mute?.mode == .unspecified && unmutedDetail.mute?.operatorUserID == "bob")

        let deleted = api(.topicDeleted(topicID: topicID, operatorID: nil), sequence: 10)
        #expect(deleted.kind == .topicDeleted && deleted.operatorUserID == "")
        guard case .topic(let deletedDetail)? = deleted.detail else {
            Issue.record("no topic detail: \(deleted)")
            return
        }
        #expect(deletedDetail.topicID == topicID && deletedDetail.changedFields.isEmpty && deletedDetail.name == "")
    }

    @Test("a topic's items reach the community's members (its receive option, joined by event id), filtered by community or topic id")
    func routing() async {
        let hub = EventHub(store: nil, clock: ManualWallClock(now), logger: Logger(label: "test"))
        let t1 = GroupID.generateTopicID(in: "c")
        let t2 = GroupID.generateTopicID(in: "c")
        // alice joined the community at its sequence 5: the topics' sequences (1, 2) are lower,
        // and are never compared with it.
        let alice = stream(hub, id: 1, user: "alice", memberships: [member(of: "c")])
        let bob = stream(hub, id: 2, user: "bob", memberships: [member(of: "c", option: .notReceive)])
        let carol = stream(hub, id: 3, user: "carol", memberships: [member(of: "other")])
        let frank = stream(hub, id: 4, user: "frank")
        let byCommunity = stream(hub, id: 5, user: "dave", memberships: [member(of: "c")], groups: ["c"])
        let byTopic = stream(hub, id: 6, user: "erin", memberships: [member(of: "c")], groups: [t1])
        let otherCommunity = stream(hub, id: 7, user: "gina", memberships: [member(of: "c")], groups: ["other"])
        let firehose = stream(hub, id: 8, user: nil)
        let firehoseByCommunity = stream(hub, id: 9, user: nil, groups: ["c"])
        let firehoseByTopic = stream(hub, id: 10, user: nil, groups: [t2])

        hub.publish(.success([
            logged(101, t1, sequence: 1, kind: .groupMessage),
            logged(102, t2, sequence: 2, kind: .messageRecalled, targets: ["alice"], changes: ["sequence": "1"]),
            logged(103, "c", sequence: 6, kind: .topicUpdated, changes: ["topic_id": t1, "name": "n"]),
            // carol joins the community: from then on she receives its topics' items.
            logged(104, "c", sequence: 7, kind: .memberJoined, operatorID: "carol", targets: ["carol"],
                   changes: ["join_source": "free_join"]),
            logged(105, t1, sequence: 2, kind: .groupMessage, operatorID: "carol"),
            logged(106, "other", sequence: 6, kind: .groupInfoChanged, changes: ["name": "o"]),
        ]))
        await hub.drain()

        let all = ["\(t1)#1", "\(t2)#2", "c#6", "c#7", "\(t1)#2"]
        #expect(alice.delivered == all)
        // NOT_RECEIVE: no messages, of the topics either; the rest still.
        #expect(bob.delivered == ["\(t2)#2", "c#6", "c#7"])
        // Not a member of the community until her join.
        #expect(carol.delivered == ["c#7", "\(t1)#2", "other#6"])
        #expect(frank.delivered.isEmpty)
        // A community's id selects its topics; a topic's id that topic only.
        #expect(byCommunity.delivered == all)
        #expect(byTopic.delivered == ["\(t1)#1", "\(t1)#2"])
        #expect(otherCommunity.delivered.isEmpty)
        #expect(firehose.delivered == all + ["other#6"])
        #expect(firehoseByCommunity.delivered == all)
        #expect(firehoseByTopic.delivered == ["\(t2)#2"])

        // A kicked member receives no more of the topics.
        hub.publish(.success([
            logged(107, "c", sequence: 8, kind: .memberKicked, targets: ["alice"]),
            logged(108, t2, sequence: 3, kind: .groupMessage, operatorID: "carol"),
        ]))
        await hub.drain()
        #expect(alice.delivered == all + ["c#8"])
        #expect(carol.delivered == ["c#7", "\(t1)#2", "other#6", "c#8", "\(t2)#3"])
    }

    @Test("the group_ids filter: a community's id takes its topics' items, a topic's id only its own")
    func filter() {
        let t1 = GroupID.generateTopicID(in: "c")
        let t2 = GroupID.generateTopicID(in: "c")
        let elsewhere = GroupID.generateTopicID(in: "d")
        let community = StreamFilter(userID: "u", groupIDs: ["c"], kinds: [], excludeMessages: false)
        let topic = StreamFilter(userID: "u", groupIDs: [t1], kinds: [], excludeMessages: false)
        for (groupID, byCommunity, byTopic) in [("c", true, false), (t1, true, true), (t2, true, false), (elsewhere, false, false), ("d", false, false)] {
            #expect(community.accepts(kind: .groupMessage, groupID: groupID, addressed: false) == byCommunity, "\(groupID)")
            #expect(topic.accepts(kind: .groupMessage, groupID: groupID, addressed: false) == byTopic, "\(groupID)")
        }
        // A group whose id merely starts like the community's is not one of its topics.
        #expect(!community.accepts(kind: .groupMessage, groupID: "c2", addressed: false))
        // Kinds still apply to topic items.
        let kinds = StreamFilter(userID: "u", groupIDs: ["c"], kinds: [.messageRecalled], excludeMessages: false)
        #expect(kinds.accepts(kind: .messageRecalled, groupID: t1, addressed: false))
        #expect(!kinds.accepts(kind: .messagePinned, groupID: t1, addressed: false))
    }
}
