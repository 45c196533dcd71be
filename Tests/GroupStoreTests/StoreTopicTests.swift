import Foundation
import GroupModel
@testable import GroupStore
import GroupTestSupport
import Testing

private let t0 = Timestamp(millisecondsSince1970: 1_700_000_000_000)
private let app = "app"

/// Creates a Community `id` owned by `alice` with `members` as ordinary members, at `t0`.
private func createCommunity(_ store: Store, _ id: String, members: [String] = ["bob", "carol"]) async throws {
    let request = GroupCreationRequest(
        type: .community, groupID: id, name: "community \(id)", members: members.map { InitialMember(userID: $0) })
    let plan = try GroupRules.planCreation(request, appID: app, creatorID: "alice", limits: .defaults, now: t0)
    _ = try await store.createGroup(plan)
}

/// Creates a topic of `community` named `name` as `alice`, with a `GROUP_INFO_CHANGED` event
/// standing for the service's topic event; returns its id.
private func createTopic(_ store: Store, _ community: String, _ name: String, at time: Timestamp = t0) async throws -> String {
    let id = GroupID.generateTopicID(in: community)
    let committed = try await store.mutateTopic(app: app, communityID: community, topicID: nil, operatorID: "alice", at: time) { snapshot in
        var topic = Group(
            appID: app, id: id, type: snapshot.community.type, name: name, settings: snapshot.community.settings,
            ownerID: snapshot.community.ownerID, maxMembers: nil, createdAt: time, updatedAt: time, custom: ["k": [1]])
        topic.parentID = community
        return (TopicPlan(write: .create(topic), events: [.init(kind: .groupInfoChanged, operatorID: "alice")]), snapshot.topicCount)
    }
    #expect(committed.topic?.id == id && committed.topic?.parentID == community && committed.events.count == 1)
    return id
}

/// A message from `sender` into `group` (a group or a topic) at `time`; returns its sequence.
@discardableResult
private func send(
    _ store: Store, _ group: String, from sender: String, at time: Timestamp = t0, mentioning: [String] = []
) async throws -> Int64 {
    let message = GroupMessage(
        appID: app, groupID: group, sequence: 0, messageID: UUID().uuidString, senderID: sender,
        content: MessageContent(type: "text", text: "hi", payload: [], clientMessageID: nil, mentionedUserIDs: mentioning),
        time: time)
    return try await store.appendMessage(message, at: time) { _, member, _ in
        guard let member else { throw GroupError(code: .permissionDenied, reason: .notAMember, message: "not a member") }
        return member.nameCard
    }.stored.message.sequence
}

/// Marks `group` read up to its latest message as `user`.
private func markRead(_ store: Store, _ group: String, _ user: String) async throws -> ReadState {
    try await store.markRead(app: app, groupID: group, userID: user, upTo: nil, at: t0) { snapshot in
        guard snapshot.membership != nil else { throw GroupError(code: .permissionDenied, reason: .notAMember, message: "") }
        return (max(snapshot.readSequence, snapshot.latestMessageSequence), [])
    }.value
}

