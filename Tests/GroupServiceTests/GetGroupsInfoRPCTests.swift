import GRPCProtocol
import GroupAPI
import GroupModel
import GroupService
import GroupTestSupport
import Testing

/// A group with every profile field set, owned by alice, with bob a member.
private func fullProfileRequest(_ type: Groupd_V1_GroupType, id: String) -> Groupd_V1_CreateGroupRequest {
    var request = createRequest(type, id: id, name: "full", members: type == .avChatRoom ? [] : [("bob", .member)]) {
        $0.introduction = "intro"
        $0.notification = "announcement"
        $0.faceURL = "https://example.com/a.png"
    }
    request.custom = ["k": [1, 2, 3]]
    return request
}

@Suite("GetGroupsInfo, in process")
struct GetGroupsInfoRPCTests {
    @Test("members see the whole group", arguments: [Groupd_V1_GroupType.work, .public, .meeting])
    func membersSeeAll(_ type: Groupd_V1_GroupType) async throws {
        let h = try await ServiceHarness()
        _ = try await h.call(Methods.createGroup, fullProfileRequest(type, id: "g"), as: .user("alice")).get()
        let group = try #require(try await h.read("g", as: .user("bob")))
        #expect(!group.publicViewOnly)
        #expect(group.type == type)
        #expect(group.ownerUserID == "alice")
        #expect(group.memberCount == 2)
        #expect(group.profile?.name == "full")
        #expect(group.profile?.introduction == "intro")
        #expect(group.profile?.notification == "announcement")
        #expect(group.profile?.faceURL == "https://example.com/a.png")
        #expect(group.custom == ["k": [1, 2, 3]])
        #expect(group.settings?.inviteScope != .unspecified)
        #expect(group.settings?.muteScope != .unspecified)
        #expect(group.latestSequence == 1)
        #expect(group.lastInfoTime != nil)
        #expect(group.selfInfo?.userID == "bob")
        #expect(group.selfInfo?.role == .member)
    }

    @Test("a non-member sees only the public subset of Public, Meeting and AVChatRoom groups",
          arguments: [Groupd_V1_GroupType.public, .meeting, .avChatRoom])
    func nonMemberSeesPublicSubset(_ type: Groupd_V1_GroupType) async throws {
        let h = try await ServiceHarness()
        let created = try await h.call(Methods.createGroup, fullProfileRequest(type, id: "g"), as: .user("alice")).get()
        let response = try await h.info(["g"], as: .user("eve"))
        #expect(response.failures.isEmpty)
        let group = try #require(response.groups.first)
        #expect(group.publicViewOnly)
        // Public fields.
        #expect(group.groupID == "g")
        #expect(group.type == type)
        #expect(group.ownerUserID == "alice")
        #expect(group.memberCount == created.group?.memberCount)
        #expect(group.maxMemberCount == created.group?.maxMemberCount)
        #expect(group.createTime == created.group?.createTime)
        #expect(group.profile?.name == "full")
        #expect(group.profile?.introduction == "intro")
        #expect(group.profile?.faceURL == "https://example.com/a.png")
        #expect(group.settings?.joinOption == created.group?.settings?.joinOption)
        #expect(group.custom == ["k": [1, 2, 3]])
        // Members-only fields.
        #expect(group.profile?.notification == "")
        #expect(group.settings?.inviteScope == .unspecified)
        #expect(group.settings?.muteScope == .unspecified)
        #expect(group.latestSequence == 0)
        #expect(group.lastInfoTime == nil)
        #expect(group.selfInfo == nil)
    }

    @Test("a Work group does not exist for a non-member: NOT_FOUND failure, the same as a missing id")
    func workHiddenFromNonMembers() async throws {
        let h = try await ServiceHarness()
        try await h.create(.work, id: "w", as: .user("alice"))
        let hidden = try await h.info(["w"], as: .user("eve"))
        expectLookupFailure(hidden, "w")
        let missing = try await h.info(["nope"], as: .user("eve"))
        expectLookupFailure(missing, "nope")
        #expect(hidden.failures.first?.reason == missing.failures.first?.reason)
        // The same for an admin token acting for a non-member.
        expectLookupFailure(try await h.info(["w"], as: .adminActing(for: "eve")), "w")
    }

    @Test("the backend sees every group whole; acting for a member it sees that member's view")
    func backendView() async throws {
        let h = try await ServiceHarness()
        _ = try await h.call(Methods.createGroup, fullProfileRequest(.work, id: "w"), as: .user("alice")).get()
        let group = try #require(try await h.read("w", as: .admin))
        #expect(!group.publicViewOnly)
        #expect(group.profile?.notification == "announcement")
        #expect(group.selfInfo == nil)
        let acting = try #require(try await h.read("w", as: .adminActing(for: "bob")))
        #expect(acting.selfInfo?.role == .member)
    }

