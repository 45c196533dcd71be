import GRPCProtocol
import GroupAPI
import GroupModel
import GroupService
import GroupTestSupport
import Testing

/// Who calls DismissGroup on a group owned by olivia, with adam an admin (where the type has
/// admins), mia a member (where the type stores members) and nora not a member.
enum DismissActor: String, Sendable {
    case owner, admin, member, nonMember = "non-member", adminToken = "admin token"
    case adminTokenAsOwner = "admin token as owner"

    var identity: TestIdentity {
        switch self {
        case .owner: .user("olivia")
        case .admin: .user("adam")
        case .member: .user("mia")
        case .nonMember: .user("nora")
        case .adminToken: .admin
        case .adminTokenAsOwner: .adminActing(for: "olivia")
        }
    }

    var operatorID: String? {
        switch self {
        case .owner, .adminTokenAsOwner: "olivia"
        case .admin: "adam"
        case .member: "mia"
        case .nonMember: "nora"
        case .adminToken: nil
        }
    }
}

struct DismissCase: Sendable, CustomTestStringConvertible {
    var type: Groupd_V1_GroupType
    var actor: DismissActor
    /// nil: dismissed; else the status code and reason of the refusal.
    var refusal: (code: GRPCStatus.Code, reason: String)?

    var testDescription: String {
        "\(type) by \(actor.rawValue) → " + (refusal.map { "\($0.code)/\($0.reason)" } ?? "dismissed")
    }

    static let ok: (code: GRPCStatus.Code, reason: String)? = nil
    static let adminTokenRequired = (code: GRPCStatus.Code.permissionDenied, reason: "ADMIN_TOKEN_REQUIRED")
    static let denied = (code: GRPCStatus.Code.permissionDenied, reason: "PERMISSION_DENIED")
    static let notAMember = (code: GRPCStatus.Code.permissionDenied, reason: "NOT_A_MEMBER")
    static let notFound = (code: GRPCStatus.Code.notFound, reason: "GROUP_NOT_FOUND")

    static let all: [DismissCase] = [
        // Work: the server (admin token) only; a non-member does not see the group.
        DismissCase(type: .work, actor: .owner, refusal: adminTokenRequired),
        DismissCase(type: .work, actor: .member, refusal: adminTokenRequired),
        DismissCase(type: .work, actor: .nonMember, refusal: notFound),
        DismissCase(type: .work, actor: .adminToken, refusal: ok),
        DismissCase(type: .work, actor: .adminTokenAsOwner, refusal: adminTokenRequired),
        // Public and Meeting: the owner or the admin token.
        DismissCase(type: .public, actor: .owner, refusal: ok),
        DismissCase(type: .public, actor: .admin, refusal: denied),
        DismissCase(type: .public, actor: .member, refusal: denied),
        DismissCase(type: .public, actor: .nonMember, refusal: notAMember),
        DismissCase(type: .public, actor: .adminToken, refusal: ok),
        DismissCase(type: .public, actor: .adminTokenAsOwner, refusal: ok),
        DismissCase(type: .meeting, actor: .owner, refusal: ok),
        DismissCase(type: .meeting, actor: .admin, refusal: denied),
        DismissCase(type: .meeting, actor: .member, refusal: denied),
        DismissCase(type: .meeting, actor: .nonMember, refusal: notAMember),
        DismissCase(type: .meeting, actor: .adminToken, refusal: ok),
        DismissCase(type: .meeting, actor: .adminTokenAsOwner, refusal: ok),
        // AVChatRoom (no admins, no stored audience): the owner or the admin token.
        DismissCase(type: .avChatRoom, actor: .owner, refusal: ok),
        DismissCase(type: .avChatRoom, actor: .nonMember, refusal: notAMember),
        DismissCase(type: .avChatRoom, actor: .adminToken, refusal: ok),
        DismissCase(type: .avChatRoom, actor: .adminTokenAsOwner, refusal: ok),
    ]
}

