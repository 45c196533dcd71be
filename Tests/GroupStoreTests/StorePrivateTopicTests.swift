import Foundation
import GroupModel
@testable import GroupStore
import GroupTestSupport
import Synchronization
import Testing

private let t0 = Timestamp(millisecondsSince1970: 1_700_000_000_000)
private let app = "app"

/// Creates a Community `c` owned by `alice` with `admin` as an admin and `bob` and `carol` as
/// ordinary members.
private func createCommunity(_ store: Store) async throws {
    let request = GroupCreationRequest(
        type: .community, groupID: "c", name: "community",
        members: [InitialMember(userID: "admin", role: .admin), InitialMember(userID: "bob"), InitialMember(userID: "carol")])
    _ = try await store.createGroup(try GroupRules.planCreation(request, appID: app, creatorID: "alice", limits: .defaults, now: t0))
}

/// Runs a GroupChange plan on the community as `alice`.
private func change(
    _ store: Store, targets: [String] = [], _ plan: @escaping @Sendable (GroupSnapshot, GroupOperator) throws -> GroupChange
) async throws {
    _ = try await store.mutateGroup(app: app, groupID: "c", operatorID: "alice", targets: targets, at: t0) { snapshot in
        (try plan(snapshot, .user("alice", membership: snapshot.operatorMembership)), ())
    }
}

/// Creates a topic of `c` as `alice`, as CreateTopic plans it (with `TOPIC_CREATED`); returns its id.
private func createTopic(_ store: Store, _ name: String, private isPrivate: Bool) async throws -> String {
    let id = GroupID.generateTopicID(in: "c")
    _ = try await store.mutateTopic(app: app, communityID: "c", topicID: nil, operatorID: "alice", at: t0) { snapshot in
        let op = GroupOperator.user("alice", membership: snapshot.operatorMembership)
        let (topic, event) = try GroupRules.planTopicCreation(
            TopicCreation(name: name, isPrivate: isPrivate), id: id, in: snapshot.community, by: op,
            topicCount: snapshot.topicCount, limits: .defaults, customFields: nil, now: t0)
        return (TopicPlan(write: .create(topic), events: [event]), ())
    }
    return id
}

/// Makes `topic` private or public as `alice`, as UpdateTopic plans it.
private func setPrivate(_ store: Store, _ topic: String, _ isPrivate: Bool) async throws {
    _ = try await store.mutateTopic(app: app, communityID: "c", topicID: topic, operatorID: "alice", at: t0) { snapshot in
        let op = GroupOperator.user("alice", membership: snapshot.operatorMembership)
        let stored = try #require(snapshot.topic)
        let (after, event) = try GroupRules.planTopicUpdate(
            ProfileUpdate(), isPrivate: isPrivate, of: stored, in: snapshot.community, by: op, limits: .defaults,
            customFields: nil, now: t0)
        return (TopicPlan(write: .update(after), events: event.map { [$0] } ?? []), ())
    }
}

/// A message from `sender` into `group`; returns its sequence.
@discardableResult
private func send(_ store: Store, _ group: String, from sender: String) async throws -> Int64 {
    let message = GroupMessage(
        appID: app, groupID: group, sequence: 0, messageID: UUID().uuidString, senderID: sender,
        content: MessageContent(type: "text", text: "hi", payload: [], clientMessageID: nil), time: t0)
    return try await store.appendMessage(message, at: t0) { _, member, _ in member?.nameCard ?? "" }.stored.message.sequence
}

/// Each topic's privacy by id.
private func privacy(_ topics: [Group]) -> [String: Bool] {
    Dictionary(uniqueKeysWithValues: topics.map { ($0.id, $0.isPrivate) })
}

/// A user's whole backlog.
private func userLog(_ store: Store, _ user: String) async throws -> [LoggedEvent] {
    var all: [LoggedEvent] = []
    var after: Int64 = 0
    while true {
        let page = try await store.userEvents(app: app, userID: user, after: after, limit: 3)
        all += page.events
        if page.isLast { return all }
        after = page.scannedThrough
    }
}