@Suite("Store conformance: topics of communities")
struct StoreTopicTests {
    @Test("a topic is created, read through its community, updated and deleted; its events are the community's", arguments: StoreKind.allCases)
    func lifecycle(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        try await createCommunity(store, "c1")
        let before = try #require(try await store.groups(app: app, ids: ["c1"])["c1"])
        let first = try await createTopic(store, "c1", "general")
        let second = try await createTopic(store, "c1", "random", at: t0.adding(seconds: 1))
        #expect(GroupID.communityID(ofTopic: first) == "c1")

        let community = try #require(try await store.groups(app: app, ids: ["c1"])["c1"])
        #expect(community.latestSequence == before.latestSequence + 2)
        let topics = try await store.topics(app: app, communityIDs: ["c1", "missing"])
        #expect(topics.keys.sorted() == ["c1"])
        #expect(topics["c1"]?.map(\.id) == [first, second])
        #expect(topics["c1"]?.map(\.name) == ["general", "random"])
        #expect(topics["c1"]?.allSatisfy { $0.parentID == "c1" && $0.memberCount == 3 && $0.ownerID == "alice" } == true)
        #expect(topics["c1"]?.first?.custom == ["k": [1]])

        // Read as a group: the community's view, the membership of the community.
        let read = try #require(try await store.groups(app: app, ids: [first])[first])
        #expect(read.isTopic && read.type == .community && read.memberCount == 3 && read.latestSequence == 0)
        #expect(try await store.memberships(app: app, userID: "bob", groupIDs: [first, "c1"]).keys.sorted() == ["c1", first].sorted())
        #expect(try await store.memberships(app: app, userID: "zed", groupIDs: [first]).isEmpty)

        // Update: loaded by id, counted.
        let updated = try await store.mutateTopic(app: app, communityID: "c1", topicID: first, operatorID: "alice", at: t0) { snapshot in
            #expect(snapshot.topicCount == 2 && snapshot.operatorMembership?.role == .owner)
            var topic = try #require(snapshot.topic)
            topic.name = "news"
            topic.custom = ["j": [2]]
            return (TopicPlan(write: .update(topic), events: []), ())
        }
        #expect(updated.topic?.name == "news" && updated.events.isEmpty)
        let renamed = try #require(try await store.groups(app: app, ids: [first])[first])
        #expect(renamed.name == "news" && renamed.custom == ["j": [2]])

        // A topic id the community does not hold loads no topic.
        let missing = await Fixture.groupError {
            _ = try await store.mutateTopic(app: app, communityID: "c1", topicID: "c1@TOPIC#_NOSUCHTOPIC0", operatorID: nil, at: t0) { snapshot in
                guard snapshot.topic == nil else { return (TopicPlan(write: .delete("c1@TOPIC#_NOSUCHTOPIC0"), events: []), ()) }
                throw GroupError.groupNotFound("c1@TOPIC#_NOSUCHTOPIC0")
            }
        }
        #expect(missing?.reason == .groupNotFound)

        // Delete: gone from the reads, the community stays, the other topic too.
        _ = try await store.mutateTopic(app: app, communityID: "c1", topicID: first, operatorID: "alice", at: t0) { snapshot in
            (TopicPlan(write: .delete(first), events: [.init(kind: .groupInfoChanged, operatorID: "alice")]), ())
        }
        #expect(try await store.groups(app: app, ids: [first, "c1"]).keys.sorted() == ["c1"])
        #expect(try await store.topics(app: app, communityIDs: ["c1"])["c1"]?.map(\.id) == [second])
        let gone = await Fixture.groupError { _ = try await send(store, first, from: "bob") }
        #expect(gone?.reason == .groupNotFound)
        // A deleted topic's id stays taken.
        let taken = await Fixture.groupError {
            _ = try await store.mutateTopic(app: app, communityID: "c1", topicID: nil, operatorID: nil, at: t0) { snapshot in
                let topic = Group(
                    appID: app, id: first, type: .community, name: "again", settings: snapshot.community.settings,
                    ownerID: "alice", maxMembers: nil, createdAt: t0, updatedAt: t0)
                return (TopicPlan(write: .create(topic), events: []), ())
            }
        }
        #expect(taken?.reason == .groupIDTaken)
    }

    @Test("messages of a topic: its own sequence and history, the community's members send, others are refused", arguments: StoreKind.allCases)
    func messages(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        try await createCommunity(store, "c1")
        let topic = try await createTopic(store, "c1", "general")
        let latest = try #require(try await store.groups(app: app, ids: ["c1"])["c1"]).latestSequence
        #expect(try await send(store, topic, from: "bob") == 1)
        #expect(try await send(store, topic, from: "carol") == 2)
        #expect(try await send(store, "c1", from: "bob") == latest + 1)
        let refused = await Fixture.groupError { _ = try await send(store, topic, from: "zed") }
        #expect(refused?.reason == .notAMember)

        let page = try await store.messages(app: app, groupID: topic, range: MessageRange(direction: .older, anchor: nil, floor: 0), limit: 10)
        #expect(page.messages.map(\.sequence) == [1, 2])
        #expect(page.messages.allSatisfy { $0.groupID == topic })
        let events = try await Fixture.events(store, topic)
        #expect(events.map(\.sequence) == [1, 2] && events.allSatisfy { $0.groupID == topic })
        #expect(try #require(try await store.groups(app: app, ids: [topic])[topic]).latestSequence == 2)
        #expect(try #require(try await store.groups(app: app, ids: ["c1"])["c1"]).latestSequence == latest + 1)
    }

