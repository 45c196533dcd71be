import GRDB
import GroupModel
@testable import GroupStore
@testable import GroupStorePostgres
@testable import GroupStoreSQL
@testable import GroupStoreSQLite
import GroupTestSupport
import Testing

private let t0 = Timestamp(millisecondsSince1970: 1_700_000_000_000)

/// A creation plan for `id` in `app` by user `owner`, with `members` as ordinary members.
private func creation(
    _ id: String, app: String = "app-a", type: GroupType = .public, owner: String = "alice",
    members: [String] = [], name: String = "team", custom: [String: [UInt8]] = [:]
) throws -> GroupCreationPlan {
    var request = GroupCreationRequest(
        type: type, groupID: id, name: name, introduction: "intro", notification: "notice",
        faceURL: "https://x/a.png", members: members.map { InitialMember(userID: $0) })
    request.custom = custom
    return try GroupRules.planCreation(request, appID: app, creatorID: owner, limits: .defaults, now: t0)
}


/// Dismissal as the service wires it: the pure rule, inside the store's transaction.
private func dismiss(
    _ store: Store, app: String = "app-a", _ id: String, by user: String?, at time: Timestamp = t0
) async throws -> [GroupEvent] {
    try await store.dismissGroup(app: app, groupID: id, operatorID: user, at: time) { group, membership in
        try GroupRules.planDismissal(
            of: group, by: ActingRole(isBackend: user == nil, role: membership?.role), operatorID: user)
    }
}

@Suite("Store conformance: groups")
struct StoreGroupTests {
    @Test("migrations run on an empty file and are idempotent on reopen")
    func migrations() async throws {
        let temporary = try await temporaryStore()
        #expect(try await temporary.store.sqlite.appliedMigrations() == ["v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12", "v13", "v14", "v15", "v16", "v17", "v18", "v19", "v20", "v21", "v22", "v23"])
        _ = try await temporary.store.createGroup(try creation("g1"))
        let reopened = try await temporary.reopen()
        #expect(try await reopened.store.sqlite.appliedMigrations() == ["v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12", "v13", "v14", "v15", "v16", "v17", "v18", "v19", "v20", "v21", "v22", "v23"])
        #expect(try await reopened.store.groups(app: "app-a", ids: ["g1"]).count == 1)
        try await reopened.store.close()
    }

