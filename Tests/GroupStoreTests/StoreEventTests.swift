import GroupAPI
import GroupModel
@testable import GroupStore
import GroupTestSupport
import Synchronization
import Testing

private typealias GroupMethods = Groupd_V1_GroupService.Method
private typealias MemberMethods = Groupd_V1_MemberService.Method

extension ServiceHarness {
    fileprivate func rename(_ id: String, _ name: String, as user: String) async throws {
        _ = try await ok(GroupMethods.updateGroupProfile, .with {
            $0.groupID = id
            $0.updateMask = Self.mask("name")
            $0.profile = .with { $0.name = name }
        }, as: .user(user))
    }

    fileprivate func invite(_ user: String, to id: String, as inviter: String) async throws {
        _ = try await ok(MemberMethods.inviteMembers, .with {
            $0.groupID = id
            $0.userIds = [user]
        }, as: .user(inviter))
    }

    fileprivate func kick(_ user: String, from id: String, as owner: String) async throws {
        _ = try await ok(MemberMethods.kickMembers, .with {
            $0.groupID = id
            $0.userIds = [user]
        }, as: .user(owner))
    }

    fileprivate func createWork(_ id: String, owner: String, members: [String] = []) async throws {
        _ = try await ok(GroupMethods.createGroup, .with {
            $0.groupID = id
            $0.type = .work
            $0.ownerUserID = owner
            $0.profile = .with { $0.name = id }
            $0.members = members.map { user in .with { $0.userID = user; $0.role = .member } }
        }, as: .admin)
    }

    fileprivate func everything(after eventID: Int64 = 0) async throws -> [LoggedEvent] {
        var all: [LoggedEvent] = []
        var after = eventID
        while true {
            let page = try await store.appEvents(app: TestApps.appA, after: after, limit: 3)
            all += page.events
            if page.isLast { return all }
            after = page.scannedThrough
        }
    }

    fileprivate func userLog(_ user: String, after eventID: Int64 = 0) async throws -> [LoggedEvent] {
        var all: [LoggedEvent] = []
        var after = eventID
        while true {
            let page = try await store.userEvents(app: TestApps.appA, userID: user, after: after, limit: 2)
            all += page.events
            if page.isLast { return all }
            after = page.scannedThrough
        }
    }
}

@Suite("Store conformance: the event log")
struct StoreEventTests {
    @Test("Every committed group_events row reaches the observer once, in commit order; rolled-back rows never", arguments: StoreKind.allCases)
    func observerSeesCommitsOnly(kind: StoreKind) async throws {
        let harness = try await ServiceHarness(store: kind)
        let seen = Mutex<[[Int64]]>([])
        harness.store.observeCommittedEvents { result in
            if case .success(let events) = result { seen.withLock { $0.append(events.map(\.eventID)) } }
        }
        try await harness.createWork("g", owner: "alice", members: ["bob"])
        harness.store.injectFault { _ in throw GroupError.internal("injected") }
        await #expect(throws: (any Error).self) { try await harness.rename("g", "lost", as: "alice") }
        harness.store.injectFault(nil)
        try await harness.rename("g", "kept", as: "alice")
        try await harness.invite("carol", to: "g", as: "alice")

        let batches = seen.withLock { $0 }
        let log = try await harness.everything()
        #expect(batches.flatMap { $0 } == log.map(\.eventID))
        #expect(batches.count == 3)
        #expect(batches[2].count == 2)
        #expect(log.map(\.event.kind) == [.groupCreated, .groupInfoChanged, .memberInvited, .invitedToGroup])
        #expect(log.allSatisfy { $0.groupType == .work })
    }

