import GroupModel
@testable import GroupStore
import GroupStoreSQL
import GroupTestSupport
import Testing

private let t0 = Timestamp(millisecondsSince1970: 1_700_000_000_000)
private let app = "app"

/// Creates a Community `id` owned by `alice` with `members` as ordinary members.
private func createCommunity(_ store: Store, _ id: String, members: [String]) async throws {
    let request = GroupCreationRequest(
        type: .community, groupID: id, name: "community \(id)", members: members.map { InitialMember(userID: $0) })
    _ = try await store.createGroup(try GroupRules.planCreation(request, appID: app, creatorID: "alice", limits: .defaults, now: t0))
}

/// Runs a GroupChange plan on `id` as `alice` naming `targets`.
@discardableResult
private func change(
    _ store: Store, _ id: String, targets: [String] = [], operatorID: String? = "alice",
    _ plan: @escaping @Sendable (GroupSnapshot, GroupOperator) throws -> GroupChange
) async throws -> Committed<Void> {
    try await store.mutateGroup(app: app, groupID: id, operatorID: operatorID, targets: targets, at: t0) { snapshot in
        let op = operatorID.map { GroupOperator.user($0, membership: snapshot.operatorMembership) } ?? .backend
        return (try plan(snapshot, op), ())
    }
}

@Suite("Store conformance: permission groups of communities")
struct StorePermissionGroupTests {
    @Test("permission groups are stored with the community, assignments with the member, both read back on every path",
          arguments: StoreKind.allCases)
    func roundTrip(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        let store = temporary.store
        try await createCommunity(store, "c", members: ["bob", "carol", "dave"])
        let topic = GroupID.generateTopicID(in: "c")
        _ = try await store.mutateTopic(app: app, communityID: "c", topicID: nil, operatorID: "alice", at: t0) { snapshot in
            var created = Group(
                appID: app, id: topic, type: .community, name: "news", settings: snapshot.community.settings,
                ownerID: "alice", maxMembers: nil, createdAt: t0, updatedAt: t0)
            created.parentID = "c"
            return (TopicPlan(write: .create(created), events: []), ())
        }
        // A name and data that need escaping in the stored text.
        let name = "m \"q\"\nl2, ü 🎉"
        let data: [UInt8] = [0, 10, 34, 92, 255]
        try await change(store, "c") { snapshot, op in
            try GroupRules.planPermissionGroupCreation(
                PermissionGroupUpdate(name: name, customData: data, permissions: [.pinMessages, .muteMembers],
                                      topicPermissions: [topic: [.sendMessage, .manageTopics]]),
                id: "PG1", in: snapshot.group, by: op, liveTopics: [topic], limits: .defaults, now: t0).change
        }
        try await change(store, "c") { snapshot, op in
            try GroupRules.planPermissionGroupUpdate(
                PermissionGroupUpdate(topicPermissions: [topic: []]), id: PermissionGroup.everyoneID, in: snapshot.group,
                by: op, liveTopics: [topic], limits: .defaults, now: t0).change
        }
        try await change(store, "c", targets: ["bob", "carol"]) { snapshot, op in
            try GroupRules.planPermissionGroupMembers(
                ["bob", "carol"], adding: true, to: "PG1", in: snapshot.group, by: op, memberships: snapshot.targets,
                limits: .defaults).change
        }

        let community = try #require(try await store.groups(app: app, ids: ["c"])["c"])
        let stored = try #require(community.permissionGroup("PG1"))
        #expect(stored.name == name && stored.customData == data && stored.permissions == [.pinMessages, .muteMembers])
        #expect(stored.topicPermissions == [topic: [.sendMessage, .manageTopics]])
        #expect(community.permissionGroup(PermissionGroup.everyoneID)?.topicPermissions == [topic: []])
        // A topic carries its community's groups; its defaults are read-only.
        let merged = try #require(try await store.groups(app: app, ids: [topic])[topic])
        #expect(merged.permissionGroups == community.permissionGroups && merged.topicDefaults == [])
        let bob = try #require(try await store.memberships(app: app, userID: "bob", groupIDs: ["c"])["c"])
        #expect(bob.permissionGroups == ["PG1"])
        #expect(try await store.memberships(app: app, userID: "dave", groupIDs: ["c"])["c"]?.permissionGroups == [])
        #expect(try await store.permissionAssignments(app: app, groupID: "c")
            == [PermissionAssignment(userID: "bob", permissionGroups: ["PG1"]), PermissionAssignment(userID: "carol", permissionGroups: ["PG1"])])
        // The snapshot of a later mutation sees both, and the permission function grants from them.
        try await change(store, topic, operatorID: "bob") { snapshot, op in
            #expect(snapshot.group.isTopic && op.membership?.permissionGroups == ["PG1"])
            #expect(GroupRules.authorize(.sendMessage, in: snapshot.group, by: op).isAllowed)
            #expect(!GroupRules.authorize(.sendMessage, in: snapshot.group, by: .user("dave", membership: Member(userID: "dave", role: .member, joinedAt: t0))).isAllowed)
            return .unchanged(snapshot.group)
        }

