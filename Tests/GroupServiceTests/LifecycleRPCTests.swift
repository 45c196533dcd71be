import GRPCProtocol
import GroupAPI
import GroupModel
import GroupService
import GroupStore
import GroupTestSupport
import Testing

private typealias MemberMethods = Groupd_V1_MemberService.Method

private func stamp(_ seconds: Int64) -> Google_Protobuf_Timestamp {
    .with { $0.seconds = seconds }
}

/// An ImportGroup request for a Public group `id` owned by `owner`.
private func importRequest(
    _ id: String, type: Groupd_V1_GroupType = .public, owner: String = "olivia",
    members: [Groupd_V1_ImportedMember] = [], created: Int64? = nil
) -> Groupd_V1_ImportGroupRequest {
    .with {
        $0.groupID = id
        $0.type = type
        $0.profile = .with { $0.name = "imported" }
        $0.ownerUserID = owner
        $0.members = members
        if let created { $0.createTime = stamp(created) }
    }
}

private func imported(
    _ user: String, _ role: Groupd_V1_MemberRole = .member, joined: Int64? = nil, card: String = "",
    muteUntil: Int64? = nil
) -> Groupd_V1_ImportedMember {
    .with {
        $0.userID = user
        $0.role = role
        if let joined { $0.joinTime = stamp(joined) }
        $0.nameCard = card
        if let muteUntil { $0.muteUntil = stamp(muteUntil) }
    }
}

/// A harness whose app-a lets a user be in at most `limit` groups.
private func limitedHarness(_ limit: Int) async throws -> ServiceHarness {
    var configuration = TestApps.configuration()
    configuration.apps[0].limits.maxGroupsPerUser = limit
    return try await ServiceHarness(configuration: configuration)
}

@Suite("RevokeGroup, ImportGroup, joined-groups limit at creation, listing counts, in process")
struct LifecycleRPCTests {
    // MARK: RevokeGroup

    @Test("RevokeGroup: the backend revokes any type with one GROUP_REVOKED carrying the reason; the group is gone",
          arguments: [Groupd_V1_GroupType.work, .public, .meeting, .avChatRoom])
    func revoke(_ type: Groupd_V1_GroupType) async throws {
        let h = try await ServiceHarness()
        let members: [(String, Groupd_V1_MemberRole)] = type == .avChatRoom ? [] : [("mia", .member)]
        try await h.create(type, id: "g-1", members: members, owner: "olivia", as: .admin)
        _ = try await h.ok(Methods.revokeGroup, .with { $0.groupID = "g-1"; $0.reason = "spam" }, as: .admin)
        let events = try await h.events("g-1")
        #expect(events.map(\.kind) == [.groupCreated, .groupRevoked])
        #expect(events.last?.changes == ["reason": "spam"])
        #expect(events.last?.operatorID == nil)
        try await expectNoGroup(h, "g-1")
        expectFailure(try await h.call(Methods.revokeGroup, .with { $0.groupID = "g-1" }, as: .admin),
                      .notFound, reason: "GROUP_NOT_FOUND")
        // The id stays reserved, as after DismissGroup.
        expectFailure(try await h.call(Methods.createGroup, createRequest(type, id: "g-1", owner: "olivia"), as: .admin),
                      .alreadyExists, reason: "GROUP_ID_TAKEN")
    }

    @Test("RevokeGroup refusals: users (even the owner), an admin token acting for a user, a missing group, an oversize reason")
    func revokeRefusals() async throws {
        let h = try await ServiceHarness()
        try await h.create(.public, id: "g-1", members: [("mia", .member)], owner: "olivia", as: .admin)
        for identity in [TestIdentity.user("olivia"), .user("mia"), .user("nora"), .adminActing(for: "olivia")] {
            expectFailure(try await h.call(Methods.revokeGroup, .with { $0.groupID = "g-1" }, as: identity),
                          .permissionDenied, reason: "ADMIN_TOKEN_REQUIRED")
        }
        // A user learns nothing about ids: the same answer for a missing group.
        expectFailure(try await h.call(Methods.revokeGroup, .with { $0.groupID = "missing" }, as: .user("olivia")),
                      .permissionDenied, reason: "ADMIN_TOKEN_REQUIRED")
        expectFailure(try await h.call(Methods.revokeGroup, .with { $0.groupID = "missing" }, as: .admin),
                      .notFound, reason: "GROUP_NOT_FOUND")
        expectFailure(try await h.call(Methods.revokeGroup, .with { $0.groupID = "" }, as: .admin),
                      .invalidArgument, reason: "INVALID_ARGUMENT", field: "group_id")
        expectFailure(try await h.call(Methods.revokeGroup, .with { $0.groupID = "g-1"; $0.reason = bytes(101) }, as: .admin),
                      .invalidArgument, reason: "INVALID_ARGUMENT", field: "reason", limit: 100)
        expectFailure(try await h.call(Methods.revokeGroup, .with { $0.groupID = "g-1" }, as: .admin(app: TestApps.appB)),
                      .notFound, reason: "GROUP_NOT_FOUND")
        #expect(try await h.events("g-1").map(\.kind) == [.groupCreated])
        #expect(try await h.read("g-1", as: .admin)?.memberCount == 2)
    }

