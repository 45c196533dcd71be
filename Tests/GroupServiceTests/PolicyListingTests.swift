import GRPCProtocol
import GroupAPI
import GroupModel
import GroupService
import GroupTestSupport
import PolicyHost
import Testing

/// The policy hooks the listings and CreateGroup's initial members go through.
@Suite("Policy plugins in listings and initial members, in process")
struct PolicyListingTests {
    /// A Public group `id` with `level` (anyone reads) and `vip` (admins and the owner read).
    private func createFiltered(_ h: ServiceHarness, id: String) async throws {
        var request = createRequest(.public, id: id, name: "club \(id)", members: [("bob", .member), ("ada", .admin)], owner: "alice")
        request.custom = ["level": Array("3".utf8), "vip": Array("true".utf8)]
        _ = try await h.ok(Methods.createGroup, request, as: .admin)
    }

    @Test("ListJoinedGroups: the read filter runs for the user's role in each group")
    func joinedGroupsFiltered() async throws {
        let h = try await policyHarness([PolicyRPCTests.schema])
        try await createFiltered(h, id: "pl-1")
        let asMember = try await h.ok(Methods.listJoinedGroups, .init(), as: .user("bob"))
        #expect(asMember.groups.map(\.groupID) == ["pl-1"])
        #expect(asMember.groups.first?.custom.keys.sorted() == ["level"])
        let asAdmin = try await h.ok(Methods.listJoinedGroups, .init(), as: .user("ada"))
        #expect(asAdmin.groups.first?.custom.keys.sorted() == ["level", "vip"])
        let asOwner = try await h.ok(Methods.listJoinedGroups, .init(), as: .adminActing(for: "alice"))
        #expect(asOwner.groups.first?.custom.keys.sorted() == ["level", "vip"])
    }

    @Test("ListJoinedGroups without a read filter returns every value")
    func joinedGroupsUnfiltered() async throws {
        let h = try await ServiceHarness()
        try await createFiltered(h, id: "pl-2")
        let asMember = try await h.ok(Methods.listJoinedGroups, .init(), as: .user("bob"))
        #expect(asMember.groups.first?.custom.keys.sorted() == ["level", "vip"])
    }

    @Test("SearchGroups: the read filter runs for the caller's role, non-members included")
    func searchFiltered() async throws {
        let h = try await policyHarness([PolicyRPCTests.schema])
        try await createFiltered(h, id: "pl-3")
        func search(as identity: TestIdentity) async throws -> [String] {
            let found = try await h.ok(Methods.searchGroups, .with {
                $0.keyword = "club"
                $0.fields = [.name]
            }, as: identity)
            return found.results.first?.group?.custom.keys.sorted() ?? ["<no result>"]
        }
        #expect(try await search(as: .user("bob")) == ["level"])
        #expect(try await search(as: .user("stranger")) == ["level"])
        #expect(try await search(as: .user("ada")) == ["level", "vip"])
    }

    @Test("CreateGroup: an initial member's banned name card is refused at members[i].name_card; nothing stored")
    func initialNameCardRejected() async throws {
        let h = try await policyHarness([PolicyRPCTests.keywordReject])
        var request = createRequest(.public, id: "pl-4", owner: "alice")
        request.members = [
            .with { $0.userID = "bob"; $0.nameCard = "bob" },
            .with { $0.userID = "eve"; $0.nameCard = "forbidden eve" },
        ]
        let refused = try await h.call(Methods.createGroup, request, as: .admin)
        #expect(refused.code == .failedPrecondition)
        #expect(refused.errorInfo?.reason == "POLICY_REJECTED")
        #expect(refused.errorInfo?.metadata["error_keys"] == "name_card")
        #expect(refused.errorInfo?.metadata["field"] == "members[1].name_card")
        #expect(try await h.read("pl-4", as: .admin) == nil)
    }

    @Test("CreateGroup: an initial member's name card is stored as the plugin masks it")
    func initialNameCardMasked() async throws {
        let h = try await policyHarness([PolicyRPCTests.keywordMask])
        var request = createRequest(.public, id: "pl-5", owner: "alice")
        request.members = [.with { $0.userID = "bob"; $0.nameCard = "darn bob" }]
        let created = try await h.ok(Methods.createGroup, request, as: .admin)
        #expect(created.group?.profile?.name.isEmpty == false)
        let members = try await h.ok(Groupd_V1_MemberService.Method.getMembersInfo, .with {
            $0.groupID = "pl-5"
            $0.userIds = ["bob"]
        }, as: .admin)
        #expect(members.results.first?.member?.nameCard == "*** bob")
    }
}
