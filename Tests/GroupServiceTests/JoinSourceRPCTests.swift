import GRPCProtocol
import GroupAPI
import GroupModel
import GroupService
import GroupStore
import GroupTestSupport
import Testing

/// `Member.join_source` and `inviter_user_id`: stored with each way in, read back through the API.
@Suite("Join source and inviter, in process")
struct JoinSourceRPCTests {
    /// `(join_source, inviter_user_id)` of each of `users` in `group`, as the backend reads them.
    private func sources(_ h: ServiceHarness, _ group: String, _ users: [String]) async throws
        -> [String: (Groupd_V1_JoinSource, String)]
    {
        let info = try await h.ok(MemberCalls.getMembersInfo, .with { $0.groupID = group; $0.userIds = users }, as: .admin)
        var result: [String: (Groupd_V1_JoinSource, String)] = [:]
        for member in info.results.compactMap(\.member) {
            result[member.userID] = (member.joinSource, member.inviterUserID)
        }
        #expect(result.count == users.count, "every user is a member: \(users)")
        return result
    }

    @Test("creator and initial members: a user creating names themselves the inviter of the initial members")
    func creation() async throws {
        let h = try await ServiceHarness()
        _ = try await h.ok(Methods.createGroup, createRequest(.work, id: "js-1", members: [("bob", .member)]),
                           as: .user("alice"))
        let byUser = try await sources(h, "js-1", ["alice", "bob"])
        #expect(byUser["alice"]! == (.creator, ""))
        #expect(byUser["bob"]! == (.initialMember, "alice"))
        // The backend creating: the named owner is the creator, initial members have no inviter.
        _ = try await h.ok(Methods.createGroup, createRequest(.work, id: "js-2", members: [("bob", .member)], owner: "olivia"),
                           as: .admin)
        let backend = try await sources(h, "js-2", ["olivia", "bob"])
        #expect(backend["olivia"]! == (.creator, ""))
        #expect(backend["bob"]! == (.initialMember, ""))
    }

    @Test("free join, direct invitation, accepted application, invitation accepted after consent")
    func joins() async throws {
        let h = try await ServiceHarness()
        try await h.applicationGroup("js-free", settings: settings(join: .any, consent: .notRequired))
        _ = try await h.apply("js-free", as: "zoe").get()
        _ = try await h.invite("js-free", ["yan"], as: .user("adam"))
        let free = try await sources(h, "js-free", ["zoe", "yan"])
        #expect(free["zoe"]! == (.freeJoin, ""))
        #expect(free["yan"]! == (.invitation, "adam"))

        try await h.applicationGroup("js-pending")
        let application = try await h.pendingApplication("js-pending", as: "zoe")
        _ = try await h.accept(application.applicationID, as: .user("adam")).get()
        let invited = try await h.invite("js-pending", ["yan"], as: .user("owner"))
        _ = try await h.accept(invited.results[0].applicationID, as: .user("yan")).get()
        let pending = try await sources(h, "js-pending", ["zoe", "yan"])
        #expect(pending["zoe"]! == (.application, "adam"))
        #expect(pending["yan"]! == (.invitation, "owner"))
    }

    @Test("imported members are IMPORTED, without inviter; a member's own record shows it too")
    func imported() async throws {
        let h = try await ServiceHarness()
        _ = try await h.ok(Methods.importGroup, .with {
            $0.groupID = "js-imp"
            $0.type = .public
            $0.profile = .with { $0.name = "legacy" }
            $0.ownerUserID = "olivia"
            $0.members = [.with { $0.userID = "bob"; $0.role = .member }]
        }, as: .admin)
        let byUser = try await sources(h, "js-imp", ["olivia", "bob"])
        #expect(byUser["olivia"]! == (.imported, ""))
        #expect(byUser["bob"]! == (.imported, ""))
        let own = try await h.ok(MemberCalls.getMembersInfo, .with { $0.groupID = "js-imp"; $0.userIds = ["bob"] },
                                 as: .user("bob"))
        #expect(own.results.first?.member?.joinSource == .imported)
    }
}