    @Test("a batch answers every id in request order: groups, hidden and missing ones as failures")
    func batch() async throws {
        let h = try await ServiceHarness()
        try await h.create(.work, id: "w-member", members: [("bob", .member)], as: .user("alice"))
        try await h.create(.work, id: "w-hidden", as: .user("alice"))
        try await h.create(.public, id: "p", as: .user("alice"))
        try await h.create(.meeting, id: "m", members: [("bob", .admin)], as: .user("alice"))
        let response = try await h.info(["m", "missing", "w-member", "w-hidden", "p"], as: .user("bob"))
        #expect(response.groups.map(\.groupID) == ["m", "w-member", "p"])
        #expect(response.groups.map(\.publicViewOnly) == [false, false, true])
        #expect(response.groups.map { $0.selfInfo?.role } == [.admin, .member, nil])
        #expect(response.failures.map(\.groupID) == ["missing", "w-hidden"])
        #expect(response.failures.allSatisfy { $0.error == .notFound && $0.reason == "GROUP_NOT_FOUND" })
    }

    @Test("a malformed id is reported as INVALID_ID / INVALID_ARGUMENT, as group.proto documents",
          .bug(id: "groupd-tests-3", "GetGroupsInfo never sends GROUP_LOOKUP_ERROR_INVALID_ID"))
    func malformedIDs() async throws {
        let h = try await ServiceHarness()
        try await h.create(.public, id: "p", as: .user("alice"))
        let long = String(repeating: "x", count: 49)
        let response = try await h.info(["", long, "has space", "p", "missing"], as: .user("alice"))
        #expect(response.groups.map(\.groupID) == ["p"])
        #expect(response.failures.map(\.groupID) == ["", long, "has space", "missing"])
        #expect(response.failures.map(\.error) == [.invalidID, .invalidID, .invalidID, .notFound])
        #expect(response.failures.map(\.reason) == ["INVALID_ARGUMENT", "INVALID_ARGUMENT", "INVALID_ARGUMENT", "GROUP_NOT_FOUND"])
    }

    @Test("duplicate ids are read once")
    func duplicates() async throws {
        let h = try await ServiceHarness()
        try await h.create(.public, id: "p", as: .user("alice"))
        let response = try await h.info(["p", "p", "missing", "p", "missing"], as: .user("alice"))
        #expect(response.groups.map(\.groupID) == ["p"])
        #expect(response.failures.map(\.groupID) == ["missing"])
    }

    @Test("an empty list is INVALID_ARGUMENT on group_ids")
    func emptyList() async throws {
        let h = try await ServiceHarness()
        let outcome = try await h.call(Methods.getGroupsInfo, .with { $0.groupIds = [] }, as: .user("alice"))
        expectFailure(outcome, .invalidArgument, reason: "INVALID_ARGUMENT", field: "group_ids")
    }

    @Test("50 distinct ids are served; 51 are INVALID_ARGUMENT naming the limit; duplicates do not count")
    func overLimit() async throws {
        let h = try await ServiceHarness()
        try await h.create(.public, id: "g0", as: .user("alice"))
        let fifty = (0..<50).map { "g\($0)" }
        let ok = try await h.info(fifty, as: .user("alice"))
        #expect(ok.groups.map(\.groupID) == ["g0"])
        #expect(ok.failures.count == 49)
        let outcome = try await h.call(Methods.getGroupsInfo, .with { $0.groupIds = fifty + ["g50"] }, as: .user("alice"))
        expectFailure(outcome, .invalidArgument, reason: "INVALID_ARGUMENT", field: "group_ids", limit: 50)
        let repeated = try await h.info(fifty + fifty, as: .user("alice"))
        #expect(repeated.groups.count + repeated.failures.count == 50)
    }

    @Test("member count and owner are right for user- and backend-created groups")
    func memberCountAndOwner() async throws {
        let h = try await ServiceHarness()
        try await h.create(.public, id: "by-user", members: [("bob", .admin), ("carol", .member)], as: .user("alice"))
        try await h.create(
            .meeting, id: "by-admin", members: [("alice", .member), ("carol", .member), ("dave", .admin)], owner: "bob",
            as: .admin)
        try await h.create(.avChatRoom, id: "room", as: .user("erin"))
        let response = try await h.info(["by-user", "by-admin", "room"], as: .user("carol"))
        #expect(response.groups.map(\.memberCount) == [3, 4, 1])
        #expect(response.groups.map(\.ownerUserID) == ["alice", "bob", "erin"])
    }

    @Test("another app's groups do not exist, even for its backend")
    func crossApp() async throws {
        let h = try await ServiceHarness()
        try await h.create(.public, id: "p", as: .user("alice"))
        expectLookupFailure(try await h.info(["p"], as: .admin(app: TestApps.appB)), "p")
        expectLookupFailure(try await h.info(["p"], as: .user("alice", app: TestApps.appB)), "p")
    }
}