    @Test("v16: the list checks are comparisons, and still refuse a value outside the list")
    func listChecks() async throws {
        let temporary = try await temporaryStore()
        let pool = try temporary.sqliteBackend.pool
        let tables = try await pool.read { db in
            try String.fetchAll(db, sql: "SELECT sql FROM sqlite_schema WHERE type = 'table'")
        }
        for check in GroupStoreSQLite.Schema.listChecks {
            #expect(!tables.contains { $0.contains("\(check.column) IN (") }, "\(check.table).\(check.column)")
            #expect(tables.contains { $0.contains("\(check.column) = '\(check.values[0])' OR ") })
        }
        #expect(try await pool.read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") } == "ok")
        // The writer, which ran the migration, compiles the new checks too: an event's insert
        // builds no temporary b-tree.
        let temporaryTrees = try await pool.write { db in
            try Row.fetchAll(
                db,
                sql: """
                    EXPLAIN INSERT INTO group_events (app_id, group_key, group_id, seq, kind, time, recipient_kind)
                    VALUES ('a', 1, 'g', 1, 'GROUP_MESSAGE', 0, 'group')
                    """
            ).filter { ($0[1] as String?) == "OpenEphemeral" }.count
        }
        #expect(temporaryTrees == 0)
        _ = try await temporary.store.createGroup(try creation("g1"))
        await #expect(throws: DatabaseError.self) {
            try await pool.write { db in
                try db.execute(sql: "UPDATE members SET role = 'guest' WHERE user_id = (SELECT min(user_id) FROM members)")
            }
        }
        try await pool.write { db in try db.execute(sql: "UPDATE members SET role = role") }
    }

    @Test("synchronous follows the durability setting", arguments: Durability.allCases)
    func durability(_ durability: Durability) async throws {
        let temporary = try await temporaryStore(durability: durability)
        #expect(try await temporary.store.sqlite.effectiveDurability() == durability)
        try await temporary.store.close()
    }

    @Test("create and fetch round trip every field", arguments: StoreKind.allCases)
    func roundTrip(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            let plan = try creation("g1", members: ["bob", "carol"], custom: ["level": [1, 2, 255]])
            let committed = try await store.createGroup(plan)
            #expect(committed.value.latestSequence == 1)
            #expect(committed.events.map(\.sequence) == [1])
            #expect(committed.events.first?.kind == .groupCreated)

            let fetched = try #require(try await store.groups(app: "app-a", ids: ["g1", "missing"])["g1"])
            var expected = plan.group
            expected.latestSequence = 1
            expected.memberCount = 3
            expected.memberVersion = 1
            #expect(fetched == expected)
            #expect(fetched.ownerID == "alice")
            #expect(fetched.custom == ["level": [1, 2, 255]])
            #expect(fetched.settings == GroupTypePreset.public.defaultSettings)

            let memberships = try await store.memberships(app: "app-a", userID: "bob", groupIDs: ["g1", "missing"])
            #expect(memberships.keys.sorted() == ["g1"])
            #expect(memberships["g1"]?.role == .member)
            #expect(memberships["g1"]?.joinOrder == 2)
            #expect(try await store.memberships(app: "app-a", userID: "alice", groupIDs: ["g1"])["g1"]?.role == .owner)
            #expect(try await store.memberships(app: "app-a", userID: "zed", groupIDs: ["g1"]).isEmpty)
        }
    }

    @Test("a batch read returns every group asked for in one call", arguments: StoreKind.allCases)
    func batch(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            for i in 0..<20 {
                _ = try await store.createGroup(try creation("g\(i)", type: i % 2 == 0 ? .work : .meeting))
            }
            let ids = (0..<25).map { "g\($0)" }
            let groups = try await store.groups(app: "app-a", ids: ids)
            #expect(groups.count == 20)
            #expect(groups["g3"]?.type == .meeting)
            #expect(groups["g4"]?.type == .work)
            #expect(try await store.groups(app: "app-a", ids: []).isEmpty)
        }
    }

    @Test("groups for a user: the groups, the user's memberships, remarks and unread mentions as the separate reads answer them", arguments: StoreKind.allCases)
    func groupsForUser(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            var request = try creation("custom", members: ["carol"], custom: ["level": [7]])
            request.members[1].custom = ["seat": [1]]
            _ = try await store.createGroup(request)
            _ = try await store.createGroup(try creation("plain", members: ["bob", "carol"]))
            _ = try await store.createGroup(try creation("room", type: .avChatRoom))
            _ = try await store.createGroup(try creation("gone", members: ["carol"]))
            _ = try await dismiss(store, "gone", by: nil)
            // Remarks: carol's for a group she belongs to; bob's for one he does not (left out) and
            // for the AVChatRoom (whose audience is not stored: kept).
            for (user, group) in [("carol", "custom"), ("carol", "plain"), ("bob", "custom"), ("bob", "room")] {
                _ = try await store.setRemark(
                    app: "app-a", groupID: group, plan: RemarkPlan(userID: user, remark: "\(user) on \(group)", events: []), at: t0)
            }
            let ids = ["custom", "plain", "room", "gone", "missing"]
            for user in ["alice", "bob", "carol", "zed"] {
                let found = try await store.groupsForUser(app: "app-a", userID: user, ids: ids)
                let groups = try await store.groups(app: "app-a", ids: ids)
                let memberships = try await store.memberships(app: "app-a", userID: user, groupIDs: ids)
                let remarkable = groups.values.filter { memberships[$0.id] != nil || $0.type == .avChatRoom }.map(\.id)
                #expect(found.groups == groups, "\(user)")
                #expect(found.memberships == memberships, "\(user)")
                #expect(found.remarks == (try await store.remarks(app: "app-a", userID: user, groupIDs: remarkable)), "\(user)")
                #expect(
                    found.unreadMentions == (try await store.unreadMentions(app: "app-a", userID: user, groupIDs: Array(memberships.keys))),
                    "\(user)")
            }
            let carol = try await store.groupsForUser(app: "app-a", userID: "carol", ids: ids + ["custom"])
            #expect(carol.groups.keys.sorted() == ["custom", "plain", "room"])
            #expect(carol.groups["custom"]?.custom == ["level": [7]])
            #expect(carol.memberships["custom"]?.custom == ["seat": [1]])
            #expect(carol.memberships.keys.sorted() == ["custom", "plain"])
            #expect(carol.remarks == ["custom": "carol on custom", "plain": "carol on plain"])
            let bob = try await store.groupsForUser(app: "app-a", userID: "bob", ids: ids)
            #expect(bob.remarks == ["room": "bob on room"])
            #expect(try await store.groupsForUser(app: "app-a", userID: "bob", ids: ["missing"]).groups.isEmpty)
            #expect(try await store.groupsForUser(app: "app-a", userID: "bob", ids: []).groups.isEmpty)
        }
    }

    @Test("SQLite: users' views that queue behind a running one are read together, each as the separate reads answer it")
    func usersViewsTogetherOnSQLite() async throws {
        let temporary = try await temporaryStore(.sqlite)
        let store = temporary.store
        let backend = try #require(temporary.backend as? SQLiteBackend)
        var request = try creation("custom", members: ["carol"], custom: ["level": [7]])
        request.members[1].custom = ["seat": [1]]
        _ = try await store.createGroup(request)
        _ = try await store.createGroup(try creation("plain", members: ["bob", "carol"]))
        _ = try await store.createGroup(try creation("room", type: .avChatRoom))
        for (user, group) in [("carol", "custom"), ("bob", "custom"), ("bob", "room")] {
            _ = try await store.setRemark(
                app: "app-a", groupID: group, plan: RemarkPlan(userID: user, remark: "\(user) on \(group)", events: []), at: t0)
        }
        let mention = GroupMessage(
            appID: "app-a", groupID: "plain", sequence: 0, messageID: "m1", senderID: "bob",
            content: MessageContent(text: "hi", mentionedUserIDs: ["carol"]), time: t0)
        _ = try await store.appendMessage(mention, at: t0) { _, member, _ in try #require(member).nameCard }
        let users = ["alice", "bob", "carol", "zed"]
        let reads: [(user: String, ids: [String])] = (0..<20).map { n in
            (users[n % 4], n % 2 == 0 ? ["custom", "plain", "room", "missing"] : ["plain"])
        }
        let before = backend.userViews.batchCount
        backend.userViews.hold()
        let answers = try await withThrowingTaskGroup(of: (Int, GroupsForUser).self) { tasks in
            for (index, read) in reads.enumerated() {
                tasks.addTask { (index, try await store.groupsForUser(app: "app-a", userID: read.user, ids: read.ids)) }
            }
            await backend.userViews.waitUntilWaiting(reads.count)
            backend.userViews.release()
            var answers: [Int: GroupsForUser] = [:]
            for try await (index, found) in tasks { answers[index] = found }
            return answers
        }
        #expect(backend.userViews.batchCount == before + 1)
        for (index, read) in reads.enumerated() {
            let found = try #require(answers[index])
            let memberships = try await store.memberships(app: "app-a", userID: read.user, groupIDs: read.ids)
            let remarkable = found.groups.values.filter { memberships[$0.id] != nil || $0.type == .avChatRoom }.map(\.id)
            #expect(found.groups == (try await store.groups(app: "app-a", ids: read.ids)), "read \(index)")
            #expect(found.memberships == memberships, "read \(index)")
            #expect(found.remarks == (try await store.remarks(app: "app-a", userID: read.user, groupIDs: remarkable)), "read \(index)")
            #expect(
                found.unreadMentions == (try await store.unreadMentions(app: "app-a", userID: read.user, groupIDs: Array(memberships.keys))),
                "read \(index)")
        }
        let carol = try #require(answers[2])
        #expect(carol.memberships["custom"]?.custom == ["seat": [1]])
        #expect(carol.remarks == ["custom": "carol on custom"])
        #expect(carol.unreadMentions?["plain"] == .me)
        #expect(try #require(answers[1]).remarks.isEmpty)  // bob's remark on custom: not a member
        // Alone, a view is read at once, in a batch of its own.
        #expect(try await store.groupsForUser(app: "app-a", userID: "bob", ids: ["plain"]).memberships["plain"] != nil)
        #expect(backend.userViews.batchCount == before + 2)
    }

    @Test("a duplicate id fails with GROUP_ID_TAKEN and changes nothing", arguments: StoreKind.allCases)
    func duplicate(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            _ = try await store.createGroup(try creation("g1", members: ["bob"], name: "first"))
            let error = try #require(await Fixture.groupError {
                _ = try await store.createGroup(try creation("g1", owner: "mallory", members: ["eve"], name: "second"))
            })
            #expect(error.code == .alreadyExists)
            #expect(error.reason == .groupIDTaken)
            let group = try #require(try await store.groups(app: "app-a", ids: ["g1"])["g1"])
            #expect(group.name == "first")
            #expect(group.ownerID == "alice")
            #expect(group.memberCount == 2)
            #expect(try await store.memberships(app: "app-a", userID: "eve", groupIDs: ["g1"]).isEmpty)
            #expect(try await store.events(app: "app-a", groupID: "g1", after: 0, limit: 100).count == 1)
        }
    }

    @Test("concurrent creates of one id: exactly one wins", arguments: StoreKind.allCases)
    func concurrentDuplicates(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            let outcomes = try await withThrowingTaskGroup(of: Bool.self) { tasks in
                for i in 0..<16 {
                    let plan = try creation("race", owner: "user\(i)")
                    tasks.addTask {
                        do {
                            _ = try await store.createGroup(plan)
                            return true
                        } catch let error as GroupError where error.reason == .groupIDTaken {
                            return false
                        }
                    }
                }
                return try await tasks.reduce(into: [Bool]()) { $0.append($1) }
            }
            #expect(outcomes.filter { $0 }.count == 1)
            #expect(try await store.groups(app: "app-a", ids: ["race"])["race"]?.memberCount == 1)
        }
    }

    @Test("dismiss appends GROUP_DISMISSED after the existing events, in the same transaction", arguments: StoreKind.allCases)
    func dismissal(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            _ = try await store.createGroup(try creation("g1", members: ["bob"]))
            let later = t0.adding(seconds: 60)
            let events = try await dismiss(store, "g1", by: "alice", at: later)
            #expect(events.map(\.kind) == [.groupDismissed])
            #expect(events.map(\.sequence) == [2])

            let log = try await store.events(app: "app-a", groupID: "g1", after: 0, limit: 100)
            #expect(log.map(\.sequence) == [1, 2])
            #expect(log.map(\.kind) == [.groupCreated, .groupDismissed])
            #expect(log.last?.operatorID == "alice")
            #expect(log.last?.time == later)
            #expect(log.first?.targets == ["alice", "bob"])
            #expect(try await store.events(app: "app-a", groupID: "g1", after: 1, limit: 100).map(\.sequence) == [2])

            #expect(try await store.groups(app: "app-a", ids: ["g1"]).isEmpty)
            #expect(try await store.memberships(app: "app-a", userID: "bob", groupIDs: ["g1"]).isEmpty)
            #expect(await Fixture.groupError { _ = try await dismiss(store, "g1", by: "alice") }?.reason == .groupNotFound)
            // The id stays reserved while the dismissed group's events are kept.
            #expect(await Fixture.groupError { _ = try await store.createGroup(try creation("g1")) }?.reason == .groupIDTaken)
        }
    }

    @Test("a refused dismissal changes nothing", arguments: StoreKind.allCases)
    func refusedDismissal(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            _ = try await store.createGroup(try creation("w", type: .work, members: ["bob"]))
            _ = try await store.createGroup(try creation("p", members: ["bob"]))
            #expect(await Fixture.groupError { _ = try await dismiss(store, "w", by: "alice") }?.reason == .adminTokenRequired)
            #expect(await Fixture.groupError { _ = try await dismiss(store, "p", by: "bob") }?.reason == .permissionDenied)
            #expect(await Fixture.groupError { _ = try await dismiss(store, "w", by: "zed") }?.reason == .groupNotFound)
            #expect(try await store.groups(app: "app-a", ids: ["w", "p"]).count == 2)
            #expect(try await store.events(app: "app-a", groupID: "w", after: 0, limit: 10).count == 1)
            #expect(try await store.events(app: "app-a", groupID: "p", after: 0, limit: 10).count == 1)
            // The backend may dismiss the Work group.
            #expect(try await dismiss(store, "w", by: nil).first?.operatorID == nil)
        }
    }

    @Test("every method is scoped by app", arguments: StoreKind.allCases)
    func appScoping(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            _ = try await store.createGroup(try creation("shared", app: "app-a", members: ["bob"], name: "A"))
            #expect(try await store.groups(app: "app-b", ids: ["shared"]).isEmpty)
            #expect(try await store.memberships(app: "app-b", userID: "bob", groupIDs: ["shared"]).isEmpty)
            #expect(await Fixture.groupError { _ = try await store.events(app: "app-b", groupID: "shared", after: 0, limit: 10) }?
                .reason == .groupNotFound)
            #expect(await Fixture.groupError { _ = try await dismiss(store, app: "app-b", "shared", by: nil) }?
                .reason == .groupNotFound)

            // The same id is free in another app, and the two never mix.
            _ = try await store.createGroup(try creation("shared", app: "app-b", owner: "zoe", name: "B"))
            #expect(try await store.groups(app: "app-a", ids: ["shared"])["shared"]?.name == "A")
            #expect(try await store.groups(app: "app-b", ids: ["shared"])["shared"]?.name == "B")
            _ = try await dismiss(store, app: "app-b", "shared", by: nil)
            #expect(try await store.groups(app: "app-a", ids: ["shared"])["shared"]?.name == "A")
            #expect(try await store.events(app: "app-a", groupID: "shared", after: 0, limit: 10).count == 1)
        }
    }

    @Test("data survives closing and reopening the store")
    func persistence() async throws {
        let temporary = try await temporaryStore()
        _ = try await temporary.store.createGroup(try creation("g1", members: ["bob"]))
        _ = try await temporary.store.createGroup(try creation("g2"))
        _ = try await dismiss(temporary.store, "g2", by: "alice")
        let reopened = try await temporary.reopen()
        let groups = try await reopened.store.groups(app: "app-a", ids: ["g1", "g2"])
        #expect(groups.keys.sorted() == ["g1"])
        #expect(groups["g1"]?.memberCount == 2)
        #expect(try await reopened.store.events(app: "app-a", groupID: "g2", after: 0, limit: 10).map(\.kind)
            == [.groupCreated, .groupDismissed])
        try await reopened.store.close()
    }

    @Test("ownerless AVChatRoom and unlimited max members persist as such", arguments: StoreKind.allCases)
    func ownerless(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            let plan = try GroupRules.planCreation(
                GroupCreationRequest(type: .avChatRoom, groupID: "live", name: "live"), appID: "app-a",
                creatorID: nil, limits: .defaults, now: t0)
            _ = try await store.createGroup(plan)
            let group = try #require(try await store.groups(app: "app-a", ids: ["live"])["live"])
            #expect(group.ownerID == nil)
            #expect(group.maxMembers == nil)
            #expect(group.memberCount == 0)
        }
    }
}