    @Test("RevokeGroup of an AVChatRoom drops the node's audience")
    func revokeRoom() async throws {
        let h = try await ServiceHarness()
        try await h.create(.avChatRoom, id: "room", owner: "host", as: .admin)
        _ = try await h.ok(MemberMethods.joinGroup, .with { $0.groupID = "room" }, as: .user("mia"))
        #expect(try await h.audienceCount("room") == 2)
        _ = try await h.ok(Methods.revokeGroup, .with { $0.groupID = "room" }, as: .admin)
        try await h.create(.avChatRoom, id: "room-2", owner: "host", as: .admin)
        #expect(try await h.audienceCount("room-2") == 1)
        try await expectNoGroup(h, "room")
    }

    // MARK: ImportGroup

    @Test("ImportGroup keeps ids, roles, join times, name cards, mutes and the creation time; emits GROUP_CREATED to the owner only")
    func importGroup() async throws {
        let h = try await ServiceHarness()
        let response = try await h.ok(Methods.importGroup, importRequest("legacy-1", members: [
            imported("bob", joined: 1_600_000_300, card: "Bob"),
            imported("olivia", .owner, joined: 1_600_000_100, card: "Boss"),
            imported("adam", .admin, joined: 1_600_000_200, muteUntil: 4_000_000_000),
        ], created: 1_600_000_000), as: .admin)
        let group = try #require(response.group)
        #expect(group.groupID == "legacy-1")
        #expect(group.memberCount == 3)
        #expect(group.ownerUserID == "olivia")
        #expect(group.createTime?.seconds == 1_600_000_000)
        #expect(response.memberResults.map(\.userID) == ["olivia", "adam", "bob"])
        #expect(response.memberResults.allSatisfy { $0.result == .success })
        let listed = try await h.ok(MemberMethods.listMembers, .with { $0.groupID = "legacy-1" }, as: .admin)
        #expect(listed.members.map(\.userID) == ["olivia", "adam", "bob"])
        #expect(listed.members.map(\.role) == [.owner, .admin, .member])
        #expect(listed.members.map { $0.joinTime?.seconds } == [1_600_000_100, 1_600_000_200, 1_600_000_300])
        #expect(listed.members.map(\.nameCard) == ["Boss", "", "Bob"])
        #expect(listed.members[1].muteUntil?.seconds == 4_000_000_000)
        let events = try await h.events("legacy-1")
        #expect(events.map(\.kind) == [.groupCreated])
        #expect(events.first?.recipient == .user("olivia"))
        #expect(events.first?.targets == ["olivia"])
        // Imported groups are ordinary groups afterwards.
        let joined = try await h.ok(Methods.listJoinedGroups, .init(), as: .user("bob"))
        #expect(joined.groups.map(\.groupID) == ["legacy-1"])
    }

    @Test("ImportGroup adds an unlisted owner; an AVChatRoom may be imported ownerless")
    func importDefaults() async throws {
        let h = try await ServiceHarness()
        let response = try await h.ok(Methods.importGroup, importRequest("legacy-2", members: [imported("bob")]), as: .admin)
        #expect(response.group?.memberCount == 2)
        #expect(response.memberResults.map(\.userID) == ["bob"])
        let room = try await h.ok(Methods.importGroup, importRequest("room", type: .avChatRoom, owner: ""), as: .admin)
        #expect(room.group?.ownerUserID == "")
        #expect(try await h.events("room").first?.recipient == .group)
    }

