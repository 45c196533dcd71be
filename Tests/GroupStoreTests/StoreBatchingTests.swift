import Foundation
import GroupModel
@testable import GroupStore
import GroupTestSupport
import Synchronization
import Testing

private struct InjectedFault: Error {}

/// The errors concurrent calls got.
private final class Errors: Sendable {
    private let list = Mutex<[GroupError]>([])
    func append(_ error: GroupError) { list.withLock { $0.append(error) } }
    var all: [GroupError] { list.withLock { $0 } }
}

/// Group commit as every backend must keep it: mutations held back, then released into one batch.
@Suite("Store conformance: group commit")
struct StoreBatchingTests {
    @Test("one batch: a refused plan and a write that fails fail alone; the others commit", arguments: StoreKind.allCases)
    func oneBadMember(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            for n in 0..<10 { try await Fixture.create(store, "g\(n)") }
            let before = store.commitStatistics
            // The remark write fails after writing its row and event (the batch aborts and the
            // others run again).
            store.injectFault { method in if method == "setRemark" { throw InjectedFault() } }
            store.holdCommits()
            async let renames = withThrowingTaskGroup(of: Group.self) { tasks in
                for n in 0..<8 { tasks.addTask { try await Fixture.rename(store, "g\(n)", to: "renamed \(n)") } }
                return try await tasks.reduce(into: [Group]()) { $0.append($1) }
            }
            async let refused = Fixture.groupError { try await Fixture.rename(store, "g8", to: "no", by: "mallory") }
            async let failed: (any Error)? = {
                do {
                    _ = try await store.setRemark(
                        app: Fixture.app, groupID: "g9",
                        plan: RemarkPlan(userID: "alice", remark: "r", events: [.init(kind: .remarkChanged, operatorID: "alice")]),
                        at: Fixture.t0)
                    return nil
                } catch { return error }
            }()
            await store.waitUntilQueued(10)
            store.releaseCommits()
            let renamed = try await renames
            #expect(renamed.count == 8 && renamed.allSatisfy { $0.latestSequence == 2 })
            #expect(await refused?.reason == .permissionDenied)
            #expect(await failed is GroupError)
            store.injectFault(nil)

            let after = store.commitStatistics
            #expect(after.abortedBatches == before.abortedBatches + 1)
            #expect(after.mutations == before.mutations + 8)
            for n in 0..<8 {
                #expect(try await Fixture.events(store, "g\(n)").map(\.sequence) == [1, 2])
                #expect(try await store.groups(app: Fixture.app, ids: ["g\(n)"])["g\(n)"]?.name == "renamed \(n)")
            }
            for id in ["g8", "g9"] { #expect(try await Fixture.events(store, id).map(\.kind) == [.groupCreated]) }
            #expect(try await store.remark(app: Fixture.app, groupID: "g9", userID: "alice") == "")
            // The sequence goes on without a gap where the failed writes were.
            #expect(try await Fixture.rename(store, "g9", to: "later").latestSequence == 2)
        }
    }

