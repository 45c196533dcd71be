import GRPCProtocol
import GroupAPI
import GroupModel
import GroupService
import GroupStore
import GroupTestSupport
import Testing

typealias AppMethods = Groupd_V1_ApplicationService.Method
typealias MemberCalls = Groupd_V1_MemberService.Method

/// Shorthands for the applications flows, in process.
extension ServiceHarness {
    /// A Public group `id` owned by `owner` with admin `adam` and member `mia`, with `settings`.
    func applicationGroup(
        _ id: String, settings: Groupd_V1_GroupSettings? = nil, maxMembers: UInt32 = 0
    ) async throws {
        _ = try await ok(Methods.createGroup, createRequest(
            .public, id: id, name: "Club \(id)", members: [("adam", .admin), ("mia", .member)], owner: "owner",
            maxMembers: maxMembers, settings: settings), as: .admin)
    }

    /// JoinGroup `id` as `user` with `message`.
    func apply(_ id: String, as user: String, message: String = "") async throws -> RPCOutcome<Groupd_V1_JoinGroupResponse> {
        try await call(MemberCalls.joinGroup, .with { $0.groupID = id; $0.message = message }, as: .user(user))
    }

    /// JoinGroup that must answer PENDING_APPROVAL; returns the application.
    func pendingApplication(_ id: String, as user: String, message: String = "") async throws -> Groupd_V1_Application {
        let response = try await apply(id, as: user, message: message).get()
        #expect(response.outcome == .pendingApproval)
        return try #require(response.application)
    }

    /// InviteMembers `users` into `id` as `identity`.
    func invite(_ id: String, _ users: [String], as identity: TestIdentity, message: String = "") async throws
        -> Groupd_V1_InviteMembersResponse
    {
        try await ok(MemberCalls.inviteMembers, .with { $0.groupID = id; $0.userIds = users; $0.message = message }, as: identity)
    }

    /// ListApplications as `identity`.
    func applications(
        as identity: TestIdentity, kind: Groupd_V1_ApplicationKind = .unspecified,
        states: [Groupd_V1_ApplicationState] = [], group: String = "", roles: [Groupd_V1_ApplicationRole] = [],
        pageSize: Int32 = 0, token: String = ""
    ) async throws -> Groupd_V1_ListApplicationsResponse {
        try await ok(AppMethods.listApplications, .with {
            $0.kind = kind; $0.states = states; $0.groupID = group; $0.roles = roles; $0.pageSize = pageSize
            $0.pageToken = token
        }, as: identity)
    }

    func accept(_ id: String, as identity: TestIdentity, message: String = "") async throws
        -> RPCOutcome<Groupd_V1_AcceptApplicationResponse>
    {
        try await call(AppMethods.acceptApplication, .with { $0.applicationID = id; $0.message = message }, as: identity)
    }

    func refuse(_ id: String, as identity: TestIdentity, message: String = "") async throws
        -> RPCOutcome<Groupd_V1_RefuseApplicationResponse>
    {
        try await call(AppMethods.refuseApplication, .with { $0.applicationID = id; $0.message = message }, as: identity)
    }

    func withdraw(_ id: String, as identity: TestIdentity) async throws -> RPCOutcome<Groupd_V1_WithdrawApplicationResponse> {
        try await call(AppMethods.withdrawApplication, .with { $0.applicationID = id }, as: identity)
    }

    /// Whether `user` is a member of `id` now (GetSelfMemberInfo).
    func isMember(_ id: String, _ user: String) async throws -> Bool {
        try await call(MemberCalls.getSelfMemberInfo, .with { $0.groupID = id }, as: .user(user)).response?.member != nil
    }
}

/// A protobuf timestamp of `time`.
func protoTimestamp(_ time: Timestamp) -> Google_Protobuf_Timestamp {
    .with {
        $0.seconds = time.secondsSince1970
        $0.nanos = Int32(time.millisecondsSince1970 - time.secondsSince1970 * 1000) * 1_000_000
    }
}

