import GRPCProtocol
import GroupAPI
import GroupModel
import GroupService
import GroupStore
import GroupTestSupport
import Testing

private typealias Members = Groupd_V1_MemberService.Method

/// Every MemberService method through the router, in process: success and main refusal.
@Suite("Member operations, in process")
struct MemberRPCTests {
    static func publicGroup(_ h: ServiceHarness, id: String = "pub-1") async throws {
        try await h.create(.public, id: id, name: "Public one", members: [("adam", .admin), ("mia", .member)], owner: "owner", as: .admin)
    }

    @Test("JoinGroup: Meeting joins at once; Public (approval) is pending; forbidden, already a member and a Work group are refused")
    func join() async throws {
        let h = try await ServiceHarness()
        try await h.create(.meeting, id: "meet-1", owner: "owner", as: .admin)
        let joined = try await h.ok(Members.joinGroup, .with { $0.groupID = "meet-1" }, as: .user("zoe"))
        #expect(joined.outcome == .joined)
        #expect(joined.member?.userID == "zoe")
        #expect(joined.member?.role == .member)
        expectFailure(try await h.call(Members.joinGroup, .with { $0.groupID = "meet-1" }, as: .user("zoe")),
                      .alreadyExists, reason: "ALREADY_MEMBER")

        try await MemberRPCTests.publicGroup(h)
        let pending = try await h.ok(Members.joinGroup, .with { $0.groupID = "pub-1"; $0.message = "let me in" }, as: .user("zoe"))
        #expect(pending.outcome == .pendingApproval)
        #expect(pending.member == nil)
        #expect(try await h.events("pub-1").last?.kind == .joinApplicationReceived)

        _ = try await h.ok(Methods.updateGroupSettings, .with {
            $0.groupID = "pub-1"; $0.updateMask = ServiceHarness.mask("join_option"); $0.settings = .with { $0.joinOption = .forbidden }
        }, as: .user("owner"))
        expectFailure(try await h.call(Members.joinGroup, .with { $0.groupID = "pub-1" }, as: .user("zoe")),
                      .permissionDenied, reason: "JOIN_FORBIDDEN")

        try await h.create(.work, id: "work-1", owner: "owner", as: .admin)
        expectFailure(try await h.call(Members.joinGroup, .with { $0.groupID = "work-1" }, as: .user("zoe")),
                      .notFound, reason: "GROUP_NOT_FOUND")
        expectFailure(try await h.call(Members.joinGroup, .with { $0.groupID = "meet-1" }, as: .admin),
                      .invalidArgument, reason: "OPERATOR_REQUIRED")
    }

    @Test("JoinGroup: a full group is GROUP_FULL")
    func joinFull() async throws {
        let h = try await ServiceHarness()
        try await h.create(.meeting, id: "meet-1", owner: "owner", as: .admin)
        _ = try await h.ok(Methods.updateGroupSettings, .with {
            $0.groupID = "meet-1"; $0.updateMask = ServiceHarness.mask("max_member_count"); $0.maxMemberCount = 1
        }, as: .admin)
        expectFailure(try await h.call(Members.joinGroup, .with { $0.groupID = "meet-1" }, as: .user("zoe")),
                      .failedPrecondition, reason: "GROUP_FULL")
    }

    @Test("QuitGroup: a member leaves; a Work owner hands over; a Public owner may not; the last member dismisses")
    func quit() async throws {
        let h = try await ServiceHarness()
        try await MemberRPCTests.publicGroup(h)
        let left = try await h.ok(Members.quitGroup, .with { $0.groupID = "pub-1" }, as: .user("mia"))
        #expect(left.newOwnerUserID == "" && !left.groupDismissed)
        expectFailure(try await h.call(Members.quitGroup, .with { $0.groupID = "pub-1" }, as: .user("mia")),
                      .permissionDenied, reason: "NOT_A_MEMBER")
        expectFailure(try await h.call(Members.quitGroup, .with { $0.groupID = "pub-1" }, as: .user("owner")),
                      .failedPrecondition, reason: "OWNER_CANNOT_QUIT")

        try await h.create(.work, id: "work-1", members: [("first", .member), ("second", .member)], owner: "owner", as: .admin)
        let handed = try await h.ok(Members.quitGroup, .with { $0.groupID = "work-1" }, as: .user("owner"))
        #expect(handed.newOwnerUserID == "first")
        #expect(try await h.read("work-1", as: .user("first"))?.ownerUserID == "first")

        try await h.create(.work, id: "work-2", owner: "solo", as: .admin)
        let last = try await h.ok(Members.quitGroup, .with { $0.groupID = "work-2" }, as: .user("solo"))
        #expect(last.groupDismissed)
        try await expectNoGroup(h, "work-2")
    }