/// The audiences of the rows of `topic` in `log` (its own and the `TOPIC_*` rows naming it).
private func audiences(_ log: [LoggedEvent], _ topic: String) -> [Set<String>?] {
    log.filter { $0.event.groupID == topic || $0.event.changes[GroupEvent.Draft.topicIDKey] == topic }.map(\.audience)
}

@Suite("Store conformance: private topics")
struct StorePrivateTopicTests {
    @Test("a topic's privacy is stored, read back on every path, and changed", arguments: StoreKind.allCases)
    func roundTrip(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        try await createCommunity(store)
        let open = try await createTopic(store, "general", private: false)
        let secret = try await createTopic(store, "secret", private: true)
        let listed = try #require(try await store.topics(app: app, communityIDs: ["c"])["c"])
        // Both are created at t0: the list's order between them is by id, so compare by id.
        #expect(privacy(listed) == [open: false, secret: true])
        let community = try #require(try await store.groups(app: app, ids: ["c"])["c"])
        let joined = try #require(try await store.joinedTopics(app: app, userID: "bob", communities: [community])["c"])
        #expect(privacy(joined.map(\.topic)) == [open: false, secret: true])
        #expect(try await store.groups(app: app, ids: [secret])[secret]?.isPrivate == true)
        try await setPrivate(store, secret, false)
        try await setPrivate(store, open, true)
        let after = try #require(try await store.topics(app: app, communityIDs: ["c"])["c"])
        #expect(privacy(after) == [open: true, secret: false])
        #expect(try await store.groups(app: app, ids: [open])[open]?.isPrivate == true)
        try await store.close()
    }

    @Test("a private topic's rows carry their audience, live and in the backlog; memberships carry role and permission groups",
          arguments: StoreKind.allCases)
    func carriedAudiences(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        let live = Mutex<[LoggedEvent]>([])
        store.observeCommittedEvents { result in
            if case .success(let events) = result { live.withLock { $0 += events } }
        }
        try await createCommunity(store)
        try await change(store) { snapshot, op in
            try GroupRules.planPermissionGroupCreation(
                PermissionGroupUpdate(name: "watchers", permissions: .viewTopic), id: "PG1", in: snapshot.group, by: op,
                liveTopics: [], limits: .defaults, now: t0).change
        }
        try await change(store, targets: ["bob"]) { snapshot, op in
            try GroupRules.planPermissionGroupMembers(
                ["bob"], adding: true, to: "PG1", in: snapshot.group, by: op, memberships: snapshot.targets,
                limits: .defaults).change
        }
        let open = try await createTopic(store, "general", private: false)
        let secret = try await createTopic(store, "secret", private: true)
        try await send(store, open, from: "carol")
        try await send(store, secret, from: "bob")
        try await setPrivate(store, secret, false)
        try await send(store, secret, from: "carol")

        // Live: as each write left the topic; the change of privacy goes to who saw it before too.
        let feed = live.withLock { $0 }
        #expect(audiences(feed, open) == [nil, nil])
        #expect(audiences(feed, secret) == [["PG1"], ["PG1"], nil, nil])
        // Backlog: as the topic is now (public again), for everyone.
        #expect(audiences(try await userLog(store, "carol"), secret) == [nil, nil, nil, nil])
        try await setPrivate(store, secret, true)
        let carol = try await userLog(store, "carol")
        #expect(audiences(carol, secret) == [["PG1"], ["PG1"], ["PG1"], ["PG1"], ["PG1"]])
        #expect(audiences(carol, open) == [nil, nil])

        let memberships = try await store.streamMemberships(app: app, userID: "bob").memberships
        #expect(memberships.map(\.groupID) == ["c"] && memberships.first?.role == .member)
        #expect(memberships.first?.permissionGroups == ["PG1"])
        #expect(try await store.streamMemberships(app: app, userID: "admin").memberships.first?.role == .admin)
        #expect(try await store.streamMemberships(app: app, userID: "alice").memberships.first?.role == .owner)
        try await store.close()
    }
}
