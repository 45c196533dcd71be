import GRPCProtocol
import GroupAPI
import GroupModel
import GroupService
import GroupStore
import GroupTestSupport
import Testing

@Suite("Subscribe: membership, firehose, types, retention, back-pressure")
struct SubscribeRoutingTests {
    @Test("A joiner receives the group from its join on; a kicked member receives the kick, then nothing more")
    func joinAndKick() async throws {
        let harness = try await ServiceHarness()
        try await harness.create(.work, id: "g", owner: "alice", as: .admin)
        try await harness.rename("g", to: "before", as: .user("alice"))
        let carol = try await TestStream(harness, subscribeRequest(), as: .user("carol"))
        await carol.waitCaughtUp()
        try await harness.rename("g", to: "still before", as: .user("alice"))
        _ = try await harness.ok(StreamMemberMethods.inviteMembers, .with {
            $0.groupID = "g"
            $0.userIds = ["carol"]
        }, as: .user("alice"))
        try await harness.rename("g", to: "after", as: .user("alice"))
        await carol.wait { $0.filter(\.hasEvent).count == 3 }
        #expect(carol.events.map(\.kind) == [.memberInvited, .invited, .groupInfoChanged])
        #expect(carol.events[0].memberCount == 2)
        #expect(carol.events[0].targetUserIds == ["carol"])

        _ = try await harness.ok(StreamMemberMethods.kickMembers, .with {
            $0.groupID = "g"
            $0.userIds = ["carol"]
        }, as: .user("alice"))
        try await harness.rename("g", to: "after kick", as: .user("alice"))
        // A marker: one more item addressed to the group after the kick, observed by alice.
        let alice = try await TestStream(harness, subscribeRequest(fromOldest: true), as: .user("alice"))
        await alice.wait { items in items.contains { $0.hasEvent && $0.event.kind == .groupInfoChanged && $0.event.sequence == 9 } }
        await harness.service.events.drain()
        await carol.wait { $0.filter(\.hasEvent).count == 5 }
        #expect(carol.events.map(\.kind) == [.memberInvited, .invited, .groupInfoChanged, .memberKicked, .kicked])

        // The same from the store: a resume from before the join gets the same window.
        let resumed = try await TestStream(
            harness, subscribeRequest(cursor: carol.items[0].cursor), as: .user("carol"))
        await resumed.waitCaughtUp()
        #expect(resumed.events.map(\.kind) == [.memberInvited, .invited, .groupInfoChanged, .memberKicked, .kicked])
        let fromOldest = try await TestStream(harness, subscribeRequest(fromOldest: true), as: .user("carol"))
        await fromOldest.waitCaughtUp()
        #expect(fromOldest.events.map(\.kind) == [.memberInvited, .invited, .groupInfoChanged, .memberKicked, .kicked])
        for stream in [carol, alice, resumed, fromOldest] { await stream.cancel() }
    }

    @Test("The firehose (admin token, no operator) gets every event of its app, filtered by groups and kinds")
    func firehoseFilters() async throws {
        let harness = try await ServiceHarness()
        let all = try await TestStream(harness, subscribeRequest(), as: .admin)
        let oneGroup = try await TestStream(harness, subscribeRequest(groups: ["g1"]), as: .admin)
        let joins = try await TestStream(harness, subscribeRequest(kinds: [.memberJoined, .memberInvited]), as: .admin)
        let otherApp = try await TestStream(harness, subscribeRequest(), as: .admin(app: TestApps.appB))
        for stream in [all, oneGroup, joins, otherApp] { await stream.waitCaughtUp() }
        try await harness.create(.work, id: "g1", owner: "alice", as: .admin)
        try await harness.create(.work, id: "g2", owner: "alice", as: .admin)
        for group in ["g1", "g2"] {
            _ = try await harness.ok(StreamMemberMethods.inviteMembers, .with {
                $0.groupID = group
                $0.userIds = ["bob"]
            }, as: .user("alice"))
        }
        await all.wait { $0.filter(\.hasEvent).count == 6 }
        await harness.service.events.drain()
        #expect(all.events.map(\.kind) == [.groupCreated, .groupCreated, .memberInvited, .invited, .memberInvited, .invited])
        #expect(oneGroup.events.map(\.groupID) == ["g1", "g1", "g1"])
        #expect(joins.events.map(\.kind) == [.memberInvited, .memberInvited])
        #expect(otherApp.events.isEmpty)
        // The same filters over the backlog.
        let replay = try await TestStream(
            harness, subscribeRequest(fromOldest: true, groups: ["g2"], kinds: [.memberInvited]), as: .admin)
        await replay.waitCaughtUp()
        #expect(replay.events.map { "\($0.groupID)/\($0.kind)" } == ["g2/memberInvited"])
        for stream in [all, oneGroup, joins, otherApp, replay] { await stream.cancel() }
    }