    @Test("InviteMembers: a result per user in a Work group; Meeting members may not invite; AVChatRoom takes no invitations")
    func invite() async throws {
        let h = try await ServiceHarness()
        try await h.create(.work, id: "work-1", members: [("mia", .member)], owner: "owner", as: .admin)
        let response = try await h.ok(Members.inviteMembers, .with {
            $0.groupID = "work-1"; $0.userIds = ["new1", "owner", "", "new1"]
        }, as: .user("mia"))
        #expect(response.results.map(\.result) == [.success, .alreadyMember, .invalid, .invalid])
        #expect(response.results.first?.member?.userID == "new1")
        #expect(try await h.read("work-1", as: .user("new1"))?.memberCount == 3)

        try await h.create(.meeting, id: "meet-1", members: [("mia", .member)], owner: "owner", as: .admin)
        expectFailure(try await h.call(Members.inviteMembers, .with { $0.groupID = "meet-1"; $0.userIds = ["x"] }, as: .user("mia")),
                      .permissionDenied, reason: "PERMISSION_DENIED")
        try await h.create(.avChatRoom, id: "room-1", owner: "host", as: .admin)
        expectFailure(try await h.call(Members.inviteMembers, .with { $0.groupID = "room-1"; $0.userIds = ["x"] }, as: .user("host")),
                      .failedPrecondition, reason: "INVITE_NOT_SUPPORTED")
        expectFailure(try await h.call(Members.inviteMembers, .with { $0.groupID = "work-1" }, as: .user("mia")),
                      .invalidArgument, reason: "INVALID_ARGUMENT", field: "user_ids")
    }

    @Test("InviteMembers in a Public group: an admin's invitation waits for the invitee (PENDING)")
    func invitePending() async throws {
        let h = try await ServiceHarness()
        try await MemberRPCTests.publicGroup(h)
        let response = try await h.ok(Members.inviteMembers, .with { $0.groupID = "pub-1"; $0.userIds = ["zoe"] }, as: .user("adam"))
        #expect(response.results.map(\.result) == [.pending])
        let direct = try await h.ok(Members.inviteMembers, .with { $0.groupID = "pub-1"; $0.userIds = ["zoe"] }, as: .admin)
        #expect(direct.results.map(\.result) == [.success])
    }

    @Test("KickMembers: the owner removes; an admin cannot remove the owner (per user); AVChatRoom is KICK_NOT_SUPPORTED")
    func kick() async throws {
        let h = try await ServiceHarness()
        try await MemberRPCTests.publicGroup(h)
        let byAdmin = try await h.ok(Members.kickMembers, .with {
            $0.groupID = "pub-1"; $0.userIds = ["owner", "ghost", "mia"]; $0.reason = "spam"
        }, as: .user("adam"))
        #expect(byAdmin.results.map(\.result) == [.failed, .notMember, .success])
        #expect(byAdmin.results.first?.reason == "TARGET_IS_OWNER")
        #expect(try await h.read("pub-1", as: .user("adam"))?.memberCount == 2)
        expectFailure(try await h.call(Members.kickMembers, .with { $0.groupID = "pub-1"; $0.userIds = ["adam"] }, as: .user("mia")),
                      .permissionDenied, reason: "NOT_A_MEMBER")
        try await h.create(.avChatRoom, id: "room-1", owner: "host", as: .admin)
        expectFailure(try await h.call(Members.kickMembers, .with { $0.groupID = "room-1"; $0.userIds = ["x"] }, as: .user("host")),
                      .failedPrecondition, reason: "KICK_NOT_SUPPORTED")
    }

