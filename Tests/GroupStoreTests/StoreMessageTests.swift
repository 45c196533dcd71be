import Foundation
import GRDB
import GroupModel
@testable import GroupStore
@testable import GroupStoreSQLite
import GroupTestSupport
import Synchronization
import Testing

private let t0 = Timestamp(millisecondsSince1970: 1_700_000_000_000)

/// Creates a group `id` of `type` owned by `alice` with `members` as ordinary members.
@discardableResult
private func create(
    _ store: Store, _ id: String, type: GroupType = .public, members: [String] = ["bob", "carol"]
) async throws -> Group {
    let request = GroupCreationRequest(type: type, groupID: id, name: "team", members: members.map { InitialMember(userID: $0) })
    let plan = try GroupRules.planCreation(request, appID: "app", creatorID: "alice", limits: .defaults, now: t0)
    return try await store.createGroup(plan).value
}

/// Adds `user` to the group as an ordinary member with a `MEMBER_JOINED` event.
private func join(_ store: Store, _ id: String, _ user: String) async throws {
    _ = try await store.mutateGroup(app: "app", groupID: id, operatorID: user, targets: [], at: t0) { snapshot in
        var group = snapshot.group
        group.memberCount += 1
        var change = GroupChange(group: group)
        change.insertedMembers = [Member(userID: user, role: .member, joinedAt: t0)]
        change.events = [GroupEvent.Draft(kind: .memberJoined, operatorID: user, targets: [user])]
        return (change, ())
    }
}

private func message(
    _ group: String, from sender: String, text: String = "hi", clientID: String? = nil, priority: MessagePriority = .normal
) -> GroupMessage {
    GroupMessage(
        appID: "app", groupID: group, sequence: 0, messageID: UUID().uuidString, senderID: sender,
        content: MessageContent(type: "text", text: text, payload: [1, 2], priority: priority, clientMessageID: clientID),
        time: t0)
}

/// Stores a message from a member (the check passes members only).
@discardableResult
private func send(
    _ store: Store, _ group: String, from sender: String, text: String = "hi", clientID: String? = nil
) async throws -> AppendedMessage {
    try await store.appendMessage(message(group, from: sender, text: text, clientID: clientID), at: t0) { _, member, _ in
        guard let member else { throw GroupError(code: .permissionDenied, reason: .notAMember, message: "not a member") }
        return member.nameCard
    }
}


@Suite("Store conformance: group messages")
struct StoreMessageTests {
    @Test("migration v5 is applied (SQLite: PostgreSQL's schema starts with messages)", arguments: [StoreKind.sqlite, .sqliteWithoutCache])
    func migration(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        #expect(try await temporary.store.sqlite.appliedMigrations().contains("v5"))
    }

    @Test("a message is a GROUP_MESSAGE event under the group's sequence, with its body beside it", arguments: StoreKind.allCases)
    func append(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        let group = try await create(store, "g1")
        let appended = try await send(store, "g1", from: "bob", text: "hello", clientID: "c-1")
        #expect(!appended.deduplicated)
        let stored = appended.stored.message
        #expect(stored.sequence == group.latestSequence + 1)
        #expect(stored.content == MessageContent(type: "text", text: "hello", payload: [1, 2], clientMessageID: "c-1"))
        #expect(appended.events.map(\.kind) == [.groupMessage])
        #expect(appended.events.first?.operatorID == "bob")
        #expect(appended.events.first?.sequence == stored.sequence)

        let events = try await store.events(app: "app", groupID: "g1", after: group.latestSequence, limit: 10)
        #expect(events.map(\.kind) == [.groupMessage])
        #expect(try await store.groups(app: "app", ids: ["g1"])["g1"]?.latestSequence == stored.sequence)

        let logged = try await store.appEvents(app: "app", after: 0, limit: 100).events
        #expect(logged.first { $0.eventID == appended.stored.eventID }?.message == appended.stored)
    }

    @Test("a retry with the same client id returns the first message and writes nothing", arguments: StoreKind.allCases)
    func retry(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        try await create(store, "g1")
        let first = try await send(store, "g1", from: "bob", text: "one", clientID: "c-1")
        let again = try await send(store, "g1", from: "bob", text: "changed", clientID: "c-1")
        #expect(again.deduplicated)
        #expect(again.stored == first.stored)
        #expect(again.events.isEmpty)
        #expect(try await store.groups(app: "app", ids: ["g1"])["g1"]?.latestSequence == first.stored.message.sequence)
        #expect(try await store.message(app: "app", groupID: "g1", senderID: "bob", clientMessageID: "c-1") == first.stored)

        // Another sender's id, or no id, is another message.
        let other = try await send(store, "g1", from: "carol", clientID: "c-1")
        #expect(!other.deduplicated)
        let plain = try await send(store, "g1", from: "bob")
        let plain2 = try await send(store, "g1", from: "bob")
        #expect(plain.stored.message.sequence + 1 == plain2.stored.message.sequence)
    }

