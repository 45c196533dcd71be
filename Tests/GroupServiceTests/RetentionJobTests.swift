import GRPCProtocol
import GroupAPI
import GroupModel
@testable import GroupService
import GroupStore
import GroupTestSupport
import Testing

private typealias MessageCalls = Groupd_V1_MessageService.Method

/// A harness whose app-a expires applications after `expiry` seconds and keeps messages
/// `messageRetention` seconds (0: forever), on a manual clock.
private func retentionHarness(
    expiry: Int = 3600, messageRetention: Int = 0, clock: ManualWallClock
) async throws -> ServiceHarness {
    var configuration = TestApps.configuration()
    configuration.apps[0].limits.applicationExpirySeconds = expiry
    configuration.apps[0].limits.messageRetentionSeconds = messageRetention
    return try await ServiceHarness(configuration: configuration, clock: clock)
}

extension ServiceHarness {
    /// SendGroupMessage of `text` as `identity`; the message's sequence.
    fileprivate func say(_ group: String, _ text: String, as identity: TestIdentity) async throws -> UInt64 {
        let sent = try await ok(MessageCalls.sendGroupMessage, .with {
            $0.groupID = group
            $0.type = "text"
            $0.text = text
        }, as: identity)
        return try #require(sent.message).sequence
    }

    /// One GetGroupMessages page as `identity` (MessageRPCTests' `history`, which must succeed).
    fileprivate func page(
        _ group: String, anchor: UInt64 = 0, direction: Groupd_V1_HistoryDirection, size: Int32 = 100,
        token: String = "", as identity: TestIdentity
    ) async throws -> Groupd_V1_GetGroupMessagesResponse {
        try await history(group, anchor: anchor, direction: direction, pageSize: size, token: token, as: identity).get()
    }
}

@Suite("Retention job: application expiry sweep, message retention; application events' detail")
struct RetentionJobTests {
    @Test("The sweep expires due items without any traffic: APPLICATION_EXPIRED reaches the approvers' and the applicant's streams with the item")
    func sweepEmitsExpiry() async throws {
        let clock = ManualWallClock()
        let h = try await retentionHarness(clock: clock)
        try await h.applicationGroup("pub")
        let item = try await h.pendingApplication("pub", as: "zoe", message: "let me in")
        let owner = try await TestStream(h, subscribeRequest(), as: .user("owner"))
        let zoe = try await TestStream(h, subscribeRequest(), as: .user("zoe"))
        await owner.waitCaughtUp()
        await zoe.waitCaughtUp()

        // Not yet due: nothing happens.
        clock.advance(seconds: 3599)
        #expect(try await h.service.expireDueApplications() == 0)
        clock.advance(seconds: 1)
        let report = try await h.service.runRetentionPass()
        // One to the applicant, one to the approvers.
        #expect(report.expiryEvents == 2)
        #expect(try await h.service.expireDueApplications() == 0)

        for stream in [owner, zoe] {
            await stream.wait { $0.contains { $0.hasEvent && $0.event.kind == .applicationExpired } }
            let event = try #require(stream.events.first { $0.kind == .applicationExpired })
            #expect(event.groupID == "pub")
            #expect(event.application.applicationID == item.applicationID)
            #expect(event.application.state == .expired)
            #expect(event.application.applicantUserID == "zoe")
            #expect(event.application.message == "let me in")
            #expect(event.application.groupName == "Club pub")
            // Reader-relative fields are ListApplications' business.
            #expect(event.application.handleStatus == .unspecified)
            #expect(event.application.callerRoles.isEmpty)
        }
        #expect(zoe.events.first { $0.kind == .applicationExpired }?.recipientUserIds == ["zoe"])
        #expect(try await h.events("pub").filter { $0.kind == .applicationExpired }.count == 2)
        await owner.cancel()
        await zoe.cancel()
    }

    @Test("The sweep covers every group with due items and only due ones")
    func sweepManyGroups() async throws {
        let clock = ManualWallClock()
        let h = try await retentionHarness(clock: clock)
        for index in 0..<3 { try await h.applicationGroup("g\(index)") }
        _ = try await h.pendingApplication("g0", as: "u0")
        _ = try await h.pendingApplication("g1", as: "u1")
        clock.advance(seconds: 1800)
        let late = try await h.pendingApplication("g2", as: "u2")
        clock.advance(seconds: 1800)
        #expect(try await h.service.expireDueApplications() == 4)
        #expect(try await h.applications(as: .user("owner"), states: [.expired]).applications.count == 2)
        let pending = try await h.applications(as: .user("owner"), states: [.pending]).applications
        #expect(pending.map(\.applicationID) == [late.applicationID])
    }