    @Test("ListMembers: pages in join order with a cursor, role filters; a Work group is hidden from non-members")
    func listMembers() async throws {
        let h = try await ServiceHarness()
        try await h.create(.public, id: "pub-1", members: [("adam", .admin), ("m1", .member), ("m2", .member), ("m3", .member)],
                           owner: "owner", as: .admin)
        var seen: [String] = []
        var token = ""
        repeat {
            let page = try await h.ok(Members.listMembers, .with { $0.groupID = "pub-1"; $0.pageSize = 2; $0.pageToken = token }, as: .user("m1"))
            #expect(page.members.count <= 2)
            #expect(page.memberCount == 5)
            seen += page.members.map(\.userID)
            token = page.nextPageToken
        } while !token.isEmpty
        #expect(seen == ["owner", "adam", "m1", "m2", "m3"])
        let owners = try await h.ok(Members.listMembers, .with { $0.groupID = "pub-1"; $0.filter = .owner }, as: .user("m1"))
        #expect(owners.members.map(\.userID) == ["owner"])
        let admins = try await h.ok(Members.listMembers, .with { $0.groupID = "pub-1"; $0.filter = .admins }, as: .admin)
        #expect(admins.members.map(\.userID) == ["adam"])
        let ordinary = try await h.ok(Members.listMembers, .with { $0.groupID = "pub-1"; $0.filter = .ordinary; $0.pageSize = 500 }, as: .admin)
        #expect(ordinary.members.map(\.userID) == ["m1", "m2", "m3"])
        expectFailure(try await h.call(Members.listMembers, .with { $0.groupID = "pub-1"; $0.pageSize = -1 }, as: .user("m1")),
                      .invalidArgument, reason: "INVALID_ARGUMENT", field: "page_size")
        try await h.create(.work, id: "work-1", owner: "owner", as: .admin)
        expectFailure(try await h.call(Members.listMembers, .with { $0.groupID = "work-1" }, as: .user("m1")),
                      .notFound, reason: "GROUP_NOT_FOUND")
    }

    @Test("GetMembersInfo: SUCCESS, NOT_MEMBER and INVALID per user; an empty list is refused")
    func membersInfo() async throws {
        let h = try await ServiceHarness()
        try await MemberRPCTests.publicGroup(h)
        let response = try await h.ok(Members.getMembersInfo, .with { $0.groupID = "pub-1"; $0.userIds = ["adam", "ghost", "", "adam"] }, as: .user("mia"))
        #expect(response.results.map(\.result) == [.success, .notMember, .invalid, .invalid])
        #expect(response.results.first?.member?.role == .admin)
        expectFailure(try await h.call(Members.getMembersInfo, .with { $0.groupID = "pub-1" }, as: .user("mia")),
                      .invalidArgument, reason: "INVALID_ARGUMENT", field: "user_ids")
    }

    @Test("GetSelfMemberInfo: the record and the remark; a non-member and the bare backend are refused")
    func selfInfo() async throws {
        let h = try await ServiceHarness()
        try await MemberRPCTests.publicGroup(h)
        _ = try await h.ok(Members.setGroupRemark, .with { $0.groupID = "pub-1"; $0.remark = "fans" }, as: .user("mia"))
        let me = try await h.ok(Members.getSelfMemberInfo, .with { $0.groupID = "pub-1" }, as: .user("mia"))
        #expect(me.member?.userID == "mia")
        #expect(me.remark == "fans")
        let other = try await h.ok(Members.getSelfMemberInfo, .with { $0.groupID = "pub-1" }, as: .user("adam"))
        #expect(other.remark == "")
        expectFailure(try await h.call(Members.getSelfMemberInfo, .with { $0.groupID = "pub-1" }, as: .user("zoe")),
                      .permissionDenied, reason: "NOT_A_MEMBER")
        expectFailure(try await h.call(Members.getSelfMemberInfo, .with { $0.groupID = "pub-1" }, as: .admin),
                      .invalidArgument, reason: "OPERATOR_REQUIRED")
    }