    @Test("concurrent retries store one message", arguments: StoreKind.allCases)
    func concurrentRetries(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        let group = try await create(store, "g1")
        let results = try await withThrowingTaskGroup(of: AppendedMessage.self) { tasks in
            for _ in 0..<16 { tasks.addTask { try await send(store, "g1", from: "bob", clientID: "same") } }
            return try await tasks.reduce(into: []) { $0.append($1) }
        }
        #expect(results.filter { !$0.deduplicated }.count == 1)
        #expect(Set(results.map(\.stored.message.messageID)).count == 1)
        let events = try await store.events(app: "app", groupID: "g1", after: group.latestSequence, limit: 100)
        #expect(events.count == 1)
    }

    @Test("a refused check or a failed commit writes nothing", arguments: StoreKind.allCases)
    func refusals(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        let group = try await create(store, "g1")
        let refused = await Fixture.groupError { try await send(store, "g1", from: "mallory") }
        #expect(refused?.reason == .notAMember)

        store.injectFault { method in
            if method == "appendMessage" { throw GroupError.internal("disk on fire") }
        }
        let failed = await Fixture.groupError { try await send(store, "g1", from: "bob", clientID: "c-9") }
        #expect(failed?.code == .internal)
        store.injectFault(nil)
        #expect(try await store.events(app: "app", groupID: "g1", after: group.latestSequence, limit: 10).isEmpty)
        #expect(try await store.message(app: "app", groupID: "g1", senderID: "bob", clientMessageID: "c-9") == nil)
        #expect(try await store.groups(app: "app", ids: ["g1"])["g1"]?.latestSequence == group.latestSequence)

        let missing = await Fixture.groupError { try await send(store, "nope", from: "bob") }
        #expect(missing?.reason == .groupNotFound)
    }

    @Test("history pages both ways, ascending, above the floor", arguments: StoreKind.allCases)
    func history(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        try await create(store, "g1")
        var sequences: [Int64] = []
        for index in 0..<5 { sequences.append(try await send(store, "g1", from: "bob", text: "m\(index)").stored.message.sequence) }
        try await join(store, "g1", "dave")  // an event between messages: not in the history
        for index in 5..<7 { sequences.append(try await send(store, "g1", from: "carol", text: "m\(index)").stored.message.sequence) }

        let newest = try await store.messages(app: "app", groupID: "g1", range: MessageRange(direction: .older, anchor: nil, floor: 0), limit: 3)
        #expect(newest.messages.map(\.sequence) == Array(sequences[4...6]))
        #expect(newest.hasMore)
        #expect(newest.latestSequence == sequences[6])
        let older = try await store.messages(
            app: "app", groupID: "g1", range: MessageRange(direction: .older, anchor: sequences[4], floor: 0), limit: 3)
        #expect(older.messages.map(\.sequence) == Array(sequences[1...3]))
        let oldest = try await store.messages(
            app: "app", groupID: "g1", range: MessageRange(direction: .older, anchor: sequences[1], floor: 0), limit: 3)
        #expect(oldest.messages.map(\.sequence) == [sequences[0]])
        #expect(!oldest.hasMore)

        let first = try await store.messages(app: "app", groupID: "g1", range: MessageRange(direction: .newer, anchor: nil, floor: 0), limit: 4)
        #expect(first.messages.map(\.sequence) == Array(sequences[0...3]))
        #expect(first.messages.map(\.content.text) == ["m0", "m1", "m2", "m3"])
        #expect(first.hasMore)
        let rest = try await store.messages(
            app: "app", groupID: "g1", range: MessageRange(direction: .newer, anchor: sequences[3], floor: 0), limit: 4)
        #expect(rest.messages.map(\.sequence) == Array(sequences[4...6]))
        #expect(!rest.hasMore)

        // A floor hides what lies at or below it, both ways.
        let floor = sequences[4]
        let visibleOlder = try await store.messages(
            app: "app", groupID: "g1", range: MessageRange(direction: .older, anchor: nil, floor: floor), limit: 10)
        #expect(visibleOlder.messages.map(\.sequence) == Array(sequences[5...6]))
        let visibleNewer = try await store.messages(
            app: "app", groupID: "g1", range: MessageRange(direction: .newer, anchor: 1, floor: floor), limit: 10)
        #expect(visibleNewer.messages.map(\.sequence) == Array(sequences[5...6]))
    }

    @Test("history outlives the event rows (SQLite: the rows deleted by hand)")
    func historyWithoutEvents() async throws {
        let temporary = try await temporaryStore(.sqlite)
        let store = temporary.store
        try await create(store, "g1")
        let sent = try await send(store, "g1", from: "bob")
        try await temporary.sqliteBackend.pool.write { db in try db.execute(sql: "DELETE FROM group_events") }
        let page = try await store.messages(app: "app", groupID: "g1", range: MessageRange(direction: .older, anchor: nil, floor: 0), limit: 10)
        #expect(page.messages == [sent.stored.message])
    }