    @Test("read positions in a topic: unread counts and mentions per member, from their join on; mark read", arguments: StoreKind.allCases)
    func readPositions(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        try await createCommunity(store, "c1")
        let topic = try await createTopic(store, "c1", "general")
        let t1 = t0.adding(seconds: 10)
        try await send(store, topic, from: "alice", at: t1)
        try await send(store, topic, from: "alice", at: t1, mentioning: ["bob"])
        // Dave joins after the first two messages: they are not unread for him.
        _ = try await store.mutateGroup(app: app, groupID: "c1", operatorID: "dave", targets: [], at: t0.adding(seconds: 20)) { snapshot in
            var group = snapshot.group
            group.memberCount += 1
            let member = Member(userID: "dave", role: .member, joinedAt: t0.adding(seconds: 20), joinSequence: group.latestSequence)
            return (GroupChange(group: group, insertedMembers: [member], events: [.init(kind: .memberJoined, operatorID: "dave", targets: ["dave"])]), ())
        }
        try await send(store, topic, from: "carol", at: t0.adding(seconds: 30))

        let bob = try await store.readStates(app: app, userID: "bob", groupIDs: [topic, "c1"])
        #expect(bob[topic]?.unreadCount == 3 && bob[topic]?.readSequence == 0 && bob[topic]?.unreadMention == .me)
        #expect(bob["c1"] != nil)
        let dave = try await store.readStates(app: app, userID: "dave", groupIDs: [topic])
        #expect(dave[topic]?.unreadCount == 1 && dave[topic]?.unreadMention == UnreadMention.none)
        #expect(try await store.readStates(app: app, userID: "zed", groupIDs: [topic]).isEmpty)
        #expect(try await store.unreadMentions(app: app, userID: "bob", groupIDs: [topic])[topic] == .me)

        let marked = try await markRead(store, topic, "bob")
        #expect(marked.readSequence == 3 && marked.unreadCount == 0 && marked.unreadMention == UnreadMention.none)
        #expect(try await store.readStates(app: app, userID: "bob", groupIDs: [topic])[topic]?.unreadCount == 0)
        // The community's own read position is untouched.
        #expect(try await store.readStates(app: app, userID: "bob", groupIDs: ["c1"])["c1"]?.readSequence == 0)

        let positions = try await store.readPositions(app: app, groupID: topic)
        #expect(positions.map(\.userID) == ["alice", "bob", "carol", "dave"])
        #expect(positions.first { $0.userID == "bob" }?.readSequence == 3)
        #expect(positions.first { $0.userID == "dave" }?.joinSequence == 2)
        #expect(positions.first { $0.userID == "carol" }?.readSequence == 0)

        // A member who quits and rejoins starts over: the old position no longer counts.
        try await Fixture.quit(store, "c1", "bob")
        _ = try await store.mutateGroup(app: app, groupID: "c1", operatorID: "bob", targets: [], at: t0.adding(seconds: 40)) { snapshot in
            var group = snapshot.group
            group.memberCount += 1
            let member = Member(userID: "bob", role: .member, joinedAt: t0.adding(seconds: 40), joinSequence: group.latestSequence)
            return (GroupChange(group: group, insertedMembers: [member], events: [.init(kind: .memberJoined, operatorID: "bob", targets: ["bob"])]), ())
        }
        let rejoined = try await store.readStates(app: app, userID: "bob", groupIDs: [topic])
        #expect(rejoined[topic]?.readSequence == 0 && rejoined[topic]?.unreadCount == 0)
        try await send(store, topic, from: "carol", at: t0.adding(seconds: 50))
        #expect(try await store.readStates(app: app, userID: "bob", groupIDs: [topic])[topic]?.unreadCount == 1)
    }

