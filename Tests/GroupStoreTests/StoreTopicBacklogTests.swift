import Foundation
import GroupModel
@testable import GroupStore
import GroupTestSupport
import Testing

private let t0 = Timestamp(millisecondsSince1970: 1_700_000_000_000)
private let app = "app"

/// Creates a Community `id` owned by `alice` with `members` as ordinary members.
private func createCommunity(_ store: Store, _ id: String, members: [String] = ["bob", "carol"]) async throws {
    let request = GroupCreationRequest(
        type: .community, groupID: id, name: "community \(id)", members: members.map { InitialMember(userID: $0) })
    let plan = try GroupRules.planCreation(request, appID: app, creatorID: "alice", limits: .defaults, now: t0)
    _ = try await store.createGroup(plan)
}

/// Creates a topic of `community` as `alice` (a `GROUP_INFO_CHANGED` of the community stands for
/// the service's `TOPIC_CREATED`); returns its id.
private func createTopic(_ store: Store, _ community: String, _ name: String) async throws -> String {
    let id = GroupID.generateTopicID(in: community)
    _ = try await store.mutateTopic(app: app, communityID: community, topicID: nil, operatorID: "alice", at: t0) { snapshot in
        var topic = Group(
            appID: app, id: id, type: snapshot.community.type, name: name, settings: snapshot.community.settings,
            ownerID: snapshot.community.ownerID, maxMembers: nil, createdAt: t0, updatedAt: t0)
        topic.parentID = community
        return (TopicPlan(write: .create(topic), events: [.init(kind: .groupInfoChanged, operatorID: "alice")]), ())
    }
    return id
}

/// Deletes `topic` of `community` as `alice`.
private func deleteTopic(_ store: Store, _ community: String, _ topic: String) async throws {
    _ = try await store.mutateTopic(app: app, communityID: community, topicID: topic, operatorID: "alice", at: t0) { _ in
        (TopicPlan(write: .delete(topic), events: [.init(kind: .groupInfoChanged, operatorID: "alice")]), ())
    }
}

/// A message from `sender` into `group` (a group or a topic); returns its sequence.
@discardableResult
private func send(_ store: Store, _ group: String, from sender: String) async throws -> Int64 {
    let message = GroupMessage(
        appID: app, groupID: group, sequence: 0, messageID: UUID().uuidString, senderID: sender,
        content: MessageContent(type: "text", text: "hi", payload: [], clientMessageID: nil), time: t0)
    return try await store.appendMessage(message, at: t0) { _, member, _ in
        guard let member else { throw GroupError(code: .permissionDenied, reason: .notAMember, message: "not a member") }
        return member.nameCard
    }.stored.message.sequence
}

/// `user` quits `group`, as QuitGroup plans it: `MEMBER_QUIT` to the group, `QUIT_GROUP` to the user.
private func quit(_ store: Store, _ group: String, _ user: String) async throws {
    _ = try await store.mutateGroup(app: app, groupID: group, operatorID: user, targets: [], at: t0) { snapshot in
        var changed = snapshot.group
        changed.memberCount -= 1
        return (GroupChange(group: changed, removedMembers: [user], events: [
            .init(kind: .memberQuit, operatorID: user, targets: [user]),
            .init(kind: .quitGroup, operatorID: user, targets: [user], recipient: .user(user)),
        ]), ())
    }
}

/// `user` sets their receive option in `group`, as SetReceiveMessageOption plans it.
private func setReceiveOption(_ store: Store, _ group: String, _ user: String, _ option: ReceiveOption) async throws {
    _ = try await store.mutateGroup(app: app, groupID: group, operatorID: user, targets: [], at: t0) { snapshot in
        var member = try #require(snapshot.operatorMembership)
        member.receiveOption = option
        return (GroupChange(group: snapshot.group, updatedMembers: [member], events: [
            .init(kind: .receiveOptionChanged, operatorID: user, targets: [user], changes: ["option": option.rawValue],
                  recipient: .user(user)),
        ]), ())
    }
}

/// Renames `topic` as `alice`: a `GROUP_INFO_CHANGED` row of the topic (its id, its sequence).
private func renameTopic(_ store: Store, _ topic: String, to name: String) async throws {
    _ = try await store.mutateGroup(app: app, groupID: topic, operatorID: "alice", targets: [], at: t0) { snapshot in
        var group = snapshot.group
        group.name = name
        return (GroupChange(group: group, events: [.init(kind: .groupInfoChanged, operatorID: "alice", changes: ["name": name])]), ())
    }
}

/// A user's whole backlog after `eventID`, read two rows a page.
private func userLog(_ store: Store, _ user: String, after eventID: Int64 = 0) async throws -> [LoggedEvent] {
    var all: [LoggedEvent] = []
    var after = eventID
    while true {
        let page = try await store.userEvents(app: app, userID: user, after: after, limit: 2)
        all += page.events
        if page.isLast { return all }
        after = page.scannedThrough
    }
}

/// The app's whole log.
private func appLog(_ store: Store) async throws -> [LoggedEvent] {
    var all: [LoggedEvent] = []
    var after: Int64 = 0
    while true {
        let page = try await store.appEvents(app: app, after: after, limit: 50)
        all += page.events
        if page.isLast { return all }
        after = page.scannedThrough
    }
}

/// The sequences of the `topic`'s messages in `log`.
private func topicMessages(_ log: [LoggedEvent], _ topic: String) -> [Int64] {
    log.filter { $0.event.groupID == topic && $0.event.kind == .groupMessage }.map(\.event.sequence)
}