    @Test("SetMemberRole: the owner promotes and demotes; an admin may not; Work has no admins; nobody changes the owner")
    func setRole() async throws {
        let h = try await ServiceHarness()
        try await MemberRPCTests.publicGroup(h)
        let promoted = try await h.ok(Members.setMemberRole, .with { $0.groupID = "pub-1"; $0.userID = "mia"; $0.role = .admin }, as: .user("owner"))
        #expect(promoted.member?.role == .admin)
        let kinds = try await h.events("pub-1").suffix(2).map(\.kind)
        #expect(kinds == [.adminSet, .adminGranted])
        expectFailure(try await h.call(Members.setMemberRole, .with { $0.groupID = "pub-1"; $0.userID = "mia"; $0.role = .member }, as: .user("adam")),
                      .permissionDenied, reason: "PERMISSION_DENIED")
        expectFailure(try await h.call(Members.setMemberRole, .with { $0.groupID = "pub-1"; $0.userID = "mia" }, as: .user("owner")),
                      .invalidArgument, reason: "INVALID_ARGUMENT", field: "role")
        expectFailure(try await h.call(Members.setMemberRole, .with { $0.groupID = "pub-1"; $0.userID = "ghost"; $0.role = .admin }, as: .user("owner")),
                      .notFound, reason: "MEMBER_NOT_FOUND")
        try await h.create(.work, id: "work-1", members: [("mia", .member)], owner: "owner", as: .admin)
        expectFailure(try await h.call(Members.setMemberRole, .with { $0.groupID = "work-1"; $0.userID = "mia"; $0.role = .admin }, as: .user("owner")),
                      .failedPrecondition, reason: "ROLE_NOT_SUPPORTED")
    }

    @Test("MuteMembers: Tencent's 120 s mute example, reported as mute_until; 0 unmutes; an ordinary member may not mute")
    func mute() async throws {
        let clock = ManualWallClock(Timestamp(millisecondsSince1970: 1_700_000_000_000))
        let h = try await ServiceHarness(clock: clock)
        try await MemberRPCTests.publicGroup(h)
        let muted = try await h.ok(Members.muteMembers, .with { $0.groupID = "pub-1"; $0.userIds = ["mia"]; $0.durationSeconds = 120 }, as: .user("adam"))
        #expect(muted.results.map(\.result) == [.success])
        #expect(muted.results.first?.member?.muteUntil?.seconds == 1_700_000_120)
        let unmuted = try await h.ok(Members.muteMembers, .with { $0.groupID = "pub-1"; $0.userIds = ["mia"] }, as: .user("owner"))
        #expect(unmuted.results.first?.member?.muteUntil == nil)
        expectFailure(try await h.call(Members.muteMembers, .with { $0.groupID = "pub-1"; $0.userIds = ["adam"]; $0.durationSeconds = 5 }, as: .user("mia")),
                      .permissionDenied, reason: "PERMISSION_DENIED")
        let byAdmin = try await h.ok(Members.muteMembers, .with { $0.groupID = "pub-1"; $0.userIds = ["owner"]; $0.durationSeconds = 5 }, as: .user("adam"))
        #expect(byAdmin.results.first?.reason == "TARGET_IS_OWNER")
    }

