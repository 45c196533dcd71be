import GroupModel
@testable import GroupStore
@testable import GroupStorePostgres
@testable import GroupStoreSQL
@testable import GroupStoreSQLite
import GroupTestSupport
import Logging
import NIOPosix
import Testing

/// Reads of groups by id on PostgreSQL: the reads that wait behind running ones are answered
/// together, one statement per app. Run when `GROUPD_TEST_POSTGRES_URL` names a server
/// (`make test-postgres`).
@Suite(
    "Group reads on PostgreSQL: reads that queue are answered together",
    .enabled(if: PostgresTestServer.settings != nil), .timeLimit(.minutes(1)))
struct StoreGroupReadTests {
    static let otherApp = "app2"

    /// Creates group `id` of `app` (Public, owned by alice) with `custom` fields and `members`
    /// (with `memberCustom` fields, by user).
    static func create(
        _ store: Store, app: String, _ id: String, custom: [String: [UInt8]] = [:], members: [String] = [],
        memberCustom: [String: [String: [UInt8]]] = [:]
    ) async throws {
        var request = GroupCreationRequest(
            type: .public, groupID: id, name: "\(app) \(id)", members: members.map { InitialMember(userID: $0) }, custom: custom)
        for index in request.members.indices { request.members[index].custom = memberCustom[request.members[index].userID] ?? [:] }
        let plan = try GroupRules.planCreation(request, appID: app, creatorID: "alice", limits: .defaults, now: Fixture.t0)
        _ = try await store.createGroup(plan)
    }

    /// A second store on `seed`'s database with `settings` changed by `change`, without a group
    /// cache (every read goes to the database).
    static func store(on seed: TemporaryStore, _ change: (inout PostgresStoreSettings) -> Void = { _ in }) async throws
        -> (Store, PostgresBackend)
    {
        var settings = try #require(seed.postgres)
        change(&settings)
        let backend = try await PostgresBackend.open(settings: settings)
        return (Store(backend: backend, cacheCapacity: 0), backend)
    }

