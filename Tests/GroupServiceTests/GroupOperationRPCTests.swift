import GRPCProtocol
import GroupAPI
import GroupModel
import GroupService
import GroupStore
import GroupTestSupport
import Testing

private typealias Members = Groupd_V1_MemberService.Method

/// UpdateGroupProfile, UpdateGroupSettings, TransferOwnership, SetGroupMute, ListJoinedGroups and
/// SearchGroups through the router, in process: each one's success and its main refusal.
@Suite("Group operations, in process")
struct GroupOperationRPCTests {
    /// A Public group `id` owned by `owner` with admin `adam` and member `mia`.
    static func publicGroup(_ h: ServiceHarness, id: String = "pub-1") async throws {
        try await h.create(.public, id: id, name: "Public one", members: [("adam", .admin), ("mia", .member)], owner: "owner", as: .admin)
    }

    @Test("UpdateGroupProfile: the owner changes the masked fields only; one GROUP_INFO_CHANGED")
    func updateProfile() async throws {
        let h = try await ServiceHarness()
        try await Self.publicGroup(h)
        let response = try await h.ok(Methods.updateGroupProfile, .with {
            $0.groupID = "pub-1"
            $0.updateMask = ServiceHarness.mask("name", "notification")
            $0.profile = .with { $0.name = "Renamed"; $0.notification = "hello"; $0.introduction = "ignored" }
        }, as: .user("owner"))
        #expect(response.group?.profile?.name == "Renamed")
        #expect(response.group?.profile?.notification == "hello")
        #expect(response.group?.profile?.introduction == "")
        let changed = try await h.events("pub-1").filter { $0.kind == .groupInfoChanged }
        #expect(changed.count == 1)
        #expect(changed.first?.changes == ["name": "Renamed", "notification": "hello"])
    }

    @Test("UpdateGroupProfile refusals: an ordinary member of a Public group, an empty mask, an oversize name")
    func updateProfileRefused() async throws {
        let h = try await ServiceHarness()
        try await Self.publicGroup(h)
        expectFailure(try await h.call(Methods.updateGroupProfile, .with {
            $0.groupID = "pub-1"; $0.updateMask = ServiceHarness.mask("name"); $0.profile = .with { $0.name = "x" }
        }, as: .user("mia")), .permissionDenied, reason: "PERMISSION_DENIED")
        expectFailure(try await h.call(Methods.updateGroupProfile, .with { $0.groupID = "pub-1" }, as: .user("owner")),
                      .invalidArgument, reason: "INVALID_ARGUMENT", field: "update_mask")
        expectFailure(try await h.call(Methods.updateGroupProfile, .with {
            $0.groupID = "pub-1"; $0.updateMask = ServiceHarness.mask("name"); $0.profile = .with { $0.name = bytes(31) }
        }, as: .user("adam")), .invalidArgument, reason: "INVALID_ARGUMENT", field: "profile.name", limit: 30)
        expectFailure(try await h.call(Methods.updateGroupProfile, .with {
            $0.groupID = "pub-1"; $0.updateMask = ServiceHarness.mask("colour")
        }, as: .user("owner")), .invalidArgument, reason: "INVALID_ARGUMENT", field: "update_mask")
        expectFailure(try await h.call(Methods.updateGroupProfile, .with {
            $0.groupID = "nope"; $0.updateMask = ServiceHarness.mask("name"); $0.profile = .with { $0.name = "x" }
        }, as: .user("owner")), .notFound, reason: "GROUP_NOT_FOUND")
    }