/// Public group settings for the flows: join option, who invites, consent, approval.
func settings(
    join: Groupd_V1_JoinOption = .unspecified, invite: Groupd_V1_OperatorScope = .unspecified,
    consent: Groupd_V1_Requirement = .unspecified, approval: Groupd_V1_Requirement = .unspecified,
    approvers: Groupd_V1_ApproverScope = .unspecified
) -> Groupd_V1_GroupSettings {
    .with {
        $0.joinOption = join; $0.inviteScope = invite; $0.inviteeConsent = consent; $0.inviteApproval = approval
        $0.approverScope = approvers
    }
}

/// ApplicationService and the application paths of JoinGroup and InviteMembers, in process.
@Suite("Applications and invitations, in process")
struct ApplicationRPCTests {
    @Test("Join by approval: a pending application with the message, seen by the approvers and the applicant only; a repeat refreshes it")
    func joinByApproval() async throws {
        let h = try await ServiceHarness()
        try await h.applicationGroup("pub")
        let first = try await h.pendingApplication("pub", as: "zoe", message: "let me in")
        #expect(first.kind == .join)
        #expect(first.state == .pending)
        #expect(first.applicantUserID == "zoe")
        #expect(first.message == "let me in")
        #expect(first.needsApproval && first.approval?.state == .pending)
        #expect(!first.needsConsent)
        #expect(first.groupName == "Club pub")
        #expect(first.callerRoles == [.sender])
        #expect(try await !h.isMember("pub", "zoe"))

        for approver in ["owner", "adam"] {
            let listing = try await h.applications(as: .user(approver))
            #expect(listing.applications.map(\.applicationID) == [first.applicationID], "\(approver)")
            #expect(listing.applications.first?.callerRoles == [.approver])
            #expect(listing.applications.first?.handleStatus == .notHandled)
            #expect(listing.unreadCount == 1)
        }
        #expect(try await h.applications(as: .user("mia")).applications.isEmpty)
        #expect(try await h.applications(as: .user("stranger")).applications.isEmpty)

        let again = try await h.pendingApplication("pub", as: "zoe", message: "please")
        #expect(again.applicationID == first.applicationID)
        #expect(again.message == "please")
        #expect(again.createTime == first.createTime)
        let owner = try await h.applications(as: .user("owner"))
        #expect(owner.applications.count == 1)
        #expect(owner.applications.first?.message == "please")

        let received = try await h.events("pub").filter { $0.kind == .joinApplicationReceived }
        #expect(received.count == 2)
        #expect(received.allSatisfy { $0.changes["application_id"] == first.applicationID && $0.recipient == .approvers })
        #expect(received.last?.changes["refreshed"] == "true")
    }

    @Test("Join by approval: the message byte limit, ALREADY_MEMBER and JOIN_FORBIDDEN store nothing")
    func joinRefusals() async throws {
        let h = try await ServiceHarness()
        try await h.applicationGroup("pub")
        expectFailure(try await h.apply("pub", as: "zoe", message: bytes(101)), .invalidArgument,
                      reason: "INVALID_ARGUMENT", field: "message", limit: 100)
        _ = try await h.pendingApplication("pub", as: "yan", message: bytes(100))
        expectFailure(try await h.apply("pub", as: "mia"), .alreadyExists, reason: "ALREADY_MEMBER")
        expectFailure(try await h.apply("pub", as: "owner"), .alreadyExists, reason: "ALREADY_MEMBER")
        let listing = try await h.applications(as: .user("owner"))
        #expect(listing.applications.map(\.applicantUserID) == ["yan"])
        #expect(try await h.applications(as: .user("zoe")).applications.isEmpty)
    }

