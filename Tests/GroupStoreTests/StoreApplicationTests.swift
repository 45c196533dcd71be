import GroupModel
@testable import GroupStore
@testable import GroupStorePostgres
@testable import GroupStoreSQL
@testable import GroupStoreSQLite
import GroupTestSupport
import Synchronization
import Testing

private let t0 = Timestamp(millisecondsSince1970: 1_700_000_000_000)
private let limits = AppLimits.defaults

/// A Public group `id` owned by `alice` with admin `bob`, in app-a.
private func publicGroup(_ store: Store, _ id: String, maxMembers: Int? = nil) async throws {
    var request = GroupCreationRequest(
        type: .public, groupID: id, name: "club", members: [InitialMember(userID: "bob", role: .admin)])
    request.maxMembers = maxMembers
    let plan = try GroupRules.planCreation(request, appID: "app-a", creatorID: "alice", limits: limits, now: t0)
    _ = try await store.createGroup(plan)
}

/// `user` applies to join `id` at `time`; returns the application.
@discardableResult
private func apply(_ store: Store, _ id: String, _ user: String, at time: Timestamp = t0) async throws -> Application {
    let committed = try await store.mutateApplications(
        app: "app-a", groupID: id, operatorID: user, targets: [user], kind: .join, at: time
    ) { snapshot in
        let plan = try GroupRules.planJoinApplication(
            snapshot.group.group, by: .user(user, membership: snapshot.group.operatorMembership),
            joinedGroupCount: snapshot.group.joinedGroupCounts[user] ?? 0, message: "hi", limits: limits, now: time,
            retainedMute: nil, pending: snapshot.pending[user], newID: ApplicationID.make())
        return (ApplicationChange(group: plan.join.change, applications: plan.application.map { [$0] } ?? []), plan)
    }
    return try #require(committed.value.value.application)
}

/// `user` accepts item `id` at `time`.
private func accept(_ store: Store, _ id: String, by user: String, at time: Timestamp = t0) async throws
    -> Committed<ApplicationCommit<ApplicationDecisionPlan>>
{
    try await store.decideApplication(app: "app-a", id: id, operatorID: user, at: time) { snapshot in
        let application = try #require(snapshot.application)
        let context = ApplicationContext(
            application: application, group: snapshot.group.group,
            op: .user(user, membership: snapshot.group.operatorMembership),
            subjectMembership: snapshot.group.targets[application.subjectID],
            subjectJoinedGroupCount: snapshot.group.joinedGroupCounts[application.subjectID] ?? 0)
        let plan = try GroupRules.planAcceptApplication(context, message: "", limits: limits, now: time)
        return (ApplicationChange(group: plan.change, applications: [plan.application]), plan)
    }
}

/// The store's applications: one write path with expiry, concurrent decisions, listing and read time.
@Suite("Store conformance: applications")
struct StoreApplicationTests {
    @Test("Two approvers accepting the same item at the same moment: exactly one wins, the user joins once", arguments: StoreKind.allCases)
    func concurrentAccept(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        try await publicGroup(store, "g")
        var items: [Application] = []
        for index in 0..<25 { items.append(try await apply(store, "g", "user\(index)")) }

        enum Outcome: Sendable { case won, alreadyHandled, other }
        let outcomes = await withTaskGroup(of: Outcome.self) { group in
            for item in items {
                for approver in ["alice", "bob"] {
                    group.addTask {
                        do {
                            _ = try await accept(store, item.id, by: approver)
                            return .won
                        } catch let error as GroupError where error.reason == .applicationAlreadyHandled {
                            return .alreadyHandled
                        } catch {
                            return .other
                        }
                    }
                }
            }
            var all: [Outcome] = []
            for await outcome in group { all.append(outcome) }
            return all
        }
        #expect(outcomes.filter { $0 == .won }.count == 25)
        #expect(outcomes.filter { $0 == .alreadyHandled }.count == 25)
        #expect(outcomes.filter { $0 == .other }.isEmpty)
        let group = try #require(try await store.groups(app: "app-a", ids: ["g"])["g"])
        #expect(group.memberCount == 27)
        let events = try await store.events(app: "app-a", groupID: "g", after: 0, limit: 1000)
        let joined = events.filter { $0.kind == .memberJoined }.flatMap(\.targets)
        #expect(joined.count == 25)
        #expect(Set(joined).count == 25)
        #expect(events.filter { $0.kind == .joinApplicationApproved }.count == 25)
        for item in items {
            let stored = try #require(try await store.application(app: "app-a", id: item.id))
            #expect(stored.storedState == .accepted)
            #expect(stored.handledBy == "alice" || stored.handledBy == "bob")
        }
        // The event sequence has no gaps or repeats despite the races.
        #expect(events.map(\.sequence) == Array(1...Int64(events.count)))
    }