    @Test("reads that queue behind a running one are answered by one batch, each with exactly the groups it asked for")
    func coalesced() async throws {
        let seed = try await temporaryStore(.postgres)
        for n in 0..<6 { try await Self.create(seed.store, app: Fixture.app, "g\(n)") }
        try await Self.create(seed.store, app: Fixture.app, "c", custom: ["tier": Array("gold".utf8)])
        for n in 0..<3 { try await Self.create(seed.store, app: Self.otherApp, "g\(n)") }
        _ = try await seed.store.dismissGroup(app: Fixture.app, groupID: "g5", operatorID: nil, at: Fixture.t0) { group, _ in
            try GroupRules.planDismissal(of: group, by: .backend, operatorID: nil)
        }
        let (store, backend) = try await Self.store(on: seed)
        defer { backend.closeNow() }

        // Each read: an app and ids, some missing ("x"), one dismissed (g5), one with custom
        // fields (c, read in a snapshot), ids other reads ask too; the same id in two apps.
        let reads: [(app: String, ids: [String])] = (0..<30).map { n in
            n % 3 == 0
                ? (Self.otherApp, ["g\(n % 4)", "x\(n)"])
                : (Fixture.app, ["g\(n % 7)", "g\((n + 1) % 7)"] + (n % 5 == 0 ? ["c"] : []))
        }
        let before = backend.groupReads.batchCount
        backend.groupReads.hold()
        let answers = try await withThrowingTaskGroup(of: (Int, [String: Group]).self) { tasks in
            for (index, read) in reads.enumerated() {
                tasks.addTask { (index, try await store.groups(app: read.app, ids: read.ids)) }
            }
            await backend.groupReads.waitUntilWaiting(reads.count)
            backend.groupReads.release()
            var answers: [Int: [String: Group]] = [:]
            for try await (index, groups) in tasks { answers[index] = groups }
            return answers
        }
        #expect(backend.groupReads.batchCount == before + 1)
        for (index, read) in reads.enumerated() {
            let answer = try #require(answers[index])
            let live: Set<String> = read.app == Self.otherApp ? ["g0", "g1", "g2"] : ["g0", "g1", "g2", "g3", "g4", "c"]
            #expect(Set(answer.keys) == Set(read.ids).intersection(live), "read \(index): \(read)")
            for (id, group) in answer {
                #expect(group.id == id && group.appID == read.app && group.name == "\(read.app) \(id)")
            }
            if let custom = answer["c"] { #expect(custom.custom["tier"] == Array("gold".utf8)) }
        }

        // Alone, a read starts a batch of its own at once.
        #expect(try await store.groups(app: Fixture.app, ids: ["g1"])["g1"]?.name == "app g1")
        #expect(backend.groupReads.batchCount == before + 2)
    }

    @Test("users' views of groups that queue are answered by one batch, each as the separate reads answer it")
    func usersViewsCoalesced() async throws {
        let seed = try await temporaryStore(.postgres)
        try await Self.create(seed.store, app: Fixture.app, "g0", members: ["bob", "carol"])
        try await Self.create(seed.store, app: Fixture.app, "g1", members: ["bob"])
        try await Self.create(
            seed.store, app: Fixture.app, "c", custom: ["tier": Array("gold".utf8)], members: ["carol"],
            memberCustom: ["carol": ["seat": [1]]])
        try await Self.create(seed.store, app: Self.otherApp, "g0", members: ["carol"])
        _ = try await seed.store.dismissGroup(app: Fixture.app, groupID: "g1", operatorID: nil, at: Fixture.t0) { group, _ in
            try GroupRules.planDismissal(of: group, by: .backend, operatorID: nil)
        }
        // Remarks: carol's on groups she is in; bob's on a group he is not in (never shown).
        for (app, user, group) in [(Fixture.app, "carol", "g0"), (Fixture.app, "carol", "c"), (Fixture.app, "bob", "c"), (Self.otherApp, "carol", "g0")] {
            _ = try await seed.store.setRemark(
                app: app, groupID: group, plan: RemarkPlan(userID: user, remark: "\(user) on \(app) \(group)", events: []), at: Fixture.t0)
        }
        // A mention of carol in g0, unread.
        let mention = GroupMessage(
            appID: Fixture.app, groupID: "g0", sequence: 0, messageID: "m1", senderID: "bob",
            content: MessageContent(text: "hi", mentionedUserIDs: ["carol"]), time: Fixture.t0)
        _ = try await seed.store.appendMessage(mention, at: Fixture.t0) { _, member, _ in try #require(member).nameCard }
        let (store, backend) = try await Self.store(on: seed)
        defer { backend.closeNow() }

        // Each read: an app, a user, ids (some missing, one dismissed, one with custom fields on
        // the group and carol's membership); the same pair in several reads.
        let users = ["alice", "bob", "carol", "zed"]
        var reads: [(app: String, user: String, ids: [String])] = []
        for n in 0..<24 {
            if n % 4 == 0 {
                reads.append((Self.otherApp, users[n % 3 + 1], ["g0", "x\(n)"]))
            } else {
                let ids: [String] = ["g\(n % 2)", "c", "x"]
                reads.append((Fixture.app, users[n % 4], ids.shuffled()))
            }
        }
        let before = backend.userGroupReads.batchCount
        backend.userGroupReads.hold()
        let answers = try await withThrowingTaskGroup(of: (Int, GroupsForUser).self) { tasks in
            for (index, read) in reads.enumerated() {
                tasks.addTask { (index, try await store.groupsForUser(app: read.app, userID: read.user, ids: read.ids)) }
            }
            await backend.userGroupReads.waitUntilWaiting(reads.count)
            backend.userGroupReads.release()
            var answers: [Int: GroupsForUser] = [:]
            for try await (index, found) in tasks { answers[index] = found }
            return answers
        }
        #expect(backend.userGroupReads.batchCount == before + 1)
        var members = 0
        for (index, read) in reads.enumerated() {
            let found = try #require(answers[index])
            let groups = try await store.groups(app: read.app, ids: read.ids)
            let memberships = try await store.memberships(app: read.app, userID: read.user, groupIDs: read.ids)
            members += memberships.count
            #expect(found.groups == groups, "read \(index): \(read)")
            #expect(found.memberships == memberships, "read \(index): \(read)")
            #expect(found.remarks == (try await store.remarks(app: read.app, userID: read.user, groupIDs: Array(memberships.keys))), "read \(index)")
            #expect(
                found.unreadMentions == (try await store.unreadMentions(app: read.app, userID: read.user, groupIDs: Array(memberships.keys))),
                "read \(index)")
            if read.app == Fixture.app && read.user == "carol" {
                #expect(found.memberships["c"]?.custom == ["seat": [1]])
                #expect(found.groups["c"]?.custom["tier"] == Array("gold".utf8))
                #expect(found.unreadMentions?["g0"] == .me)
            }
        }
        // carol's in g0 of each app and in c, asked by eight reads; bob's in g1 is dismissed.
        #expect(members == 14)

        // Alone, a read starts a batch of its own at once.
        #expect(try await store.groupsForUser(app: Fixture.app, userID: "bob", ids: ["g0"]).memberships["g0"] != nil)
        #expect(backend.userGroupReads.batchCount == before + 2)
    }

    @Test("past max_waiting a read is refused at once with RESOURCE_EXHAUSTED; the waiting ones are answered")
    func refusedPastMaxWaiting() async throws {
        let seed = try await temporaryStore(.postgres)
        try await Fixture.create(seed.store, "g")
        let (store, backend) = try await Self.store(on: seed) { $0.maxWaiting = 3 }
        defer { backend.closeNow() }
        backend.groupReads.hold()
        try await withThrowingTaskGroup(of: Group?.self) { tasks in
            for _ in 0..<3 { tasks.addTask { try await store.groups(app: Fixture.app, ids: ["g"])["g"] } }
            await backend.groupReads.waitUntilWaiting(3)
            let refused = await Fixture.groupError { _ = try await store.groups(app: Fixture.app, ids: ["g"]) }
            #expect(refused?.code == .resourceExhausted)
            #expect(refused?.reason == .storeBusy)
            backend.groupReads.release()
            for try await group in tasks { #expect(group?.id == "g") }
        }
    }

    @Test("a batch that fails fails each of its reads; the next reads are answered")
    func failedBatch() async throws {
        let seed = try await temporaryStore(.postgres)
        try await Fixture.create(seed.store, "g")
        let (store, backend) = try await Self.store(on: seed) { $0.statementTimeoutMilliseconds = 200 }
        defer { backend.closeNow() }
        // A lock another connection holds makes the batch's statement time out.
        let holder = PostgresSession(
            settings: try #require(seed.postgres), eventLoop: MultiThreadedEventLoopGroup.singleton.next(),
            logger: Logger(label: "test"), id: 98)
        defer { holder.disconnectBlocking() }
        try await holder.begin()
        try await holder.command("LOCK TABLE groups IN ACCESS EXCLUSIVE MODE")
        backend.groupReads.hold()
        let failures = await withTaskGroup(of: GroupError?.self) { tasks in
            for _ in 0..<4 {
                tasks.addTask { await Fixture.groupError { _ = try await store.groups(app: Fixture.app, ids: ["g"]) } }
            }
            await backend.groupReads.waitUntilWaiting(4)
            backend.groupReads.release()
            var failures: [GroupError?] = []
            for await failure in tasks { failures.append(failure) }
            return failures
        }
        await holder.rollback()
        #expect(failures.count == 4)
        #expect(failures.allSatisfy { $0?.code == .unavailable }, "\(failures)")
        // The store reports itself unavailable after a timeout only while a probe fails; the
        // next read is answered once it is available again.
        while !backend.isAvailable { await Task.yield() }
        #expect(try await store.groups(app: Fixture.app, ids: ["g"])["g"] != nil)
    }
}