    @Test("Accept: the applicant joins with the approver as operator; other approvers see who handled it and how; a second handling is APPLICATION_ALREADY_HANDLED")
    func accept() async throws {
        let h = try await ServiceHarness()
        try await h.applicationGroup("pub")
        let item = try await h.pendingApplication("pub", as: "zoe", message: "hi")
        let accepted = try await h.accept(item.applicationID, as: .user("owner"), message: "welcome").get()
        #expect(accepted.application?.state == .accepted)
        #expect(accepted.application?.handledByUserID == "owner")
        #expect(accepted.application?.handleMessage == "welcome")
        #expect(accepted.application?.approval?.decidedByUserID == "owner")
        #expect(accepted.member?.userID == "zoe")
        #expect(try await h.isMember("pub", "zoe"))

        let events = try await h.events("pub")
        let joined = try #require(events.first { $0.kind == .memberJoined })
        #expect(joined.operatorID == "owner")
        #expect(joined.targets == ["zoe"])
        #expect(joined.recipient == .group)
        let approved = try #require(events.first { $0.kind == .joinApplicationApproved })
        #expect(approved.recipient == .user("zoe"))
        #expect(approved.changes["message"] == "welcome")

        let byAdam = try #require(try await h.applications(as: .user("adam")).applications.first)
        #expect(byAdam.state == .accepted)
        #expect(byAdam.handleStatus == .handledByOther)
        #expect(byAdam.handledByUserID == "owner")
        #expect(byAdam.handleMessage == "welcome")
        #expect(try await h.applications(as: .user("owner")).applications.first?.handleStatus == .handledBySelf)
        let byZoe = try #require(try await h.applications(as: .user("zoe")).applications.first)
        #expect(byZoe.state == .accepted && byZoe.handleStatus == .handledByOther)

        let info = expectFailure(try await h.accept(item.applicationID, as: .user("adam")), .failedPrecondition,
                                 reason: "APPLICATION_ALREADY_HANDLED")
        #expect(info?.metadata["state"] == "accepted")
        #expect(info?.metadata["handled_by"] == "owner")
        expectFailure(try await h.refuse(item.applicationID, as: .user("owner")), .failedPrecondition,
                      reason: "APPLICATION_ALREADY_HANDLED")
        expectFailure(try await h.withdraw(item.applicationID, as: .user("zoe")), .failedPrecondition,
                      reason: "APPLICATION_ALREADY_HANDLED")
        // Applying again as a member now: ALREADY_MEMBER.
        expectFailure(try await h.apply("pub", as: "zoe"), .alreadyExists, reason: "ALREADY_MEMBER")
    }

    @Test("Refuse: the reason is recorded and sent to the applicant, who does not join; who may decide")
    func refuseAndWho() async throws {
        let h = try await ServiceHarness()
        try await h.applicationGroup("pub")
        let item = try await h.pendingApplication("pub", as: "zoe")
        expectFailure(try await h.accept(item.applicationID, as: .user("zoe")), .permissionDenied, reason: "PERMISSION_DENIED")
        expectFailure(try await h.accept(item.applicationID, as: .user("mia")), .permissionDenied, reason: "PERMISSION_DENIED")
        expectFailure(try await h.accept(item.applicationID, as: .user("stranger")), .notFound, reason: "APPLICATION_NOT_FOUND")
        expectFailure(try await h.accept("ap-nope", as: .user("owner")), .notFound, reason: "APPLICATION_NOT_FOUND")
        expectFailure(try await h.accept(item.applicationID, as: .user("x", app: TestApps.appB)), .notFound,
                      reason: "APPLICATION_NOT_FOUND")
        expectFailure(try await h.accept("", as: .user("owner")), .invalidArgument, reason: "INVALID_ARGUMENT",
                      field: "application_id")
        expectFailure(try await h.refuse(item.applicationID, as: .user("adam"), message: bytes(101)), .invalidArgument,
                      reason: "INVALID_ARGUMENT", field: "message", limit: 100)

        let refused = try await h.refuse(item.applicationID, as: .user("adam"), message: "not now").get()
        #expect(refused.application?.state == .refused)
        #expect(refused.application?.handledByUserID == "adam")
        #expect(refused.application?.handleMessage == "not now")
        #expect(refused.application?.approval?.state == .refused)
        #expect(try await !h.isMember("pub", "zoe"))
        let event = try #require(try await h.events("pub").first { $0.kind == .joinApplicationRefused })
        #expect(event.recipient == .user("zoe"))
        #expect(event.operatorID == "adam")
        #expect(event.changes["message"] == "not now")

        // Approvers "owner only": the admin no longer approves.
        try await h.applicationGroup("pub2", settings: settings(approvers: .owner))
        let second = try await h.pendingApplication("pub2", as: "zoe")
        #expect(try await h.applications(as: .user("adam"), group: "pub2").applications.isEmpty)
        expectFailure(try await h.accept(second.applicationID, as: .user("adam")), .permissionDenied, reason: "PERMISSION_DENIED")
        #expect(try await h.accept(second.applicationID, as: .admin).get().member?.userID == "zoe")
    }