    @Test("a failed commit stores nothing of its batch and answers every mutation with the error", arguments: StoreKind.allCases)
    func failedCommit(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        for n in 0..<4 { try await Fixture.create(store, "g\(n)", members: ["bob"]) }
        let cached = try await store.groups(app: Fixture.app, ids: ["g0"])
        temporary.failCommits(with: InjectedFault())
        store.holdCommits()
        let errors = Errors()
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            for n in 0..<4 {
                tasks.addTask {
                    if let error = await Fixture.groupError({ try await Fixture.rename(store, "g\(n)", to: "lost") }) {
                        errors.append(error)
                    }
                }
            }
            tasks.addTask {
                if let error = await Fixture.groupError({ try await Fixture.send(store, "g0", from: "bob") }) {
                    errors.append(error)
                }
            }
            await store.waitUntilQueued(5)
            store.releaseCommits()
            try await tasks.waitForAll()
        }
        #expect(errors.all.map(\.code) == Array(repeating: .internal, count: 5))
        temporary.failCommits(with: nil)
        #expect(try await store.groups(app: Fixture.app, ids: ["g0"]) == cached)
        for n in 0..<4 {
            #expect(try await Fixture.events(store, "g\(n)").map(\.kind) == [.groupCreated])
            #expect(try await store.groups(app: Fixture.app, ids: ["g\(n)"])["g\(n)"]?.name == "team g\(n)")
        }
        #expect(store.commitStatistics.failedBatches == 1)
        // The store goes on: the next write commits with the next sequence.
        #expect(try await Fixture.rename(store, "g0", to: "kept").latestSequence == 2)
        try await store.close()
    }

    @Test("concurrent writes to one group: sequences 1 to n without gaps, in commit order", arguments: StoreKind.allCases)
    func sequenceOrder(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            try await Fixture.create(store, "g", members: (0..<20).map { "u\($0)" })
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                for n in 0..<300 { tasks.addTask { try await Fixture.send(store, "g", from: "u\(n % 20)") } }
                try await tasks.waitForAll()
            }
            let events = try await Fixture.events(store, "g")
            #expect(events.map(\.sequence) == Array(1...301))
            // The app-wide log (event_id order) lists the group's events in sequence order.
            var logged: [Int64] = []
            var after: Int64 = 0
            while true {
                let page = try await store.appEvents(app: Fixture.app, after: after, limit: 64)
                logged += page.events.map(\.event.sequence)
                if page.isLast { break }
                after = page.scannedThrough
            }
            #expect(logged == Array(1...301))
            #expect(try await store.groups(app: Fixture.app, ids: ["g"])["g"]?.latestSequence == 301)
            #expect(store.commitStatistics.batches < 301)
        }
    }

    @Test("a retry with the same client message id stores one message, in one batch or across batches", arguments: StoreKind.allCases)
    func idempotentRetries(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            try await Fixture.create(store, "g", members: ["bob"])
            store.holdCommits()
            async let first = Fixture.send(store, "g", from: "bob", clientID: "c-1")
            async let second = Fixture.send(store, "g", from: "bob", clientID: "c-1")
            async let other = Fixture.send(store, "g", from: "bob", clientID: "c-2")
            await store.waitUntilQueued(3)
            store.releaseCommits()
            let answers = try await [first, second, other]
            let same = answers[0...1]
            #expect(same.filter(\.deduplicated).count == 1)
            #expect(Set(same.map(\.stored)).count == 1)
            #expect(answers[2].deduplicated == false && answers[2].stored.message.sequence != same.first?.stored.message.sequence)
            let later = try await Fixture.send(store, "g", from: "bob", clientID: "c-1")
            #expect(later.deduplicated && later.stored == same.first?.stored)
            #expect(try await Fixture.events(store, "g").filter { $0.kind == .groupMessage }.count == 2)
        }
    }

    @Test("replies in one batch each read the message they answer, as a recall earlier in the batch left it", arguments: StoreKind.allCases)
    func repliesInOneBatch(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            try await Fixture.create(store, "g", members: ["bob"])
            let first = try await Fixture.send(store, "g", from: "bob").stored.message
            let second = try await Fixture.send(store, "g", from: "bob").stored.message
            let answers = Mutex<[String: Result<MessageReference?, GroupError>]>([:])
            @Sendable func reply(_ name: String, to sequence: Int64) async {
                let message = GroupMessage(
                    appID: Fixture.app, groupID: "g", sequence: 0, messageID: UUID().uuidString, senderID: "bob",
                    content: MessageContent(type: "text", text: name), time: Fixture.t0)
                let plan = { @Sendable (group: Group, member: Member?, original: GroupMessage?) throws -> MessageReference in
                    guard let original else { throw GroupError(code: .notFound, reason: .messageNotFound, message: "none") }
                    if original.recall != nil {
                        throw GroupError(code: .failedPrecondition, reason: .messageRecalled, message: "recalled")
                    }
                    return MessageReference(to: original)
                }
                do {
                    let stored = try await store.appendMessage(message, at: Fixture.t0, reply: (sequence, plan)) { _, _, _ in "" }
                    answers.withLock { $0[name] = .success(stored.stored.message.replyTo) }
                } catch let error as GroupError {
                    answers.withLock { $0[name] = .failure(error) }
                } catch {}
            }
            try await Fixture.inOneBatch(store, [
                { await reply("a", to: first.sequence) },
                { await reply("b", to: 999) },
                {
                    _ = try await store.recallMessage(app: Fixture.app, groupID: "g", sequence: second.sequence, operatorID: nil, at: Fixture.t0) { _, _, _ in
                        (MessageRecall(by: nil, time: Fixture.t0), GroupEvent.Draft(kind: .messageRecalled, operatorID: nil))
                    }
                },
                { await reply("c", to: second.sequence) },
                { await reply("d", to: first.sequence) },
            ])
            let got = answers.withLock { $0 }
            #expect(try got["a"]?.get() == MessageReference(to: first) && (try got["d"]?.get()) == MessageReference(to: first))
            func reason(_ name: String) -> GroupError.Reason? {
                guard case .failure(let error)? = got[name] else { return nil }
                return error.reason
            }
            #expect(reason("b") == .messageNotFound && reason("c") == .messageRecalled)
            let listed = try await store.replies(app: Fixture.app, groupID: "g", to: first.sequence, after: 0, limit: 10)
            #expect(listed.messages.map(\.content.text) == ["a", "d"])
        }
    }

    @Test("after every kind of mutation the store answers what the backend holds", arguments: StoreKind.allCases)
    func cacheMatchesBackend(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            func check(_ id: String) async throws {
                let answered = try await store.groups(app: Fixture.app, ids: [id])
                let stored = try await store.backend.groups(app: Fixture.app, ids: [id])
                #expect(answered == stored, "\(id)")
            }
            try await Fixture.create(store, "g", members: ["bob"])
            try await check("g")
            try await Fixture.rename(store, "g", to: "new name")
            try await check("g")
            try await Fixture.join(store, "g", "carol")
            try await check("g")
            try await Fixture.send(store, "g", from: "carol")
            try await check("g")
            _ = try await store.setRemark(
                app: Fixture.app, groupID: "g",
                plan: RemarkPlan(userID: "bob", remark: "mine", events: [.init(kind: .remarkChanged, operatorID: "bob")]),
                at: Fixture.t0)
            try await check("g")
            _ = try await store.mutateGroup(app: Fixture.app, groupID: "g", operatorID: nil, targets: ["bob"], at: Fixture.t0) {
                snapshot in
                var group = snapshot.group
                group.custom = ["k": [1, 2]]
                group.mute = GroupMuteState(mode: .all, until: nil)
                var bob = try #require(snapshot.targets["bob"])
                bob.role = .admin
                return (GroupChange(group: group, updatedMembers: [bob], events: [.init(kind: .groupInfoChanged, operatorID: nil)]), ())
            }
            try await check("g")
            _ = try await store.dismissGroup(app: Fixture.app, groupID: "g", operatorID: nil, at: Fixture.t0) { _, _ in
                [.init(kind: .groupDismissed, operatorID: nil)]
            }
            try await check("g")
            #expect(try await store.groups(app: Fixture.app, ids: ["g"]).isEmpty)
        }
    }

    @Test("with a wait configured, a full batch starts at once and a lone write starts when the wait ends",
          .timeLimit(.minutes(1)))
    func configuredWait() async throws {
        // An hour's wait: the four writes can only finish by filling the batch.
        let full = try await TemporaryStore(batching: WriteBatching(maxWrites: 4, maxWait: .seconds(3600)))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            for n in 0..<4 { tasks.addTask { try await Fixture.create(full.store, "g\(n)") } }
            try await tasks.waitForAll()
        }
        #expect(full.store.commitStatistics.batches == 1 && full.store.commitStatistics.mutations == 4)
        try await full.store.close()

        let lone = try await TemporaryStore(batching: WriteBatching(maxWrites: 4, maxWait: .milliseconds(5)))
        try await Fixture.create(lone.store, "g")
        try await Fixture.rename(lone.store, "g", to: "later")
        #expect(lone.store.commitStatistics.batches == 2)
        try await lone.store.close()
    }

    @Test("the commit feed hands over each event once, in commit order, as the log stores it", arguments: StoreKind.allCases)
    func feedMatchesLog(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            let fed = Feed()
            store.observeCommittedEvents { result in if case .success(let events) = result { fed.append(events) } }
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                for n in 0..<6 {
                    tasks.addTask {
                        try await Fixture.create(store, "g\(n)", members: ["bob"])
                        for round in 0..<15 {
                            switch round % 3 {
                            case 0: try await Fixture.rename(store, "g\(n)", to: "name \(round)")
                            case 1: try await Fixture.send(store, "g\(n)", from: "bob")
                            default: try await Fixture.join(store, "g\(n)", "u\(n)-\(round)")
                            }
                        }
                    }
                }
                try await tasks.waitForAll()
            }
            var logged: [LoggedEvent] = []
            var after: Int64 = 0
            while true {
                let page = try await store.appEvents(app: Fixture.app, after: after, limit: 50)
                logged += page.events
                if page.isLast { break }
                after = page.scannedThrough
            }
            let feed = fed.all
            #expect(feed.map(\.eventID) == logged.map(\.eventID))
            #expect(feed.map(\.event) == logged.map(\.event))
            #expect(feed.map(\.message) == logged.map(\.message))
            #expect(feed.map(\.groupType) == logged.map(\.groupType))
        }
    }

    @Test(
        "one batch: a creation, a join of it and a send to it, its id taken twice, and a member count read after a join",
        arguments: StoreKind.allCases)
    func creationJoinAndSendInOneBatch(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            try await Fixture.create(store, "old", members: ["carol"])
            try await Fixture.create(store, "other")
            let batches = store.commitStatistics.batches
            store.holdCommits()
            let created = Task { try await Fixture.create(store, "new", members: ["bob"]) }
            await store.waitUntilQueued(1)
            let joined = Task { try await Fixture.join(store, "new", "carol") }
            await store.waitUntilQueued(2)
            let sent = Task { try await Fixture.send(store, "new", from: "carol") }
            await store.waitUntilQueued(3)
            let again = Task { await Fixture.groupError { try await Fixture.create(store, "new") } }
            await store.waitUntilQueued(4)
            let joinedOther = Task { try await Fixture.join(store, "other", "dave") }
            await store.waitUntilQueued(5)
            // The counts a creation reads include the joins made before it in the batch.
            let request = GroupCreationRequest(
                type: .public, groupID: "third", name: "third", members: ["carol", "dave"].map { InitialMember(userID: $0) })
            let plan = try GroupRules.planCreation(request, appID: Fixture.app, creatorID: "alice", limits: .defaults, now: Fixture.t0)
            let counted = Task { try await store.createGroup(plan) { counts in (plan, counts) }.value }
            await store.waitUntilQueued(6)
            store.releaseCommits()

            #expect(try await created.value.id == "new")
            try await joined.value
            #expect(try await sent.value.stored.message.sequence == 3)
            #expect(await again.value?.reason == .groupIDTaken)
            try await joinedOther.value
            #expect(try await counted.value == ["alice": 3, "carol": 2, "dave": 1])
            #expect(store.commitStatistics.batches == batches + 1)
            #expect(try await Fixture.events(store, "new").map(\.kind) == [.groupCreated, .memberJoined, .groupMessage])
            let members = try await store.members(app: Fixture.app, groupID: "new", userIDs: ["alice", "bob", "carol"])
            #expect(Set(members.keys) == ["alice", "bob", "carol"])
            #expect(members["carol"]?.joinOrder == 3)
            #expect(try await store.groups(app: Fixture.app, ids: ["new"])["new"]?.memberCount == 3)
            for (user, count) in ["alice": 4, "bob": 1, "carol": 3, "dave": 2] {
                #expect(try await store.joinedGroupCount(app: Fixture.app, userID: user, types: Set(GroupType.allCases)) == count)
            }
        }
    }


    @Test(
        "one batch of one group's joins, a quit, a rename and a send: join orders, sequences, counts and versions as if committed one by one",
        arguments: StoreKind.allCases)
    func changesOfOneGroupInOneBatch(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            let created = try await Fixture.create(store, "g", members: ["bob"])
            try await Fixture.create(store, "h")
            let batches = store.commitStatistics.batches
            // In this order: u2 quits after joining in the batch; the rename and the send come
            // between joins; u6 joins another group and then this one.
            let steps: [@Sendable () async throws -> Void] = [
                { try await Fixture.join(store, "g", "u1") },
                { try await Fixture.join(store, "g", "u2") },
                { try await Fixture.join(store, "g", "u3") },
                { try await Fixture.quit(store, "g", "u2") },
                { try await Fixture.join(store, "g", "u4") },
                { _ = try await Fixture.rename(store, "g", to: "later") },
                { try await Fixture.join(store, "g", "u5") },
                { _ = try await Fixture.send(store, "g", from: "u3") },
                { try await Fixture.join(store, "h", "u6") },
                { try await Fixture.join(store, "g", "u6") },
                { try await Fixture.join(store, "g", "u7") },
            ]
            try await Fixture.inOneBatch(store, steps)
            #expect(store.commitStatistics.batches == batches + 1)
            let events = try await Fixture.events(store, "g")
            #expect(events.map(\.kind) == [
                .groupCreated, .memberJoined, .memberJoined, .memberJoined, .memberQuit, .memberJoined, .groupInfoChanged,
                .memberJoined, .groupMessage, .memberJoined, .memberJoined,
            ])
            #expect(events.map(\.sequence) == Array(1...11))
            let users = ["u1", "u2", "u3", "u4", "u5", "u6", "u7"]
            let members = try await store.members(app: Fixture.app, groupID: "g", userIDs: users)
            #expect(members.keys.sorted() == ["u1", "u3", "u4", "u5", "u6", "u7"])
            // Join orders follow the owner's and bob's (1, 2) in the order of the joins, u2's 4 used.
            let orders = ["u1": 3, "u3": 5, "u4": 6, "u5": 7, "u6": 8, "u7": 9]
            for (user, order) in orders { #expect(members[user]?.joinOrder == Int64(order), "\(user)") }
            // A member's join sequence is its join event's.
            for event in events where event.kind == .memberJoined {
                let user = event.targets[0]
                if let member = members[user] { #expect(member.joinSequence == event.sequence, "\(user)") }
            }
            let group = try #require(try await store.groups(app: Fixture.app, ids: ["g"])["g"])
            #expect(group.name == "later")
            #expect(group.memberCount == 8)
            #expect(group.latestSequence == 11)
            // Seven joins and a quit each made a member version.
            #expect(group.memberVersion == created.memberVersion + 8)
            for user in users {
                let count = try await store.joinedGroupCount(app: Fixture.app, userID: user, types: Set(GroupType.allCases))
                #expect(count == (user == "u2" ? 0 : user == "u6" ? 2 : 1), "\(user)")
            }
            // A join after the batch continues the join orders.
            try await Fixture.join(store, "g", "u8")
            #expect(try await store.members(app: Fixture.app, groupID: "g", userIDs: ["u8"])["u8"]?.joinOrder == 10)
        }
    }
}

/// What the commit feed handed over.
private final class Feed: Sendable {
    private let events = Mutex<[LoggedEvent]>([])
    func append(_ more: [LoggedEvent]) { events.withLock { $0 += more } }
    var all: [LoggedEvent] { events.withLock { $0 } }
}