    @Test("Paging and the unread count stay exact while other applications are written concurrently", arguments: StoreKind.allCases)
    func listingUnderConcurrentWrites(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        try await publicGroup(store, "g")
        var before: [String] = []
        for index in 0..<40 {
            before.append(try await apply(store, "g", "early\(index)", at: t0.adding(seconds: Int64(index))).id)
        }
        // `started` counts writes begun, `committed` writes acknowledged: a page's count must lie
        // between the acknowledged writes before it and the writes begun after it.
        let started = Atomic<Int>(40)
        let committed = Atomic<Int>(40)
        let writer = Task {
            for index in 0..<40 {
                started.add(1, ordering: .sequentiallyConsistent)
                _ = try await apply(store, "g", "late\(index)", at: t0.adding(seconds: 1000 + Int64(index)))
                committed.add(1, ordering: .sequentiallyConsistent)
            }
        }
        // Several complete listings while the writer runs.
        for _ in 0..<6 {
            var seen: [String] = []
            var cursor: String?
            repeat {
                let low = committed.load(ordering: .sequentiallyConsistent)
                let listing = try await store.listApplications(
                    app: "app-a", query: ApplicationQuery(userID: "alice", now: t0.adding(seconds: 5000)), after: cursor, limit: 7)
                let high = started.load(ordering: .sequentiallyConsistent)
                // The unread count is over every item committed when the page was read.
                #expect(listing.unreadCount >= low && listing.unreadCount <= high, "\(low) ≤ \(listing.unreadCount) ≤ \(high)")
                seen += listing.page.items.map(\.application.id)
                cursor = listing.page.next
            } while cursor != nil
            #expect(Set(seen).count == seen.count, "an item was listed twice")
            #expect(Set(before).isSubset(of: Set(seen)), "an item present throughout was skipped")
        }
        try await writer.value
        let final = try await store.listApplications(
            app: "app-a", query: ApplicationQuery(userID: "alice", now: t0.adding(seconds: 5000)), after: nil, limit: 100)
        #expect(final.unreadCount == 80)
        #expect(final.page.items.count == 80)
        let times = final.page.items.map(\.application.createdAt)
        #expect(times == times.sorted(by: >))
    }

    @Test("A refused plan still commits the expiry it found; the expired items' events are stored once", arguments: StoreKind.allCases)
    func expiryCommitsOnRefusal(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        try await publicGroup(store, "g")
        let item = try await apply(store, "g", "zoe")
        let late = t0.adding(seconds: Int64(limits.applicationExpirySeconds))
        await #expect(throws: GroupError.applicationExpired(item)) {
            _ = try await accept(store, item.id, by: "alice", at: late)
        }
        let stored = try #require(try await store.application(app: "app-a", id: item.id))
        #expect(stored.storedState == .expired)
        let events = try await store.events(app: "app-a", groupID: "g", after: 0, limit: 100)
        #expect(events.filter { $0.kind == .applicationExpired }.count == 2)
        #expect(try await store.expireApplications(app: "app-a", now: late, limit: 10).isEmpty)
    }

    @Test("The read time only moves forward; unread counts items created after it", arguments: StoreKind.allCases)
    func readTime(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        try await publicGroup(store, "g")
        for index in 0..<4 { try await apply(store, "g", "u\(index)", at: t0.adding(seconds: Int64(index))) }
        let first = try await store.markApplicationsRead(app: "app-a", userID: "alice", upTo: t0.adding(seconds: 1), now: t0)
        #expect(first.readTime == t0.adding(seconds: 1))
        #expect(first.unreadCount == 2)
        let back = try await store.markApplicationsRead(app: "app-a", userID: "alice", upTo: t0, now: t0)
        #expect(back.readTime == t0.adding(seconds: 1))
        #expect(back.unreadCount == 2)
        let listing = try await store.listApplications(
            app: "app-a", query: ApplicationQuery(userID: "alice", now: t0), after: nil, limit: 10)
        #expect(listing.readTime == t0.adding(seconds: 1))
        #expect(listing.unreadCount == 2)
        // Bob (admin, approvers owner and admins by default) has read nothing.
        let bob = try await store.listApplications(app: "app-a", query: ApplicationQuery(userID: "bob", now: t0), after: nil, limit: 10)
        #expect(bob.unreadCount == 4)
        #expect(bob.readTime == nil)
    }

    @Test("migration v4 applies on a v3 file: the groups stay, applications and read times work")
    func migrationV4() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("db.sqlite")
        let v3 = Store(backend: try await SQLiteBackend.open(path: path, durability: .full, migratingUpTo: "v3"), cacheCapacity: 0)
        #expect(try await v3.sqlite.appliedMigrations() == ["v1", "v2", "v3"])
        try await publicGroup(v3, "g")
        try await v3.close()

        let store = Store(backend: try await SQLiteBackend.open(path: path))
        #expect(try await Array(store.sqlite.appliedMigrations().prefix(4)) == ["v1", "v2", "v3", "v4"])
        #expect(try await store.groups(app: "app-a", ids: ["g"])["g"]?.memberCount == 2)
        let item = try await apply(store, "g", "zoe")
        _ = try await accept(store, item.id, by: "alice")
        #expect(try await store.groups(app: "app-a", ids: ["g"])["g"]?.memberCount == 3)
        #expect(try await store.markApplicationsRead(app: "app-a", userID: "alice", upTo: t0, now: t0).unreadCount == 0)
        try await store.close()
    }
}
