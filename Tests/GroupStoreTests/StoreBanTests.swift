import GroupModel
@testable import GroupStore
@testable import GroupStorePostgres
@testable import GroupStoreSQL
@testable import GroupStoreSQLite
import GroupTestSupport
import Testing

private let t0 = Timestamp(millisecondsSince1970: 1_700_000_000_000)

private func at(_ seconds: Int64) -> Timestamp {
    Timestamp(millisecondsSince1970: t0.millisecondsSince1970 + seconds * 1000)
}

private func create(_ store: Store, _ id: String, members: [String]) async throws {
    var request = GroupCreationRequest(type: .public, groupID: id, name: "team",
                                       members: members.map { InitialMember(userID: $0) })
    request.members[0].role = .admin
    _ = try await store.createGroup(
        try GroupRules.planCreation(request, appID: "app-a", creatorID: "alice", limits: .defaults, now: t0))
}

/// Writes `change` made by `plan` over a snapshot of `parts` for `targets`.
@discardableResult
private func write(
    _ store: Store, _ id: String, targets: [String], at time: Timestamp,
    parts: SnapshotRequest.Parts = Store.groupSnapshotParts.union([.banCount, .managers]),
    _ plan: @escaping @Sendable (GroupSnapshot) throws -> GroupChange
) async throws -> Committed<GroupSnapshot> {
    try await store.mutateGroup(app: "app-a", groupID: id, operatorID: nil, targets: targets, at: time, parts: parts) {
        snapshot in (try plan(snapshot), snapshot)
    }
}

@Suite("Store conformance: ban lists and mute bypass lists")
struct StoreBanTests {
    @Test("bans are written, replaced, lifted; the snapshot holds the targets' running bans, the count and the managers",
          arguments: StoreKind.allCases)
    func bans(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            try await create(store, "g1", members: ["bob", "carol"])
            let forever = GroupBan(userID: "dave", until: nil, reason: "spam", operatorID: "alice", bannedAt: t0)
            let brief = GroupBan(userID: "erin", until: at(60), reason: "", operatorID: nil, bannedAt: t0)
            try await write(store, "g1", targets: [], at: t0) { snapshot in
                var change = GroupChange(group: snapshot.group)
                change.bans = [forever, brief]
                return change
            }
            let seen = try await write(store, "g1", targets: ["dave", "erin", "frank"], at: at(1)) { .unchanged($0.group) }
                .value
            #expect(seen.bans == ["dave": forever, "erin": brief])
            #expect(seen.banCount == 2)
            #expect(seen.managers == ["alice", "bob"])

            // Listing: by user id, paged; an ended ban is left out.
            let page = try await store.bans(app: "app-a", groupID: "g1", after: nil, limit: 1, now: at(1))
            #expect(page.items == [forever] && page.next != nil)
            let rest = try await store.bans(app: "app-a", groupID: "g1", after: page.next, limit: 1, now: at(1))
            #expect(rest.items == [brief] && rest.next == nil)
            #expect(try await store.bans(app: "app-a", groupID: "g1", after: nil, limit: 10, now: at(60)).items == [forever])
            let ended = try await write(store, "g1", targets: ["erin"], at: at(60)) { .unchanged($0.group) }.value
            #expect(ended.bans.isEmpty && ended.banCount == 1)

            // Replaced, then lifted.
            let again = GroupBan(userID: "dave", until: at(120), reason: "again", operatorID: "bob", bannedAt: at(61))
            try await write(store, "g1", targets: [], at: at(61)) { snapshot in
                var change = GroupChange(group: snapshot.group)
                change.bans = [again]
                return change
            }
            #expect(try await store.bans(app: "app-a", groupID: "g1", after: nil, limit: 10, now: at(61)).items == [again])
            try await write(store, "g1", targets: [], at: at(62)) { snapshot in
                var change = GroupChange(group: snapshot.group)
                change.liftedBans = ["dave"]
                return change
            }
            #expect(try await store.bans(app: "app-a", groupID: "g1", after: nil, limit: 10, now: at(62)).items.isEmpty)
            let missing = await Fixture.groupError {
                _ = try await store.bans(app: "app-a", groupID: "nope", after: nil, limit: 10, now: t0)
            }
            #expect(missing?.reason == .groupNotFound)
            let otherApp = await Fixture.groupError {
                _ = try await store.bans(app: "app-b", groupID: "g1", after: nil, limit: 10, now: t0)
            }
            #expect(otherApp?.reason == .groupNotFound)
        }
    }

    @Test("a change that adds a user whose ban runs is refused with USER_BANNED and writes nothing; an ended ban is not",
          arguments: StoreKind.allCases)
    func bannedInsertRefused(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            try await create(store, "g1", members: ["bob"])
            try await write(store, "g1", targets: [], at: t0) { snapshot in
                var change = GroupChange(group: snapshot.group)
                change.bans = [GroupBan(userID: "dave", until: at(60), operatorID: nil, bannedAt: t0)]
                return change
            }
            @Sendable func join(_ time: Timestamp) async throws {
                try await write(store, "g1", targets: ["dave"], at: time) { snapshot in
                    var group = snapshot.group
                    group.memberCount += 1
                    let member = Member(userID: "dave", role: .member, joinedAt: time, joinSequence: group.latestSequence)
                    return GroupChange(group: group, insertedMembers: [member],
                                       events: [.init(kind: .memberJoined, operatorID: "dave", targets: ["dave"])])
                }
            }
            let refused = await Fixture.groupError { try await join(at(59)) }
            #expect(refused?.reason == .userBanned && refused?.metadata["user_id"] == "dave")
            #expect(try await store.members(app: "app-a", groupID: "g1", userIDs: ["dave"]).isEmpty)
            #expect(try await store.events(app: "app-a", groupID: "g1", after: 0, limit: 10).count == 1)
            try await join(at(60))
            #expect(try await store.members(app: "app-a", groupID: "g1", userIDs: ["dave"]).keys.sorted() == ["dave"])
        }
    }

    @Test("the mute bypass list persists with the group; a member removed drops off it", arguments: StoreKind.allCases)
    func muteBypass(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            try await create(store, "g1", members: ["bob", "carol"])
            try await write(store, "g1", targets: [], at: t0) { snapshot in
                var group = snapshot.group
                group.muteBypass = ["carol", "bob"]
                return GroupChange(group: group, events: [.init(kind: .muteBypassChanged, operatorID: nil)])
            }
            #expect(try await store.groups(app: "app-a", ids: ["g1"])["g1"]?.muteBypass == ["carol", "bob"])
            try await write(store, "g1", targets: ["carol"], at: at(1)) { snapshot in
                var group = snapshot.group
                group.memberCount -= 1
                return GroupChange(group: group, removedMembers: ["carol"],
                                   events: [.init(kind: .memberKicked, operatorID: nil, targets: ["carol"])])
            }
            #expect(try await store.groups(app: "app-a", ids: ["g1"])["g1"]?.muteBypass == ["bob"])
            let joined = try await store.joinedGroups(app: "app-a", userID: "bob", after: nil, limit: 10)
            #expect(joined.items.first?.group.muteBypass == ["bob"])
        }
    }
}