        // Removal, and a quit: the member row goes with its assignments.
        try await change(store, "c", targets: ["bob"]) { snapshot, op in
            try GroupRules.planPermissionGroupMembers(
                ["bob"], adding: false, to: "PG1", in: snapshot.group, by: op, memberships: snapshot.targets,
                limits: .defaults).change
        }
        try await change(store, "c", operatorID: "carol") { snapshot, op in
            try GroupRules.planQuit(snapshot.group, by: op, now: t0).change
        }
        #expect(try await store.permissionAssignments(app: app, groupID: "c").isEmpty)
        #expect(try await store.memberships(app: app, userID: "bob", groupIDs: ["c"])["c"]?.permissionGroups == [])

        // Deletion: the group is gone from the community row.
        try await change(store, "c") { snapshot, op in try GroupRules.planPermissionGroupDeletion("PG1", in: snapshot.group, by: op) }
        let after = try #require(try await store.groups(app: app, ids: ["c"])["c"])
        #expect(after.permissionGroups.map(\.id) == [PermissionGroup.everyoneID])
        await #expect(throws: GroupError.self) { try await store.permissionAssignments(app: app, groupID: "missing") }
    }

    @Test("the stored text of permission groups and assignments reads back what was written; malformed text is refused")
    func coding() throws {
        let groups = [
            PermissionGroup(id: "PG1", name: "a\tb\"c\\d\n", customData: Array(0...255), permissions: .all,
                            topicPermissions: ["c@TOPIC#_X=Y": [], "t2": .sendMessage], createdAt: t0, updatedAt: t0),
            PermissionGroup(id: "everyone", name: "everyone", createdAt: t0, updatedAt: t0),
        ]
        let text = PermissionGroupCoding.encode(groups)
        #expect(PermissionGroupCoding.decode(text) == groups)
        // Decoded and encoded again (the cache's answers): the same values and text.
        #expect(PermissionGroupCoding.decode(text) == groups && PermissionGroupCoding.encode(groups) == text)
        #expect(PermissionGroupCoding.encode([]) == nil && PermissionGroupCoding.decode(nil) == [])
        // Two texts alike in length and in their first and last 64 bytes are told apart.
        func three(_ middle: String) -> [PermissionGroup] {
            [PermissionGroup(id: "PGA", name: "first", createdAt: t0, updatedAt: t0),
             PermissionGroup(id: "PGB", name: middle, createdAt: t0, updatedAt: t0),
             PermissionGroup(id: "PGC", name: "last", createdAt: t0, updatedAt: t0)]
        }
        let (one, other) = (three("aaa"), three("bbb"))
        let (oneText, otherText) = (try #require(PermissionGroupCoding.encode(one)), try #require(PermissionGroupCoding.encode(other)))
        #expect(oneText.utf8.count == otherText.utf8.count && oneText.utf8.prefix(64).elementsEqual(otherText.utf8.prefix(64))
            && oneText.utf8.suffix(64).elementsEqual(otherText.utf8.suffix(64)) && oneText != otherText)
        #expect(PermissionGroupCoding.decode(oneText) == one && PermissionGroupCoding.decode(otherText) == other)
        #expect(PermissionGroupCoding.decode("not json") == nil)
        #expect(PermissionGroupCoding.decode(#"{"id":"x"}"#) == nil)
        #expect(PermissionGroupCoding.decodeAssignments(PermissionGroupCoding.encodeAssignments(["PG1", "PG2"])) == ["PG1", "PG2"])
        #expect(PermissionGroupCoding.encodeAssignments([]) == nil)
    }
}