    @Test("The periodic retention job runs on the service's clock: a pass when an advance reaches its turn, none before")
    func periodicJobFollowsTheClock() async throws {
        let clock = ManualWallClock()
        let h = try await retentionHarness(expiry: 30, clock: clock)
        try await h.applicationGroup("pub")
        _ = try await h.pendingApplication("pub", as: "zoe")
        let job = Task { await h.service.runEventRetention(every: .seconds(60)) }
        await clock.settle(jobs: 1)  // the first pass ran: nothing was due
        #expect(try await h.applications(as: .user("owner"), states: [.expired]).applications.isEmpty)
        clock.advance(seconds: 59)  // the item is due, the job's turn has not come
        await clock.settle()
        #expect(try await h.events("pub").filter { $0.kind == .applicationExpired }.isEmpty)
        clock.advance(seconds: 1)
        await clock.settle()
        #expect(try await h.events("pub").filter { $0.kind == .applicationExpired }.count == 2)
        job.cancel()
        await job.value
    }

    @Test("Application events carry the item: received, accepted, refused, withdrawn, invitation received and accepted")
    func applicationDetail() async throws {
        let h = try await ServiceHarness()
        try await h.applicationGroup("pub")
        let firehose = try await TestStream(h, subscribeRequest(), as: .admin)
        await firehose.waitCaughtUp()
        let accepted = try await h.pendingApplication("pub", as: "zoe", message: "hello")
        _ = try await h.accept(accepted.applicationID, as: .user("adam"), message: "welcome").get()
        let refused = try await h.pendingApplication("pub", as: "yan")
        _ = try await h.refuse(refused.applicationID, as: .user("owner"), message: "no").get()
        let withdrawn = try await h.pendingApplication("pub", as: "xia")
        _ = try await h.withdraw(withdrawn.applicationID, as: .user("xia")).get()
        await firehose.wait { items in
            items.contains { $0.hasEvent && $0.event.kind == .applicationWithdrawn }
        }
        let events = firehose.events
        let received = events.filter { $0.kind == .applicationReceived }
        #expect(received.map(\.application.applicationID) == [accepted.applicationID, refused.applicationID, withdrawn.applicationID])
        #expect(received.first?.application.message == "hello")
        let acceptance = try #require(events.first { $0.kind == .applicationAccepted })
        #expect(acceptance.application.state == .accepted)
        #expect(acceptance.application.handledByUserID == "adam")
        #expect(acceptance.application.handleMessage == "welcome")
        let refusal = try #require(events.first { $0.kind == .applicationRefused })
        #expect(refusal.application.applicationID == refused.applicationID)
        #expect(refusal.application.state == .refused)
        #expect(refusal.application.handleMessage == "no")
        let withdrawal = try #require(events.first { $0.kind == .applicationWithdrawn })
        #expect(withdrawal.application.applicationID == withdrawn.applicationID)
        #expect(withdrawal.application.state == .withdrawn)
        // Other kinds keep their own detail (or none).
        #expect(events.first { $0.kind == .memberJoined }?.application.applicationID.isEmpty != false)
        // The same items resumed from the store.
        let resumed = try await TestStream(h, subscribeRequest(fromOldest: true), as: .admin)
        await resumed.waitCaughtUp()
        #expect(resumed.events.filter { $0.kind == .applicationReceived }.map(\.application.applicationID)
            == received.map(\.application.applicationID))
        await firehose.cancel()
        await resumed.cancel()
    }

    @Test("An invitation needing consent: INVITATION_RECEIVED carries the invitation to the invitee")
    func invitationDetail() async throws {
        let h = try await ServiceHarness()
        try await h.applicationGroup("pub", settings: settings(consent: .required))
        let ivan = try await TestStream(h, subscribeRequest(), as: .user("ivan"))
        await ivan.waitCaughtUp()
        _ = try await h.invite("pub", ["ivan"], as: .user("owner"), message: "join us")
        await ivan.wait { $0.contains { $0.hasEvent && $0.event.kind == .invitationReceived } }
        let event = try #require(ivan.events.first { $0.kind == .invitationReceived })
        #expect(event.application.kind == .invitation)
        #expect(event.application.inviterUserID == "owner")
        #expect(event.application.inviteeUserID == "ivan")
        #expect(event.application.message == "join us")
        #expect(event.application.state == .pending)
        await ivan.cancel()
    }

    @Test("Message retention: messages past it are purged; history walks stop at the oldest kept; 0 keeps everything")
    func messageRetention() async throws {
        let clock = ManualWallClock()
        let h = try await retentionHarness(messageRetention: 3600, clock: clock)
        try await h.create(.public, id: "g", members: [("bob", .member)], owner: "alice", as: .admin)
        let old1 = try await h.say("g", "old 1", as: .user("alice"))
        let old2 = try await h.say("g", "old 2", as: .user("bob"))
        clock.advance(seconds: 1800)
        let kept1 = try await h.say("g", "kept 1", as: .user("alice"))
        let kept2 = try await h.say("g", "kept 2", as: .user("bob"))
        clock.advance(seconds: 1801)

        let report = try await h.service.runRetentionPass()
        #expect(report.purgedMessages == 2)
        #expect(try await h.service.purgeExpiredMessages() == 0)
        // NEWER from the start begins at the oldest kept message.
        let newer = try await h.page("g", direction: .newer, as: .user("bob"))
        #expect(newer.messages.map(\.text) == ["kept 1", "kept 2"])
        #expect(newer.messages.map(\.sequence) == [kept1, kept2])
        // OLDER from the newest ends at the oldest kept message: no token into the purged range.
        let older = try await h.page("g", direction: .older, size: 1, as: .user("bob"))
        #expect(older.messages.map(\.text) == ["kept 2"])
        let next = try await h.page("g", direction: .older, size: 1, token: older.nextPageToken, as: .user("bob"))
        #expect(next.messages.map(\.text) == ["kept 1"])
        #expect(next.nextPageToken.isEmpty)
        // An anchor inside the purged range reads nothing below it; sequences are not reused.
        let below = try await h.page("g", anchor: old2 + 1, direction: .older, as: .user("bob"))
        #expect(below.messages.isEmpty)
        #expect(below.latestSequence >= kept2)
        let after = try await h.page("g", anchor: old1, direction: .newer, as: .user("bob"))
        #expect(after.messages.map(\.text) == ["kept 1", "kept 2"])
        // The purged rows are gone from the event log too: a stream from the oldest has only kept messages.
        let stream = try await TestStream(h, subscribeRequest(fromOldest: true), as: .user("bob"))
        await stream.waitCaughtUp()
        #expect(stream.items.filter(\.hasMessage).map(\.message.text) == ["kept 1", "kept 2"])
        await stream.cancel()
        // The unread count counts kept messages only (bob has read nothing, sent one kept one).
        let joined = try await h.ok(Methods.listJoinedGroups, .init(), as: .user("bob"))
        #expect(joined.groups.first?.unreadCount == 1)
    }

    @Test("Message retention 0 (the default) keeps history forever")
    func messageRetentionForever() async throws {
        let clock = ManualWallClock()
        let h = try await retentionHarness(clock: clock)
        #expect(AppLimits.defaults.messageRetentionSeconds == 0)
        try await h.create(.public, id: "g", owner: "alice", as: .admin)
        _ = try await h.say("g", "ancient", as: .user("alice"))
        clock.advance(seconds: 365 * 24 * 3600)
        #expect(try await h.service.runRetentionPass().purgedMessages == 0)
        #expect(try await h.page("g", direction: .newer, as: .user("alice")).messages.map(\.text) == ["ancient"])
    }

    @Test("Message retention is per app: another app's messages stay")
    func messageRetentionPerApp() async throws {
        let clock = ManualWallClock()
        let h = try await retentionHarness(messageRetention: 60, clock: clock)
        try await h.create(.public, id: "g", owner: "alice", as: .admin)
        try await h.create(.public, id: "g", owner: "alice", as: .admin(app: TestApps.appB))
        _ = try await h.say("g", "a", as: .user("alice"))
        _ = try await h.say("g", "b", as: .user("alice", app: TestApps.appB))
        clock.advance(seconds: 61)
        #expect(try await h.service.purgeExpiredMessages() == 1)
        #expect(try await h.page("g", direction: .newer, as: .user("alice")).messages.isEmpty)
        #expect(try await h.page("g", direction: .newer, as: .user("alice", app: TestApps.appB)).messages.map(\.text) == ["b"])
    }
}