    @Test("A user's backlog covers each membership: through the kick, then again from the rejoin, nothing between", arguments: StoreKind.allCases)
    func userBacklogIntervals(kind: StoreKind) async throws {
        let harness = try await ServiceHarness(store: kind)
        try await harness.createWork("g", owner: "alice")
        try await harness.rename("g", "before", as: "alice")
        try await harness.invite("carol", to: "g", as: "alice")
        try await harness.rename("g", "member", as: "alice")
        try await harness.kick("carol", from: "g", as: "alice")
        try await harness.rename("g", "away", as: "alice")
        try await harness.invite("carol", to: "g", as: "alice")
        try await harness.rename("g", "back", as: "alice")

        let carol = try await harness.userLog("carol")
        #expect(carol.map(\.event.kind) == [
            .memberInvited, .invitedToGroup, .groupInfoChanged, .memberKicked, .kickedFromGroup,
            .memberInvited, .invitedToGroup, .groupInfoChanged,
        ])
        #expect(carol.filter { $0.event.kind == .groupInfoChanged }.map(\.event.changes["name"]) == ["member", "back"])
        // From a cursor inside the first membership: the rest of it, then the second.
        let firstRename = try #require(carol.first { $0.event.kind == .groupInfoChanged })
        let resumed = try await harness.userLog("carol", after: firstRename.eventID)
        #expect(resumed.map(\.event.kind) == [
            .memberKicked, .kickedFromGroup, .memberInvited, .invitedToGroup, .groupInfoChanged,
        ])
        // The owner sees everything; a stranger nothing.
        #expect(try await harness.userLog("alice").count == (try await harness.everything()).count - 3)
        #expect(try await harness.userLog("stranger").isEmpty)
    }

    @Test("A user's backlog reads their groups and their notifications, merged in event_id order across pages, none of the app's other groups", arguments: StoreKind.allCases)
    func userBacklogMergesGroups(kind: StoreKind) async throws {
        let harness = try await ServiceHarness(store: kind)
        try await harness.createWork("mine1", owner: "alice", members: ["carol"])
        try await harness.createWork("mine2", owner: "bob", members: ["carol"])
        for index in 0..<4 { try await harness.createWork("busy\(index)", owner: "dave") }
        let start = try await harness.everything().last?.eventID ?? 0
        for round in 0..<5 {
            for index in 0..<4 { try await harness.rename("busy\(index)", "busy \(round)", as: "dave") }
            try await harness.rename(round % 2 == 0 ? "mine1" : "mine2", "mine \(round)", as: round % 2 == 0 ? "alice" : "bob")
        }
        // Addressed to carol (INVITED_TO_GROUP) from a group she joins in the window.
        try await harness.createWork("later", owner: "erin")
        try await harness.invite("carol", to: "later", as: "erin")
        try await harness.rename("busy0", "after", as: "dave")

        let expected = try await harness.everything(after: start).filter { logged in
            ["mine1", "mine2", "later"].contains(logged.event.groupID)
                && !(logged.event.groupID == "later" && logged.event.kind == .groupCreated)
        }
        let carol = try await harness.userLog("carol", after: start)
        #expect(carol.map(\.eventID) == expected.map(\.eventID))
        #expect(carol.map(\.eventID) == carol.map(\.eventID).sorted())
        #expect(carol.filter { $0.event.kind == .groupInfoChanged }.map(\.event.changes["name"]) == (0..<5).map { "mine \($0)" })
        #expect(carol.contains { $0.event.kind == .invitedToGroup && $0.event.groupID == "later" })
        #expect(!carol.contains { $0.event.groupID.hasPrefix("busy") })
    }

    @Test("Approver notifications go to the approvers, resolved when committed and when read", arguments: StoreKind.allCases)
    func approvers(kind: StoreKind) async throws {
        let harness = try await ServiceHarness(store: kind)
        _ = try await harness.ok(GroupMethods.createGroup, .with {
            $0.groupID = "p"
            $0.type = .public
            $0.ownerUserID = "alice"
            $0.profile = .with { $0.name = "p" }
            $0.members = [.with { $0.userID = "bob"; $0.role = .admin }, .with { $0.userID = "dan"; $0.role = .member }]
        }, as: .admin)
        let live = Mutex<[LoggedEvent]>([])
        harness.store.observeCommittedEvents { result in
            if case .success(let events) = result { live.withLock { $0 += events } }
        }
        _ = try await harness.ok(MemberMethods.joinGroup, .with { $0.groupID = "p" }, as: .user("carol"))
        let application = try #require(live.withLock { $0 }.first { $0.event.recipient == .approvers })
        #expect(Set(application.approvers) == ["alice", "bob"])
        #expect(try await harness.userLog("bob").contains { $0.eventID == application.eventID })
        #expect(try await harness.userLog("dan").contains { $0.eventID == application.eventID } == false)
    }

    @Test("Purging removes events older than the cutoff but keeps messages; the retained start follows", arguments: StoreKind.allCases)
    func purgeAndRetainedStart(kind: StoreKind) async throws {
        let clock = ManualWallClock()
        let harness = try await ServiceHarness(clock: clock, store: kind)
        try await harness.createWork("g", owner: "alice", members: ["bob"])
        _ = try await harness.ok(Groupd_V1_MessageService.Method.sendGroupMessage, .with {
            $0.groupID = "g"
            $0.text = "hello"
        }, as: .user("bob"))
        clock.advance(seconds: 3600)
        try await harness.rename("g", "recent", as: "alice")
        let all = try await harness.everything()
        #expect(all.map(\.event.kind) == [.groupCreated, .groupMessage, .groupInfoChanged])
        #expect(all[1].message?.message.content.text == "hello")

        let cutoff = clock.now().adding(seconds: -60)
        let start = try await harness.store.retainedStart(app: TestApps.appA, cutoff: cutoff)
        #expect(start.afterEventID == all[2].eventID - 1)
        #expect(try await harness.store.purgeEvents(app: TestApps.appA, olderThan: cutoff, limit: 100) == 1)
        #expect(try await harness.store.purgeEvents(app: TestApps.appA, olderThan: cutoff, limit: 100) == 0)
        #expect(try await harness.everything().map(\.event.kind) == [.groupMessage, .groupInfoChanged])
        // Another app's cutoff does not touch app-a.
        #expect(try await harness.store.purgeEvents(app: TestApps.appB, olderThan: clock.now(), limit: 100) == 0)
        #expect(try await harness.store.latestEventID() == all[2].eventID)
        // Nothing retained: the start is the end of the log.
        let none = try await harness.store.retainedStart(app: TestApps.appA, cutoff: clock.now().adding(seconds: 10))
        #expect(none.afterEventID == all[2].eventID)
    }
}