    @Test("Meeting member-change events never reach member streams (the firehose keeps them)")
    func meetingNoMemberEvents() async throws {
        let harness = try await ServiceHarness()
        try await harness.create(.meeting, id: "m", members: [("bob", .member)], owner: "alice", as: .admin)
        let bob = try await TestStream(harness, subscribeRequest(fromOldest: true), as: .user("bob"))
        let backend = try await TestStream(harness, subscribeRequest(fromOldest: true), as: .admin)
        await bob.waitCaughtUp()
        _ = try await harness.ok(StreamMemberMethods.joinGroup, .with { $0.groupID = "m" }, as: .user("carol"))
        try await harness.rename("m", to: "renamed", as: .user("alice"))
        await bob.wait { $0.filter(\.hasEvent).count == 2 }
        await backend.wait { $0.filter(\.hasEvent).count == 3 }
        #expect(bob.events.map(\.kind) == [.groupCreated, .groupInfoChanged])
        #expect(backend.events.map(\.kind) == [.groupCreated, .memberJoined, .groupInfoChanged])
        // carol joined and receives the group's items from her join on, without the join itself.
        let carol = try await TestStream(harness, subscribeRequest(fromOldest: true), as: .user("carol"))
        await carol.waitCaughtUp()
        #expect(carol.events.map(\.kind) == [.groupInfoChanged])
        for stream in [bob, backend, carol] { await stream.cancel() }
    }

    @Test("AVChatRoom member events reach user streams at most the room's rate per second")
    func avChatRoomMemberEventsRateLimited() async throws {
        let clock = ManualWallClock()
        let harness = try await ServiceHarness(clock: clock)
        try await harness.create(.avChatRoom, id: "room", owner: "alice", as: .admin)
        let alice = try await TestStream(harness, subscribeRequest(), as: .user("alice"))
        let backend = try await TestStream(harness, subscribeRequest(), as: .admin)
        await alice.waitCaughtUp()
        await backend.waitCaughtUp()
        let limit = EventHub.Settings().avChatRoomMemberEventsPerSecond
        for index in 0..<(limit + 5) {
            _ = try await harness.ok(StreamMemberMethods.joinGroup, .with { $0.groupID = "room" }, as: .user("viewer\(index)"))
        }
        await backend.wait { $0.filter(\.hasEvent).count == limit + 5 }
        await harness.service.events.drain()
        #expect(alice.events.count == limit)
        clock.advance(seconds: 1)
        _ = try await harness.ok(StreamMemberMethods.joinGroup, .with { $0.groupID = "room" }, as: .user("late"))
        await alice.wait { $0.filter(\.hasEvent).count == limit + 1 }
        #expect(alice.events.last?.targetUserIds == ["late"])
        await alice.cancel()
        await backend.cancel()
    }