    @Test("custom fields: unknown key and oversize value name the key; unreadable values are left out")
    func customFields() async throws {
        let h = try await ServiceHarness(configuration: TestApps.customFieldsConfiguration())
        try await Self.publicGroup(h)
        let set = try await h.ok(Methods.updateGroupProfile, .with {
            $0.groupID = "pub-1"
            $0.updateMask = ServiceHarness.mask("custom.level", "custom.secret")
            $0.custom = ["level": [1], "secret": [2]]
        }, as: .user("owner"))
        #expect(set.group?.custom == ["level": [1], "secret": [2]])
        expectFailure(try await h.call(Methods.updateGroupProfile, .with {
            $0.groupID = "pub-1"; $0.updateMask = ServiceHarness.mask("custom.colour"); $0.custom = ["colour": [1]]
        }, as: .user("owner")), .invalidArgument, reason: "INVALID_ARGUMENT", field: "custom.colour")
        expectFailure(try await h.call(Methods.updateGroupProfile, .with {
            $0.groupID = "pub-1"; $0.updateMask = ServiceHarness.mask("custom.level"); $0.custom = ["level": Array(repeating: 1, count: 9)]
        }, as: .user("owner")), .invalidArgument, reason: "INVALID_ARGUMENT", field: "custom.level", limit: 8)
        expectFailure(try await h.call(Methods.updateGroupProfile, .with {
            $0.groupID = "pub-1"; $0.updateMask = ServiceHarness.mask("custom.secret"); $0.custom = ["secret": [3]]
        }, as: .user("adam")), .permissionDenied, reason: "PERMISSION_DENIED", field: "custom.secret")
        // The admin reads `level` but not the owner-only `secret`; a non-member sees `level` too.
        #expect(try await h.read("pub-1", as: .user("adam"))?.custom == ["level": [1]])
        #expect(try await h.read("pub-1", as: .user("stranger"))?.custom == ["level": [1]])
        #expect(try await h.read("pub-1", as: .admin)?.custom == ["level": [1], "secret": [2]])
        // A masked key absent from `custom` is removed.
        let removed = try await h.ok(Methods.updateGroupProfile, .with {
            $0.groupID = "pub-1"; $0.updateMask = ServiceHarness.mask("custom.secret")
        }, as: .user("owner"))
        #expect(removed.group?.custom == ["level": [1]])
    }

    @Test("UpdateGroupSettings: the owner opens a Public group; a type-fixed setting and max_member_count are refused")
    func updateSettings() async throws {
        let h = try await ServiceHarness()
        try await Self.publicGroup(h)
        let opened = try await h.ok(Methods.updateGroupSettings, .with {
            $0.groupID = "pub-1"; $0.updateMask = ServiceHarness.mask("join_option"); $0.settings = .with { $0.joinOption = .any }
        }, as: .user("owner"))
        #expect(opened.group?.settings?.joinOption == .any)
        expectFailure(try await h.call(Methods.updateGroupSettings, .with {
            $0.groupID = "pub-1"; $0.updateMask = ServiceHarness.mask("join_option"); $0.settings = .with { $0.joinOption = .forbidden }
        }, as: .user("mia")), .permissionDenied, reason: "PERMISSION_DENIED")
        // An admin changes settings in a Public group (as Tencent's TIMGroupManager guide lets them), but not who may.
        let byAdmin = try await h.ok(Methods.updateGroupSettings, .with {
            $0.groupID = "pub-1"; $0.updateMask = ServiceHarness.mask("join_option"); $0.settings = .with { $0.joinOption = .approval }
        }, as: .user("adam"))
        #expect(byAdmin.group?.settings?.joinOption == .approval)
        expectFailure(try await h.call(Methods.updateGroupSettings, .with {
            $0.groupID = "pub-1"; $0.updateMask = ServiceHarness.mask("settings_edit_scope")
            $0.settings = .with { $0.settingsEditScope = .allMembers }
        }, as: .user("adam")), .permissionDenied, reason: "PERMISSION_DENIED")
        expectFailure(try await h.call(Methods.updateGroupSettings, .with {
            $0.groupID = "pub-1"; $0.updateMask = ServiceHarness.mask("max_member_count"); $0.maxMemberCount = 10
        }, as: .user("owner")), .permissionDenied, reason: "ADMIN_TOKEN_REQUIRED")
        let capped = try await h.ok(Methods.updateGroupSettings, .with {
            $0.groupID = "pub-1"; $0.updateMask = ServiceHarness.mask("max_member_count"); $0.maxMemberCount = 10
        }, as: .admin)
        #expect(capped.group?.maxMemberCount == 10)
        expectFailure(try await h.call(Methods.updateGroupSettings, .with {
            $0.groupID = "pub-1"; $0.updateMask = ServiceHarness.mask("join_option")
        }, as: .user("owner")), .invalidArgument, reason: "INVALID_ARGUMENT", field: "settings.join_option")

        try await h.create(.work, id: "work-1", members: [("mia", .member)], owner: "owner", as: .admin)
        expectFailure(try await h.call(Methods.updateGroupSettings, .with {
            $0.groupID = "work-1"; $0.updateMask = ServiceHarness.mask("join_option"); $0.settings = .with { $0.joinOption = .any }
        }, as: .user("owner")), .failedPrecondition, reason: "SETTING_FIXED_BY_TYPE")
    }