    @Test("a member's joined topics: each community's topics in its view, oldest first, each with the read state readStates gives; other communities absent", arguments: StoreKind.allCases)
    func joinedTopics(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        try await createCommunity(store, "c1")
        let general = try await createTopic(store, "c1", "general", at: t0)
        let quiet = try await createTopic(store, "c1", "quiet", at: t0.adding(seconds: 1))
        let read = try await createTopic(store, "c1", "read", at: t0.adding(seconds: 2))
        try await createCommunity(store, "c2", members: ["carol"])
        let elsewhere = try await createTopic(store, "c2", "not bob's")
        try await createCommunity(store, "c3")
        try await createCommunity(store, "gone")
        _ = try await createTopic(store, "gone", "dismissed with its community")
        try await send(store, general, from: "alice", at: t0.adding(seconds: 10))
        try await send(store, general, from: "carol", at: t0.adding(seconds: 11), mentioning: ["bob"])
        try await send(store, general, from: "bob", at: t0.adding(seconds: 12))
        try await send(store, read, from: "alice", at: t0.adding(seconds: 13))
        try await send(store, elsewhere, from: "carol", at: t0.adding(seconds: 14))
        _ = try await markRead(store, read, "bob")
        let communities = try await store.groups(app: app, ids: ["c1", "c2", "c3", "gone"])
        _ = try await store.mutateGroup(app: app, groupID: "gone", operatorID: "alice", targets: [], at: t0) { snapshot in
            var change = GroupChange(group: snapshot.group, events: [.init(kind: .groupDismissed, operatorID: "alice")])
            change.dismissesGroup = true
            return (change, ())
        }

        let joined = try await store.joinedTopics(app: app, userID: "bob", communities: Array(communities.values))
        #expect(Array(joined.keys) == ["c1"])
        let topics = try #require(joined["c1"])
        #expect(topics.map(\.topic.id) == [general, quiet, read])
        #expect(topics.map(\.topic.name) == ["general", "quiet", "read"])
        // In the community's view, with the topic's own sequence and custom fields.
        #expect(topics.allSatisfy { $0.topic.parentID == "c1" && $0.topic.type == .community && $0.topic.custom == ["k": [1]] })
        #expect(topics.map(\.topic.latestSequence) == [3, 0, 1])
        let states = try await store.readStates(app: app, userID: "bob", groupIDs: [general, quiet, read])
        #expect(topics.map(\.read) == [general, quiet, read].map { states[$0] })
        #expect(topics[0].read.unreadCount == 2 && topics[0].read.unreadMention == .me)
        #expect(topics[0].read.lastMessageAt == t0.adding(seconds: 12))
        #expect(topics[1].read == ReadState(readSequence: 0, unreadCount: 0, lastMessageAt: nil))
        #expect(topics[2].read.readSequence == 1 && topics[2].read.unreadCount == 0)
        #expect(topics[2].read.lastMessageAt == t0.adding(seconds: 13))
        // Not a member: nothing; no communities asked: nothing.
        #expect(try await store.joinedTopics(app: app, userID: "zed", communities: Array(communities.values)).isEmpty)
        #expect(try await store.joinedTopics(app: app, userID: "bob", communities: []).isEmpty)
        // Carol's, in both communities.
        let carol = try await store.joinedTopics(app: app, userID: "carol", communities: Array(communities.values))
        #expect(carol.keys.sorted() == ["c1", "c2"] && carol["c2"]?.first?.read.unreadCount == 0)
        #expect(carol["c1"]?.first?.read.unreadCount == 2)
    }

    @Test("a dismissed community takes its topics with it; search lists no topic", arguments: StoreKind.allCases)
    func dismissalAndSearch(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        try await createCommunity(store, "c1")
        let topic = try await createTopic(store, "c1", "community news")
        let found = try await store.searchGroups(app: app, keyword: "c", userID: "bob", matchNameCards: false, after: nil, limit: 10)
        #expect(found.items.map(\.id) == ["c1"])
        let byName = try await store.searchGroups(app: app, keyword: "news", userID: "bob", matchNameCards: false, after: nil, limit: 10)
        #expect(byName.items.isEmpty)

        _ = try await store.mutateGroup(app: app, groupID: "c1", operatorID: "alice", targets: [], at: t0) { snapshot in
            var change = GroupChange(group: snapshot.group, events: [.init(kind: .groupDismissed, operatorID: "alice")])
            change.dismissesGroup = true
            return (change, ())
        }
        #expect(try await store.groups(app: app, ids: [topic, "c1"]).isEmpty)
        #expect(try await store.topics(app: app, communityIDs: ["c1"]).isEmpty)
        let refused = await Fixture.groupError { _ = try await send(store, topic, from: "bob") }
        #expect(refused?.reason == .groupNotFound)
    }

    @Test("a topic's writes take its community's lock key too (a send and a kick of the community never commit side by side)")
    func lockKeys() {
        let topic = GroupID.generateTopicID(in: "c1")
        let community = WriteScope.groups(["c1"], app: app).lockKeys
        let send = WriteScope.send(to: topic, from: "bob", clientMessageID: nil, app: app).lockKeys
        #expect(send.count == 2 && send.contains(community[0]) && send[0] != community[0])
        #expect(WriteScope.groups(["g1"], app: app).lockKeys.count == 1)
    }
}
