import GroupModel
import GroupStore
import GroupTestSupport
import Testing

private let t0 = Fixture.t0
private let app = Fixture.app

/// Removes `users` from a group as its owner (member rows deleted, one write).
private func remove(_ store: Store, _ id: String, _ users: [String]) async throws {
    _ = try await store.mutateGroup(app: app, groupID: id, operatorID: "alice", targets: users, at: t0) { snapshot in
        var group = snapshot.group
        group.memberCount -= users.count
        return (GroupChange(group: group, removedMembers: users,
                            events: [.init(kind: .memberKicked, operatorID: "alice", targets: users)]), ())
    }
}

/// Sets a member's name card (an updated member row).
private func nameCard(_ store: Store, _ id: String, _ user: String, _ card: String) async throws {
    _ = try await store.mutateGroup(app: app, groupID: id, operatorID: user, targets: [], at: t0) { snapshot in
        var member = try #require(snapshot.operatorMembership)
        member.nameCard = card
        return (GroupChange(group: snapshot.group, updatedMembers: [member],
                            events: [.init(kind: .memberInfoChanged, operatorID: user, targets: [user])]), ())
    }
}

/// Every page of a member sync from `version`.
private func memberSync(_ store: Store, _ id: String, since version: Int64, limit: Int = 100) async throws
    -> (changed: [String], removed: [String], version: Int64, pages: Int)
{
    var changed: [String] = [], removed: [String] = [], cursor: String?, pages = 0, last: Int64 = 0
    repeat {
        let page = try await store.memberChanges(app: app, groupID: id, since: version, after: cursor, limit: limit)
        #expect(!page.fullReloadRequired)
        changed += page.changed.map(\.userID)
        removed += page.removed
        cursor = page.next
        last = page.version
        pages += 1
    } while cursor != nil
    return (changed, removed, last, pages)
}