    @Test("Accept: the group being full is checked at accept time (GROUP_FULL); the item stays pending")
    func groupFullAtAccept() async throws {
        let h = try await ServiceHarness()
        try await h.applicationGroup("pub", maxMembers: 4)
        let zoe = try await h.pendingApplication("pub", as: "zoe")
        let yan = try await h.pendingApplication("pub", as: "yan")
        _ = try await h.accept(zoe.applicationID, as: .user("owner")).get()
        expectFailure(try await h.accept(yan.applicationID, as: .user("owner")), .failedPrecondition, reason: "GROUP_FULL")
        let still = try await h.applications(as: .user("owner"), states: [.pending])
        #expect(still.applications.map(\.applicationID) == [yan.applicationID])
        #expect(try await !h.isMember("pub", "yan"))
        // Refusing is still possible.
        #expect(try await h.refuse(yan.applicationID, as: .user("owner")).get().application?.state == .refused)
    }

    @Test("Accept: the applicant's joined-group limit is checked at accept time (TOO_MANY_GROUPS)")
    func tooManyGroupsAtAccept() async throws {
        var configuration = TestApps.configuration()
        configuration.apps[0].limits.maxGroupsPerUser = 1
        let h = try await ServiceHarness(configuration: configuration)
        try await h.applicationGroup("pub")
        let item = try await h.pendingApplication("pub", as: "zoe")
        try await h.create(.meeting, id: "meet", owner: "host", as: .admin)
        #expect(try await h.apply("meet", as: "zoe").get().outcome == .joined)
        let info = expectFailure(try await h.accept(item.applicationID, as: .user("owner")), .failedPrecondition,
                                 reason: "TOO_MANY_GROUPS")
        #expect(info?.metadata["user_id"] == "zoe")
        #expect(try await h.applications(as: .user("owner")).applications.first?.state == .pending)
        #expect(try await !h.isMember("pub", "zoe"))
    }