@Suite("Store conformance: topics in a user's backlog")
struct StoreTopicBacklogTests {
    @Test("a member's backlog holds the topic's rows with the topic's id, in event_id order, deleted topics too; a non-member's none", arguments: StoreKind.allCases)
    func membersGetTopicRows(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        try await createCommunity(store, "c1")
        let topic = try await createTopic(store, "c1", "general")
        try await send(store, topic, from: "bob")
        try await send(store, "c1", from: "alice")
        try await send(store, topic, from: "carol")
        try await renameTopic(store, topic, to: "news")

        let bob = try await userLog(store, "bob")
        #expect(topicMessages(bob, topic) == [1, 2])
        #expect(bob.filter { $0.event.groupID == topic }.map(\.event.kind) == [.groupMessage, .groupMessage, .groupInfoChanged])
        #expect(bob.first { $0.event.groupID == topic }?.message?.message.groupID == topic)
        #expect(bob.map(\.eventID) == bob.map(\.eventID).sorted())
        // Every row of the app to the members reaches bob: the community's and the topic's.
        let all = try await appLog(store)
        #expect(bob.map(\.eventID) == all.filter { $0.event.recipient == .group || $0.event.recipient == .user("bob") }.map(\.eventID))
        // From a cursor: the rest.
        let first = try #require(bob.first { $0.event.groupID == topic })
        #expect(topicMessages(try await userLog(store, "bob", after: first.eventID), topic) == [2])

        #expect(try await userLog(store, "zed").isEmpty)

        // A deleted topic's rows stay in the backlog of the window.
        try await deleteTopic(store, "c1", topic)
        #expect(topicMessages(try await userLog(store, "carol"), topic) == [1, 2])
        try await store.close()
    }

    @Test("a member who joined after some of a topic's messages gets only the later ones; one who quit none after the quit, then again from a rejoin", arguments: StoreKind.allCases)
    func membershipWindows(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        try await createCommunity(store, "c1")
        let topic = try await createTopic(store, "c1", "general")
        try await send(store, topic, from: "alice")
        try await send(store, topic, from: "alice")
        // Several community rows, so the community's sequence runs ahead of the topic's.
        for _ in 0..<3 { try await send(store, "c1", from: "alice") }
        try await Fixture.join(store, "c1", "dave")
        try await send(store, topic, from: "alice")
        try await quit(store, "c1", "bob")
        try await send(store, topic, from: "alice")
        try await send(store, topic, from: "alice")

        let dave = try await userLog(store, "dave")
        #expect(topicMessages(dave, topic) == [3, 4, 5])
        #expect(dave.first?.event.kind == .memberJoined)
        let bob = try await userLog(store, "bob")
        #expect(topicMessages(bob, topic) == [1, 2, 3])
        // From a cursor inside the ended membership.
        let second = try #require(bob.first { $0.event.groupID == topic && $0.event.sequence == 2 })
        #expect(topicMessages(try await userLog(store, "bob", after: second.eventID), topic) == [3])

        try await Fixture.join(store, "c1", "bob")
        try await send(store, topic, from: "alice")
        #expect(topicMessages(try await userLog(store, "bob"), topic) == [1, 2, 3, 6])
        #expect(topicMessages(try await userLog(store, "bob", after: second.eventID), topic) == [3, 6])
        // A rejoin within the window after a quit: only the second membership's.
        try await quit(store, "c1", "dave")
        try await send(store, topic, from: "alice")
        try await Fixture.join(store, "c1", "dave")
        try await send(store, topic, from: "alice")
        #expect(topicMessages(try await userLog(store, "dave"), topic) == [3, 4, 5, 6, 8])
        try await store.close()
    }

    @Test("not_receive in the community drops its topics' messages, keeps their other rows", arguments: StoreKind.allCases)
    func receiveOption(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        try await createCommunity(store, "c1")
        let topic = try await createTopic(store, "c1", "general")
        try await setReceiveOption(store, "c1", "carol", .notReceive)
        try await send(store, topic, from: "bob")
        try await renameTopic(store, topic, to: "news")
        try await send(store, "c1", from: "bob")

        let carol = try await userLog(store, "carol")
        #expect(!carol.contains { $0.event.kind == .groupMessage })
        #expect(carol.filter { $0.event.groupID == topic }.map(\.event.kind) == [.groupInfoChanged])
        #expect(carol.contains { $0.event.kind == .receiveOptionChanged })
        #expect(topicMessages(try await userLog(store, "bob"), topic) == [1])
        try await store.close()
    }

    @Test("a user in no community gets what their groups give, nothing of the app's topics", arguments: StoreKind.allCases)
    func noCommunity(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        try await Fixture.create(store, "p", members: ["dan"])
        try await createCommunity(store, "c1")
        let topic = try await createTopic(store, "c1", "general")
        try await send(store, "p", from: "dan")
        try await send(store, topic, from: "bob")
        try await Fixture.join(store, "p", "erin")
        try await send(store, "p", from: "erin")
        try await quit(store, "p", "erin")
        try await send(store, topic, from: "bob")

        let all = try await appLog(store)
        let dan = try await userLog(store, "dan")
        #expect(dan.map(\.eventID) == all.filter {
            $0.event.groupID == "p" && ($0.event.recipient == .group || $0.event.recipient == .user("dan"))
        }.map(\.eventID))
        let erin = try await userLog(store, "erin")
        #expect(erin.map(\.event.kind) == [.memberJoined, .groupMessage, .memberQuit, .quitGroup])
        #expect(!erin.contains { $0.event.groupID != "p" })
        try await store.close()
    }
}