    @Test("A cursor older than the retention ends with OUT_OF_RANGE / CURSOR_EXPIRED and the oldest cursor")
    func cursorExpired() async throws {
        let clock = ManualWallClock()
        let harness = try await ServiceHarness(clock: clock)
        try await harness.create(.public, id: "g", members: [("bob", .member)], owner: "alice", as: .admin)
        let first = try await TestStream(harness, subscribeRequest(fromOldest: true), as: .user("bob"))
        await first.waitCaughtUp()
        let oldCursor = first.items[0].cursor
        await first.cancel()
        let retention = Int64(AppLimits.defaults.eventRetentionSeconds)
        clock.advance(seconds: retention - 10)
        try await harness.rename("g", to: "recent", as: .user("alice"))
        clock.advance(seconds: 20)

        let expired = try await TestStream(harness, subscribeRequest(cursor: oldCursor), as: .user("bob"))
        let status = await expired.waitEnd()
        #expect(status?.code == .outOfRange)
        #expect(status?.errorInfo?.reason == "CURSOR_EXPIRED")
        let oldest = try #require(status?.resumeInfo?.cursor)
        // Purged or not, the oldest cursor resumes at the oldest retained item.
        #expect(try await harness.service.purgeExpiredEvents() == 1)
        let resumed = try await TestStream(harness, subscribeRequest(cursor: oldest), as: .user("bob"))
        await resumed.waitCaughtUp()
        #expect(resumed.events.map(\.kind) == [.groupInfoChanged])
        await resumed.cancel()
    }

    @Test("A subscriber that stops reading is ended with UNAVAILABLE / SUBSCRIBER_TOO_SLOW and its cursor; its queue stays bounded")
    func slowConsumer() async throws {
        let harness = try await ServiceHarness()
        try await harness.create(.public, id: "g", members: [("bob", .member)], owner: "alice", as: .admin)
        let slow = try await TestStream(harness, subscribeRequest(), as: .user("bob"), capacity: 4, stalled: true)
        await slow.waitCaughtUp()
        for round in 0..<10 { try await harness.rename("g", to: "n\(round)", as: .user("alice")) }
        let status = await slow.waitEnd()
        #expect(status?.code == .unavailable)
        #expect(status?.errorInfo?.reason == "SUBSCRIBER_TOO_SLOW")
        #expect(slow.queuedCount == 4)
        #expect(slow.items.count == 4)
        let cursor = try #require(status?.resumeInfo?.cursor)
        #expect(cursor == slow.items.last?.cursor)
        #expect(harness.service.events.streamCount == 0)
        // It resumes from the store with everything it missed.
        let resumed = try await TestStream(harness, subscribeRequest(cursor: cursor), as: .user("bob"))
        await resumed.waitCaughtUp()
        #expect(slow.events.map(\.sequence) + resumed.events.map(\.sequence) == Array(2...11))
        await resumed.cancel()
    }

    @Test("A slow stream does not hold up the others")
    func slowConsumerIsolated() async throws {
        let harness = try await ServiceHarness()
        try await harness.create(.public, id: "g", members: [("bob", .member)], owner: "alice", as: .admin)
        let slow = try await TestStream(harness, subscribeRequest(), as: .user("bob"), capacity: 2, stalled: true)
        let fast = try await TestStream(harness, subscribeRequest(), as: .user("bob"))
        await slow.waitCaughtUp()
        await fast.waitCaughtUp()
        for round in 0..<20 { try await harness.rename("g", to: "n\(round)", as: .user("alice")) }
        await fast.wait { $0.filter(\.hasEvent).count == 20 }
        #expect(await slow.waitEnd()?.code == .unavailable)
        await fast.cancel()
    }

    @Test("Shutdown ends every stream with UNAVAILABLE and its cursor, and refuses new ones")
    func shutdown() async throws {
        let harness = try await ServiceHarness()
        try await harness.create(.public, id: "g", members: [("bob", .member)], owner: "alice", as: .admin)
        let stream = try await TestStream(harness, subscribeRequest(fromOldest: true), as: .user("bob"))
        await stream.waitCaughtUp()
        harness.service.events.shutdown()
        let status = await stream.waitEnd()
        #expect(status?.code == .unavailable)
        #expect(status?.resumeInfo?.cursor == stream.items.last?.cursor)
        let refused = try await TestStream(harness, subscribeRequest(), as: .user("bob"))
        #expect(await refused.waitEnd()?.code == .unavailable)
    }

