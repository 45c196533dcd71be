import GRPCProtocol
import GroupAPI
import GroupModel
import GroupService
import GroupTestSupport
import Testing

/// One row of ZIM's table "operation results of different methods called by different roles
/// in a group in inviteMode and beInviteMode modes" (ZEGOCLOUD ZIM).
struct InviteTableRow: Sendable, CustomTestStringConvertible {
    /// ZIM `beInviteMode`: 0 None (no consent) or 1 Auth (the invitee must accept).
    var beInviteAuth: Bool
    /// ZIM `inviteMode`: 0 Any (every member invites) or 1 Admin (owner and admins only).
    var inviteAdminOnly: Bool
    /// ZIM's method: `inviteUsersIntoGroup` or `sendGroupInviteApplicationsToUserIDs`; both are
    /// groupd's InviteMembers.
    var method: String
    /// The caller: `owner`, `adam` (admin) or `mia` (ordinary member).
    var caller: String
    /// The row's result.
    var expected: Expected

    enum Expected: String, Sendable {
        /// "The invitee joins the group without approval" (and "with no application generated").
        case joins
        /// "Failed."
        case fails
        /// "An application is generated and sent to the invitee for approval" (and the inviter
        /// sees it among their items: ZIM's `groupApplicationListChanged` for the caller).
        case invitationToInvitee
    }

    var testDescription: String {
        "beInviteMode=\(beInviteAuth ? "1 Auth" : "0 None") inviteMode=\(inviteAdminOnly ? "1 Admin" : "0 Any") "
            + "\(method) by \(caller) → \(expected.rawValue)"
    }

    /// The table, the rows naming "all group members" or "group owner or administrator" expanded
    /// to each role they name.
    static let all: [InviteTableRow] = {
        var rows: [InviteTableRow] = []
        let methods = ["inviteUsersIntoGroup", "sendGroupInviteApplicationsToUserIDs"]
        for auth in [false, true] {
            let granted: Expected = auth ? .invitationToInvitee : .joins
            for method in methods {
                // inviteMode 0 Any: all group members.
                for caller in ["owner", "adam", "mia"] {
                    rows.append(InviteTableRow(beInviteAuth: auth, inviteAdminOnly: false, method: method, caller: caller, expected: granted))
                }
                // inviteMode 1 Admin: ordinary members fail; owner or administrator as above.
                rows.append(InviteTableRow(beInviteAuth: auth, inviteAdminOnly: true, method: method, caller: "mia", expected: .fails))
                for caller in ["owner", "adam"] {
                    rows.append(InviteTableRow(beInviteAuth: auth, inviteAdminOnly: true, method: method, caller: caller, expected: granted))
                }
            }
        }
        return rows
    }()
}

/// ZIM's inviteMode × beInviteMode × method × caller table, row by row, through InviteMembers.
@Suite("ZIM's invitation table, in process")
struct ApplicationInviteTableRPCTests {
    @Test("Each row of ZIM's invitation table gives the result it names", arguments: InviteTableRow.all)
    func row(_ row: InviteTableRow) async throws {
        #expect(InviteTableRow.all.count == 24)
        let h = try await ServiceHarness()
        // ZIM has no approval of invitations: approval is not required.
        try await h.applicationGroup("zim", settings: settings(
            invite: row.inviteAdminOnly ? .ownerAndAdmins : .allMembers,
            consent: row.beInviteAuth ? .required : .notRequired, approval: .notRequired))
        let outcome = try await h.call(MemberCalls.inviteMembers, .with {
            $0.groupID = "zim"; $0.userIds = ["zoe"]; $0.message = "xxx invited you to join the group."
        }, as: .user(row.caller))

        switch row.expected {
        case .fails:
            expectFailure(outcome, .permissionDenied, reason: "PERMISSION_DENIED")
            #expect(try await !h.isMember("zim", "zoe"))
            #expect(try await h.applications(as: .user("zoe")).applications.isEmpty)
        case .joins:
            let result = try #require(try outcome.get().results.first)
            #expect(result.result == .success)
            #expect(result.applicationID.isEmpty)
            #expect(try await h.isMember("zim", "zoe"))
            #expect(try await h.applications(as: .user("zoe")).applications.isEmpty)
            #expect(try await h.applications(as: .user(row.caller)).applications.isEmpty)
        case .invitationToInvitee:
            let result = try #require(try outcome.get().results.first)
            #expect(result.result == .pending)
            #expect(try await !h.isMember("zim", "zoe"))
            let inbox = try await h.applications(as: .user("zoe"))
            #expect(inbox.applications.map(\.applicationID) == [result.applicationID])
            #expect(inbox.applications.first?.callerRoles == [.invitee])
            #expect(inbox.applications.first?.needsApproval == false)
            #expect(inbox.unreadCount == 1)
            let sent = try await h.applications(as: .user(row.caller), roles: [.sender])
            #expect(sent.applications.map(\.applicationID) == [result.applicationID])
            // The invitee's answer completes it.
            #expect(try await h.accept(result.applicationID, as: .user("zoe")).get().member?.userID == "zoe")
        }
    }
}
