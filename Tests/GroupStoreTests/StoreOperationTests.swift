import Foundation
import GroupModel
import GRDB
@testable import GroupStore
@testable import GroupStorePostgres
@testable import GroupStoreSQL
@testable import GroupStoreSQLite
import GroupTestSupport
import Synchronization
import Testing

private let t0 = Timestamp(millisecondsSince1970: 1_700_000_000_000)

private func at(_ seconds: Int64) -> Timestamp {
    Timestamp(millisecondsSince1970: t0.millisecondsSince1970 + seconds * 1000)
}

/// A creation plan for `id` in `app` by user `owner`, with `members` as ordinary members.
private func creation(
    _ id: String, app: String = "app-a", type: GroupType = .public, owner: String = "alice",
    members: [InitialMember] = [], name: String = "team", custom: [String: [UInt8]] = [:], now: Timestamp = t0
) throws -> GroupCreationPlan {
    var request = GroupCreationRequest(
        type: type, groupID: id, name: name, introduction: "intro", notification: "notice",
        faceURL: "https://x/a.png", members: members)
    request.custom = custom
    return try GroupRules.planCreation(request, appID: app, creatorID: owner, limits: .defaults, now: now)
}

@discardableResult
private func create(
    _ store: Store, _ id: String, app: String = "app-a", type: GroupType = .public,
    owner: String = "alice", members: [String] = [], name: String = "team", now: Timestamp = t0
) async throws -> Group {
    try await store.createGroup(
        creation(id, app: app, type: type, owner: owner, members: members.map { InitialMember(userID: $0) }, name: name,
                 now: now)
    ).value
}


/// A test plan: `user` joins as an ordinary member (with a retained mute, if any).
@discardableResult
private func join(
    _ store: Store, _ id: String, _ user: String, app: String = "app-a", at time: Timestamp = t0
) async throws -> Committed<Member> {
    try await store.mutateGroup(app: app, groupID: id, operatorID: user, targets: [], at: time) { snapshot in
        if snapshot.operatorMembership != nil {
            throw GroupError(code: .failedPrecondition, reason: .alreadyMember, message: "already")
        }
        var group = snapshot.group
        group.memberCount += 1
        let member = Member(
            userID: user, role: .member, joinedAt: time, joinSequence: snapshot.group.latestSequence,
            mutedUntil: snapshot.retainedMutes[user])
        return (GroupChange(group: group, insertedMembers: [member],
                            events: [.init(kind: .memberJoined, operatorID: user, targets: [user])]), member)
    }
}

/// A test plan: `user` quits (keeping a mute, if asked); the last member leaving dismisses.
@discardableResult
private func quit(
    _ store: Store, _ id: String, _ user: String, keepMute: Timestamp? = nil, at time: Timestamp = t0
) async throws -> Committed<Void> {
    try await store.mutateGroup(app: "app-a", groupID: id, operatorID: user, targets: [], at: time) { snapshot in
        guard snapshot.operatorMembership != nil else {
            throw GroupError(code: .failedPrecondition, reason: .notAMember, message: "not a member")
        }
        var group = snapshot.group
        group.memberCount -= 1
        var change = GroupChange(group: group, removedMembers: [user],
                                 events: [.init(kind: .memberQuit, operatorID: user, targets: [user])])
        if let keepMute { change.retainedMutes[user] = keepMute }
        change.dismissesGroup = group.memberCount == 0
        return (change, ())
    }
}

extension GroupSnapshot {
    /// A change that writes nothing (a plan that only reads the snapshot).
    var unchangedChange: GroupChange { .unchanged(group) }
}

/// A flag shared between tasks.
private final class Flag: Sendable {
    let value = Atomic<Bool>(false)
}

@Suite("Store conformance: group operations")
struct StoreOperationTests {
    // MARK: mutateGroup