    @Test("Messages reach members' streams except where the receive option is not to receive; events still do")
    func messagesAndReceiveOption() async throws {
        let harness = try await ServiceHarness()
        try await harness.create(.work, id: "g", members: [("bob", .member), ("carol", .member)], owner: "alice", as: .admin)
        let bob = try await TestStream(harness, subscribeRequest(), as: .user("bob"))
        let carol = try await TestStream(harness, subscribeRequest(), as: .user("carol"))
        let carolEventsOnly = try await TestStream(harness, subscribeRequest(excludeMessages: true), as: .user("carol"))
        for stream in [bob, carol, carolEventsOnly] { await stream.waitCaughtUp() }
        _ = try await harness.ok(StreamMemberMethods.setReceiveMessageOption, .with {
            $0.groupID = "g"
            $0.option = .notReceive
        }, as: .user("bob"))
        _ = try await harness.ok(Groupd_V1_MessageService.Method.sendGroupMessage, .with {
            $0.groupID = "g"
            $0.text = "hello"
        }, as: .user("alice"))
        try await harness.rename("g", to: "marker", as: .user("alice"))
        await carol.wait { $0.filter(\.hasEvent).count == 1 }
        await bob.wait { $0.filter(\.hasEvent).count == 2 }
        await carolEventsOnly.wait { $0.filter(\.hasEvent).count == 1 }
        #expect(carol.items.filter(\.hasMessage).map(\.message.text) == ["hello"])
        #expect(carol.items.first(where: \.hasMessage)?.message.sequence == 3)
        #expect(bob.items.filter(\.hasMessage).isEmpty)
        #expect(bob.events.map(\.kind) == [.receiveOptionChanged, .groupInfoChanged])
        #expect(bob.events[0].receiveOption.option == .notReceive)
        #expect(carolEventsOnly.items.filter(\.hasMessage).isEmpty)
        // The same from the store.
        let replay = try await TestStream(harness, subscribeRequest(fromOldest: true), as: .user("carol"))
        await replay.waitCaughtUp()
        #expect(replay.items.filter(\.hasMessage).map(\.message.text) == ["hello"])
        let bobReplay = try await TestStream(harness, subscribeRequest(fromOldest: true), as: .user("bob"))
        await bobReplay.waitCaughtUp()
        #expect(bobReplay.items.filter(\.hasMessage).isEmpty)
        for stream in [bob, carol, carolEventsOnly, replay, bobReplay] { await stream.cancel() }
    }

    @Test("Notifications addressed to a user reach only that user's streams")
    func addressedNotifications() async throws {
        let harness = try await ServiceHarness()
        try await harness.create(.work, id: "g", members: [("bob", .member), ("carol", .member)], owner: "alice", as: .admin)
        let bob = try await TestStream(harness, subscribeRequest(), as: .user("bob"))
        let carol = try await TestStream(harness, subscribeRequest(), as: .user("carol"))
        await bob.waitCaughtUp()
        await carol.waitCaughtUp()
        _ = try await harness.ok(StreamMemberMethods.setGroupRemark, .with {
            $0.groupID = "g"
            $0.remark = "mine"
        }, as: .user("bob"))
        try await harness.rename("g", to: "marker", as: .user("alice"))
        await carol.wait { $0.filter(\.hasEvent).count == 1 }
        await bob.wait { $0.filter(\.hasEvent).count == 2 }
        #expect(bob.events.map(\.kind) == [.remarkChanged, .groupInfoChanged])
        #expect(bob.events[0].remark.remark == "mine")
        #expect(bob.events[0].recipientUserIds == ["bob"])
        #expect(carol.events.map(\.kind) == [.groupInfoChanged])
        await bob.cancel()
        await carol.cancel()
    }
}
