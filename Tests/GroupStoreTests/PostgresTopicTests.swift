import Foundation
import GroupModel
@testable import GroupStore
@testable import GroupStorePostgres
import GroupTestSupport
import Testing

/// Topics of communities on PostgreSQL (v17: `groups.parent_key`, `topic_reads`), through the
/// store's API: their writes (``Store/mutateTopic``), their messages and sequences, read positions
/// and counts, and the reads that list or exclude them.
@Suite("PostgreSQL topics", .enabled(if: PostgresTestServer.settings != nil))
struct PostgresTopicTests {
    private let app = Fixture.app
    private let t0 = Fixture.t0

    private func at(_ seconds: Int64) -> Timestamp {
        Timestamp(millisecondsSince1970: t0.millisecondsSince1970 + seconds * 1000)
    }

    private func store() async throws -> TemporaryStore {
        try await TemporaryStore(postgres: try #require(PostgresTestServer.settings))
    }

    /// A Community `id` owned by `alice` with `members`, joined at `t0`.
    private func community(_ store: Store, _ id: String, members: [String] = []) async throws {
        let request = GroupCreationRequest(
            type: .community, groupID: id, name: "community \(id)", members: members.map { InitialMember(userID: $0) })
        _ = try await store.createGroup(
            try GroupRules.planCreation(request, appID: app, creatorID: "alice", limits: .defaults, now: t0))
    }

    /// Creates a topic of `communityID` named `name` at `time`; returns its id.
    private func createTopic(
        _ store: Store, _ communityID: String, _ name: String, at time: Timestamp, custom: [String: [UInt8]] = [:]
    ) async throws -> TopicCommitted<String> {
        try await store.mutateTopic(app: app, communityID: communityID, topicID: nil, operatorID: "alice", at: time) { snapshot in
            var topic = snapshot.community
            topic.id = GroupID.generateTopicID(in: communityID)
            topic.name = name
            topic.introduction = "about \(name)"
            topic.custom = custom
            topic.latestSequence = 0
            topic.pins = []
            topic.mute = GroupMuteState(mode: .none, until: nil)
            topic.createdAt = time
            topic.updatedAt = time
            return (
                TopicPlan(write: .create(topic), events: [.init(kind: .groupInfoChanged, operatorID: "alice", changes: ["topic": topic.id])]),
                topic.id
            )
        }
    }

    /// A message from `sender` to `groupID` at `time`, mentioning `mentions`.
    @discardableResult
    private func send(
        _ store: Store, _ groupID: String, from sender: String, at time: Timestamp, mentions: [String] = [], all: Bool = false
    ) async throws -> AppendedMessage {
        let message = GroupMessage(
            appID: app, groupID: groupID, sequence: 0, messageID: UUID().uuidString, senderID: sender,
            content: MessageContent(text: "hi", mentionedUserIDs: mentions, mentionAll: all), time: time)
        return try await store.appendMessage(message, at: time) { _, member, _ in
            guard let member else { throw GroupError(code: .permissionDenied, reason: .notAMember, message: "not a member") }
            return member.nameCard
        }
    }

    /// `user` joins `id` at `time`.
    private func join(_ store: Store, _ id: String, _ user: String, at time: Timestamp) async throws {
        _ = try await store.mutateGroup(app: app, groupID: id, operatorID: user, targets: [], at: time, parts: Fixture.joinParts) { snapshot in
            var group = snapshot.group
            group.memberCount += 1
            let member = Member(userID: user, role: .member, joinedAt: time, joinSequence: group.latestSequence)
            return (GroupChange(group: group, insertedMembers: [member],
                                events: [.init(kind: .memberJoined, operatorID: user, targets: [user])]), ())
        }
    }

    private func markRead(_ store: Store, _ id: String, _ user: String, at time: Timestamp) async throws -> ReadState {
        try await store.markRead(app: app, groupID: id, userID: user, upTo: nil, at: time) { snapshot in
            (max(snapshot.readSequence, snapshot.latestMessageSequence), [])
        }.value
    }

    @Test("create, update and delete a topic: events on the community, its count, its listing in creation order; a deleted topic and the topics of a dismissed community are gone")
    func topicWrites() async throws {
        let temporary = try await store()
        let store = temporary.store
        try await community(store, "c", members: ["bob"])
        let before = try #require(try await store.groups(app: app, ids: ["c"])["c"]).latestSequence
        let first = try await createTopic(store, "c", "one", at: at(2), custom: ["k": [1, 2]])
        let second = try await createTopic(store, "c", "two", at: at(1))
        let third = try await createTopic(store, "c", "three", at: at(3))
        #expect(first.events.map(\.groupID) == ["c"] && first.events.map(\.sequence) == [before + 1])
        #expect(third.community.latestSequence == before + 3)
        #expect(first.topic?.parentID == "c" && first.topic?.name == "one")
        #expect(GroupID.communityID(ofTopic: first.value) == "c")

        let listed = try await store.topics(app: app, communityIDs: ["c"])["c"] ?? []
        #expect(listed.map(\.id) == [second.value, first.value, third.value])
        #expect(listed.allSatisfy { $0.parentID == "c" && $0.type == .community })
        #expect(listed.first { $0.id == first.value }?.custom == ["k": [1, 2]])
        let raw = try await temporary.backend.topics(app: app, communities: ["c", "nothing"])
        #expect(raw.keys.sorted() == ["c"] && raw["c"]?.count == 3)

        // Update: profile, custom fields.
        let updated = try await store.mutateTopic(
            app: app, communityID: "c", topicID: first.value, operatorID: "alice", at: at(4)
        ) { snapshot in
            #expect(snapshot.topicCount == 3)
            var topic = try #require(snapshot.topic)
            #expect(topic.name == "one" && topic.parentID == "c")
            topic.name = "uno"
            topic.notification = "note"
            topic.custom = ["j": [3]]
            topic.updatedAt = at(4)
            return (TopicPlan(write: .update(topic), events: [.init(kind: .groupInfoChanged, operatorID: "alice")]), ())
        }
        #expect(updated.topic?.name == "uno" && updated.events.map(\.groupID) == ["c"])
        let read = try #require(try await store.groups(app: app, ids: [first.value])[first.value])
        #expect(read.name == "uno" && read.notification == "note" && read.custom == ["j": [3]] && read.parentID == "c")

        // Delete.
        _ = try await store.mutateTopic(app: app, communityID: "c", topicID: second.value, operatorID: "alice", at: at(5)) { snapshot in
            #expect(snapshot.topic?.id == second.value)
            return (TopicPlan(write: .delete(second.value), events: [.init(kind: .groupInfoChanged, operatorID: "alice")]), ())
        }
        #expect(try await store.topics(app: app, communityIDs: ["c"])["c"]?.map(\.id) == [first.value, third.value])
        #expect(try await store.groups(app: app, ids: [second.value])[second.value] == nil)
        let refused = await Fixture.groupError {
            _ = try await store.mutateTopic(app: self.app, communityID: "c", topicID: second.value, operatorID: "alice", at: self.at(5)) { snapshot -> (TopicPlan, Void) in
                #expect(snapshot.topic == nil && snapshot.topicCount == 2)
                throw GroupError.groupNotFound(second.value)
            }
        }
        #expect(refused?.reason == .groupNotFound)
        let sent = await Fixture.groupError { try await self.send(store, second.value, from: "bob", at: at(6)) }
        #expect(sent?.reason == .groupNotFound)

        // Dismissing the community: its topics are not found.
        _ = try await store.dismissGroup(app: app, groupID: "c", operatorID: nil, at: at(7)) { group, membership in
            try GroupRules.planDismissal(of: group, by: ActingRole(isBackend: true, role: nil), operatorID: nil)
        }
        let afterDismissal = await Fixture.groupError { try await self.send(store, first.value, from: "bob", at: at(8)) }
        #expect(afterDismissal == GroupError.groupNotFound(first.value))
        #expect(try await store.topics(app: app, communityIDs: ["c"]).isEmpty)
        #expect(try await temporary.backend.topics(app: app, communities: ["c"]).isEmpty)
        let history = await Fixture.groupError {
            _ = try await store.messages(app: self.app, groupID: first.value, range: MessageRange(direction: .older, anchor: nil, floor: 0), limit: 5)
        }
        #expect(history?.reason == .groupNotFound)
        try await store.close()
    }

    @Test("a topic's messages: its own sequences and history, events with the topic's id, the community's sequence unchanged; non-members refused; batched sends")
    func topicMessages() async throws {
        let temporary = try await store()
        let store = temporary.store
        try await community(store, "c", members: ["bob"])
        try await send(store, "c", from: "bob", at: at(1))
        let topic = try await createTopic(store, "c", "one", at: at(2)).value
        let latest = try #require(try await store.groups(app: app, ids: ["c"])["c"]).latestSequence

        let first = try await send(store, topic, from: "bob", at: at(3))
        let second = try await send(store, topic, from: "alice", at: at(4))
        #expect(first.stored.message.sequence == 1 && second.stored.message.sequence == 2)
        #expect(first.events.map(\.groupID) == [topic] && second.events.map(\.sequence) == [2])
        // Batched with a send to the community: each keeps its own sequences.
        try await Fixture.inOneBatch(store, [
            { _ = try await self.send(store, topic, from: "bob", at: self.at(5)) },
            { _ = try await self.send(store, "c", from: "bob", at: self.at(5)) },
            { _ = try await self.send(store, topic, from: "alice", at: self.at(5)) },
        ])
        let history = try await store.messages(app: app, groupID: topic, range: MessageRange(direction: .older, anchor: nil, floor: 0), limit: 10)
        #expect(history.messages.map(\.sequence) == [1, 2, 3, 4])
        #expect(history.messages.allSatisfy { $0.groupID == topic })
        #expect(history.latestSequence == 4)
        let community = try await store.messages(app: app, groupID: "c", range: MessageRange(direction: .older, anchor: nil, floor: 0), limit: 10)
        #expect(community.messages.count == 2)
        #expect(try await store.groups(app: app, ids: ["c"])["c"]?.latestSequence == latest + 1)
        #expect(try await store.groups(app: app, ids: [topic])[topic]?.latestSequence == 4)
        #expect(try await store.events(app: app, groupID: topic, after: 0, limit: 10).map(\.sequence) == [1, 2, 3, 4])

        let stranger = await Fixture.groupError { try await self.send(store, topic, from: "mallory", at: self.at(6)) }
        #expect(stranger?.reason == .notAMember)
        let missing = await Fixture.groupError { try await self.send(store, "c@TOPIC#_NOSUCHTOPIC0", from: "bob", at: self.at(6)) }
        #expect(missing == GroupError.groupNotFound("c@TOPIC#_NOSUCHTOPIC0"))
        #expect(try await store.memberships(app: app, userID: "bob", groupIDs: [topic])[topic]?.userID == "bob")
        // GetGroupsInfo's read: the topic in its community's view, with bob's membership of the community.
        let view = try await store.groupsForUser(app: app, userID: "bob", ids: [topic, "c"])
        #expect(view.groups[topic]?.parentID == "c" && view.groups[topic]?.latestSequence == 4 && view.groups["c"] != nil)
        #expect(view.memberships[topic]?.userID == "bob" && view.memberships["c"]?.userID == "bob")
        #expect(view.unreadMentions?[topic] == UnreadMention.none)
        let outsider = try await store.groupsForUser(app: app, userID: "mallory", ids: [topic])
        #expect(outsider.groups[topic]?.parentID == "c" && outsider.memberships.isEmpty)
        try await store.close()
    }

    @Test("read state in a topic: unread counts and mentions after the member's position and join, mark read, a later joiner starts with nothing unread; read positions")
    func topicReads() async throws {
        let temporary = try await store()
        let store = temporary.store
        try await community(store, "c", members: ["bob", "carol"])
        let topic = try await createTopic(store, "c", "one", at: at(1)).value
        try await send(store, topic, from: "alice", at: at(10))
        try await send(store, topic, from: "alice", at: at(11), mentions: ["bob"])
        try await send(store, topic, from: "bob", at: at(12))
        try await send(store, "c", from: "alice", at: at(12))

        let bob = try #require(try await store.readStates(app: app, userID: "bob", groupIDs: [topic, "c"])[topic])
        #expect(bob.readSequence == 0 && bob.unreadCount == 2 && bob.unreadMention == .me)
        #expect(bob.lastMessageAt == at(12))
        let carol = try #require(try await store.readStates(app: app, userID: "carol", groupIDs: [topic])[topic])
        #expect(carol.unreadCount == 3 && carol.unreadMention == UnreadMention.none)
        #expect(try await store.unreadMentions(app: app, userID: "bob", groupIDs: [topic, "c"])[topic] == .me)
        #expect(try await store.readStates(app: app, userID: "mallory", groupIDs: [topic])[topic] == nil)

        let marked = try await markRead(store, topic, "bob", at: at(13))
        #expect(marked.readSequence == 3 && marked.unreadCount == 0 && marked.unreadMention == UnreadMention.none)
        let after = try #require(try await store.readStates(app: app, userID: "bob", groupIDs: [topic])[topic])
        #expect(after.readSequence == 3 && after.unreadCount == 0 && after.unreadMention == UnreadMention.none)
        // The community's own read position did not move.
        #expect(try await store.readStates(app: app, userID: "bob", groupIDs: ["c"])["c"]?.readSequence == 0)

        // A member who joins later: the messages before the join are not unread.
        try await join(store, "c", "dave", at: at(20))
        let dave = try #require(try await store.readStates(app: app, userID: "dave", groupIDs: [topic])[topic])
        #expect(dave.readSequence == 0 && dave.unreadCount == 0)
        try await send(store, topic, from: "alice", at: at(21), all: true)
        let daveLater = try #require(try await store.readStates(app: app, userID: "dave", groupIDs: [topic])[topic])
        #expect(daveLater.unreadCount == 1 && daveLater.unreadMention == .all)
        let daveMarked = try await markRead(store, topic, "dave", at: at(22))
        #expect(daveMarked.readSequence == 4 && daveMarked.unreadCount == 0 && daveMarked.unreadMention == UnreadMention.none)

        let positions = try await store.readPositions(app: app, groupID: topic)
        #expect(positions.map(\.userID) == ["alice", "bob", "carol", "dave"])
        #expect(positions.map(\.readSequence) == [0, 3, 0, 4])
        // The join sequence: the topic's latest message sent before the member joined.
        #expect(positions.map(\.joinSequence) == [0, 0, 0, 3])

        // A member who quits and joins again starts over.
        try await Fixture.quit(store, "c", "bob")
        try await join(store, "c", "bob", at: at(30))
        let rejoined = try #require(try await store.readStates(app: app, userID: "bob", groupIDs: [topic])[topic])
        #expect(rejoined.readSequence == 0 && rejoined.unreadCount == 0)
        try await store.close()
    }

    @Test("a store session plans by index and never compiles a statement (JIT off): the joined list's generic plan cost 21 million and JIT took a second a call")
    func sessionSettings() async throws {
        let temporary = try await store()
        let backend = try #require(temporary.backend as? PostgresBackend)
        let settings = try await backend.read { session in
            var values: [String] = []
            for name in ["jit", "enable_seqscan", "enable_bitmapscan"] {
                values.append(try await session.first("SELECT current_setting('\(name)')", []) { try $0.text(0) } ?? "")
            }
            return values
        }
        #expect(settings == ["off", "off", "off"])
        try await temporary.store.close()
    }

    @Test("search and the app's listings exclude topics")
    func searchExcludesTopics() async throws {
        let temporary = try await store()
        let store = temporary.store
        try await community(store, "c", members: ["bob"])
        let topic = try await createTopic(store, "c", "community talk", at: at(1)).value
        let found = try await store.searchGroups(
            app: app, keyword: "community", userID: nil, matchNameCards: false, after: nil, limit: 10)
        #expect(found.items.map(\.id) == ["c"])
        let byID = try await store.searchGroups(app: app, keyword: "c", userID: "bob", matchNameCards: false, after: nil, limit: 10)
        #expect(!byID.items.map(\.id).contains(topic))
        let joined = try await store.joinedGroups(app: app, userID: "bob", after: nil, limit: 10)
        #expect(joined.items.map(\.group.id) == ["c"])
        try await store.close()
    }

    @Test("a change of a topic (its name, its mute) writes the topic's row and events alone; a change of members over a topic is refused")
    func topicChanges() async throws {
        let temporary = try await store()
        let store = temporary.store
        try await community(store, "c", members: ["bob"])
        let topic = try await createTopic(store, "c", "one", at: at(1)).value
        let community = try #require(try await store.groups(app: app, ids: ["c"])["c"])
        let changed = try await store.mutateGroup(app: app, groupID: topic, operatorID: "alice", targets: ["bob"], at: at(2)) { snapshot in
            #expect(snapshot.group.parentID == "c" && snapshot.group.ownerID == "alice")
            #expect(snapshot.operatorMembership?.role == .owner && snapshot.operatorMembership?.joinSequence == 0)
            #expect(snapshot.targets["bob"]?.role == .member)
            var group = snapshot.group
            group.name = "renamed"
            group.mute = GroupMuteState(mode: .all, until: nil, operatorID: "alice")
            return (GroupChange(group: group, events: [.init(kind: .groupMuted, operatorID: "alice")]), ())
        }
        #expect(changed.events.map(\.groupID) == [topic] && changed.events.map(\.sequence) == [1])
        let groups = try await store.groups(app: app, ids: [topic, "c"])
        #expect(groups[topic]?.name == "renamed" && groups[topic]?.mute.mode == .all && groups[topic]?.latestSequence == 1)
        #expect(groups["c"]?.name == community.name && groups["c"]?.mute.mode == GroupMuteMode.none)
        #expect(groups["c"]?.latestSequence == community.latestSequence && groups["c"]?.memberCount == 2)
        #expect(try await store.topics(app: app, communityIDs: ["c"])["c"]?.first?.name == "renamed")

        let refused = await Fixture.groupError {
            _ = try await store.mutateGroup(app: self.app, groupID: topic, operatorID: "carol", targets: [], at: self.at(3)) { snapshot in
                var group = snapshot.group
                group.memberCount += 1
                let member = Member(userID: "carol", role: .member, joinedAt: self.at(3), joinSequence: 0)
                return (GroupChange(group: group, insertedMembers: [member],
                                    events: [.init(kind: .memberJoined, operatorID: "carol", targets: ["carol"])]), ())
            }
        }
        #expect(refused?.code == .internal)
        #expect(try await store.memberships(app: app, userID: "carol", groupIDs: ["c", topic]).isEmpty)
        #expect(try await store.groups(app: app, ids: ["c"])["c"]?.memberCount == 2)
        try await store.close()
    }

    @Test("sends to topics in one batch: read by the batch's preload, the topic's state dropped by a write of its community (a join, a quit) in the batch")
    func batchedTopicSends() async throws {
        let temporary = try await store()
        let store = temporary.store
        try await community(store, "c", members: ["bob"])
        let topic = try await createTopic(store, "c", "one", at: at(1)).value
        let other = try await createTopic(store, "c", "two", at: at(1)).value
        let results = Results()
        let missing = "c@TOPIC#_NOSUCHTOPIC0"
        try await Fixture.inOneBatch(store, [
            { await results.set("bob 1", await sendOutcome { try await self.send(store, topic, from: "bob", at: self.at(2)) }) },
            { await results.set("dave before", await sendOutcome { try await self.send(store, topic, from: "dave", at: self.at(2)) }) },
            { await results.set("bob other", await sendOutcome { try await self.send(store, other, from: "bob", at: self.at(2)) }) },
            { await results.set("missing", await sendOutcome { try await self.send(store, missing, from: "bob", at: self.at(2)) }) },
            { try await self.join(store, "c", "dave", at: self.at(3)) },
            { await results.set("dave after", await sendOutcome { try await self.send(store, topic, from: "dave", at: self.at(4)) }) },
            { await results.set("bob 2", await sendOutcome { try await self.send(store, topic, from: "bob", at: self.at(4)) }) },
            { try await Fixture.quit(store, "c", "bob") },
            { await results.set("bob after quit", await sendOutcome { try await self.send(store, topic, from: "bob", at: self.at(5)) }) },
        ])
        let outcome = await results.all
        #expect(outcome["bob 1"] == "1")
        #expect(outcome["dave before"] == GroupError.Reason.notAMember.rawValue)
        #expect(outcome["bob other"] == "1")
        #expect(outcome["missing"] == GroupError.Reason.groupNotFound.rawValue)
        #expect(outcome["dave after"] == "2")
        #expect(outcome["bob 2"] == "3")
        #expect(outcome["bob after quit"] == GroupError.Reason.notAMember.rawValue)
        let history = try await store.messages(app: app, groupID: topic, range: MessageRange(direction: .older, anchor: nil, floor: 0), limit: 10)
        #expect(history.messages.map(\.senderID) == ["bob", "dave", "bob"])
        #expect(try await store.groups(app: app, ids: [topic, other]).mapValues(\.latestSequence) == [topic: 3, other: 1])
        try await store.close()
    }
}

/// What each step of a batch ended with, by name.
private actor Results {
    private(set) var all: [String: String] = [:]

    func set(_ name: String, _ value: String) { all[name] = value }
}

/// The sequence of the message `body` sent, or its error's reason.
private func sendOutcome(_ body: () async throws -> AppendedMessage) async -> String {
    do {
        return String(try await body().stored.message.sequence)
    } catch let error as GroupError {
        return error.reason.rawValue
    } catch {
        return "\(error)"
    }
}