@Suite("Store conformance: versioned sync and member search")
struct StoreSyncTests {
    @Test("member changes after a version: inserted, updated, removed, paged; the group carries the version",
          arguments: StoreKind.allCases)
    func memberChanges(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            let created = try await Fixture.create(store, "g1", members: ["bob", "carol", "dave"])
            #expect(created.memberVersion == 1)
            let all = try await memberSync(store, "g1", since: 0, limit: 2)
            #expect(Set(all.changed) == ["alice", "bob", "carol", "dave"] && all.removed.isEmpty)
            #expect(all.version == 1 && all.pages == 2)

            try await Fixture.join(store, "g1", "erin")
            try await nameCard(store, "g1", "bob", "Bobby")
            try await remove(store, "g1", ["carol", "dave"])
            try await Fixture.rename(store, "g1", to: "renamed")  // no member row: the version stays
            #expect(try await store.groups(app: app, ids: ["g1"])["g1"]?.memberVersion == 4)
            let delta = try await memberSync(store, "g1", since: 1, limit: 1)
            #expect(delta.changed == ["erin", "bob"] && Set(delta.removed) == ["carol", "dave"])
            #expect(delta.version == 4 && delta.pages == 4)
            #expect(try await memberSync(store, "g1", since: 4).changed.isEmpty)

            // A rejoin is a change, no longer a removal.
            try await Fixture.join(store, "g1", "carol")
            let rejoin = try await memberSync(store, "g1", since: 3)
            #expect(rejoin.changed == ["carol"] && rejoin.removed == ["dave"] && rejoin.version == 5)

            // From the future: reload; a cursor of another version is refused.
            let future = try await store.memberChanges(app: app, groupID: "g1", since: 6, after: nil, limit: 10)
            #expect(future.fullReloadRequired && future.version == 5 && future.changed.isEmpty)
            let first = try await store.memberChanges(app: app, groupID: "g1", since: 1, after: nil, limit: 1)
            let refused = await Fixture.groupError {
                _ = try await store.memberChanges(app: app, groupID: "g1", since: 2, after: first.next, limit: 1)
            }
            #expect(refused?.reason == .invalidArgument && refused?.metadata["field"] == "page_token")
            let missing = await Fixture.groupError {
                _ = try await store.memberChanges(app: app, groupID: "nope", since: 0, after: nil, limit: 1)
            }
            #expect(missing?.reason == .groupNotFound)
        }
    }

    @Test("purged removals raise the group's floor: a sync from below it must reload", arguments: StoreKind.allCases)
    func tombstoneFloor(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            try await Fixture.create(store, "g1", members: ["bob", "carol"])
            try await remove(store, "g1", ["bob"])
            #expect(try await store.purgeMemberTombstones(app: app, olderThan: t0, limit: 10) == 0)
            #expect(try await store.purgeMemberTombstones(app: app, olderThan: t0.adding(seconds: 1), limit: 10) == 1)
            let stale = try await store.memberChanges(app: app, groupID: "g1", since: 1, after: nil, limit: 10)
            #expect(stale.fullReloadRequired && stale.version == 2)
            #expect(try await memberSync(store, "g1", since: 2).changed.isEmpty)
            #expect(Set(try await memberSync(store, "g1", since: 0).changed) == ["alice", "carol"])
        }
    }

    @Test("joined-group changes after an event id: joined, changed, left; remarks are the user's own",
          arguments: StoreKind.allCases)
    func joinedGroupChanges(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            try await Fixture.create(store, "g1", members: ["bob"])
            try await Fixture.create(store, "g2", members: ["bob"])
            try await Fixture.create(store, "g3")
            let start = try await store.joinedGroupChanges(app: app, userID: "bob", since: 0, after: nil, limit: 1)
            #expect(start.changed.map(\.group.id) == ["g1"] && start.next != nil)
            let rest = try await store.joinedGroupChanges(app: app, userID: "bob", since: 0, after: start.next, limit: 10)
            #expect(rest.changed.map(\.group.id) == ["g2"] && rest.next == nil && rest.version == start.version)
            let version = start.version

            try await Fixture.rename(store, "g1", to: "renamed")
            try await remove(store, "g2", ["bob"])
            try await Fixture.join(store, "g3", "bob")
            let delta = try await store.joinedGroupChanges(app: app, userID: "bob", since: version, after: nil, limit: 10)
            #expect(delta.changed.map(\.group.id) == ["g1", "g3"] && delta.removed == ["g2"])
            #expect(delta.changed.first?.group.name == "renamed" && delta.changed.first?.membership.userID == "bob")
            #expect(delta.version > version)
            // Carol is in none of them.
            let carol = try await store.joinedGroupChanges(app: app, userID: "carol", since: version, after: nil, limit: 10)
            #expect(carol.changed.isEmpty && carol.removed.isEmpty)
            let future = try await store.joinedGroupChanges(
                app: app, userID: "bob", since: delta.version + 1, after: nil, limit: 10)
            #expect(future.fullReloadRequired)
        }
    }

    @Test("member search: user id prefix in byte order, name card substring in join order, paged",
          arguments: StoreKind.allCases)
    func searchMembers(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            try await Fixture.create(store, "g1", members: ["ann", "anna", "a%", "bob"])
            try await nameCard(store, "g1", "bob", "Team Lead")
            try await nameCard(store, "g1", "anna", "lead")
            let first = try await store.searchMembers(app: app, groupID: "g1", keyword: "an", field: .userIDPrefix, after: nil, limit: 1)
            #expect(first.items.map(\.userID) == ["ann"] && first.next != nil)
            let second = try await store.searchMembers(
                app: app, groupID: "g1", keyword: "an", field: .userIDPrefix, after: first.next, limit: 1)
            #expect(second.items.map(\.userID) == ["anna"] && second.next == nil)
            let percent = try await store.searchMembers(app: app, groupID: "g1", keyword: "a%", field: .userIDPrefix, after: nil, limit: 10)
            #expect(percent.items.map(\.userID) == ["a%"])
            let cards = try await store.searchMembers(app: app, groupID: "g1", keyword: "LEAD", field: .nameCard, after: nil, limit: 10)
            #expect(cards.items.map(\.userID) == ["anna", "bob"])
            let bad = await Fixture.groupError {
                _ = try await store.searchMembers(app: app, groupID: "g1", keyword: "a", field: .userIDPrefix, after: "zz", limit: 1)
            }
            #expect(bad?.metadata["field"] == "page_token")
        }
    }
}