    @Test("UpdateMemberInfo: own name card; another's only per member_edit_scope; byte limit; custom fields per key")
    func memberInfo() async throws {
        let h = try await ServiceHarness(configuration: TestApps.customFieldsConfiguration())
        try await MemberRPCTests.publicGroup(h)
        let own = try await h.ok(Members.updateMemberInfo, .with {
            $0.groupID = "pub-1"; $0.updateMask = ServiceHarness.mask("name_card", "custom.title"); $0.nameCard = "Mia"; $0.custom = ["title": [7]]
        }, as: .user("mia"))
        #expect(own.member?.nameCard == "Mia")
        #expect(own.member?.custom == ["title": [7]])
        #expect(try await h.events("pub-1").last?.kind == .memberInfoChanged)
        expectFailure(try await h.call(Members.updateMemberInfo, .with {
            $0.groupID = "pub-1"; $0.userID = "adam"; $0.updateMask = ServiceHarness.mask("name_card"); $0.nameCard = "x"
        }, as: .user("mia")), .permissionDenied, reason: "PERMISSION_DENIED")
        expectFailure(try await h.call(Members.updateMemberInfo, .with {
            $0.groupID = "pub-1"; $0.updateMask = ServiceHarness.mask("name_card"); $0.nameCard = bytes(51)
        }, as: .user("mia")), .invalidArgument, reason: "INVALID_ARGUMENT", field: "name_card", limit: 50)
        expectFailure(try await h.call(Members.updateMemberInfo, .with {
            $0.groupID = "pub-1"; $0.updateMask = ServiceHarness.mask("custom.score"); $0.custom = ["score": [1]]
        }, as: .user("mia")), .permissionDenied, reason: "PERMISSION_DENIED", field: "custom.score")
        let byOwner = try await h.ok(Members.updateMemberInfo, .with {
            $0.groupID = "pub-1"; $0.userID = "mia"; $0.updateMask = ServiceHarness.mask("custom.score"); $0.custom = ["score": [9]]
        }, as: .user("owner"))
        #expect(byOwner.member?.custom == ["title": [7], "score": [9]])
        // `score` is read by the owner and admins only.
        let asMember = try await h.ok(Members.getMembersInfo, .with { $0.groupID = "pub-1"; $0.userIds = ["mia"] }, as: .user("mia"))
        #expect(asMember.results.first?.member?.custom == ["title": [7]])
        let asAdmin = try await h.ok(Members.getMembersInfo, .with { $0.groupID = "pub-1"; $0.userIds = ["mia"] }, as: .user("adam"))
        #expect(asAdmin.results.first?.member?.custom == ["title": [7], "score": [9]])
        expectFailure(try await h.call(Members.updateMemberInfo, .with {
            $0.groupID = "pub-1"; $0.updateMask = ServiceHarness.mask("custom.nope"); $0.custom = ["nope": [1]]
        }, as: .user("mia")), .invalidArgument, reason: "INVALID_ARGUMENT", field: "custom.nope")
    }

    @Test("SetReceiveMessageOption: a member's own choice; UNSPECIFIED and non-members are refused")
    func receiveOption() async throws {
        let h = try await ServiceHarness()
        try await MemberRPCTests.publicGroup(h)
        _ = try await h.ok(Members.setReceiveMessageOption, .with { $0.groupID = "pub-1"; $0.option = .receiveWithoutPush }, as: .user("mia"))
        let me = try await h.ok(Members.getSelfMemberInfo, .with { $0.groupID = "pub-1" }, as: .user("mia"))
        #expect(me.member?.receiveMessageOption == .receiveWithoutPush)
        expectFailure(try await h.call(Members.setReceiveMessageOption, .with { $0.groupID = "pub-1" }, as: .user("mia")),
                      .invalidArgument, reason: "INVALID_ARGUMENT", field: "option")
        expectFailure(try await h.call(Members.setReceiveMessageOption, .with { $0.groupID = "pub-1"; $0.option = .notReceive }, as: .user("zoe")),
                      .permissionDenied, reason: "NOT_A_MEMBER")
    }

    @Test("SetGroupRemark: visible only to its author; over 64 bytes is refused; empty removes it")
    func remark() async throws {
        let h = try await ServiceHarness()
        try await MemberRPCTests.publicGroup(h)
        _ = try await h.ok(Members.setGroupRemark, .with { $0.groupID = "pub-1"; $0.remark = "mine" }, as: .user("mia"))
        #expect(try await h.ok(Members.getSelfMemberInfo, .with { $0.groupID = "pub-1" }, as: .user("mia")).remark == "mine")
        expectFailure(try await h.call(Members.setGroupRemark, .with { $0.groupID = "pub-1"; $0.remark = bytes(65) }, as: .user("mia")),
                      .invalidArgument, reason: "INVALID_ARGUMENT", field: "remark", limit: 64)
        expectFailure(try await h.call(Members.setGroupRemark, .with { $0.groupID = "pub-1"; $0.remark = "x" }, as: .user("zoe")),
                      .permissionDenied, reason: "NOT_A_MEMBER")
        _ = try await h.ok(Members.setGroupRemark, .with { $0.groupID = "pub-1" }, as: .user("mia"))
        #expect(try await h.ok(Members.getSelfMemberInfo, .with { $0.groupID = "pub-1" }, as: .user("mia")).remark == "")
    }