    @Test("Expiry: after the app's expiry an item reads EXPIRED, cannot be handled (APPLICATION_EXPIRED), is announced, and a new application can be made")
    func expiry() async throws {
        let clock = ManualWallClock()
        var configuration = TestApps.configuration()
        configuration.apps[0].limits.applicationExpirySeconds = 3600
        let h = try await ServiceHarness(configuration: configuration, clock: clock)
        try await h.applicationGroup("pub")
        let item = try await h.pendingApplication("pub", as: "zoe")
        let created = try #require(item.createTime)
        #expect(item.expireTime?.seconds == created.seconds + 3600)

        clock.advance(seconds: 3599)
        #expect(try await h.applications(as: .user("owner")).applications.first?.state == .pending)
        clock.advance(seconds: 1)
        let listed = try #require(try await h.applications(as: .user("owner")).applications.first)
        #expect(listed.state == .expired)
        #expect(try await h.applications(as: .user("owner"), states: [.pending]).applications.isEmpty)
        #expect(try await h.applications(as: .user("zoe"), states: [.expired]).applications.count == 1)
        expectFailure(try await h.accept(item.applicationID, as: .user("owner")), .failedPrecondition, reason: "APPLICATION_EXPIRED")
        expectFailure(try await h.withdraw(item.applicationID, as: .user("zoe")), .failedPrecondition, reason: "APPLICATION_EXPIRED")
        let expired = try await h.events("pub").filter { $0.kind == .applicationExpired }
        #expect(Set(expired.map(\.recipient)) == [.user("zoe"), .approvers])
        #expect(expired.allSatisfy { $0.changes["application_id"] == item.applicationID })

        let fresh = try await h.pendingApplication("pub", as: "zoe")
        #expect(fresh.applicationID != item.applicationID)
        #expect(try await h.accept(fresh.applicationID, as: .user("owner")).get().member?.userID == "zoe")
    }

    @Test("Withdraw: the applicant withdraws, the approvers are told; others may not; twice is APPLICATION_ALREADY_HANDLED")
    func withdraw() async throws {
        let h = try await ServiceHarness()
        try await h.applicationGroup("pub")
        let item = try await h.pendingApplication("pub", as: "zoe")
        expectFailure(try await h.withdraw(item.applicationID, as: .user("owner")), .permissionDenied, reason: "PERMISSION_DENIED")
        expectFailure(try await h.withdraw(item.applicationID, as: .user("stranger")), .notFound, reason: "APPLICATION_NOT_FOUND")
        let withdrawn = try await h.withdraw(item.applicationID, as: .user("zoe")).get()
        #expect(withdrawn.application?.state == .withdrawn)
        #expect(withdrawn.application?.handledByUserID == "zoe")
        #expect(withdrawn.application?.handleStatus == .handledBySelf)
        let event = try #require(try await h.events("pub").first { $0.kind == .applicationWithdrawn })
        #expect(event.recipient == .approvers)
        expectFailure(try await h.withdraw(item.applicationID, as: .user("zoe")), .failedPrecondition,
                      reason: "APPLICATION_ALREADY_HANDLED")
        expectFailure(try await h.accept(item.applicationID, as: .user("owner")), .failedPrecondition,
                      reason: "APPLICATION_ALREADY_HANDLED")
        #expect(try await h.applications(as: .user("owner")).applications.first?.state == .withdrawn)
    }