    @Test("ImportGroup refusals: not the backend, a taken id, no id, a wrong OWNER, future times, the creation limits")
    func importRefusals() async throws {
        let h = try await ServiceHarness()
        try await h.create(.public, id: "taken", owner: "olivia", as: .admin)
        for identity in [TestIdentity.user("olivia"), .adminActing(for: "olivia")] {
            expectFailure(try await h.call(Methods.importGroup, importRequest("new"), as: identity),
                          .permissionDenied, reason: "ADMIN_TOKEN_REQUIRED")
        }
        expectFailure(try await h.call(Methods.importGroup, importRequest("taken"), as: .admin),
                      .alreadyExists, reason: "GROUP_ID_TAKEN")
        expectFailure(try await h.call(Methods.importGroup, importRequest(""), as: .admin),
                      .invalidArgument, reason: "INVALID_ARGUMENT", field: "group_id")
        expectFailure(try await h.call(Methods.importGroup, importRequest("new", members: [imported("bob"), imported("mallory", .owner)]), as: .admin),
                      .invalidArgument, reason: "INVALID_ARGUMENT", field: "members[1].role")
        expectFailure(try await h.call(Methods.importGroup, importRequest("new", members: [imported("bob"), imported("bob")]), as: .admin),
                      .invalidArgument, reason: "INVALID_ARGUMENT", field: "members[1].user_id")
        expectFailure(try await h.call(Methods.importGroup, importRequest("new", type: .work, members: [imported("bob", .admin)]), as: .admin),
                      .invalidArgument, reason: "INVALID_ARGUMENT", field: "members[0].role")
        expectFailure(try await h.call(Methods.importGroup, importRequest("new", members: [imported("bob", card: bytes(51))]), as: .admin),
                      .invalidArgument, reason: "INVALID_ARGUMENT", field: "members[0].name_card", limit: 50)
        expectFailure(try await h.call(Methods.importGroup, importRequest("new", members: [imported("bob", joined: 9_999_999_999)]), as: .admin),
                      .invalidArgument, reason: "INVALID_ARGUMENT", field: "members[0].join_time")
        expectFailure(try await h.call(Methods.importGroup, importRequest("new", created: 9_999_999_999), as: .admin),
                      .invalidArgument, reason: "INVALID_ARGUMENT", field: "create_time")
        expectFailure(try await h.call(Methods.importGroup, importRequest("new", owner: ""), as: .admin),
                      .invalidArgument, reason: "INVALID_ARGUMENT", field: "owner_user_id")
        var oversize = importRequest("new")
        oversize.profile = .with { $0.name = bytes(31) }
        expectFailure(try await h.call(Methods.importGroup, oversize, as: .admin),
                      .invalidArgument, reason: "INVALID_ARGUMENT", field: "profile.name", limit: 30)
        try await expectNoGroup(h, "new")
    }

    // MARK: TOO_MANY_GROUPS at creation

    @Test("CreateGroup: an owner at max_groups_per_user is refused as a whole; members at it are left out (FAILED / TOO_MANY_GROUPS)")
    func creationLimit() async throws {
        let h = try await limitedHarness(2)
        try await h.create(.public, id: "a", members: [("mia", .member)], owner: "olivia", as: .admin)
        try await h.create(.work, id: "b", members: [("mia", .member)], owner: "olivia", as: .admin)
        // AVChatRoom memberships do not count.
        try await h.create(.avChatRoom, id: "room", owner: "olivia", as: .admin)
        let refused = try await h.call(Methods.createGroup, createRequest(.public, id: "c"), as: .user("olivia"))
        let info = expectFailure(refused, .failedPrecondition, reason: "TOO_MANY_GROUPS")
        #expect(info?.metadata["user_id"] == "olivia")
        #expect(info?.metadata["limit"] == "2")
        try await expectNoGroup(h, "c")

        let response = try await h.ok(
            Methods.createGroup, createRequest(.public, id: "d", members: [("mia", .member), ("bob", .admin)]), as: .user("nora"))
        #expect(response.group?.memberCount == 2)
        #expect(response.memberResults.map(\.userID) == ["mia", "bob"])
        #expect(response.memberResults.map(\.result) == [.failed, .success])
        #expect(response.memberResults.first?.reason == "TOO_MANY_GROUPS")
        let listed = try await h.ok(MemberMethods.listMembers, .with { $0.groupID = "d" }, as: .admin)
        #expect(listed.members.map(\.userID) == ["nora", "bob"])
        let events = try await h.events("d")
        #expect(events.first?.targets == ["nora", "bob"])
        // An AVChatRoom is not counted, so it may still be created by a user at the limit.
        try await h.create(.avChatRoom, id: "room-2", as: .user("olivia"))
        // Dismissing frees a place.
        _ = try await h.ok(Methods.dismissGroup, .with { $0.groupID = "a" }, as: .admin)
        try await h.create(.public, id: "e", as: .user("olivia"))
    }

    @Test("ImportGroup applies the same limit: owner refused as a whole, members left out")
    func importLimit() async throws {
        let h = try await limitedHarness(1)
        try await h.create(.public, id: "a", members: [("mia", .member)], owner: "olivia", as: .admin)
        expectFailure(try await h.call(Methods.importGroup, importRequest("x", owner: "olivia"), as: .admin),
                      .failedPrecondition, reason: "TOO_MANY_GROUPS")
        let response = try await h.ok(Methods.importGroup, importRequest("y", owner: "nora", members: [imported("mia"), imported("bob")]), as: .admin)
        #expect(response.memberResults.map(\.result) == [.failed, .success])
        #expect(response.group?.memberCount == 2)
    }