    @Test("TransferOwnership: the owner hands over (and quits); a non-member heir and AVChatRoom are refused")
    func transfer() async throws {
        let h = try await ServiceHarness()
        try await Self.publicGroup(h)
        let moved = try await h.ok(Methods.transferOwnership, .with { $0.groupID = "pub-1"; $0.newOwnerUserID = "mia" }, as: .user("owner"))
        #expect(moved.group?.ownerUserID == "mia")
        #expect(moved.group?.selfInfo?.role == .member)
        let quit = try await h.ok(Methods.transferOwnership, .with {
            $0.groupID = "pub-1"; $0.newOwnerUserID = "adam"; $0.quitAfterTransfer = true
        }, as: .user("mia"))
        #expect(quit.group?.ownerUserID == "adam")
        #expect(quit.group?.publicViewOnly == true)
        #expect(quit.group?.memberCount == 2)
        expectFailure(try await h.call(Methods.transferOwnership, .with { $0.groupID = "pub-1"; $0.newOwnerUserID = "ghost" }, as: .user("adam")),
                      .notFound, reason: "MEMBER_NOT_FOUND", field: "new_owner_user_id")
        expectFailure(try await h.call(Methods.transferOwnership, .with { $0.groupID = "pub-1"; $0.newOwnerUserID = "owner" }, as: .user("mia")),
                      .permissionDenied, reason: "NOT_A_MEMBER")

        try await h.create(.avChatRoom, id: "room-1", owner: "host", as: .admin)
        expectFailure(try await h.call(Methods.transferOwnership, .with { $0.groupID = "room-1"; $0.newOwnerUserID = "x" }, as: .user("host")),
                      .failedPrecondition, reason: "TRANSFER_NOT_SUPPORTED")
    }

    @Test("SetGroupMute: the owner mutes ordinary members for a while and lifts it; a member may not; a mode is required")
    func groupMute() async throws {
        let h = try await ServiceHarness()
        try await Self.publicGroup(h)
        let muted = try await h.ok(Methods.setGroupMute, .with {
            $0.groupID = "pub-1"; $0.muted = true; $0.mode = .ordinaryMembers; $0.durationSeconds = 60
        }, as: .user("adam"))
        #expect(muted.mute?.mode == .ordinaryMembers)
        #expect(muted.mute?.muteUntil != nil)
        #expect(try await h.read("pub-1", as: .user("mia"))?.mute?.mode == .ordinaryMembers)
        let lifted = try await h.ok(Methods.setGroupMute, .with { $0.groupID = "pub-1"; $0.muted = false }, as: .user("owner"))
        #expect(lifted.mute == nil)
        expectFailure(try await h.call(Methods.setGroupMute, .with { $0.groupID = "pub-1"; $0.muted = true; $0.mode = .all }, as: .user("mia")),
                      .permissionDenied, reason: "PERMISSION_DENIED")
        expectFailure(try await h.call(Methods.setGroupMute, .with { $0.groupID = "pub-1"; $0.muted = true }, as: .user("owner")),
                      .invalidArgument, reason: "INVALID_ARGUMENT", field: "mode")
        let roles = try await h.ok(Methods.setGroupMute, .with {
            $0.groupID = "pub-1"; $0.muted = true; $0.mode = .roles; $0.roles = [.admin]
        }, as: .user("owner"))
        #expect(roles.mute?.roles == [.admin])
    }

