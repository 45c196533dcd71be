import GRPCProtocol
import GroupAPI
import GroupModel
import GroupService
import GroupStore
import GroupTestSupport
import Testing

private typealias Members = Groupd_V1_MemberService.Method

/// Settings changed through UpdateGroupSettings flip what the member RPCs allow; quit options and
/// page-size clamping, through the router.
@Suite("Settings flip member operations, in process")
struct MemberSettingsRPCTests {
    func setting(_ h: ServiceHarness, _ id: String, _ path: String, _ build: (inout Groupd_V1_GroupSettings) -> Void) async throws {
        var settings = Groupd_V1_GroupSettings()
        build(&settings)
        _ = try await h.ok(Methods.updateGroupSettings, .with {
            $0.groupID = id; $0.updateMask = ServiceHarness.mask(path); $0.settings = settings
        }, as: .user("owner"))
    }

    @Test("remove_scope OWNER: an admin may no longer kick")
    func removeScope() async throws {
        let h = try await ServiceHarness()
        try await h.create(.public, id: "p", members: [("adam", .admin), ("mia", .member)], owner: "owner", as: .admin)
        let before = try await h.ok(Members.kickMembers, .with { $0.groupID = "p"; $0.userIds = ["ghost"] }, as: .user("adam"))
        #expect(before.results.map(\.result) == [.notMember])
        try await setting(h, "p", "remove_scope") { $0.removeScope = .owner }
        expectFailure(try await h.call(Members.kickMembers, .with { $0.groupID = "p"; $0.userIds = ["mia"] }, as: .user("adam")),
                      .permissionDenied, reason: "PERMISSION_DENIED")
    }

    @Test("invite_scope ALL_MEMBERS with invitee_consent NOT_REQUIRED and invite_approval NOT_REQUIRED: a member adds directly")
    func inviteScope() async throws {
        let h = try await ServiceHarness()
        try await h.create(.public, id: "p", members: [("mia", .member)], owner: "owner", as: .admin)
        expectFailure(try await h.call(Members.inviteMembers, .with { $0.groupID = "p"; $0.userIds = ["zoe"] }, as: .user("mia")),
                      .permissionDenied, reason: "PERMISSION_DENIED")
        try await setting(h, "p", "invite_scope") { $0.inviteScope = .allMembers }
        try await setting(h, "p", "invitee_consent") { $0.inviteeConsent = .notRequired }
        try await setting(h, "p", "invite_approval") { $0.inviteApproval = .notRequired }
        let added = try await h.ok(Members.inviteMembers, .with { $0.groupID = "p"; $0.userIds = ["zoe"] }, as: .user("mia"))
        #expect(added.results.map(\.result) == [.success])
    }

    @Test("member_edit_scope SELF_ONLY: the owner may no longer change a member's name card")
    func memberEditScope() async throws {
        let h = try await ServiceHarness()
        try await h.create(.public, id: "p", members: [("mia", .member)], owner: "owner", as: .admin)
        let request = Groupd_V1_UpdateMemberInfoRequest.with {
            $0.groupID = "p"; $0.userID = "mia"; $0.updateMask = ServiceHarness.mask("name_card"); $0.nameCard = "M"
        }
        #expect(try await h.ok(Members.updateMemberInfo, request, as: .user("owner")).member?.nameCard == "M")
        try await setting(h, "p", "member_edit_scope") { $0.memberEditScope = .selfOnly }
        expectFailure(try await h.call(Members.updateMemberInfo, request, as: .user("owner")), .permissionDenied, reason: "PERMISSION_DENIED")
    }

    @Test("keep_mute_status: a mute outlives quitting and applies again on rejoin; by default it is cleared")
    func keepMute() async throws {
        let h = try await ServiceHarness()
        try await h.create(.meeting, id: "m", members: [("mia", .member), ("max", .member)], owner: "owner", as: .admin)
        _ = try await h.ok(Members.muteMembers, .with { $0.groupID = "m"; $0.userIds = ["mia", "max"]; $0.durationSeconds = 600 }, as: .user("owner"))
        _ = try await h.ok(Members.quitGroup, .with { $0.groupID = "m"; $0.options = .with { $0.keepMuteStatus = true } }, as: .user("mia"))
        _ = try await h.ok(Members.quitGroup, .with { $0.groupID = "m" }, as: .user("max"))
        let mia = try await h.ok(Members.joinGroup, .with { $0.groupID = "m" }, as: .user("mia"))
        let max = try await h.ok(Members.joinGroup, .with { $0.groupID = "m" }, as: .user("max"))
        #expect(mia.member?.muteUntil != nil)
        #expect(max.member?.muteUntil == nil)
    }

    @Test("ListMembers pages are at most 50 members whatever page_size asks")
    func pageClamp() async throws {
        let h = try await ServiceHarness()
        try await h.create(.meeting, id: "m", owner: "owner", as: .admin)
        for index in 0..<60 {
            _ = try await h.ok(Members.joinGroup, .with { $0.groupID = "m" }, as: .user("u\(index)"))
        }
        let page = try await h.ok(Members.listMembers, .with { $0.groupID = "m"; $0.pageSize = 500 }, as: .user("u1"))
        #expect(page.members.count == 50)
        #expect(page.memberCount == 61)
        let rest = try await h.ok(Members.listMembers, .with { $0.groupID = "m"; $0.pageToken = page.nextPageToken }, as: .user("u1"))
        #expect(rest.members.count == 11)
        #expect(Set((page.members + rest.members).map(\.userID)).count == 61)
    }
}