    @Test("the limit is checked inside the creating transaction: concurrent creations never exceed it")
    func creationLimitUnderConcurrency() async throws {
        let h = try await limitedHarness(3)
        let outcomes = try await withThrowingTaskGroup(of: GRPCStatus.Code.self) { group in
            for index in 0..<12 {
                group.addTask {
                    try await h.call(Methods.createGroup, createRequest(.public, id: "c-\(index)"), as: .user("olivia")).code
                }
            }
            var codes: [GRPCStatus.Code] = []
            for try await code in group { codes.append(code) }
            return codes
        }
        #expect(outcomes.filter { $0 == .ok }.count == 3)
        #expect(outcomes.filter { $0 == .failedPrecondition }.count == 9)
        let joined = try await h.ok(Methods.listJoinedGroups, .init(), as: .user("olivia"))
        #expect(joined.totalCount == 3)
    }

    // MARK: Listings

    @Test("ListJoinedGroups.total_count: every joined group of the requested types, whatever the page size")
    func totalCount() async throws {
        let h = try await ServiceHarness()
        try await h.create(.work, id: "w", members: [("mia", .member)], owner: "olivia", as: .admin)
        try await h.create(.public, id: "p", members: [("mia", .member)], owner: "olivia", as: .admin)
        try await h.create(.meeting, id: "m", members: [("mia", .member)], owner: "olivia", as: .admin)
        try await h.create(.public, id: "gone", members: [("mia", .member)], owner: "olivia", as: .admin)
        try await h.create(.avChatRoom, id: "room", owner: "host", as: .admin)
        _ = try await h.ok(MemberMethods.joinGroup, .with { $0.groupID = "room" }, as: .user("mia"))
        _ = try await h.ok(Methods.dismissGroup, .with { $0.groupID = "gone" }, as: .admin)
        let page = try await h.ok(Methods.listJoinedGroups, .with { $0.pageSize = 1 }, as: .user("mia"))
        #expect(page.groups.count == 1)
        #expect(page.totalCount == 3)
        let typed = try await h.ok(Methods.listJoinedGroups, .with { $0.types = [.public, .meeting] }, as: .user("mia"))
        #expect(typed.totalCount == 2)
        let none = try await h.ok(Methods.listJoinedGroups, .init(), as: .user("stranger"))
        #expect(none.totalCount == 0)
        // The owner of an AVChatRoom is stored, but AVChatRooms are never listed nor counted.
        let host = try await h.ok(Methods.listJoinedGroups, .init(), as: .user("host"))
        #expect(host.groups.isEmpty && host.totalCount == 0)
        let rooms = try await h.ok(Methods.listJoinedGroups, .with { $0.types = [.avChatRoom] }, as: .user("host"))
        #expect(rooms.groups.isEmpty && rooms.totalCount == 0)
    }

    @Test("SearchGroups MEMBER_NAME_CARD returns the members whose name card matched, in joined groups only")
    func matchedMembers() async throws {
        let h = try await ServiceHarness()
        try await h.create(.work, id: "w", members: [("mia", .member), ("bob", .member), ("carl", .member)], owner: "olivia", as: .admin)
        try await h.create(.public, id: "p", members: [("bob", .member)], owner: "olivia", as: .admin)
        for (group, user, card) in [("w", "bob", "Banana Bob"), ("w", "carl", "banana split"), ("w", "mia", "Mia"), ("p", "bob", "banana")] {
            _ = try await h.ok(MemberMethods.updateMemberInfo, .with {
                $0.groupID = group; $0.userID = user; $0.updateMask = ServiceHarness.mask("name_card"); $0.nameCard = card
            }, as: .admin)
        }
        let search = try await h.ok(Methods.searchGroups, .with { $0.keyword = "banana"; $0.fields = [.memberNameCard] }, as: .user("mia"))
        #expect(search.results.compactMap { $0.group?.groupID } == ["w"])
        let hit = try #require(search.results.first)
        #expect(hit.matchedFields == [.memberNameCard])
        #expect(hit.matchedMembers.map(\.userID) == ["bob", "carl"])
        #expect(hit.matchedMembers.map(\.nameCard) == ["Banana Bob", "banana split"])
        // Without MEMBER_NAME_CARD nothing is matched by name cards.
        let plain = try await h.ok(Methods.searchGroups, .with { $0.keyword = "banana" }, as: .user("mia"))
        #expect(plain.results.isEmpty)
        // A non-member of the Public group does not see its members' cards.
        let stranger = try await h.ok(Methods.searchGroups, .with { $0.keyword = "banana"; $0.fields = [.memberNameCard] }, as: .user("nora"))
        #expect(stranger.results.isEmpty)
    }
}