@Suite("Store migration: ban lists and mute bypass lists on an existing file")
struct StoreBanMigrationTests {
    // An older file is written as a file before v8 (the newest such state the store writes;
    // files stop partway only in tests), then migrated through v11.
    @Test("migration v11 applies on an older file: groups read with an empty bypass list, bans are stored")
    func migrationV11() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("db.sqlite")
        let v7 = Store(backend: try await SQLiteBackend.open(path: path, durability: .full, migratingUpTo: "v7"),
                       cacheCapacity: 0)
        try await create(v7, "g1", members: ["bob", "carol"])
        try await v7.close()

        let store = Store(backend: try await SQLiteBackend.open(path: path), cacheCapacity: 0)
        #expect(try await store.sqlite.appliedMigrations().contains("v11"))
        let group = try #require(try await store.groups(app: "app-a", ids: ["g1"])["g1"])
        #expect(group.muteBypass.isEmpty && group.memberCount == 3)
        try await write(store, "g1", targets: [], at: t0) { snapshot in
            var change = GroupChange(group: snapshot.group)
            change.group.muteBypass = ["carol"]
            change.bans = [GroupBan(userID: "dave", until: nil, operatorID: nil, bannedAt: t0)]
            return change
        }
        #expect(try await store.groups(app: "app-a", ids: ["g1"])["g1"]?.muteBypass == ["carol"])
        #expect(try await store.bans(app: "app-a", groupID: "g1", after: nil, limit: 5, now: t0).items.map(\.userID) == ["dave"])
        try await store.close()
    }
}