    @Test("Invitation with consent: PENDING with the invitation's id; the invitee accepts and joins, the inviter is told")
    func invitationWithConsent() async throws {
        let h = try await ServiceHarness()
        try await h.applicationGroup("pub")
        let response = try await h.invite("pub", ["zoe", "yan", "mia"], as: .user("adam"), message: "come")
        #expect(response.results.map(\.result) == [.pending, .pending, .alreadyMember])
        let zoeID = response.results[0].applicationID
        #expect(!zoeID.isEmpty && zoeID != response.results[1].applicationID)
        #expect(try await !h.isMember("pub", "zoe"))

        let inbox = try await h.applications(as: .user("zoe"))
        let item = try #require(inbox.applications.first)
        #expect(item.applicationID == zoeID)
        #expect(item.kind == .invitation && item.inviterUserID == "adam" && item.inviteeUserID == "zoe")
        #expect(item.needsConsent && !item.needsApproval)
        #expect(item.callerRoles == [.invitee])
        #expect(item.message == "come")
        let sent = try await h.applications(as: .user("adam"), roles: [.sender])
        #expect(Set(sent.applications.map(\.inviteeUserID)) == ["zoe", "yan"])
        // An approver has nothing to approve: only consent is needed.
        #expect(try await h.applications(as: .user("owner"), roles: [.approver]).applications.isEmpty)
        expectFailure(try await h.accept(zoeID, as: .user("owner")), .permissionDenied, reason: "PERMISSION_DENIED")

        let accepted = try await h.accept(zoeID, as: .user("zoe"), message: "thanks").get()
        #expect(accepted.application?.state == .accepted)
        #expect(accepted.application?.consent?.state == .accepted)
        #expect(accepted.member?.userID == "zoe")
        #expect(try await h.isMember("pub", "zoe"))
        let events = try await h.events("pub")
        let answer = try #require(events.first { $0.kind == .invitationAccepted })
        #expect(answer.recipient == .user("adam"))
        #expect(answer.changes["decision"] == "consent")
        let joined = try #require(events.first { $0.kind == .memberJoined })
        #expect(joined.operatorID == "adam")
        #expect(joined.targets == ["zoe"])
        #expect(events.contains { $0.kind == .invitationReceived && $0.recipient == .user("zoe") })

        let yanRefused = try await h.refuse(response.results[1].applicationID, as: .user("yan"), message: "no thanks").get()
        #expect(yanRefused.application?.state == .refused)
        let refusal = try #require(try await h.events("pub").first { $0.kind == .invitationRefused })
        #expect(refusal.recipient == .user("adam"))
        #expect(refusal.changes["message"] == "no thanks")
        #expect(try await !h.isMember("pub", "yan"))
        #expect(try await h.applications(as: .user("adam"), roles: [.sender]).applications
            .first { $0.inviteeUserID == "yan" }?.handleStatus == .handledByOther)

