import Foundation
import GroupModel
@testable import GroupStore
import GroupTestSupport
import Testing

private let t0 = Timestamp(millisecondsSince1970: 1_700_000_000_000)

/// Creates a Public group `id` owned by `alice` with `members` as ordinary members.
private func create(_ store: Store, _ id: String, members: [String] = ["bob", "carol", "dave"]) async throws {
    let request = GroupCreationRequest(type: .public, groupID: id, name: "team", members: members.map { InitialMember(userID: $0) })
    let plan = try GroupRules.planCreation(request, appID: "app", creatorID: "alice", limits: .defaults, now: t0)
    _ = try await store.createGroup(plan)
}

/// Stores a message from `sender` and returns its sequence.
private func send(_ store: Store, _ group: String, from sender: String) async throws -> Int64 {
    let message = GroupMessage(
        appID: "app", groupID: group, sequence: 0, messageID: UUID().uuidString, senderID: sender,
        content: MessageContent(type: "text", text: "hi", payload: [], priority: .normal, clientMessageID: nil), time: t0)
    return try await store.appendMessage(message, at: t0) { _, member, _ in member?.nameCard ?? "" }.stored.message.sequence
}

/// Adds (or removes) `user`'s reaction `key` with the model's rules and the given limits.
@discardableResult
private func react(
    _ store: Store, _ group: String, _ sequence: Int64, _ key: String, by user: String, adds: Bool = true,
    limits: AppLimits = .defaults, at time: Timestamp = t0
) async throws -> Committed<ReactionPlan> {
    try await store.react(app: "app", groupID: group, sequence: sequence, operatorID: user, at: time) { group, member, message, state in
        let op = GroupOperator.user(user, membership: member)
        return adds
            ? try GroupRules.planAddReaction(key, to: message, sequence: sequence, in: group, by: op, state: state, limits: limits)
            : try GroupRules.planRemoveReaction(key, from: message, sequence: sequence, in: group, by: op, state: state)
    }
}