    @Test("ListJoinedGroups: newest join first, AVChatRoom left out, with remark; the backend must name a user")
    func joinedGroups() async throws {
        let h = try await ServiceHarness()
        try await h.create(.work, id: "w-1", members: [("mia", .member)], owner: "owner", as: .admin)
        try await Self.publicGroup(h, id: "p-1")
        try await h.create(.avChatRoom, id: "room-1", owner: "host", as: .admin)
        _ = try await h.ok(Members.joinGroup, .with { $0.groupID = "room-1" }, as: .user("mia"))
        _ = try await h.ok(Members.setGroupRemark, .with { $0.groupID = "w-1"; $0.remark = "my work" }, as: .user("mia"))
        let listed = try await h.ok(Methods.listJoinedGroups, .with { $0.pageSize = 1 }, as: .user("mia"))
        #expect(listed.groups.map(\.groupID) == ["p-1"])
        #expect(!listed.nextPageToken.isEmpty)
        let rest = try await h.ok(Methods.listJoinedGroups, .with { $0.pageToken = listed.nextPageToken }, as: .adminActing(for: "mia"))
        #expect(rest.groups.map(\.groupID) == ["w-1"])
        #expect(rest.groups.first?.remark == "my work")
        #expect(rest.groups.first?.selfInfo?.role == .member)
        #expect(rest.nextPageToken.isEmpty)
        let typed = try await h.ok(Methods.listJoinedGroups, .with { $0.types = [.work] }, as: .user("mia"))
        #expect(typed.groups.map(\.groupID) == ["w-1"])
        expectFailure(try await h.call(Methods.listJoinedGroups, .init(), as: .admin), .invalidArgument, reason: "OPERATOR_REQUIRED")
    }

    @Test("SearchGroups: by name among visible groups (a Work group stays hidden from non-members); an empty keyword is refused")
    func search() async throws {
        let h = try await ServiceHarness()
        try await h.create(.work, id: "w-apple", name: "Apple work", members: [("mia", .member)], owner: "owner", as: .admin)
        try await h.create(.public, id: "p-apple", name: "Apple fans", owner: "owner", as: .admin)
        try await h.create(.public, id: "p-pear", name: "Pears", owner: "owner", as: .admin)
        let stranger = try await h.ok(Methods.searchGroups, .with { $0.keyword = "apple" }, as: .user("stranger"))
        #expect(stranger.results.map { $0.group?.groupID } == ["p-apple"])
        #expect(stranger.results.first?.matchedFields == [.name])
        #expect(stranger.results.first?.group?.publicViewOnly == true)
        let member = try await h.ok(Methods.searchGroups, .with { $0.keyword = "apple" }, as: .user("mia"))
        #expect(Set(member.results.compactMap { $0.group?.groupID }) == ["p-apple", "w-apple"])
        let joined = try await h.ok(Methods.searchGroups, .with { $0.keyword = "apple"; $0.joinedOnly = true }, as: .user("mia"))
        #expect(joined.results.compactMap { $0.group?.groupID } == ["w-apple"])
        let byID = try await h.ok(Methods.searchGroups, .with { $0.keyword = "p-pear" }, as: .user("stranger"))
        #expect(byID.results.first?.matchedFields == [.groupID])
        expectFailure(try await h.call(Methods.searchGroups, .init(), as: .user("mia")), .invalidArgument, reason: "INVALID_ARGUMENT", field: "keyword")
    }
}