    @Test("read position: moves to the latest message covered, never back; unread skips own and pre-join messages", arguments: StoreKind.allCases)
    func readState(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        try await create(store, "g1")
        try await send(store, "g1", from: "bob")
        let m2 = try await send(store, "g1", from: "carol").stored.message.sequence
        try await join(store, "g1", "dave")
        let m3 = try await send(store, "g1", from: "bob").stored.message.sequence
        _ = try await send(store, "g1", from: "alice")

        let states = try await store.readStates(app: "app", userID: "alice", groupIDs: ["g1", "missing"])
        #expect(states == ["g1": ReadState(readSequence: 0, unreadCount: 3, lastMessageAt: t0)])
        #expect(try await store.readStates(app: "app", userID: "dave", groupIDs: ["g1"])["g1"]?.unreadCount == 2)

        let plan: @Sendable (ReadSnapshot) throws -> (readSequence: Int64, events: [GroupEvent.Draft]) = { snapshot in
            let position = max(snapshot.readSequence, snapshot.latestMessageSequence)
            return (position, position == snapshot.readSequence ? [] : [
                GroupEvent.Draft(kind: .groupRead, operatorID: "alice", changes: ["read_sequence": String(position)], recipient: .user("alice")),
            ])
        }
        // Up to a sequence between messages: the latest message at or below it.
        let partial = try await store.markRead(app: "app", groupID: "g1", userID: "alice", upTo: m3 - 1, at: t0, plan: plan)
        #expect(partial.value == ReadState(readSequence: m2, unreadCount: 1, lastMessageAt: t0))
        #expect(partial.events.map(\.kind) == [.groupRead])
        #expect(partial.events.first?.recipient == .user("alice"))
        let back = try await store.markRead(app: "app", groupID: "g1", userID: "alice", upTo: 1, at: t0, plan: plan)
        #expect(back.value.readSequence == m2)
        #expect(back.events.isEmpty)
        let latest = try await store.markRead(app: "app", groupID: "g1", userID: "alice", upTo: nil, at: t0, plan: plan)
        #expect(latest.value.unreadCount == 0)
        #expect(try await store.readStates(app: "app", userID: "alice", groupIDs: ["g1"])["g1"] == latest.value)
    }

    // MARK: Mentions, recall, slow mode

    /// Stores `content` from `sender` (members only), handing the check's `lastSent` to `seen`.
    @discardableResult
    private func sendContent(
        _ store: Store, _ group: String, from sender: String, content: MessageContent, at time: Timestamp = t0,
        seen: (@Sendable (Timestamp?) -> Void)? = nil
    ) async throws -> StoredMessage {
        var draft = message(group, from: sender)
        draft.content = content
        return try await store.appendMessage(draft, at: time) { _, member, lastSent in
            seen?(lastSent)
            guard let member else { throw GroupError(code: .permissionDenied, reason: .notAMember, message: "not a member") }
            return member.nameCard
        }.stored
    }

    private let readPlan: @Sendable (ReadSnapshot) throws -> (readSequence: Int64, events: [GroupEvent.Draft]) = { snapshot in
        (max(snapshot.readSequence, snapshot.latestMessageSequence), [])
    }

    @Test("mentions are kept with the message and give unread @me / @all until read past them", arguments: StoreKind.allCases)
    func mentions(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        try await create(store, "g1", members: ["bob", "carol", "dave"])
        let first = try await sendContent(store, "g1", from: "bob", content: MessageContent(text: "a", mentionedUserIDs: ["carol", "bob"]))
        #expect(first.message.content.mentionedUserIDs == ["carol", "bob"])
        /// The unread mention as read states report it, checked against the mention-only read.
        func mention(_ user: String) async throws -> UnreadMention? {
            let state = try await store.readStates(app: "app", userID: user, groupIDs: ["g1"])["g1"]?.unreadMention
            let alone = try await store.unreadMentions(app: "app", userID: user, groupIDs: ["g1", "missing"])
            #expect(alone == (state.map { ["g1": $0] } ?? [:]), "\(user)")
            // Read with the groups (GetGroupsInfo's one statement on PostgreSQL, its one read on SQLite).
            let withGroups = try await store.groupsForUser(app: "app", userID: user, ids: ["g1"]).unreadMentions
            #expect(withGroups == alone, "\(user)")
            return state
        }
        #expect(try await mention("carol") == .me)
        #expect(try await mention("bob") == UnreadMention.none)  // the sender's own mention is not kept
        #expect(try await mention("dave") == UnreadMention.none)
        let second = try await sendContent(store, "g1", from: "alice", content: MessageContent(text: "b", mentionedUserIDs: ["dave"], mentionAll: true))
        #expect(try await mention("carol") == .allAndMe)
        #expect(try await mention("dave") == .allAndMe)
        #expect(try await mention("bob") == .all)
        #expect(try await mention("alice") == UnreadMention.none)
        let page = try await store.messages(app: "app", groupID: "g1", range: MessageRange(direction: .newer, anchor: nil, floor: 0), limit: 10)
        #expect(page.messages.map(\.content.mentionAll) == [false, true])
        #expect(page.messages.map(\.content.mentionedUserIDs) == [["carol", "bob"], ["dave"]])

        let partial = try await store.markRead(
            app: "app", groupID: "g1", userID: "carol", upTo: first.message.sequence, at: t0, plan: readPlan)
        #expect(partial.value.unreadMention == .all)
        let all = try await store.markRead(app: "app", groupID: "g1", userID: "carol", upTo: nil, at: t0, plan: readPlan)
        #expect(all.value.unreadMention == UnreadMention.none)
        #expect(try await mention("carol") == UnreadMention.none)
        #expect(second.message.content.mentionAll)
    }