    @Test("a plan's change is applied exactly: group columns, custom fields, members, retained mutes, events", arguments: StoreKind.allCases)
    func applyEveryField(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            var plan = try creation(
                "g1", members: [InitialMember(userID: "bob", custom: ["m1": [1]]), InitialMember(userID: "carol")],
                custom: ["a": [1], "b": [2]])
            plan.members[1].custom = ["m1": [1], "m2": [2]]
            _ = try await store.createGroup(plan)
            _ = try await store.groups(app: "app-a", ids: ["g1"])  // fill the cache

            let muteEnd = at(3600)
            let committed = try await store.mutateGroup(
                app: "app-a", groupID: "g1", operatorID: "alice", targets: ["bob", "carol", "dave"], at: at(10)
            ) { snapshot in
                #expect(snapshot.operatorMembership?.role == .owner)
                #expect(snapshot.owner?.userID == "alice")
                #expect(snapshot.successor?.userID == "bob")
                #expect(snapshot.targets.keys.sorted() == ["bob", "carol"])
                #expect(snapshot.targets["bob"]?.custom == ["m1": [1], "m2": [2]])
                #expect(snapshot.joinedGroupCounts == ["alice": 1, "bob": 1, "carol": 1, "dave": 0])
                #expect(snapshot.group.custom == ["a": [1], "b": [2]])
                var group = snapshot.group
                group.name = "renamed"
                group.introduction = "new intro"
                group.notification = "new notice"
                group.faceURL = "https://x/b.png"
                group.settings.joinOption = .forbidden
                group.settings.joinApprovers = .owner
                group.settings.invitePermission = .everyone
                group.settings.inviteeMustAccept = true
                group.settings.invitationNeedsApproval = true
                group.settings.removeMembersPermission = .owner
                group.settings.editProfilePermission = .everyone
                group.settings.editMemberInfoPermission = .selfOnly
                group.settings.editSettingsPermission = .everyone
                group.settings.ownerQuit = .longestStandingAdminElseMember
                group.settings.mentionAllPermission = .nobody
                group.settings.slowModeIntervalSeconds = 45
                group.ownerID = "bob"
                group.maxMembers = 77
                group.mute = GroupMuteState(mode: .roles([.member, .admin]), until: muteEnd, operatorID: "alice")
                group.custom = ["a": [9, 9], "c": [3]]
                group.updatedAt = at(10)
                group.memberCount = 3
                var bob = snapshot.targets["bob"]!
                bob.role = .owner
                bob.custom = ["m2": [7]]
                var alice = snapshot.operatorMembership!
                alice.role = .admin
                alice.nameCard = "Al"
                alice.mutedUntil = muteEnd
                alice.receiveOption = .receiveWithoutPush
                let dave = Member(userID: "dave", role: .member, joinedAt: at(10), joinSequence: group.latestSequence,
                                  nameCard: "D", custom: ["m1": [4]], receiveOption: .notReceive)
                let change = GroupChange(
                    group: group, insertedMembers: [dave], updatedMembers: [bob, alice], removedMembers: ["carol"],
                    retainedMutes: ["carol": muteEnd],
                    events: [
                        .init(kind: .groupInfoChanged, operatorID: "alice", changes: ["name": "renamed"]),
                        .init(kind: .memberInvited, operatorID: "alice", targets: ["dave"],
                              changes: ["join_source": "invitation", "inviter": "alice"]),
                        .init(kind: .memberKicked, operatorID: "alice", targets: ["carol"]),
                        .init(kind: .ownerChanged, operatorID: "alice", targets: ["bob"]),
                    ])
                return (change, "ok")
            }
            #expect(committed.value == "ok")
            #expect(committed.events.map(\.sequence) == [2, 3, 4, 5])
            #expect(committed.events.map(\.kind) == [.groupInfoChanged, .memberInvited, .memberKicked, .ownerChanged])

            let stored = try #require(try await store.groups(app: "app-a", ids: ["g1"])["g1"])
            #expect(stored == committed.group)
            #expect(stored.name == "renamed")
            #expect(stored.introduction == "new intro")
            #expect(stored.notification == "new notice")
            #expect(stored.faceURL == "https://x/b.png")
            #expect(stored.settings == GroupSettings(
                joinOption: .forbidden, joinApprovers: .owner, invitePermission: .everyone, inviteeMustAccept: true,
                invitationNeedsApproval: true, removeMembersPermission: .owner, editProfilePermission: .everyone,
                editMemberInfoPermission: .selfOnly, editSettingsPermission: .everyone,
                ownerQuit: .longestStandingAdminElseMember, mentionAllPermission: .nobody, slowModeIntervalSeconds: 45))
            #expect(stored.ownerID == "bob")
            #expect(stored.maxMembers == 77)
            #expect(stored.mute == GroupMuteState(mode: .roles([.member, .admin]), until: muteEnd, operatorID: "alice"))
            #expect(stored.custom == ["a": [9, 9], "c": [3]])
            #expect(stored.memberCount == 3)
            #expect(stored.latestSequence == 5)
            #expect(stored.updatedAt == at(10))
            #expect(stored.createdAt == t0)

            let members = try await store.members(app: "app-a", groupID: "g1", userIDs: ["alice", "bob", "carol", "dave"])
            #expect(members.keys.sorted() == ["alice", "bob", "dave"])
            #expect(members["bob"]?.role == .owner)
            #expect(members["bob"]?.custom == ["m2": [7]])
            #expect(members["alice"] == Member(
                userID: "alice", role: .admin, joinedAt: t0, joinOrder: 1, joinSequence: 0, nameCard: "Al",
                mutedUntil: muteEnd, receiveOption: .receiveWithoutPush, joinSource: .creator))
            // Join order from the counter (creation used 1…3); join sequence = its MEMBER_INVITED event.
            #expect(members["dave"] == Member(
                userID: "dave", role: .member, joinedAt: at(10), joinOrder: 4, joinSequence: 3, nameCard: "D",
                custom: ["m1": [4]], receiveOption: .notReceive))

            // Name search follows the rename.
            #expect(try await store.searchGroups(app: "app-a", keyword: "renamed", userID: nil, matchNameCards: false,
                                                 after: nil, limit: 10).items.map(\.id) == ["g1"])
            #expect(try await store.searchGroups(app: "app-a", keyword: "team", userID: nil, matchNameCards: false,
                                                 after: nil, limit: 10).items.isEmpty)

            // The retained mute comes back in the snapshot and is consumed by the rejoin.
            let rejoined = try await join(store, "g1", "carol", at: at(20))
            #expect(rejoined.value.mutedUntil == muteEnd)
            #expect(try await store.members(app: "app-a", groupID: "g1", userIDs: ["carol"])["carol"]?.mutedUntil == muteEnd)
            #expect(rejoined.value.joinOrder == 0)  // the plan's value; the store numbered the row:
            #expect(try await store.members(app: "app-a", groupID: "g1", userIDs: ["carol"])["carol"]?.joinOrder == 5)
            try await quit(store, "g1", "carol", at: at(30))
            let again = try await join(store, "g1", "carol", at: at(40))
            #expect(again.value.mutedUntil == nil)
        }
    }

    @Test("an empty change writes nothing and appends no event", arguments: StoreKind.allCases)
    func emptyChange(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            let group = try await create(store, "g1", members: ["bob"])
            let result = try await store.mutateGroup(
                app: "app-a", groupID: "g1", operatorID: "bob", targets: [], at: at(5)
            ) { snapshot in
                var unchangedButDifferent = snapshot.group
                unchangedButDifferent.name = "ignored"
                return (GroupChange(group: unchangedButDifferent), 1)
            }
            #expect(result.events.isEmpty)
            #expect(result.group == group)
            #expect(try await store.groups(app: "app-a", ids: ["g1"])["g1"] == group)
            #expect(try await store.events(app: "app-a", groupID: "g1", after: 0, limit: 10).count == 1)
        }
    }

    @Test("a throwing plan, or a failure before commit, rolls back and changes nothing", arguments: StoreKind.allCases)
    func rollback(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            let group = try await create(store, "g1", members: ["bob"])
            _ = try await store.groups(app: "app-a", ids: ["g1"])
            let refused = await Fixture.groupError {
                _ = try await store.mutateGroup(app: "app-a", groupID: "g1", operatorID: "bob", targets: [], at: at(1)) { _ in
                    throw GroupError(code: .permissionDenied, reason: .permissionDenied, message: "no")
                } as Committed<Int>
            }
            #expect(refused?.reason == .permissionDenied)

            store.injectFault { method in
                if method == "mutateGroup" { throw GroupError.internal("injected") }
            }
            let failed = await Fixture.groupError { try await join(store, "g1", "carol") }
            #expect(failed?.code == .internal)
            store.injectFault(nil)

            #expect(try await store.groups(app: "app-a", ids: ["g1"])["g1"] == group)
            #expect(try await store.members(app: "app-a", groupID: "g1", userIDs: ["carol"]).isEmpty)
            #expect(try await store.events(app: "app-a", groupID: "g1", after: 0, limit: 10).map(\.sequence) == [1])
            // The counter did not move either: the next join gets order 3.
            try await join(store, "g1", "carol")
            #expect(try await store.members(app: "app-a", groupID: "g1", userIDs: ["carol"])["carol"]?.joinOrder == 3)
        }
    }

    @Test("a missing, dismissed or other app's group is NOT_FOUND / GROUP_NOT_FOUND", arguments: StoreKind.allCases)
    func notFound(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            try await create(store, "g1")
            try await create(store, "solo", type: .work)
            _ = try await store.mutateGroup(app: "app-a", groupID: "solo", operatorID: "alice", targets: [], at: t0) { snapshot in
                #expect(snapshot.successor == nil)  // the operator is the only member
                #expect(snapshot.owner?.userID == "alice")
                return (GroupChange.unchanged(snapshot.group), ())
            }
            try await quit(store, "solo", "alice")  // the last member leaves: dismissed
            #expect(try await store.groups(app: "app-a", ids: ["solo"]).isEmpty)
            for (app, id) in [("app-a", "missing"), ("app-a", "solo"), ("app-b", "g1")] {
                let error = await Fixture.groupError { try await join(store, id, "zed", app: app) }
                #expect(error?.code == .notFound)
                #expect(error?.reason == .groupNotFound)
            }
            #expect(try await store.events(app: "app-a", groupID: "solo", after: 0, limit: 10).map(\.kind)
                    == [.groupCreated, .memberQuit])
        }
    }

    @Test("concurrent joins get unique, increasing join orders; events are numbered without gaps", arguments: StoreKind.allCases)
    func concurrentJoins(kind: StoreKind) async throws {
        try await withTemporaryStore(kind, durability: .normal) { store in
            try await create(store, "g1")
            let users = (0..<200).map { "u\($0)" }
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                for user in users { tasks.addTask { try await join(store, "g1", user) } }
                try await tasks.waitForAll()
            }
            let members = try await store.members(app: "app-a", groupID: "g1", userIDs: users)
            #expect(members.count == 200)
            let orders = members.values.map(\.joinOrder)
            #expect(Set(orders) == Set(2...201))
            // The join order follows the commit order, which the join sequence records.
            let byOrder = members.values.sorted { $0.joinOrder < $1.joinOrder }
            #expect(byOrder.map(\.joinSequence) == byOrder.map(\.joinSequence).sorted())
            #expect(Set(byOrder.map(\.joinSequence)).count == 200)
            let events = try await store.events(app: "app-a", groupID: "g1", after: 0, limit: 1000)
            #expect(events.map(\.sequence) == Array(1...201))
            #expect(try await store.groups(app: "app-a", ids: ["g1"])["g1"]?.memberCount == 201)
        }
    }

    @Test("events are numbered without gaps across kinds of operation", arguments: StoreKind.allCases)
    func sequenceAcrossOperations(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            try await create(store, "g1", members: ["bob"])
            try await join(store, "g1", "carol")
            let remarkEvents = try await store.setRemark(
                app: "app-a", groupID: "g1",
                plan: RemarkPlan(userID: "bob", remark: "mine",
                                 events: [.init(kind: .remarkChanged, operatorID: "bob", targets: ["bob"], recipient: .user("bob"))]),
                at: at(1))
            #expect(remarkEvents.map(\.sequence) == [3])
            try await quit(store, "g1", "carol")
            _ = try await store.mutateGroup(app: "app-a", groupID: "g1", operatorID: "alice", targets: [], at: at(2)) { snapshot in
                var group = snapshot.group
                group.notification = "x"
                return (GroupChange(group: group, events: [
                    .init(kind: .groupInfoChanged, operatorID: "alice"), .init(kind: .groupMuted, operatorID: "alice"),
                ]), ())
            }
            let events = try await store.events(app: "app-a", groupID: "g1", after: 0, limit: 100)
            #expect(events.map(\.sequence) == [1, 2, 3, 4, 5, 6])
            #expect(try await store.groups(app: "app-a", ids: ["g1"])["g1"]?.latestSequence == 6)
        }
    }

    @Test("every mutateGroup and setRemark is seen by the next read, cached or not", arguments: StoreKind.allCases)
    func cacheInvalidation(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            try await create(store, "g1")
            func cached() async throws -> Group {
                _ = try await store.groups(app: "app-a", ids: ["g1"])  // make sure it is cached
                return try #require(try await store.groups(app: "app-a", ids: ["g1"])["g1"])
            }
            var before = try await cached()
            #expect(kind.cacheCapacity == 0 || store.cacheStatistics().hits > 0)
            try await join(store, "g1", "bob")
            var after = try #require(try await store.groups(app: "app-a", ids: ["g1"])["g1"])
            #expect(after.memberCount == before.memberCount + 1)
            #expect(after.latestSequence == before.latestSequence + 1)

            before = try await cached()
            _ = try await store.mutateGroup(app: "app-a", groupID: "g1", operatorID: "alice", targets: [], at: at(1)) { snapshot in
                var group = snapshot.group
                group.name = "new name"
                group.custom = ["k": [1]]
                return (GroupChange(group: group, events: [.init(kind: .groupInfoChanged, operatorID: "alice")]), ())
            }
            after = try #require(try await store.groups(app: "app-a", ids: ["g1"])["g1"])
            #expect(after.name == "new name")
            #expect(after.custom == ["k": [1]])

            before = try await cached()
            _ = try await store.setRemark(
                app: "app-a", groupID: "g1",
                plan: RemarkPlan(userID: "bob", remark: "r", events: [.init(kind: .remarkChanged, operatorID: "bob")]),
                at: at(2))
            after = try #require(try await store.groups(app: "app-a", ids: ["g1"])["g1"])
            #expect(after.latestSequence == before.latestSequence + 1)

            before = try await cached()
            try await quit(store, "g1", "bob")
            after = try #require(try await store.groups(app: "app-a", ids: ["g1"])["g1"])
            #expect(after.memberCount == before.memberCount - 1)
        }
    }

    // MARK: Remarks

    @Test("remarks are set, replaced and cleared, per user", arguments: StoreKind.allCases)
    func remarks(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            try await create(store, "g1", members: ["bob"])
            #expect(try await store.remark(app: "app-a", groupID: "g1", userID: "bob") == "")
            let event = GroupEvent.Draft(kind: .remarkChanged, operatorID: "bob", targets: ["bob"], recipient: .user("bob"))
            let events = try await store.setRemark(
                app: "app-a", groupID: "g1", plan: RemarkPlan(userID: "bob", remark: "Team A", events: [event]), at: at(1))
            #expect(events.map(\.kind) == [.remarkChanged])
            #expect(events.first?.recipient == .user("bob"))
            #expect(try await store.remark(app: "app-a", groupID: "g1", userID: "bob") == "Team A")
            #expect(try await store.remark(app: "app-a", groupID: "g1", userID: "alice") == "")
            _ = try await store.setRemark(
                app: "app-a", groupID: "g1", plan: RemarkPlan(userID: "bob", remark: "Team B", events: [event]), at: at(2))
            #expect(try await store.remark(app: "app-a", groupID: "g1", userID: "bob") == "Team B")
            #expect(try await store.joinedGroups(app: "app-a", userID: "bob", after: nil, limit: 10).items.first?.remark == "Team B")
            _ = try await store.setRemark(
                app: "app-a", groupID: "g1", plan: RemarkPlan(userID: "bob", remark: nil, events: [event]), at: at(3))
            #expect(try await store.remark(app: "app-a", groupID: "g1", userID: "bob") == "")
            #expect(try await store.joinedGroups(app: "app-a", userID: "bob", after: nil, limit: 10).items.first?.remark == "")
            // No events: nothing appended.
            let none = try await store.setRemark(
                app: "app-a", groupID: "g1", plan: RemarkPlan(userID: "bob", remark: nil, events: []), at: at(4))
            #expect(none.isEmpty)
            #expect(try await store.events(app: "app-a", groupID: "g1", after: 0, limit: 10).count == 4)
            let missing = await Fixture.groupError { _ = try await store.remark(app: "app-a", groupID: "nope", userID: "bob") }
            #expect(missing?.reason == .groupNotFound)
        }
    }

    // MARK: Member listing

    @Test("member paging over 10,000 members stays exact under concurrent joins and quits", arguments: StoreKind.allCases)
    func pagingUnderChurn(kind: StoreKind) async throws {
        try await withTemporaryStore(kind, durability: .normal) { store in
            try await create(store, "big")
            let stable = (0..<5_000).map { "s\($0)" }
            let churn = (0..<5_000).map { "c\($0)" }
            // Bulk insert, interleaving stable and churning members in join order.
            _ = try await store.mutateGroup(app: "app-a", groupID: "big", operatorID: nil, targets: [], at: t0) { snapshot in
                var group = snapshot.group
                var inserted: [Member] = []
                for i in 0..<5_000 {
                    inserted.append(Member(userID: stable[i], role: i % 100 == 0 ? .admin : .member, joinedAt: t0))
                    inserted.append(Member(userID: churn[i], role: .member, joinedAt: t0))
                }
                group.memberCount += inserted.count
                return (GroupChange(group: group, insertedMembers: inserted,
                                    events: [.init(kind: .memberJoined, operatorID: nil, targets: ["bulk"])]), ())
            }
            let done = Flag()
            let listed = try await withThrowingTaskGroup(of: [String].self) { tasks in
                tasks.addTask {
                    // Churn: churning members quit and rejoin (new join order), newcomers join.
                    var i = 0
                    while !done.value.load(ordering: .relaxed), i < 2_500 {
                        try await quit(store, "big", churn[i])
                        if i % 2 == 0 { try await join(store, "big", churn[i]) }
                        try await join(store, "big", "new\(i)")
                        i += 1
                    }
                    return []
                }
                tasks.addTask {
                    defer { done.value.store(true, ordering: .relaxed) }
                    var users: [String] = []
                    var cursor: String?
                    var pages = 0
                    repeat {
                        let page = try await store.listMembers(
                            app: "app-a", groupID: "big", filter: .all, after: cursor, limit: 50)
                        #expect(page.items.count <= 50)
                        users += page.items.map(\.userID)
                        cursor = page.next
                        // Also churn between pages, so changes land inside the listing whatever
                        // the scheduling: one of the next page's members quits (and half rejoin).
                        let k = 2_500 + pages
                        pages += 1
                        try await quit(store, "big", churn[k])
                        if k % 2 == 0 { try await join(store, "big", churn[k]) }
                        try await join(store, "big", "late\(k)")
                    } while cursor != nil
                    return users
                }
                var all: [String] = []
                for try await users in tasks { all += users }
                return all
            }
            #expect(listed.count == Set(listed).count, "no member twice")
            #expect(Set(stable).subtracting(listed).isEmpty, "nobody who stayed is skipped")
            #expect(listed.contains("alice"))
            #expect(listed.first == "alice")
        }
    }

    @Test("a user who quits and rejoins during a listing is listed at most once", arguments: StoreKind.allCases)
    func rejoinDuringListing(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            try await create(store, "g1", members: ["bob", "carol", "dave"])
            let first = try await store.listMembers(app: "app-a", groupID: "g1", filter: .all, after: nil, limit: 2)
            #expect(first.items.map(\.userID) == ["alice", "bob"])
            try await quit(store, "g1", "bob")
            try await join(store, "g1", "bob")
            try await join(store, "g1", "erin")
            let second = try await store.listMembers(app: "app-a", groupID: "g1", filter: .all, after: first.next, limit: 10)
            #expect(second.items.map(\.userID) == ["carol", "dave"])
            #expect(second.next == nil)
            // A fresh listing sees the rejoined and the new member, in join order.
            let fresh = try await store.listMembers(app: "app-a", groupID: "g1", filter: .all, after: nil, limit: 10)
            #expect(fresh.items.map(\.userID) == ["alice", "carol", "dave", "bob", "erin"])
        }
    }

    @Test("role filters list only their roles, in join order, across pages", arguments: StoreKind.allCases, MemberListFilter.allCases)
    func roleFilters(kind: StoreKind, _ filter: MemberListFilter) async throws {
        try await withTemporaryStore(kind) { store in
            var plan = try creation("g1", members: (0..<12).map {
                InitialMember(userID: "u\($0)", role: $0 % 3 == 0 ? .admin : .member)
            })
            plan.members[2].custom = ["k": [5]]
            _ = try await store.createGroup(plan)
            var listed: [Member] = []
            var cursor: String?
            repeat {
                let page = try await store.listMembers(app: "app-a", groupID: "g1", filter: filter, after: cursor, limit: 2)
                listed += page.items
                cursor = page.next
            } while cursor != nil
            let expected = plan.members.filter { filter.includes($0.role) }
            #expect(listed == expected)
            #expect(listed.allSatisfy { filter.includes($0.role) })
        }
    }

    @Test("members batch returns only members, with custom fields", arguments: StoreKind.allCases)
    func membersBatch(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            var plan = try creation("g1", members: [InitialMember(userID: "bob"), InitialMember(userID: "carol")])
            plan.members[1].custom = ["x": [1]]
            _ = try await store.createGroup(plan)
            let members = try await store.members(app: "app-a", groupID: "g1", userIDs: ["bob", "carol", "zed", "bob"])
            #expect(members.keys.sorted() == ["bob", "carol"])
            #expect(members["bob"]?.custom == ["x": [1]])
            #expect(try await store.members(app: "app-a", groupID: "g1", userIDs: []).isEmpty)
        }
    }

    @Test("a malformed page token is INVALID_ARGUMENT naming page_token", arguments: StoreKind.allCases, ["", "zz", "!", "1.2.3", "1..2", "zzzzzzzzzzzzzzzzzz.1"])
    func invalidCursor(kind: StoreKind, _ token: String) async throws {
        try await withTemporaryStore(kind) { store in
            try await create(store, "g1")
            var errors: [GroupError?] = []
            errors.append(await Fixture.groupError {
                _ = try await store.listMembers(app: "app-a", groupID: "g1", filter: .all, after: token, limit: 10)
            })
            errors.append(await Fixture.groupError {
                _ = try await store.joinedGroups(app: "app-a", userID: "alice", after: token, limit: 10)
            })
            if token.contains(".") || token.isEmpty || token == "!" {
                errors.append(await Fixture.groupError {
                    _ = try await store.searchGroups(
                        app: "app-a", keyword: "team", userID: nil, matchNameCards: false, after: token, limit: 10)
                })
            }
            for error in errors {
                #expect(error?.code == .invalidArgument)
                #expect(error?.metadata["field"] == "page_token")
            }
        }
    }

    // MARK: Joined groups

    @Test("joined groups: newest join first, no AVChatRoom, no dismissed group, paged, with role and remark", arguments: StoreKind.allCases)
    func joinedGroups(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            for i in 0..<7 {
                try await create(store, "g\(i)", owner: "owner\(i)", name: "group \(i)")
                try await join(store, "g\(i)", "bob", at: at(Int64(10 - i)))  // g6 oldest … g0 newest
            }
            try await create(store, "mine", owner: "bob", now: at(20))
            try await create(store, "room", type: .avChatRoom, owner: "bob", now: at(30))
            try await create(store, "gone", type: .work, owner: "bob", now: at(40))
            try await quit(store, "gone", "bob")
            try await create(store, "other-app", app: "app-b", owner: "bob", now: at(50))

            var entries: [JoinedGroup] = []
            var cursor: String?
            repeat {
                let page = try await store.joinedGroups(app: "app-a", userID: "bob", after: cursor, limit: 3)
                #expect(page.items.count <= 3)
                entries += page.items
                cursor = page.next
            } while cursor != nil
            #expect(entries.map(\.group.id) == ["mine", "g0", "g1", "g2", "g3", "g4", "g5", "g6"])
            #expect(entries.first?.membership.role == .owner)
            #expect(entries[1].membership.role == .member)
            #expect(entries[1].group.name == "group 0")
            #expect(try await store.joinedGroups(app: "app-b", userID: "bob", after: nil, limit: 10).items.map(\.group.id)
                    == ["other-app"])
        }
    }

    @Test("joined groups with equal join times page by group, none twice or skipped", arguments: StoreKind.allCases)
    func joinedGroupsTies(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            for i in 0..<10 { try await create(store, "g\(i)", owner: "bob") }
            var ids: [String] = []
            var cursor: String?
            repeat {
                let page = try await store.joinedGroups(app: "app-a", userID: "bob", after: cursor, limit: 4)
                ids += page.items.map(\.group.id)
                cursor = page.next
            } while cursor != nil
            #expect(ids == (0..<10).reversed().map { "g\($0)" })
        }
    }

    // MARK: Search

    @Test("search by id, by name (short and long keywords, any case), by name card; visibility; paging", arguments: StoreKind.allCases)
    func search(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            try await create(store, "pub1", type: .public, owner: "alice", name: "Rust Lovers")
            try await create(store, "meet", type: .meeting, owner: "alice", name: "rust meetup")
            try await create(store, "room", type: .avChatRoom, owner: "alice", name: "Rusty room")
            try await create(store, "work1", type: .work, owner: "alice", members: ["bob"], name: "Rust work")
            try await create(store, "work2", type: .work, owner: "alice", name: "secret Rx")
            try await create(store, "RUST", type: .work, owner: "carol", name: "zzz")
            try await create(store, "other", app: "app-b", type: .public, owner: "alice", name: "Rust elsewhere")
            _ = try await store.mutateGroup(app: "app-a", groupID: "work1", operatorID: "bob", targets: [], at: at(1)) { snapshot in
                var bob = snapshot.operatorMembership!
                bob.nameCard = "Captain Kirk"
                return (GroupChange(group: snapshot.group, updatedMembers: [bob],
                                    events: [.init(kind: .memberInfoChanged, operatorID: "bob")]), ())
            }

            func ids(_ keyword: String, _ user: String?, cards: Bool = false, app: String = "app-a") async throws -> [String] {
                var result: [String] = []
                var cursor: String?
                repeat {
                    let page = try await store.searchGroups(
                        app: app, keyword: keyword, userID: user, matchNameCards: cards, after: cursor, limit: 2)
                    #expect(page.items.count <= 2)
                    result += page.items.map(\.id)
                    cursor = page.next
                } while cursor != nil
                return result
            }
            // Long keyword (FTS trigram), case-insensitive; Work groups only for their members.
            #expect(try await ids("RUST", "bob") == ["pub1", "meet", "room", "work1"])
            #expect(try await ids("rust", "zed") == ["pub1", "meet", "room"])
            #expect(try await ids("rust", nil) == ["pub1", "meet", "room", "work1"])
            // Id equality (exact), alongside name matches; a Work group by id only for a member.
            #expect(try await ids("RUST", "carol") == ["pub1", "meet", "room", "RUST"])
            #expect(try await ids("work2", "zed").isEmpty)
            #expect(try await ids("work2", "alice") == ["work2"])
            // Short keywords (LIKE), case-insensitive, wildcards taken literally.
            #expect(try await ids("rX", "alice") == ["work2"])
            #expect(try await ids("Ru", "zed") == ["pub1", "meet", "room"])
            #expect(try await ids("%", "alice").isEmpty)
            #expect(try await ids("_", "alice").isEmpty)
            // Name cards, only within joined groups and only when asked.
            #expect(try await ids("kirk", "alice", cards: true) == ["work1"])
            #expect(try await ids("kirk", "alice").isEmpty)
            #expect(try await ids("kirk", "zed", cards: true).isEmpty)
            #expect(try await ids("Ki", "bob", cards: true) == ["work1"])
            // App scoping.
            #expect(try await ids("rust", nil, app: "app-b") == ["other"])
            #expect(try await ids("pub1", nil, app: "app-b").isEmpty)
            // Dismissed groups are not found.
            try await quit(store, "work2", "alice")
            #expect(try await ids("secret", "alice").isEmpty)
            let empty = await Fixture.groupError {
                _ = try await store.searchGroups(app: "app-a", keyword: "", userID: nil, matchNameCards: false, after: nil, limit: 5)
            }
            #expect(empty?.code == .invalidArgument)
        }
    }

    @Test("search by group id prefix: one byte-order range, LIKE metacharacters literal", arguments: StoreKind.allCases)
    func searchIDPrefix(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            for id in ["ab", "ab%1", "ab%2", "ab_1", "abX1", "aB_1", "ac", "a", "ab~"] {
                try await create(store, id, type: .public, owner: "alice", name: "zzz")
            }
            func ids(_ keyword: String) async throws -> [String] {
                var result: [String] = []
                var cursor: String?
                repeat {
                    let page = try await store.searchGroups(
                        app: "app-a", keyword: keyword, userID: "zed", matchNameCards: false, after: cursor, limit: 2)
                    result += page.items.map(\.id)
                    cursor = page.next
                } while cursor != nil
                return result.sorted()
            }
            #expect(try await ids("ab") == ["ab", "ab%1", "ab%2", "abX1", "ab_1", "ab~"])
            #expect(try await ids("ab%") == ["ab%1", "ab%2"])
            #expect(try await ids("ab_") == ["ab_1"])
            #expect(try await ids("ab_1") == ["ab_1"])
            #expect(try await ids("a%").isEmpty)
            #expect(try await ids("a_").isEmpty)
            #expect(try await ids("ab~") == ["ab~"])
            #expect(try await ids("ab%10").isEmpty)
        }
    }

    @Test("the range of a prefix: the prefix up to its last scalar advanced, surrogates and U+10FFFF skipped")
    func prefixRange() {
        #expect(PrefixRange(prefix: "ab").upper == "ac")
        #expect(PrefixRange(prefix: "a%").upper == "a&")
        #expect(PrefixRange(prefix: "a~").upper == "a\u{7F}")
        #expect(PrefixRange(prefix: "a\u{D7FF}").upper == "a\u{E000}")
        #expect(PrefixRange(prefix: "a\u{10FFFF}").upper == "b")
        #expect(PrefixRange(prefix: "\u{10FFFF}\u{10FFFF}").upper == nil)
        #expect(PrefixRange(prefix: "ab").lower == "ab")
    }

    @Test("a user's remarks for several groups, theirs only, live groups only", arguments: StoreKind.allCases)
    func remarksOfGroups(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            for id in ["g1", "g2", "g3"] { try await create(store, id, members: ["bob"]) }
            for (id, user, text) in [("g1", "bob", "one"), ("g2", "bob", "two"), ("g1", "alice", "mine")] {
                _ = try await store.setRemark(
                    app: "app-a", groupID: id, plan: RemarkPlan(userID: user, remark: text, events: []), at: t0)
            }
            #expect(try await store.remarks(app: "app-a", userID: "bob", groupIDs: ["g1", "g2", "g3", "nope"])
                    == ["g1": "one", "g2": "two"])
            #expect(try await store.remarks(app: "app-a", userID: "alice", groupIDs: ["g1", "g2"]) == ["g1": "mine"])
            #expect(try await store.remarks(app: "app-b", userID: "bob", groupIDs: ["g1"]).isEmpty)
            try await quit(store, "g2", "bob")
            try await quit(store, "g2", "alice")  // the last member: dismissed
            #expect(try await store.remarks(app: "app-a", userID: "bob", groupIDs: ["g1", "g2"]) == ["g1": "one"])
        }
    }

    @Test("the snapshot holds the longest-standing other admin when the owner-quit setting asks for one",
          arguments: StoreKind.allCases)
    func successorAdmin(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            var request = GroupCreationRequest(
                type: .public, groupID: "g1", name: "team",
                settings: .init(ownerQuit: .longestStandingAdminElseMember),
                members: [InitialMember(userID: "bob"), InitialMember(userID: "carol", role: .admin),
                          InitialMember(userID: "dave", role: .admin)])
            request.custom = [:]
            _ = try await store.createGroup(
                try GroupRules.planCreation(request, appID: "app-a", creatorID: "alice", limits: .defaults, now: t0))
            try await create(store, "g2", members: ["bob"])
            _ = try await store.mutateGroup(app: "app-a", groupID: "g1", operatorID: "alice", targets: [], at: t0) { snapshot in
                #expect(snapshot.group.settings.ownerQuit == .longestStandingAdminElseMember)
                #expect(snapshot.successor?.userID == "bob")
                #expect(snapshot.successorAdmin?.userID == "carol")
                return (GroupChange.unchanged(snapshot.group), ())
            }
            // Not for another operator, nor under another rule.
            _ = try await store.mutateGroup(app: "app-a", groupID: "g1", operatorID: "bob", targets: [], at: t0) { snapshot in
                #expect(snapshot.successorAdmin == nil)
                return (GroupChange.unchanged(snapshot.group), ())
            }
            _ = try await store.mutateGroup(app: "app-a", groupID: "g2", operatorID: "alice", targets: [], at: t0) { snapshot in
                #expect(snapshot.successorAdmin == nil)
                return (GroupChange.unchanged(snapshot.group), ())
            }
        }
    }

    // MARK: App scoping

    @Test("every method is scoped by app", arguments: StoreKind.allCases)
    func appScoping(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            try await create(store, "g1", app: "app-a", members: ["bob"], name: "alpha team")
            try await create(store, "g1", app: "app-b", members: ["carol"], name: "beta team")
            try await join(store, "g1", "dave", app: "app-b")
            _ = try await store.setRemark(
                app: "app-b", groupID: "g1", plan: RemarkPlan(userID: "bob", remark: "b-remark", events: []), at: t0)

            #expect(try await store.members(app: "app-a", groupID: "g1", userIDs: ["bob", "carol", "dave"]).keys.sorted() == ["bob"])
            #expect(try await store.members(app: "app-b", groupID: "g1", userIDs: ["bob", "carol", "dave"]).keys.sorted()
                    == ["carol", "dave"])
            let listA = try await store.listMembers(app: "app-a", groupID: "g1", filter: .all, after: nil, limit: 50)
            #expect(listA.items.map(\.userID) == ["alice", "bob"])
            #expect(try await store.remark(app: "app-a", groupID: "g1", userID: "bob") == "")
            #expect(try await store.remark(app: "app-b", groupID: "g1", userID: "bob") == "b-remark")
            #expect(try await store.joinedGroups(app: "app-a", userID: "dave", after: nil, limit: 10).items.isEmpty)
            #expect(try await store.joinedGroups(app: "app-b", userID: "dave", after: nil, limit: 10).items.map(\.group.name)
                    == ["beta team"])
            #expect(try await store.searchGroups(app: "app-a", keyword: "team", userID: nil, matchNameCards: false,
                                                 after: nil, limit: 10).items.map(\.name) == ["alpha team"])
            #expect(try await store.groups(app: "app-a", ids: ["g1"])["g1"]?.memberCount == 2)
            #expect(try await store.groups(app: "app-b", ids: ["g1"])["g1"]?.memberCount == 3)
            // Joined-group counts in a snapshot count only the app's groups.
            _ = try await store.mutateGroup(app: "app-a", groupID: "g1", operatorID: "alice", targets: ["dave"], at: t0) { snapshot in
                #expect(snapshot.joinedGroupCounts == ["alice": 1, "dave": 0])
                return (GroupChange.unchanged(snapshot.group), ())
            }
            let missing = await Fixture.groupError {
                _ = try await store.listMembers(app: "app-c", groupID: "g1", filter: .all, after: nil, limit: 5)
            }
            #expect(missing?.reason == .groupNotFound)
        }
    }

    @Test("the snapshot's joined-group counts leave out AVChatRooms and dismissed groups", arguments: StoreKind.allCases)
    func joinedCounts(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            try await create(store, "g1")
            try await create(store, "g2", owner: "bob")
            try await create(store, "room", type: .avChatRoom, owner: "bob")
            try await create(store, "gone", type: .work, owner: "bob")
            try await quit(store, "gone", "bob")
            _ = try await store.mutateGroup(app: "app-a", groupID: "g1", operatorID: nil, targets: ["bob"], at: t0) { snapshot in
                #expect(snapshot.joinedGroupCounts == ["bob": 1])
                #expect(snapshot.operatorMembership == nil)
                #expect(snapshot.successor?.userID == "alice")
                return (GroupChange.unchanged(snapshot.group), ())
            }
        }
    }

    // MARK: Migration

    @Test("migration v6 applies on a v5 file: old members read as of unknown origin, new ones keep theirs")
    func migrationV6() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("db.sqlite")
        let v5 = Store(backend: try await SQLiteBackend.open(path: path, durability: .full, migratingUpTo: "v5"), cacheCapacity: 0)
        #expect(try await v5.sqlite.appliedMigrations() == ["v1", "v2", "v3", "v4", "v5"])
        _ = try await v5.createGroup(try creation("g1", members: [InitialMember(userID: "bob")]))
        try await v5.close()

        let store = Store(backend: try await SQLiteBackend.open(path: path))
        #expect(try await store.sqlite.appliedMigrations() == ["v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12", "v13", "v14", "v15", "v16", "v17", "v18", "v19", "v20", "v21", "v22", "v23"])
        let before = try await store.members(app: "app-a", groupID: "g1", userIDs: ["alice", "bob"])
        #expect(before["alice"]?.joinSource == .unknown && before["alice"]?.inviterID == nil)
        #expect(before["bob"]?.joinSource == .unknown && before["bob"]?.inviterID == nil)
        _ = try await store.createGroup(try creation("g2", members: [InitialMember(userID: "bob")]))
        let after = try await store.members(app: "app-a", groupID: "g2", userIDs: ["alice", "bob"])
        #expect(after["alice"]?.joinSource == .creator && after["alice"]?.inviterID == nil)
        #expect(after["bob"]?.joinSource == .initialMember && after["bob"]?.inviterID == "alice")
        try await store.close()
    }

    @Test("migration v7 counts each user's groups on a v6 file; the kept counts then follow joins, quits and dismissals")
    func migrationV7() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("db.sqlite")
        let v6 = Store(backend: try await SQLiteBackend.open(path: path, durability: .full, migratingUpTo: "v6"), cacheCapacity: 0)
        try await create(v6, "p1", members: ["bob", "carol"])
        try await create(v6, "p2", members: ["bob"])
        try await create(v6, "gone", members: ["bob"])
        try await create(v6, "live", type: .avChatRoom, owner: "bob")
        // Reads of this build's group rows need later columns (v8), so the v6 file is dismissed
        // from and counted in SQL, as a v6 build did.
        let old = try v6.sqlite
        try await old.pool.write { db in
            try db.execute(sql: "UPDATE groups SET dismissed_at = 1 WHERE app_id = 'app-a' AND group_id = 'gone'")
        }
        let counted = try await old.pool.read { db in
            try Operations.joinedGroupCounts(app: "app-a", users: ["bob", "carol", "alice"], countedTable: false, db: db)
        }
        try await v6.close()

        let store = Store(backend: try await SQLiteBackend.open(path: path))
        let backend = try store.sqlite
        func kept() async throws -> [String: Int] {
            try await backend.pool.read { db in
                Dictionary(uniqueKeysWithValues: try Row.fetchAll(db, sql: "SELECT user_id, count FROM joined_counts WHERE app_id = 'app-a'")
                    .map { ($0[0] as String, $0[1] as Int) })
            }
        }
        #expect(counted == ["bob": 2, "carol": 1, "alice": 2])
        #expect(try await kept() == ["bob": 2, "carol": 1, "alice": 2])

        try await join(store, "p2", "carol")
        try await quit(store, "p1", "bob")
        try await create(store, "p3", members: ["carol"])
        _ = try await store.dismissGroup(app: "app-a", groupID: "p2", operatorID: nil, at: t0) { _, _ in
            [.init(kind: .groupDismissed, operatorID: nil)]
        }
        // What counting the memberships gives, for every user.
        let recount = try await backend.pool.read { db in
            try Operations.joinedGroupCounts(app: "app-a", users: ["alice", "bob", "carol"], countedTable: false, db: db)
        }
        #expect(recount == ["alice": 2, "bob": 0, "carol": 2])
        #expect(try await kept().filter { $0.value != 0 } == recount.filter { $0.value != 0 })
        let snapshot = try await store.mutateGroup(app: "app-a", groupID: "p1", operatorID: "carol", targets: ["bob", "alice"], at: t0) {
            ($0.unchangedChange, $0.joinedGroupCounts)
        }.value
        #expect(snapshot == recount)
        try await store.close()
    }

    @Test("migration v12 gives groups stored before their type's mention_all_scope and slow mode off; new values persist")
    func migrationV12() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("db.sqlite")
        let old = Store(backend: try await SQLiteBackend.open(path: path, durability: .full, migratingUpTo: "v7"), cacheCapacity: 0)
        for (id, type) in [("w", GroupType.work), ("p", .public), ("m", .meeting), ("r", .avChatRoom)] {
            try await create(old, id, type: type, members: type == .avChatRoom ? [] : ["bob"])
        }
        try await old.close()

        let store = Store(backend: try await SQLiteBackend.open(path: path), cacheCapacity: 0)
        #expect(try await store.sqlite.appliedMigrations().contains("v12"))
        let groups = try await store.groups(app: "app-a", ids: ["w", "p", "m", "r"])
        for (id, type) in [("w", GroupType.work), ("p", .public), ("m", .meeting), ("r", .avChatRoom)] {
            #expect(groups[id]?.settings.mentionAllPermission == type.preset.defaultSettings.mentionAllPermission, "\(id)")
            #expect(groups[id]?.settings.slowModeIntervalSeconds == 0, "\(id)")
        }
        #expect(groups["w"]?.settings.mentionAllPermission == .everyone)
        #expect(groups["r"]?.settings.mentionAllPermission == .owner)
        _ = try await store.mutateGroup(app: "app-a", groupID: "p", operatorID: "alice", targets: [], at: t0) { snapshot in
            var group = snapshot.group
            group.settings.mentionAllPermission = .everyone
            group.settings.slowModeIntervalSeconds = 60
            return (GroupChange(group: group, events: [.init(kind: .groupSettingsChanged, operatorID: "alice")]), ())
        }
        let after = try await store.groups(app: "app-a", ids: ["p"])["p"]?.settings
        #expect(after?.mentionAllPermission == .everyone && after?.slowModeIntervalSeconds == 60)
        try await store.close()
    }

    @Test("migration v8 gives groups stored before their type's owner settings; new values then persist")
    func migrationV8() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("db.sqlite")
        let v7 = Store(backend: try await SQLiteBackend.open(path: path, durability: .full, migratingUpTo: "v7"), cacheCapacity: 0)
        for (id, type) in [("w", GroupType.work), ("p", .public), ("m", .meeting), ("r", .avChatRoom)] {
            try await create(v7, id, type: type, members: type == .avChatRoom ? [] : ["bob"])
        }
        // A file before v8 reads each type's default, as v8 will write it.
        #expect(try await v7.groups(app: "app-a", ids: ["p"])["p"]?.settings == GroupTypePreset.public.defaultSettings)
        _ = try await v7.mutateGroup(app: "app-a", groupID: "p", operatorID: "alice", targets: [], at: t0) { snapshot in
            var group = snapshot.group
            group.name = "renamed"
            return (GroupChange(group: group, events: [.init(kind: .groupInfoChanged, operatorID: "alice")]), ())
        }
        try await v7.close()

        let store = Store(backend: try await SQLiteBackend.open(path: path), cacheCapacity: 0)
        #expect(try await store.sqlite.appliedMigrations().contains("v8"))
        let groups = try await store.groups(app: "app-a", ids: ["w", "p", "m", "r"])
        for (id, type) in [("w", GroupType.work), ("p", .public), ("m", .meeting), ("r", .avChatRoom)] {
            #expect(groups[id]?.settings.editSettingsPermission == type.preset.defaultSettings.editSettingsPermission, "\(id)")
            #expect(groups[id]?.settings.ownerQuit == type.preset.defaultSettings.ownerQuit, "\(id)")
        }
        #expect(groups["p"]?.settings.editSettingsPermission == .ownerAndAdmins)
        #expect(groups["w"]?.settings.ownerQuit == .longestStandingMember)
        _ = try await store.mutateGroup(app: "app-a", groupID: "p", operatorID: "alice", targets: [], at: t0) { snapshot in
            var group = snapshot.group
            group.settings.editSettingsPermission = .nobody
            group.settings.ownerQuit = .longestStandingAdminElseMember
            return (GroupChange(group: group, events: [.init(kind: .groupInfoChanged, operatorID: "alice")]), ())
        }
        let after = try await store.groups(app: "app-a", ids: ["p"])["p"]?.settings
        #expect(after?.editSettingsPermission == .nobody && after?.ownerQuit == .longestStandingAdminElseMember)
        try await store.close()
    }

    @Test("migration v3 applies on a v2 file and keeps its data")
    func migrationV3() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("db.sqlite")
        let v2 = Store(backend: try await SQLiteBackend.open(path: path, durability: .full, migratingUpTo: "v2"), cacheCapacity: 0)
        #expect(try await v2.sqlite.appliedMigrations() == ["v1", "v2"])
        var group = try await v2.createGroup(try creation("g1", members: [InitialMember(userID: "bob")])).value
        try await v2.close()
        group.memberVersion = 0  // written before v15: no member version is stored

        for _ in 0..<2 {
            let store = Store(backend: try await SQLiteBackend.open(path: path))
            #expect(try await store.sqlite.appliedMigrations() == ["v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12", "v13", "v14", "v15", "v16", "v17", "v18", "v19", "v20", "v21", "v22", "v23"])
            #expect(try await store.groups(app: "app-a", ids: ["g1"])["g1"] == group)
            #expect(try await store.joinedGroups(app: "app-a", userID: "bob", after: nil, limit: 5).items.map(\.group) == [group])
            try await store.close()
        }
        let store = Store(backend: try await SQLiteBackend.open(path: path))
        try await quit(store, "g1", "bob", keepMute: at(999))
        let rejoined = try await join(store, "g1", "bob")
        #expect(rejoined.value.mutedUntil == at(999))
        try await store.close()
    }
}