    @Test("the admin token acts for a user with x-operator-id, with that user's permissions")
    func adminActing() async throws {
        let h = try await ServiceHarness()
        try await MemberRPCTests.publicGroup(h)
        expectFailure(try await h.call(Members.kickMembers, .with { $0.groupID = "pub-1"; $0.userIds = ["adam"] }, as: .adminActing(for: "mia")),
                      .permissionDenied, reason: "PERMISSION_DENIED")
        let asOwner = try await h.ok(Members.kickMembers, .with { $0.groupID = "pub-1"; $0.userIds = ["adam"] }, as: .adminActing(for: "owner"))
        #expect(asOwner.results.map(\.result) == [.success])
        let bare = try await h.ok(Members.kickMembers, .with { $0.groupID = "pub-1"; $0.userIds = ["mia"] }, as: .admin)
        #expect(bare.results.map(\.result) == [.success])
    }

    @Test("AVChatRoom: the audience joins and quits in memory, counted live; owner plus recent members listed; no kick")
    func avChatRoom() async throws {
        let h = try await ServiceHarness()
        try await h.create(.avChatRoom, id: "room-1", owner: "host", as: .admin)
        for user in ["a", "b", "c"] {
            let joined = try await h.ok(Members.joinGroup, .with { $0.groupID = "room-1" }, as: .user(user))
            #expect(joined.outcome == .joined)
        }
        expectFailure(try await h.call(Members.joinGroup, .with { $0.groupID = "room-1" }, as: .user("a")),
                      .alreadyExists, reason: "ALREADY_MEMBER")
        #expect(try await h.audienceCount("room-1") == 4)
        let listed = try await h.ok(Members.listMembers, .with { $0.groupID = "room-1" }, as: .user("a"))
        #expect(listed.members.map(\.userID) == ["host", "c", "b", "a"])
        #expect(listed.memberCount == 4)
        #expect(listed.nextPageToken.isEmpty)
        let self_ = try await h.ok(Members.getSelfMemberInfo, .with { $0.groupID = "room-1" }, as: .user("b"))
        #expect(self_.member?.userID == "b")
        let muted = try await h.ok(Members.muteMembers, .with { $0.groupID = "room-1"; $0.userIds = ["b"]; $0.durationSeconds = 60 }, as: .user("host"))
        #expect(muted.results.map(\.result) == [.success])
        #expect(try await h.ok(Members.getMembersInfo, .with { $0.groupID = "room-1"; $0.userIds = ["b"] }, as: .user("a"))
            .results.first?.member?.muteUntil != nil)
        _ = try await h.ok(Members.quitGroup, .with { $0.groupID = "room-1" }, as: .user("b"))
        #expect(try await h.audienceCount("room-1") == 3)
        expectFailure(try await h.call(Members.quitGroup, .with { $0.groupID = "room-1" }, as: .user("b")),
                      .permissionDenied, reason: "NOT_A_MEMBER")
        expectFailure(try await h.call(Members.quitGroup, .with { $0.groupID = "room-1" }, as: .user("host")),
                      .failedPrecondition, reason: "OWNER_CANNOT_QUIT")
        expectFailure(try await h.call(Members.kickMembers, .with { $0.groupID = "room-1"; $0.userIds = ["a"] }, as: .user("host")),
                      .failedPrecondition, reason: "KICK_NOT_SUPPORTED")
        expectFailure(try await h.call(Members.setMemberRole, .with { $0.groupID = "room-1"; $0.userID = "a"; $0.role = .admin }, as: .user("host")),
                      .failedPrecondition, reason: "ROLE_NOT_SUPPORTED")
        // The audience is not among joined groups, and the stored member count stays the owner's.
        #expect(try await h.ok(Methods.listJoinedGroups, .init(), as: .user("a")).groups.isEmpty)
        #expect(try await h.store.groups(app: TestApps.appA, ids: ["room-1"])["room-1"]?.memberCount == 1)
    }
}