    @Test("a recall makes a tombstone with its event; the mentions it gave are gone; the unread count stays", arguments: StoreKind.allCases)
    func recall(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        try await create(store, "g1")
        let sent = try await sendContent(
            store, "g1", from: "bob", content: MessageContent(type: "text", text: "oops", payload: [9], mentionedUserIDs: ["carol"], mentionAll: true))
        let t1 = t0.adding(seconds: 5)
        let recall = MessageRecall(by: "alice", time: t1)
        let committed = try await store.recallMessage(
            app: "app", groupID: "g1", sequence: sent.message.sequence, operatorID: "alice", at: t1
        ) { group, member, message in
            #expect(member?.role == .owner)
            #expect(message == sent.message)
            return (recall, GroupEvent.Draft(kind: .messageRecalled, operatorID: "alice", targets: ["bob"], changes: ["sequence": "x"]))
        }
        #expect(committed.value.recall == recall)
        #expect(committed.value.content == MessageContent())
        #expect(committed.events.map(\.kind) == [.messageRecalled])
        let page = try await store.messages(app: "app", groupID: "g1", range: MessageRange(direction: .newer, anchor: nil, floor: 0), limit: 10)
        #expect(page.messages == [committed.value])
        #expect(page.latestSequence == committed.events[0].sequence)
        let carol = try await store.readStates(app: "app", userID: "carol", groupIDs: ["g1"])["g1"]
        #expect(carol?.unreadMention == UnreadMention.none)
        #expect(carol?.unreadCount == 1)

        // The plan sees the tombstone next time, and a missing sequence as nil; a refusal writes nothing.
        await #expect(throws: GroupError.self) {
            _ = try await store.recallMessage(app: "app", groupID: "g1", sequence: sent.message.sequence, operatorID: nil, at: t1) { _, _, message in
                #expect(message?.recall == recall)
                throw GroupError(code: .failedPrecondition, reason: .messageAlreadyRecalled, message: "again")
            }
        }
        await #expect(throws: GroupError.self) {
            _ = try await store.recallMessage(app: "app", groupID: "g1", sequence: 999, operatorID: nil, at: t1) { _, _, message in
                #expect(message == nil)
                throw GroupError(code: .notFound, reason: .messageNotFound, message: "none")
            }
        }
        let after = try await store.messages(app: "app", groupID: "g1", range: MessageRange(direction: .newer, anchor: nil, floor: 0), limit: 10)
        #expect(after.latestSequence == page.latestSequence)
    }

    @Test("an edit replaces the body with its event; history and the event stream show it; unchanged and unwritten edits write nothing", arguments: StoreKind.allCases)
    func edit(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        try await create(store, "g1")
        let sent = try await sendContent(
            store, "g1", from: "bob", content: MessageContent(type: "text", text: "tpyo", payload: [9], mentionedUserIDs: ["carol"]))
        let t1 = t0.adding(seconds: 5)
        let edit = MessageEdit(by: "bob", time: t1, count: 1)
        let draft = GroupEvent.Draft(kind: .messageEdited, operatorID: "bob", targets: ["bob"], changes: ["text": "typo"])
        let committed = try await store.editMessage(
            app: "app", groupID: "g1", sequence: sent.message.sequence, text: "typo", payload: [], operatorID: "bob", at: t1
        ) { group, member, message in
            #expect(member?.userID == "bob" && member?.role == .member)
            #expect(message == sent.message)
            return .edit(edit, event: draft)
        }
        var built = sent.message
        built.content.text = "typo"
        built.content.payload = []
        built.edit = edit
        let expected = built
        #expect(committed.value == EditedMessage(message: expected, unchanged: false))
        #expect(committed.events.map(\.kind) == [.messageEdited] && committed.events[0].changes == ["text": "typo"])
        let page = try await store.messages(app: "app", groupID: "g1", range: MessageRange(direction: .newer, anchor: nil, floor: 0), limit: 10)
        #expect(page.messages == [expected])
        #expect(page.latestSequence == committed.events[0].sequence)
        // The mentions stay as sent.
        #expect(page.messages.first?.content.mentionedUserIDs == ["carol"])
        // The message's own event, read from the log, carries the edited body.
        let logged = try await store.appEvents(app: "app", after: 0, limit: 20).events
        #expect(logged.compactMap(\.message).map(\.message) == [expected])

        // Unchanged, and an edit not to be written: no event, nothing stored.
        let unchanged = try await store.editMessage(
            app: "app", groupID: "g1", sequence: sent.message.sequence, text: "typo", payload: [], operatorID: "bob", at: t1
        ) { _, _, message in
            #expect(message == expected)
            return .unchanged
        }
        #expect(unchanged.value == EditedMessage(message: expected, unchanged: true) && unchanged.events.isEmpty)
        let t2 = t1.adding(seconds: 5)
        let unwritten = try await store.editMessage(
            app: "app", groupID: "g1", sequence: sent.message.sequence, text: "hidden", payload: [1], operatorID: nil, at: t2,
            write: false
        ) { _, _, _ in .edit(MessageEdit(by: nil, time: t2, count: 2), event: draft) }
        #expect(unwritten.value.message.content.text == "hidden" && unwritten.value.message.edit?.count == 2 && unwritten.events.isEmpty)
        // A refusal writes nothing either.
        await #expect(throws: GroupError.self) {
            _ = try await store.editMessage(
                app: "app", groupID: "g1", sequence: 999, text: "x", payload: [], operatorID: nil, at: t2
            ) { _, _, message in
                #expect(message == nil)
                throw GroupError(code: .notFound, reason: .messageNotFound, message: "none")
            }
        }
        let after = try await store.messages(app: "app", groupID: "g1", range: MessageRange(direction: .newer, anchor: nil, floor: 0), limit: 10)
        #expect(after.messages == [expected] && after.latestSequence == page.latestSequence)

        // A second edit counts up; history shows the latest body and editor.
        let second = try await store.editMessage(
            app: "app", groupID: "g1", sequence: sent.message.sequence, text: "", payload: [7, 7], operatorID: "alice", at: t2
        ) { _, _, _ in .edit(MessageEdit(by: "alice", time: t2, count: 2), event: draft) }
        #expect(second.value.message.edit == MessageEdit(by: "alice", time: t2, count: 2) && second.value.message.content.payload == [7, 7])
        let reopened = try await store.messages(app: "app", groupID: "g1", range: MessageRange(direction: .newer, anchor: nil, floor: 0), limit: 1)
        #expect(reopened.messages.first?.content.text == "" && reopened.messages.first?.content.payload == [7, 7]
            && reopened.messages.first?.edit?.by == "alice")
    }

    /// Sends `text` from `sender` as a reply to `sequence`, the reply rule handing back the
    /// reference to the message it is given (refusing when there is none).
    private func reply(
        _ store: Store, _ group: String, from sender: String, to sequence: Int64, text: String,
        seen: (@Sendable (GroupMessage?) -> Void)? = nil
    ) async throws -> StoredMessage {
        let reply = (sequence: sequence, plan: { @Sendable (group: Group, member: Member?, original: GroupMessage?) throws -> MessageReference in
            seen?(original)
            guard let original else { throw GroupError(code: .notFound, reason: .messageNotFound, message: "none") }
            return MessageReference(to: original)
        })
        return try await store.appendMessage(message(group, from: sender, text: text), at: t0, reply: reply) { _, member, _ in
            member?.nameCard ?? ""
        }.stored
    }

    @Test("a reply stores its reference with its snapshot; the replies list pages in order; the snapshot follows the original's edit and recall", arguments: StoreKind.allCases)
    func replies(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        try await create(store, "g1")
        let original = try await send(store, "g1", from: "bob", text: "the plan for friday").stored.message
        let first = try await reply(store, "g1", from: "carol", to: original.sequence, text: "yes") { seen in
            #expect(seen == original)
        }
        let expected = MessageReference(
            sequence: original.sequence, messageID: original.messageID, senderID: "bob", type: "text", preview: "the plan for friday")
        #expect(first.message.replyTo == expected)
        let second = try await reply(store, "g1", from: "alice", to: original.sequence, text: "agreed")
        _ = try await send(store, "g1", from: "bob", text: "not a reply")

        // History and the event log carry the reference.
        let history = try await store.messages(
            app: "app", groupID: "g1", range: MessageRange(direction: .newer, anchor: nil, floor: 0), limit: 10)
        #expect(history.messages.map(\.replyTo) == [nil, expected, expected, nil])
        let logged = try await store.appEvents(app: "app", after: 0, limit: 20).events.compactMap(\.message)
        #expect(logged.map(\.message.replyTo) == [nil, expected, expected, nil])

        // The list: oldest first, paged; above `after` only.
        let page1 = try await store.replies(app: "app", groupID: "g1", to: original.sequence, after: 0, limit: 1)
        #expect(page1.messages == [first.message] && page1.hasMore)
        let page2 = try await store.replies(app: "app", groupID: "g1", to: original.sequence, after: first.message.sequence, limit: 1)
        #expect(page2.messages == [second.message] && !page2.hasMore)
        #expect(try await store.replies(app: "app", groupID: "g1", to: second.message.sequence, after: 0, limit: 5).messages.isEmpty)

        // A refused reply writes nothing.
        let latest = history.latestSequence
        await #expect(throws: GroupError.self) {
            _ = try await reply(store, "g1", from: "carol", to: 999, text: "to nothing") { seen in
                #expect(seen == nil)
            }
        }
        #expect(try await store.groups(app: "app", ids: ["g1"])["g1"]?.latestSequence == latest)

        // An edit of the original rewrites the previews.
        let edited = String(repeating: "é", count: 120)
        _ = try await store.editMessage(
            app: "app", groupID: "g1", sequence: original.sequence, text: edited, payload: [], operatorID: "bob", at: t0
        ) { _, _, _ in
            .edit(MessageEdit(by: "bob", time: t0, count: 1), event: GroupEvent.Draft(kind: .messageEdited, operatorID: "bob"))
        }
        let afterEdit = try await store.replies(app: "app", groupID: "g1", to: original.sequence, after: 0, limit: 5).messages
        #expect(afterEdit.map(\.replyTo?.preview) == Array(repeating: String(repeating: "é", count: 100), count: 2))

        // A recall of the original makes each snapshot a tombstone; the replies stay listed.
        _ = try await store.recallMessage(
            app: "app", groupID: "g1", sequence: original.sequence, operatorID: "bob", at: t0
        ) { _, _, _ in
            (MessageRecall(by: "bob", time: t0), GroupEvent.Draft(kind: .messageRecalled, operatorID: "bob"))
        }
        let tombstone = MessageReference(
            sequence: original.sequence, messageID: original.messageID, senderID: "bob", type: "", preview: "", recalled: true)
        let afterRecall = try await store.replies(app: "app", groupID: "g1", to: original.sequence, after: 0, limit: 5).messages
        #expect(afterRecall.map(\.replyTo) == [tombstone, tombstone])

        // A recalled reply is no reply any more: its reference goes with its body.
        _ = try await store.recallMessage(
            app: "app", groupID: "g1", sequence: first.message.sequence, operatorID: "carol", at: t0
        ) { _, _, _ in
            (MessageRecall(by: "carol", time: t0), GroupEvent.Draft(kind: .messageRecalled, operatorID: "carol"))
        }
        let remaining = try await store.replies(app: "app", groupID: "g1", to: original.sequence, after: 0, limit: 5).messages
        #expect(remaining.map(\.sequence) == [second.message.sequence])
        let recalledReply = try await store.messages(
            app: "app", groupID: "g1", range: MessageRange(direction: .newer, anchor: original.sequence, floor: 0), limit: 1)
        #expect(recalledReply.messages.first?.recall != nil && recalledReply.messages.first?.replyTo == nil)
        await #expect(throws: GroupError.self) {
            _ = try await store.replies(app: "app", groupID: "nope", to: 1, after: 0, limit: 5)
        }
    }

    @Test("the send check gets the sender's previous message time when slow mode is on", arguments: StoreKind.allCases)
    func lastSent(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        try await create(store, "g1")
        let seen = Mutex<[Timestamp?]>([])
        let record: @Sendable (Timestamp?) -> Void = { time in seen.withLock { $0.append(time) } }
        try await sendContent(store, "g1", from: "bob", content: MessageContent(text: "a"), seen: record)
        try await sendContent(store, "g1", from: "bob", content: MessageContent(text: "b"), seen: record)
        // Slow mode off: not read.
        #expect(seen.withLock { $0 } == [nil, nil])
        _ = try await store.mutateGroup(app: "app", groupID: "g1", operatorID: nil, targets: [], at: t0) { snapshot in
            var group = snapshot.group
            group.settings.slowModeIntervalSeconds = 30
            return (GroupChange(group: group, events: [GroupEvent.Draft(kind: .groupSettingsChanged, operatorID: nil)]), ())
        }
        #expect(try await store.groups(app: "app", ids: ["g1"])["g1"]?.settings.slowModeIntervalSeconds == 30)
        let t1 = t0.adding(seconds: 40)
        try await sendContent(store, "g1", from: "bob", content: MessageContent(text: "c"), at: t1, seen: record)
        try await sendContent(store, "g1", from: "bob", content: MessageContent(text: "d"), at: t1.adding(seconds: 1), seen: record)
        try await sendContent(store, "g1", from: "carol", content: MessageContent(text: "e"), at: t1, seen: record)
        #expect(seen.withLock { $0 } == [nil, nil, t0, t1, nil])
    }

    @Test("read positions: every member's join sequence and read position, by user id", arguments: StoreKind.allCases)
    func readPositions(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        let group = try await create(store, "g1")
        let m1 = try await send(store, "g1", from: "alice").stored.message.sequence
        try await join(store, "g1", "dave")
        let plan: @Sendable (ReadSnapshot) throws -> (readSequence: Int64, events: [GroupEvent.Draft]) = { snapshot in
            (max(snapshot.readSequence, snapshot.latestMessageSequence), [])
        }
        _ = try await store.markRead(app: "app", groupID: "g1", userID: "carol", upTo: nil, at: t0, plan: plan)
        let positions = try await store.readPositions(app: "app", groupID: "g1")
        #expect(positions.map(\.userID) == ["alice", "bob", "carol", "dave"])
        #expect(positions.map(\.readSequence) == [0, 0, m1, 0])
        #expect(positions[0].joinSequence == 0 && positions[3].joinSequence > group.latestSequence)
        let missing = await #expect(throws: GroupError.self) { try await store.readPositions(app: "app", groupID: "nope") }
        #expect(missing?.reason == .groupNotFound)
    }

    @Test("pins and pin_permission live on the group row: written with their event, kept by other writes", arguments: StoreKind.allCases)
    func pins(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        let created = try await create(store, "g1")
        #expect(created.pins.isEmpty && created.settings.pinPermission == .ownerAndAdmins)
        let m1 = try await send(store, "g1", from: "bob").stored.message.sequence
        let owner = GroupOperator.user("alice", membership: Member(userID: "alice", role: .owner, joinedAt: t0))
        let pinned = try await store.mutateGroup(app: "app", groupID: "g1", operatorID: "alice", targets: [], at: t0) { snapshot in
            (try GroupRules.planPin(sequence: m1, in: snapshot.group, by: owner, limits: .defaults, now: t0), ())
        }
        #expect(pinned.events.map(\.kind) == [.messagePinned])
        let pin = PinnedMessage(sequence: m1, pinnedBy: "alice", pinnedAt: t0)
        #expect(try await store.groups(app: "app", ids: ["g1"])["g1"]?.pins == [pin])
        try await join(store, "g1", "dave")
        var read = try #require(try await store.groups(app: "app", ids: ["g1"])["g1"])
        #expect(read.pins == [pin])
        _ = try await store.mutateGroup(app: "app", groupID: "g1", operatorID: nil, targets: [], at: t0) { snapshot in
            var group = snapshot.group
            group.settings.pinPermission = .everyone
            return (GroupChange(group: group, events: [
                GroupEvent.Draft(kind: .groupSettingsChanged, operatorID: nil, changes: ["pin_permission": "everyone"]),
            ]), ())
        }
        read = try #require(try await store.groups(app: "app", ids: ["g1"])["g1"])
        #expect(read.settings.pinPermission == .everyone && read.pins == [pin])
        let unpinned = try await store.mutateGroup(app: "app", groupID: "g1", operatorID: nil, targets: [], at: t0) { snapshot in
            (try GroupRules.planUnpin(sequence: m1, in: snapshot.group, by: .backend), ())
        }
        #expect(unpinned.group.pins.isEmpty)
        #expect(try await store.groups(app: "app", ids: ["g1"])["g1"]?.pins == [])

        // A group created with a setting other than its type's default keeps it.
        var request = GroupCreationRequest(type: .work, groupID: "g2", name: "team", members: [])
        request.settings.pinPermission = .everyone
        let plan = try GroupRules.planCreation(request, appID: "app", creatorID: "alice", limits: .defaults, now: t0)
        _ = try await store.createGroup(plan)
        #expect(try await store.groups(app: "app", ids: ["g2"])["g2"]?.settings.pinPermission == .everyone)
    }

    @Test("sends held into one batch are answered each as alone: sequences, retries, refusals, mentions, slow mode", arguments: StoreKind.allCases)
    func batchedSends(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        let g1 = try await create(store, "g1")
        try await create(store, "g2", members: ["bob"])
        _ = try await store.mutateGroup(app: "app", groupID: "g2", operatorID: nil, targets: [], at: t0) { snapshot in
            var group = snapshot.group
            group.settings.slowModeIntervalSeconds = 30
            return (GroupChange(group: group, events: [GroupEvent.Draft(kind: .groupSettingsChanged, operatorID: nil)]), ())
        }
        let slowSeen = Mutex<[Timestamp?]>([])
        /// A send to g2 refused within 30 s of the sender's previous one.
        let slowSend: @Sendable () async throws -> StoredMessage = {
            try await store.appendMessage(message("g2", from: "bob"), at: t0) { _, member, last in
                slowSeen.withLock { $0.append(last) }
                if last != nil { throw GroupError(code: .resourceExhausted, reason: .slowMode, message: "slow mode") }
                return member?.nameCard ?? ""
            }.stored
        }
        let before = store.commitStatistics
        store.holdCommits()
        async let retries = withThrowingTaskGroup(of: AppendedMessage.self) { tasks in
            for _ in 0..<4 { tasks.addTask { try await send(store, "g1", from: "bob", text: "once", clientID: "c-1") } }
            return try await tasks.reduce(into: []) { $0.append($1) }
        }
        async let plain = withThrowingTaskGroup(of: AppendedMessage.self) { tasks in
            for n in 0..<6 { tasks.addTask { try await send(store, "g1", from: n % 2 == 0 ? "carol" : "alice") } }
            return try await tasks.reduce(into: []) { $0.append($1) }
        }
        async let mention = sendContent(store, "g1", from: "carol", content: MessageContent(text: "@bob", mentionedUserIDs: ["bob"]))
        async let stranger = Fixture.groupError { try await send(store, "g1", from: "mallory") }
        async let missing = Fixture.groupError { try await send(store, "nope", from: "bob") }
        async let slow = withTaskGroup(of: Bool.self) { tasks in
            for _ in 0..<2 { tasks.addTask { (try? await slowSend()) != nil } }
            return await tasks.reduce(into: [Bool]()) { $0.append($1) }
        }
        await store.waitUntilQueued(4 + 6 + 1 + 1 + 1 + 2)
        store.releaseCommits()

        let sent = try await retries
        #expect(sent.filter { !$0.deduplicated }.count == 1)
        #expect(Set(sent.map(\.stored)).count == 1)
        #expect(try await plain.count == 6)
        let mentioned = try await mention
        #expect(await stranger?.reason == .notAMember)
        #expect(await missing?.reason == .groupNotFound)
        #expect(await slow.filter { $0 }.count == 1)
        #expect(slowSeen.withLock { $0 }.sorted { ($0 == nil ? 0 : 1) < ($1 == nil ? 0 : 1) } == [nil, t0])
        #expect(store.commitStatistics.batches == before.batches + 1)

        // g1: eight messages under gap-free sequences; each body where its event is.
        let events = try await store.events(app: "app", groupID: "g1", after: g1.latestSequence, limit: 100)
        #expect(events.map(\.kind) == Array(repeating: .groupMessage, count: 8))
        #expect(events.map(\.sequence) == Array((g1.latestSequence + 1)...(g1.latestSequence + 8)))
        let page = try await store.messages(
            app: "app", groupID: "g1", range: MessageRange(direction: .newer, anchor: nil, floor: 0), limit: 100)
        #expect(page.messages.map(\.sequence) == events.map(\.sequence))
        #expect(page.latestSequence == g1.latestSequence + 8)
        #expect(try await store.message(app: "app", groupID: "g1", senderID: "bob", clientMessageID: "c-1") == sent[0].stored)
        let logged = try await store.appEvents(app: "app", after: 0, limit: 100).events.filter { $0.event.kind == .groupMessage }
        #expect(logged.count == 9 && logged.allSatisfy { $0.message?.eventID == $0.eventID })
        #expect(logged.contains { $0.eventID == sent[0].stored.eventID && $0.message == sent[0].stored })
        #expect(logged.contains { $0.message?.message == mentioned.message })
        #expect(try await store.unreadMentions(app: "app", userID: "bob", groupIDs: ["g1"])["g1"] == .me)
        #expect(try await store.groups(app: "app", ids: ["g2"])["g2"]?.latestSequence == (try await store.events(
            app: "app", groupID: "g2", after: 0, limit: 100)).last?.sequence)
    }

    @Test("a send queued after a member left, in the same batch, sees that they left", arguments: StoreKind.allCases)
    func sendAfterLeavingInOneBatch(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        let g1 = try await create(store, "g1")
        store.holdCommits()
        async let first = send(store, "g1", from: "bob")
        await store.waitUntilQueued(1)
        async let quit = store.mutateGroup(app: "app", groupID: "g1", operatorID: "bob", targets: [], at: t0) { snapshot in
            var group = snapshot.group
            group.memberCount -= 1
            let change = GroupChange(
                group: group, removedMembers: ["bob"], events: [.init(kind: .memberQuit, operatorID: "bob", targets: ["bob"])])
            return (change, ())
        }
        await store.waitUntilQueued(2)
        async let after = Fixture.groupError { try await send(store, "g1", from: "bob") }
        async let other = send(store, "g1", from: "carol")
        await store.waitUntilQueued(4)
        store.releaseCommits()
        #expect(try await first.stored.message.sequence == g1.latestSequence + 1)
        #expect(try await quit.group.memberCount == g1.memberCount - 1)
        #expect(await after?.reason == .notAMember)
        #expect(try await other.stored.message.sequence == g1.latestSequence + 3)
        let events = try await store.events(app: "app", groupID: "g1", after: g1.latestSequence, limit: 10)
        #expect(events.map(\.kind) == [.groupMessage, .memberQuit, .groupMessage])
    }

    @Test("a rename between sends in one batch: the names and sequences each would have alone", arguments: StoreKind.allCases)
    func renameBetweenSendsInOneBatch(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        let g1 = try await create(store, "g1")
        store.holdCommits()
        async let first = send(store, "g1", from: "bob")
        await store.waitUntilQueued(1)
        async let renamed = Fixture.rename(store, "g1", to: "renamed")
        await store.waitUntilQueued(2)
        async let second = send(store, "g1", from: "carol")
        await store.waitUntilQueued(3)
        store.releaseCommits()
        #expect(try await first.stored.message.sequence == g1.latestSequence + 1)
        #expect(try await renamed.latestSequence == g1.latestSequence + 2)
        #expect(try await second.stored.message.sequence == g1.latestSequence + 3)
        let group = try #require(try await store.groups(app: "app", ids: ["g1"])["g1"])
        #expect(group.name == "renamed" && group.latestSequence == g1.latestSequence + 3)
        let events = try await store.events(app: "app", groupID: "g1", after: g1.latestSequence, limit: 10)
        #expect(events.map(\.kind) == [.groupMessage, .groupInfoChanged, .groupMessage])
        let page = try await store.messages(
            app: "app", groupID: "g1", range: MessageRange(direction: .newer, anchor: nil, floor: 0), limit: 10)
        #expect(page.messages.map(\.senderID) == ["bob", "carol"])
    }
}