@Suite("DismissGroup, in process")
struct DismissGroupRPCTests {
    private func makeGroup(_ h: ServiceHarness, _ type: Groupd_V1_GroupType) async throws {
        let members: [(String, Groupd_V1_MemberRole)] = switch type {
        case .public, .meeting: [("adam", .admin), ("mia", .member)]
        case .work: [("mia", .member)]
        default: []
        }
        try await h.create(type, id: "g", members: members, as: .user("olivia"))
    }

    @Test("who may dismiss each type", arguments: DismissCase.all)
    func matrix(_ c: DismissCase) async throws {
        let h = try await ServiceHarness()
        try await makeGroup(h, c.type)
        let before = try #require(try await h.read("g", as: .admin))
        let outcome = try await h.dismiss("g", as: c.actor.identity)

        if let refusal = c.refusal {
            expectFailure(outcome, refusal.code, reason: refusal.reason)
            // Nothing changed: the group is there, whole, and no GROUP_DISMISSED was stored.
            let after = try #require(try await h.read("g", as: .admin))
            #expect(after == before)
            #expect(try await h.events("g").map(\.kind) == [.groupCreated])
        } else {
            #expect(outcome.response != nil, "\(String(describing: outcome.status))")
            // Gone for everyone, the backend included.
            for identity in [TestIdentity.admin, .user("olivia"), .user("nora")] {
                expectLookupFailure(try await h.info(["g"], as: identity), "g")
            }
            let events = try await h.events("g")
            #expect(events.map(\.kind) == [.groupCreated, .groupDismissed])
            #expect(events.map(\.sequence) == [1, 2])
            #expect(events.last?.operatorID == c.actor.operatorID)
            #expect(events.last?.recipient == .group)
            // A second dismissal finds nothing.
            expectFailure(try await h.dismiss("g", as: c.actor.identity), .notFound, reason: "GROUP_NOT_FOUND")
        }
    }

    @Test("a dismissed group reads as NOT_FOUND in a batch with live ones")
    func dismissedInBatch() async throws {
        let h = try await ServiceHarness()
        try await h.create(.public, id: "gone", as: .user("olivia"))
        try await h.create(.public, id: "live", as: .user("olivia"))
        _ = try await h.dismiss("gone", as: .user("olivia")).get()
        let response = try await h.info(["gone", "live"], as: .user("olivia"))
        #expect(response.groups.map(\.groupID) == ["live"])
        expectLookupFailure(response, "gone")
    }

    @Test("a dismissed group's id stays taken (the store keeps it until purged)")
    func dismissedIDStaysTaken() async throws {
        let h = try await ServiceHarness()
        try await h.create(.public, id: "once", as: .user("olivia"))
        _ = try await h.dismiss("once", as: .user("olivia")).get()
        let again = try await h.call(Methods.createGroup, createRequest(.public, id: "once"), as: .user("olivia"))
        expectFailure(again, .alreadyExists, reason: "GROUP_ID_TAKEN")
        expectLookupFailure(try await h.info(["once"], as: .admin), "once")
    }

    @Test("an unknown id is NOT_FOUND; an empty one INVALID_ARGUMENT on group_id")
    func badIDs() async throws {
        let h = try await ServiceHarness()
        let missing = try await h.dismiss("nope", as: .admin)
        let info = expectFailure(missing, .notFound, reason: "GROUP_NOT_FOUND")
        #expect(info?.metadata["group_id"] == "nope")
        expectFailure(try await h.dismiss("", as: .admin), .invalidArgument, reason: "INVALID_ARGUMENT", field: "group_id")
    }

    @Test("another app's backend cannot dismiss the group")
    func crossApp() async throws {
        let h = try await ServiceHarness()
        try await h.create(.public, id: "g", as: .user("olivia"))
        expectFailure(try await h.dismiss("g", as: .admin(app: TestApps.appB)), .notFound, reason: "GROUP_NOT_FOUND")
        expectFailure(try await h.dismiss("g", as: .user("olivia", app: TestApps.appB)), .notFound, reason: "GROUP_NOT_FOUND")
        #expect(try await h.read("g", as: .user("olivia")) != nil)
        #expect(try await h.events("g").map(\.kind) == [.groupCreated])
    }
}