@Suite("Store conformance: message reactions")
struct StoreReactionTests {
    @Test("reactions: a count row per key and a row per user, written with their event; idempotent calls write nothing", arguments: StoreKind.allCases)
    func addAndRemove(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        try await create(store, "g1")
        let m1 = try await send(store, "g1", from: "alice")
        let m2 = try await send(store, "g1", from: "bob")

        let first = try await react(store, "g1", m1, "👍", by: "bob")
        #expect(first.value.count == 1 && first.events.map(\.kind) == [.messageReactionAdded])
        #expect(ReactionChange(changes: first.events[0].changes) == ReactionChange(sequence: m1, key: "👍", count: 1))
        #expect(first.events[0].operatorID == "bob" && first.events[0].sequence > m2)
        let again = try await react(store, "g1", m1, "👍", by: "bob")
        #expect(again.value.count == 1 && again.value.write == nil && again.events.isEmpty)
        #expect(try await react(store, "g1", m1, "👍", by: "carol").value.count == 2)
        try await react(store, "g1", m1, "🎉", by: "alice")
        try await react(store, "g1", m2, "👍", by: "dave")

        let read = try await store.reactions(app: "app", groupID: "g1", sequences: [m1, m2, 999], reader: "carol", usersPerKey: 5)
        #expect(read.keys.sorted() == [m1, m2])
        #expect(read[m1] == [
            ReactionSummary(key: "👍", count: 2, reactedByReader: true, firstUsers: ["bob", "carol"]),
            ReactionSummary(key: "🎉", count: 1, reactedByReader: false, firstUsers: ["alice"]),
        ])
        #expect(read[m2] == [ReactionSummary(key: "👍", count: 1, reactedByReader: false, firstUsers: ["dave"])])
        let none = try await store.reactions(app: "app", groupID: "g1", sequences: [m1], reader: nil, usersPerKey: 0)
        #expect(none[m1]?.map(\.firstUsers) == [[], []] && none[m1]?.contains(where: \.reactedByReader) == false)

        let removed = try await react(store, "g1", m1, "👍", by: "bob", adds: false)
        #expect(removed.value.count == 1 && removed.events.map(\.kind) == [.messageReactionRemoved])
        let absent = try await react(store, "g1", m1, "👍", by: "bob", adds: false)
        #expect(absent.value.write == nil && absent.events.isEmpty)
        let last = try await react(store, "g1", m1, "🎉", by: "alice", adds: false)
        #expect(last.value.count == 0)
        let after = try await store.reactions(app: "app", groupID: "g1", sequences: [m1], reader: "bob", usersPerKey: 5)
        #expect(after[m1] == [ReactionSummary(key: "👍", count: 1, reactedByReader: false, firstUsers: ["carol"])])
        // A key back from 0 is listed last.
        try await react(store, "g1", m1, "🎉", by: "bob")
        #expect(try await store.reactions(app: "app", groupID: "g1", sequences: [m1], reader: nil, usersPerKey: 0)[m1]?.map(\.key) == ["👍", "🎉"])

        let missing = await #expect(throws: GroupError.self) {
            try await store.reactions(app: "app", groupID: "nope", sequences: [m1], reader: nil, usersPerKey: 0)
        }
        #expect(missing?.reason == .groupNotFound)
        let missingGroup = await #expect(throws: GroupError.self) { try await react(store, "nope", m1, "👍", by: "bob") }
        #expect(missingGroup?.reason == .groupNotFound)
    }

    @Test("a key's users page by ordinal, earliest first; a user back after leaving comes last", arguments: StoreKind.allCases)
    func users(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        let users = (1...5).map { "u\($0)" }
        try await create(store, "g1", members: users)
        let m1 = try await send(store, "g1", from: "alice")
        for user in users { try await react(store, "g1", m1, "👍", by: user) }
        let page1 = try await store.reactionUsers(app: "app", groupID: "g1", sequence: m1, key: "👍", after: 0, limit: 2)
        #expect(page1.users.map(\.userID) == ["u1", "u2"] && page1.hasMore && page1.count == 5)
        let page2 = try await store.reactionUsers(
            app: "app", groupID: "g1", sequence: m1, key: "👍", after: try #require(page1.users.last).ordinal, limit: 3)
        #expect(page2.users.map(\.userID) == ["u3", "u4", "u5"] && !page2.hasMore)
        try await react(store, "g1", m1, "👍", by: "u1", adds: false)
        try await react(store, "g1", m1, "👍", by: "u1")
        let all = try await store.reactionUsers(app: "app", groupID: "g1", sequence: m1, key: "👍", after: 0, limit: 10)
        #expect(all.users.map(\.userID) == ["u2", "u3", "u4", "u5", "u1"] && all.count == 5)
        let other = try await store.reactionUsers(app: "app", groupID: "g1", sequence: m1, key: "🎉", after: 0, limit: 10)
        #expect(other.users.isEmpty && other.count == 0 && !other.hasMore)
    }

    @Test("a refused reaction writes nothing; limits are checked on the state in the transaction", arguments: StoreKind.allCases)
    func refusals(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        try await create(store, "g1")
        let m1 = try await send(store, "g1", from: "alice")
        var limits = AppLimits.defaults
        limits.maxReactionKeysPerMessage = 1
        try await react(store, "g1", m1, "👍", by: "bob", limits: limits)
        let before = try await store.latestEventID(app: "app")
        let full = await #expect(throws: GroupError.self) { try await react(store, "g1", m1, "🎉", by: "carol", limits: limits) }
        #expect(full?.reason == .tooManyReactionKeys)
        let stranger = await #expect(throws: GroupError.self) { try await react(store, "g1", m1, "👍", by: "zed") }
        #expect(stranger?.reason == .notAMember)
        let nothing = await #expect(throws: GroupError.self) { try await react(store, "g1", 1, "👍", by: "bob") }
        #expect(nothing?.reason == .messageNotFound)
        let read = try await store.reactions(app: "app", groupID: "g1", sequences: [m1], reader: nil, usersPerKey: 5)
        #expect(read[m1] == [ReactionSummary(key: "👍", count: 1, reactedByReader: false, firstUsers: ["bob"])])
        #expect(try await store.latestEventID(app: "app") == before)
    }

    @Test("a recalled message shows no reactions and refuses new ones; a purge deletes a message's reactions", arguments: StoreKind.allCases)
    func recallAndPurge(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        try await create(store, "g1")
        let m1 = try await send(store, "g1", from: "alice")
        let m2 = try await send(store, "g1", from: "alice")
        try await react(store, "g1", m1, "👍", by: "bob")
        try await react(store, "g1", m2, "👍", by: "bob")
        _ = try await store.recallMessage(app: "app", groupID: "g1", sequence: m1, operatorID: nil, at: t0) { group, _, message in
            try GroupRules.planRecall(message, sequence: m1, in: group, by: .backend, now: t0, limits: .defaults)
        }
        #expect(try await store.reactions(app: "app", groupID: "g1", sequences: [m1, m2], reader: nil, usersPerKey: 1).keys.sorted() == [m2])
        let recalled = await #expect(throws: GroupError.self) { try await react(store, "g1", m1, "🎉", by: "carol") }
        #expect(recalled?.reason == .messageRecalled)

        let purged = try await store.purgeMessages(app: "app", olderThan: t0.adding(seconds: 1), limit: 10)
        #expect(purged == 2)
        #expect(try await store.reactions(app: "app", groupID: "g1", sequences: [m1, m2], reader: nil, usersPerKey: 1).isEmpty)
        let users = try await store.reactionUsers(app: "app", groupID: "g1", sequence: m2, key: "👍", after: 0, limit: 10)
        #expect(users.users.isEmpty && users.count == 0)
    }
}