@Suite("Store conformance: creation with counts, joined-group counts, name-card matches")
struct StoreCreationTests {
    @Test("createGroup(_:revise:) hands revise the members' counted groups, writes the revised plan, or nothing when it throws", arguments: StoreKind.allCases)
    func createWithCounts(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            try await create(store, "a", members: ["bob"])
            try await create(store, "b", type: .work, members: ["bob"])
            try await create(store, "room", type: .avChatRoom)
            try await create(store, "gone", members: ["bob"])
            _ = try await store.dismissGroup(app: "app-a", groupID: "gone", operatorID: nil, at: t0) { _, _ in
                [.init(kind: .groupDismissed, operatorID: nil)]
            }
            try await create(store, "other-app", app: "app-b", members: ["bob"])
            let plan = try creation("c", owner: "carol", members: [InitialMember(userID: "bob"), InitialMember(userID: "dan")])
            let committed = try await store.createGroup(plan) { counts in
                #expect(counts == ["carol": 0, "bob": 2, "dan": 0])
                return try GroupRules.applyGroupLimit(to: plan, joinedGroupCounts: counts, limits: {
                    var limits = AppLimits.defaults
                    limits.maxGroupsPerUser = 2
                    return limits
                }())
            }
            #expect(committed.value == ["bob"])
            #expect(committed.group.memberCount == 2)
            #expect(committed.events.first?.targets == ["carol", "dan"])
            let members = try await store.members(app: "app-a", groupID: "c", userIDs: ["carol", "bob", "dan"])
            #expect(members.keys.sorted() == ["carol", "dan"])
            #expect(members["dan"]?.joinOrder == 2)

            let refused = try creation("d", owner: "bob")
            let error = await Fixture.groupError {
                _ = try await store.createGroup(refused) { _ -> (GroupCreationPlan, Void) in
                    throw GroupError(code: .failedPrecondition, reason: .tooManyGroups, message: "no")
                }
            }
            #expect(error?.reason == .tooManyGroups)
            #expect(try await store.groups(app: "app-a", ids: ["d"]).isEmpty)
            #expect(try await store.joinedGroupCount(app: "app-a", userID: "bob", types: []) == 2)
            #expect(try await store.joinedGroupCount(app: "app-a", userID: "bob", types: [.work]) == 1)
            #expect(try await store.joinedGroupCount(app: "app-a", userID: "alice", types: []) == 3)
            #expect(try await store.joinedGroupCount(app: "app-a", userID: "alice", types: [.public, .work, .meeting]) == 2)
            #expect(try await store.joinedGroupCount(app: "app-b", userID: "bob", types: []) == 1)
            try await store.close()
        }
    }

    @Test("nameCardMatches: members whose card contains the keyword, per live group of the app, in join order, limited", arguments: StoreKind.allCases)
    func nameCards(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            let members = [
                InitialMember(userID: "bob", nameCard: "Big 100%"), InitialMember(userID: "carl", nameCard: "big_top"),
                InitialMember(userID: "dan", nameCard: "small"), InitialMember(userID: "eve", nameCard: "BIG"),
            ]
            _ = try await store.createGroup(try creation("g", members: members))
            _ = try await store.createGroup(try creation("g", app: "app-b", members: members))
            let matches = try await store.nameCardMatches(app: "app-a", groupIDs: ["g", "missing"], keyword: "big", limit: 10)
            #expect(matches.keys.sorted() == ["g"])
            #expect(matches["g"]?.map(\.userID) == ["bob", "carl", "eve"])
            #expect(try await store.nameCardMatches(app: "app-a", groupIDs: ["g"], keyword: "big", limit: 2)["g"]?.count == 2)
            // LIKE wildcards in the keyword are literal.
            #expect(try await store.nameCardMatches(app: "app-a", groupIDs: ["g"], keyword: "%", limit: 10)["g"]?.map(\.userID) == ["bob"])
            #expect(try await store.nameCardMatches(app: "app-a", groupIDs: ["g"], keyword: "_", limit: 10)["g"]?.map(\.userID) == ["carl"])
            #expect(try await store.nameCardMatches(app: "app-a", groupIDs: ["g"], keyword: "nobody", limit: 10).isEmpty)
            try await store.close()
        }
    }
}