        // Without consent the invitee joins at once.
        try await h.applicationGroup("open", settings: settings(consent: .notRequired))
        let direct = try await h.invite("open", ["zoe"], as: .user("owner"))
        #expect(direct.results.first?.result == .success)
        #expect(try await h.isMember("open", "zoe"))
    }

    @Test("Invitation needing approval and consent: both are tracked; the invitee is asked after the approval and joins after both")
    func invitationWithApprovalAndConsent() async throws {
        let h = try await ServiceHarness()
        try await h.applicationGroup("pub", settings: settings(invite: .allMembers))
        let response = try await h.invite("pub", ["zoe"], as: .user("mia"))
        let id = try #require(response.results.first?.applicationID)
        #expect(response.results.first?.result == .pending)

        // The invitee is not asked yet.
        #expect(try await h.applications(as: .user("zoe")).applications.isEmpty)
        expectFailure(try await h.accept(id, as: .user("zoe")), .notFound, reason: "APPLICATION_NOT_FOUND")
        let queued = try #require(try await h.applications(as: .user("owner")).applications.first)
        #expect(queued.needsApproval && queued.needsConsent)
        #expect(queued.approval?.state == .pending && queued.consent?.state == .pending)
        #expect(try await h.events("pub").last?.kind == .invitationApprovalRequested)
        // The inviter (an ordinary member) cannot approve their own invitation.
        expectFailure(try await h.accept(id, as: .user("mia")), .permissionDenied, reason: "PERMISSION_DENIED")

        let approved = try await h.accept(id, as: .user("adam"), message: "ok").get()
        #expect(approved.application?.state == .pending)
        #expect(approved.application?.approval?.state == .accepted)
        #expect(approved.application?.approval?.decidedByUserID == "adam")
        #expect(approved.member == nil)
        #expect(try await !h.isMember("pub", "zoe"))
        let asked = try #require(try await h.events("pub").last(where: { $0.kind == .invitationReceived }))
        #expect(asked.recipient == .user("zoe"))
        // The other approver sees the approval handled by adam; approving again is refused.
        let byOwner = try #require(try await h.applications(as: .user("owner")).applications.first)
        #expect(byOwner.handleStatus == .handledByOther)
        let info = expectFailure(try await h.accept(id, as: .user("owner")), .failedPrecondition,
                                 reason: "APPLICATION_ALREADY_HANDLED")
        #expect(info?.metadata["handled_by"] == "adam")

        let inbox = try #require(try await h.applications(as: .user("zoe")).applications.first)
        #expect(inbox.callerRoles == [.invitee])
        let joined = try await h.accept(id, as: .user("zoe")).get()
        #expect(joined.application?.state == .accepted)
        #expect(joined.member?.userID == "zoe")
        #expect(try await h.isMember("pub", "zoe"))
        let memberJoined = try #require(try await h.events("pub").first { $0.kind == .memberJoined })
        #expect(memberJoined.operatorID == "mia")

        // Approval refused: the invitee is never asked, the inviter is told.
        let other = try await h.invite("pub", ["yan"], as: .user("mia")).results[0].applicationID
        _ = try await h.refuse(other, as: .user("owner"), message: "no").get()
        #expect(try await h.applications(as: .user("yan")).applications.isEmpty)
        let refusal = try #require(try await h.events("pub").last(where: { $0.kind == .invitationRefused }))
        #expect(refusal.recipient == .user("mia"))
        #expect(refusal.changes["decision"] == "approval")

        // Approval only (no consent): the invitee joins when approved, and is told.
        try await h.applicationGroup("pub3", settings: settings(invite: .allMembers, consent: .notRequired))
        let third = try await h.invite("pub3", ["kim"], as: .user("mia")).results[0].applicationID
        #expect(try await h.accept(third, as: .user("owner")).get().member?.userID == "kim")
        #expect(try await h.events("pub3").contains { $0.kind == .invitedToGroup && $0.recipient == .user("kim") })
    }

    @Test("Invitation: the inviter withdraws; a repeated invitation replaces the pending one; the invitee is told of the withdrawal")
    func invitationWithdrawAndRepeat() async throws {
        let h = try await ServiceHarness()
        try await h.applicationGroup("pub")
        let first = try await h.invite("pub", ["zoe"], as: .user("adam"), message: "one").results[0].applicationID
        let second = try await h.invite("pub", ["zoe"], as: .user("owner"), message: "two").results[0].applicationID
        #expect(first == second)
        let item = try #require(try await h.applications(as: .user("zoe")).applications.first)
        #expect(item.inviterUserID == "owner" && item.message == "two")
        expectFailure(try await h.withdraw(first, as: .user("adam")), .permissionDenied, reason: "PERMISSION_DENIED")
        expectFailure(try await h.withdraw(first, as: .user("zoe")), .permissionDenied, reason: "PERMISSION_DENIED")
        #expect(try await h.withdraw(first, as: .user("owner")).get().application?.state == .withdrawn)
        let told = try #require(try await h.events("pub").first { $0.kind == .applicationWithdrawn })
        #expect(told.recipient == .user("zoe"))
        expectFailure(try await h.accept(first, as: .user("zoe")), .failedPrecondition, reason: "APPLICATION_ALREADY_HANDLED")
    }

    @Test("Listing: filters by kind, state, group and role; newest first; cursor paging; unread count over every item; read reports")
    func listing() async throws {
        let clock = ManualWallClock()
        let h = try await ServiceHarness(clock: clock)
        try await h.applicationGroup("g1")
        try await h.applicationGroup("g2")
        var created: [String] = []
        for index in 0..<5 {
            clock.advance(seconds: 1)
            created.append(try await h.pendingApplication(index % 2 == 0 ? "g1" : "g2", as: "user\(index)").applicationID)
        }
        clock.advance(seconds: 1)
        let invitation = try await h.invite("g1", ["zoe"], as: .user("owner")).results[0].applicationID
        clock.advance(seconds: 1)
        _ = try await h.refuse(created[0], as: .user("owner")).get()

        let all = try await h.applications(as: .user("owner"))
        #expect(all.applications.map(\.applicationID) == [invitation] + created.reversed())
        #expect(all.unreadCount == 6)
        #expect(all.readTime == nil)
        #expect(try await h.applications(as: .user("owner"), kind: .join).applications.count == 5)
        #expect(try await h.applications(as: .user("owner"), kind: .invitation).applications.map(\.applicationID) == [invitation])
        #expect(try await h.applications(as: .user("owner"), states: [.refused]).applications.map(\.applicationID) == [created[0]])
        #expect(try await h.applications(as: .user("owner"), group: "g2").applications.map(\.applicationID)
            == [created[3], created[1]])
        #expect(try await h.applications(as: .user("owner"), roles: [.sender]).applications.map(\.applicationID) == [invitation])
        #expect(try await h.applications(as: .user("owner"), roles: [.approver]).applications.count == 5)

        // Paging: two at a time, every item once, the unread count over everything on every page.
        var seen: [String] = []
        var token = ""
        repeat {
            let page = try await h.applications(as: .user("owner"), pageSize: 2, token: token)
            #expect(page.applications.count <= 2)
            #expect(page.unreadCount == 6)
            seen += page.applications.map(\.applicationID)
            token = page.nextPageToken
        } while !token.isEmpty
        #expect(seen == all.applications.map(\.applicationID))
        expectFailure(try await h.call(AppMethods.listApplications, .with { $0.pageToken = "nope" }, as: .user("owner")),
                      .invalidArgument, reason: "INVALID_ARGUMENT", field: "page_token")
        expectFailure(try await h.call(AppMethods.listApplications, .with { $0.pageSize = -1 }, as: .user("owner")),
                      .invalidArgument, reason: "INVALID_ARGUMENT", field: "page_size")
        expectFailure(try await h.call(AppMethods.listApplications, .with { $0.states = [.unspecified] }, as: .user("owner")),
                      .invalidArgument, reason: "INVALID_ARGUMENT", field: "states[0]")

        // Read up to the third application: the three oldest become read.
        let third = try #require(all.applications.first { $0.applicationID == created[2] }?.createTime)
        let report = try await h.ok(AppMethods.reportApplicationsRead, .with { $0.readTime = third }, as: .user("owner"))
        #expect(report.unreadCount == 3)
        #expect(report.readTime == third)
        let after = try await h.applications(as: .user("owner"))
        #expect(after.unreadCount == 3)
        #expect(after.readTime == third)
        #expect(try await h.applications(as: .user("owner"), kind: .join).unreadCount == 2)
        // An earlier time changes nothing; no time means now.
        let earlier = try await h.ok(AppMethods.reportApplicationsRead, .with { $0.readTime = .with { $0.seconds = 1 } }, as: .user("owner"))
        #expect(earlier.readTime == third)
        let future = protoTimestamp(clock.now().adding(seconds: 3600))
        let clamped = try await h.ok(AppMethods.reportApplicationsRead, .with { $0.readTime = future }, as: .user("owner"))
        #expect(clamped.readTime?.seconds == clock.now().secondsSince1970)
        #expect(clamped.unreadCount == 0)
        let now = try await h.ok(AppMethods.reportApplicationsRead, .init(), as: .user("owner"))
        #expect(now.unreadCount == 0)
        #expect(now.readTime == clamped.readTime)
        #expect(try await h.applications(as: .user("adam")).unreadCount == 5)
        expectFailure(try await h.call(AppMethods.reportApplicationsRead, .init(), as: .admin), .invalidArgument,
                      reason: "OPERATOR_REQUIRED")

        // The backend lists every item needing approval.
        #expect(try await h.applications(as: .admin).applications.count == 5)
        // Items of a dismissed group are gone; deciding on them is GROUP_NOT_FOUND.
        _ = try await h.dismiss("g2", as: .user("owner")).get()
        #expect(try await h.applications(as: .user("owner")).applications.count == 4)
        expectFailure(try await h.accept(created[1], as: .user("owner")), .notFound, reason: "GROUP_NOT_FOUND")
    }
}
