import GRPCProtocol
import GroupAPI
import GroupModel
@testable import GroupService
import GroupStore
import GroupTestSupport
import Testing

private typealias Messages = Groupd_V1_MessageService.Method
private typealias Members = Groupd_V1_MemberService.Method

extension ServiceHarness {
    /// SendGroupMessage as `identity`.
    fileprivate func send(
        _ group: String, _ text: String = "hi", clientID: String = "", priority: Groupd_V1_MessagePriority = .unspecified,
        as identity: TestIdentity
    ) async throws -> RPCOutcome<Groupd_V1_SendGroupMessageResponse> {
        try await call(Messages.sendGroupMessage, .with {
            $0.groupID = group
            $0.type = "text"
            $0.text = text
            $0.clientMessageID = clientID
            $0.priority = priority
        }, as: identity)
    }

    /// GetGroupMessages as `identity`.
    func history(
        _ group: String, anchor: UInt64 = 0, direction: Groupd_V1_HistoryDirection = .unspecified, pageSize: Int32 = 0,
        token: String = "", as identity: TestIdentity
    ) async throws -> RPCOutcome<Groupd_V1_GetGroupMessagesResponse> {
        try await call(Messages.getGroupMessages, .with {
            $0.groupID = group
            $0.anchorSequence = anchor
            $0.direction = direction
            $0.pageSize = pageSize
            $0.pageToken = token
        }, as: identity)
    }

    /// The texts of the messages `identity` sees in `group`, oldest first (one big page).
    fileprivate func texts(_ group: String, as identity: TestIdentity) async throws -> [String] {
        try await history(group, direction: .newer, pageSize: 100, as: identity).get().messages.map(\.text)
    }
}

@Suite("MessageService, in process")
struct MessageRPCTests {
    @Test("a member sends; the message is stored under the group's sequence and read back")
    func sendAndRead() async throws {
        let h = try await ServiceHarness()
        let group = try await h.create(.public, id: "p", members: [("mia", .member)], owner: "owner", as: .admin)
        _ = try await h.ok(Members.updateMemberInfo, .with {
            $0.groupID = "p"; $0.updateMask = ServiceHarness.mask("name_card"); $0.nameCard = "Mia"
        }, as: .user("mia"))
        let sent = try await h.send("p", "hello", priority: .high, as: .user("mia")).get()
        #expect(sent.result == .sent)
        #expect(!sent.deduplicated)
        let message = try #require(sent.message)
        #expect(message.sequence > group.latestSequence)
        #expect(message.messageID.count == 32)
        #expect(message.senderUserID == "mia")
        #expect(message.senderNameCard == "Mia")
        #expect(message.priority == .high)
        #expect(message.type == "text")
        let events = try await h.events("p")
        #expect(events.last?.kind == .groupMessage)
        #expect(events.last?.sequence == Int64(message.sequence))

        let read = try await h.history("p", as: .user("owner")).get()
        // History adds the read counts of a group with read receipts (Public).
        var counted = message
        counted.readReceiptsCounted = true
        counted.unreadCount = read.messages.first?.unreadCount ?? 0
        #expect(read.messages == [counted])
        #expect(read.messages.first?.readCount == 0 && counted.unreadCount > 0)
        #expect(read.latestSequence == message.sequence)
        #expect(read.nextPageToken.isEmpty)
    }

    @Test("refusals: empty, not a member, the bare backend, a missing group")
    func refusals() async throws {
        let h = try await ServiceHarness()
        try await h.create(.public, id: "p", owner: "owner", as: .admin)
        try await h.create(.work, id: "w", owner: "owner", as: .admin)
        expectFailure(try await h.send("p", "", as: .user("owner")), .invalidArgument, reason: "INVALID_ARGUMENT", field: "text")
        expectFailure(try await h.call(Messages.sendGroupMessage, .with {
            $0.groupID = "p"; $0.text = "x"; $0.type = String(repeating: "t", count: 33)
        }, as: .user("owner")), .invalidArgument, reason: "INVALID_ARGUMENT", field: "type", limit: 32)
        expectFailure(try await h.call(Messages.sendGroupMessage, .with {
            $0.groupID = "p"; $0.payload = Array(repeating: 7, count: GroupRules.messageBodyBytes + 1)
        }, as: .user("owner")), .invalidArgument, reason: "INVALID_ARGUMENT", field: "payload", limit: GroupRules.messageBodyBytes)
        expectFailure(try await h.send("p", as: .user("stranger")), .permissionDenied, reason: "NOT_A_MEMBER")
        expectFailure(try await h.send("w", as: .user("stranger")), .notFound, reason: "GROUP_NOT_FOUND")
        expectFailure(try await h.send("p", as: .admin), .invalidArgument, reason: "OPERATOR_REQUIRED")
        expectFailure(try await h.send("nope", as: .user("owner")), .notFound, reason: "GROUP_NOT_FOUND")
        expectFailure(try await h.send("", as: .user("owner")), .invalidArgument, reason: "INVALID_ARGUMENT", field: "group_id")
        #expect(try await h.send("p", as: .adminActing(for: "owner")).get().result == .sent)
        #expect(try await h.events("p").filter { $0.kind == .groupMessage }.count == 1)
    }

    @Test("a retry with the same client message id returns the first result, also concurrently")
    func idempotentSend() async throws {
        let h = try await ServiceHarness()
        try await h.create(.public, id: "p", members: [("mia", .member)], owner: "owner", as: .admin)
        let first = try await h.send("p", "once", clientID: "c-1", as: .user("mia")).get()
        let again = try await h.send("p", "twice", clientID: "c-1", as: .user("mia")).get()
        #expect(again.deduplicated)
        #expect(again.message == first.message)
        _ = try await h.ok(Members.muteMembers, .with { $0.groupID = "p"; $0.userIds = ["mia"]; $0.durationSeconds = 60 }, as: .user("owner"))
        #expect(try await h.send("p", "once", clientID: "c-1", as: .user("mia")).get().message == first.message)
        _ = try await h.ok(Members.muteMembers, .with { $0.groupID = "p"; $0.userIds = ["mia"]; $0.durationSeconds = 0 }, as: .user("owner"))
        let concurrent = try await withThrowingTaskGroup(of: Groupd_V1_SendGroupMessageResponse.self) { tasks in
            for _ in 0..<8 { tasks.addTask { try await h.send("p", "burst", clientID: "c-2", as: .user("mia")).get() } }
            return try await tasks.reduce(into: []) { $0.append($1) }
        }
        #expect(Set(concurrent.compactMap { $0.message?.messageID }).count == 1)
        #expect(concurrent.filter { !$0.deduplicated }.count == 1)
        #expect(try await h.texts("p", as: .user("mia")) == ["once", "burst"])
    }

    @Test("a muted member gets MEMBER_MUTED until the mute ends")
    func memberMute() async throws {
        let clock = ManualWallClock()
        let h = try await ServiceHarness(clock: clock)
        try await h.create(.public, id: "p", members: [("mia", .member)], owner: "owner", as: .admin)
        _ = try await h.ok(Members.muteMembers, .with { $0.groupID = "p"; $0.userIds = ["mia"]; $0.durationSeconds = 60 }, as: .user("owner"))
        expectFailure(try await h.send("p", as: .user("mia")), .permissionDenied, reason: "MEMBER_MUTED")
        clock.advance(seconds: 60)
        #expect(try await h.send("p", as: .user("mia")).get().result == .sent)
    }

    @Test("each group-mute mode refuses its roles with GROUP_MUTED until it expires")
    func groupMuteModes() async throws {
        let clock = ManualWallClock()
        let h = try await ServiceHarness(clock: clock)
        try await h.create(.public, id: "p", members: [("adam", .admin), ("mia", .member)], owner: "owner", as: .admin)
        let cases: [(Groupd_V1_GroupMuteMode, [Groupd_V1_MemberRole], Set<String>)] = [
            (.all, [], ["owner", "adam", "mia"]),
            (.ordinaryMembers, [], ["mia"]),
            (.roles, [.admin], ["adam"]),
        ]
        for (mode, roles, muted) in cases {
            _ = try await h.ok(Groupd_V1_GroupService.Method.setGroupMute, .with {
                $0.groupID = "p"; $0.muted = true; $0.mode = mode; $0.roles = roles; $0.durationSeconds = 30
            }, as: .user("owner"))
            for user in ["owner", "adam", "mia"] {
                let outcome = try await h.send("p", as: .user(user))
                if muted.contains(user) {
                    expectFailure(outcome, .permissionDenied, reason: "GROUP_MUTED")
                } else {
                    #expect(outcome.response?.result == .sent, "\(mode) \(user)")
                }
            }
            clock.advance(seconds: 30)
            for user in muted { #expect(try await h.send("p", as: .user(user)).response?.result == .sent, "\(mode) \(user) after expiry") }
        }
    }

    @Test("history by type: Work and Public from the join on, Meeting from the first, AVChatRoom none")
    func historyRules() async throws {
        let h = try await ServiceHarness()
        try await h.create(.work, id: "w", owner: "owner", as: .admin)
        try await h.create(.public, id: "p", owner: "owner", as: .admin)
        try await h.create(.meeting, id: "m", owner: "owner", as: .admin)
        try await h.create(.avChatRoom, id: "av", owner: "owner", as: .admin)
        _ = try await h.ok(Groupd_V1_GroupService.Method.updateGroupSettings, .with {
            $0.groupID = "p"; $0.updateMask = ServiceHarness.mask("join_option"); $0.settings = .with { $0.joinOption = .any }
        }, as: .user("owner"))
        for group in ["w", "p", "m"] { _ = try await h.send(group, "before", as: .user("owner")).get() }
        _ = try await h.ok(Members.inviteMembers, .with { $0.groupID = "w"; $0.userIds = ["late"] }, as: .user("owner"))
        _ = try await h.ok(Members.joinGroup, .with { $0.groupID = "p" }, as: .user("late"))
        _ = try await h.ok(Members.joinGroup, .with { $0.groupID = "m" }, as: .user("late"))
        for group in ["w", "p", "m"] { _ = try await h.send(group, "after", as: .user("owner")).get() }

        #expect(try await h.texts("w", as: .user("late")) == ["after"])
        #expect(try await h.texts("p", as: .user("late")) == ["after"])
        #expect(try await h.texts("m", as: .user("late")) == ["before", "after"])
        #expect(try await h.texts("p", as: .user("owner")) == ["before", "after"])
        #expect(try await h.texts("w", as: .admin) == ["before", "after"])
        // The same from the newest end.
        #expect(try await h.history("p", as: .user("late")).get().messages.map(\.text) == ["after"])

        _ = try await h.ok(Members.joinGroup, .with { $0.groupID = "av" }, as: .user("late"))
        expectFailure(try await h.history("av", as: .user("late")), .failedPrecondition, reason: "HISTORY_NOT_KEPT")
        expectFailure(try await h.history("p", as: .user("stranger")), .permissionDenied, reason: "NOT_A_MEMBER")
        expectFailure(try await h.history("w", as: .user("stranger")), .notFound, reason: "GROUP_NOT_FOUND")
    }

    @Test("history pages both ways with tokens; bad tokens and directions are INVALID_ARGUMENT")
    func paging() async throws {
        let h = try await ServiceHarness()
        try await h.create(.public, id: "p", owner: "owner", as: .admin)
        for index in 0..<7 { _ = try await h.send("p", "m\(index)", as: .user("owner")).get() }

        var older: [[String]] = []
        var token = ""
        repeat {
            let page = try await h.history("p", pageSize: 3, token: token, as: .user("owner")).get()
            older.append(page.messages.map(\.text))
            token = page.nextPageToken
        } while !token.isEmpty && older.count < 10
        #expect(older == [["m4", "m5", "m6"], ["m1", "m2", "m3"], ["m0"]])

        var newer: [[String]] = []
        token = ""
        repeat {
            let page = try await h.history("p", direction: .newer, pageSize: 3, token: token, as: .user("owner")).get()
            newer.append(page.messages.map(\.text))
            token = page.nextPageToken
        } while !token.isEmpty && newer.count < 10
        #expect(newer == [["m0", "m1", "m2"], ["m3", "m4", "m5"], ["m6"]])

        let all = try await h.history("p", direction: .newer, pageSize: 100, as: .user("owner")).get().messages
        let anchored = try await h.history("p", anchor: all[3].sequence, direction: .older, pageSize: 2, as: .user("owner")).get()
        #expect(anchored.messages.map(\.text) == ["m1", "m2"])
        let after = try await h.history("p", anchor: all[3].sequence, direction: .newer, pageSize: 2, as: .user("owner")).get()
        #expect(after.messages.map(\.text) == ["m4", "m5"])

        expectFailure(try await h.history("p", token: "garbage", as: .user("owner")), .invalidArgument, reason: "INVALID_ARGUMENT", field: "page_token")
        expectFailure(try await h.history("p", direction: .UNRECOGNIZED(9), as: .user("owner")), .invalidArgument, reason: "INVALID_ARGUMENT", field: "direction")
        expectFailure(try await h.history("p", pageSize: -1, as: .user("owner")), .invalidArgument, reason: "INVALID_ARGUMENT", field: "page_size")
    }

    @Test("MarkGroupRead and unread counts in ListJoinedGroups: Work and Public only")
    func unread() async throws {
        let h = try await ServiceHarness()
        for (type, id) in [(Groupd_V1_GroupType.work, "w"), (.public, "p"), (.meeting, "m")] {
            try await h.create(type, id: id, members: [("mia", .member)], owner: "owner", as: .admin)
            for _ in 0..<3 { _ = try await h.send(id, as: .user("owner")).get() }
            _ = try await h.send(id, "mine", as: .user("mia")).get()
        }
        func listed() async throws -> [String: Groupd_V1_Group] {
            let groups = try await h.ok(Groupd_V1_GroupService.Method.listJoinedGroups, .init(), as: .user("mia")).groups
            return Dictionary(uniqueKeysWithValues: groups.map { ($0.groupID, $0) })
        }
        var groups = try await listed()
        #expect(groups["w"]?.unreadCount == 3)
        #expect(groups["p"]?.unreadCount == 3)
        #expect(groups["m"]?.unreadCount == 0)
        let newest = try await h.history("p", direction: .older, pageSize: 1, as: .user("mia")).get().messages
        #expect(groups["p"]?.lastMessageTime != nil)
        #expect(groups["p"]?.lastMessageTime == newest.first?.sendTime)

        let page = try await h.history("p", direction: .newer, as: .user("mia")).get()
        let marked = try await h.ok(Messages.markGroupRead, .with { $0.groupID = "p"; $0.readSequence = page.messages[1].sequence }, as: .user("mia"))
        #expect(marked.readSequence == page.messages[1].sequence)
        #expect(marked.unreadCount == 1)
        let back = try await h.ok(Messages.markGroupRead, .with { $0.groupID = "p"; $0.readSequence = 1 }, as: .user("mia"))
        #expect(back.readSequence == page.messages[1].sequence)
        groups = try await listed()
        #expect(groups["p"]?.unreadCount == 1)
        #expect(groups["p"]?.readSequence == page.messages[1].sequence)
        #expect(try await h.events("p").filter { $0.kind == .groupRead }.map(\.recipient) == [.user("mia")])

        let all = try await h.ok(Messages.markGroupRead, .with { $0.groupID = "w" }, as: .user("mia"))
        #expect(all.unreadCount == 0)
        let meeting = try await h.ok(Messages.markGroupRead, .with { $0.groupID = "m" }, as: .user("mia"))
        #expect(meeting.unreadCount == 0)
        #expect(meeting.readSequence > 0)

        expectFailure(try await h.call(Messages.markGroupRead, .with { $0.groupID = "p" }, as: .user("stranger")), .permissionDenied, reason: "NOT_A_MEMBER")
        expectFailure(try await h.call(Messages.markGroupRead, .with { $0.groupID = "p" }, as: .admin), .invalidArgument, reason: "OPERATOR_REQUIRED")
        try await h.create(.avChatRoom, id: "av", owner: "owner", as: .admin)
        expectFailure(try await h.call(Messages.markGroupRead, .with { $0.groupID = "av" }, as: .user("owner")), .failedPrecondition, reason: "HISTORY_NOT_KEPT")
    }

    @Test("custom system notifications: from the backend only, to all or to listed members")
    func systemNotification() async throws {
        let h = try await ServiceHarness()
        try await h.create(.public, id: "p", members: [("mia", .member), ("max", .member)], owner: "owner", as: .admin)
        let toAll = try await h.ok(Messages.sendSystemNotification, .with { $0.groupID = "p"; $0.text = "hello"; $0.payload = [1, 2] }, as: .admin)
        let event = try #require(toAll.event)
        #expect(event.kind == .customNotification)
        #expect(event.recipientUserIds.isEmpty)
        #expect(!event.eventID.isEmpty)
        #expect(event.groupName == "group")
        if case .custom(let body) = event.detail {
            #expect(body.text == "hello")
            #expect(body.payload == [1, 2])
        } else {
            Issue.record("no custom detail: \(event)")
        }

        let listed = try await h.ok(Messages.sendSystemNotification, .with { $0.groupID = "p"; $0.recipientUserIds = ["mia", "max"]; $0.text = "psst" }, as: .admin)
        #expect(listed.event?.recipientUserIds == ["mia", "max"])
        let stored = try await h.events("p").filter { $0.kind == .customNotification }
        #expect(stored.map(\.recipient) == [.group, .user("mia"), .user("max")])

        expectFailure(try await h.call(Messages.sendSystemNotification, .with { $0.groupID = "p"; $0.text = "x" }, as: .user("owner")),
                      .permissionDenied, reason: "ADMIN_TOKEN_REQUIRED")
        expectFailure(try await h.call(Messages.sendSystemNotification, .with { $0.groupID = "p"; $0.text = "x" }, as: .adminActing(for: "owner")),
                      .permissionDenied, reason: "ADMIN_TOKEN_REQUIRED")
        expectFailure(try await h.call(Messages.sendSystemNotification, .with { $0.groupID = "p" }, as: .admin),
                      .invalidArgument, reason: "INVALID_ARGUMENT", field: "text")
        expectFailure(try await h.call(Messages.sendSystemNotification, .with { $0.groupID = "p"; $0.text = "x"; $0.recipientUserIds = ["ghost"] }, as: .admin),
                      .invalidArgument, reason: "INVALID_ARGUMENT", field: "recipient_user_ids[0]")
        expectFailure(try await h.call(Messages.sendSystemNotification, .with { $0.groupID = "nope"; $0.text = "x" }, as: .admin),
                      .notFound, reason: "GROUP_NOT_FOUND")
        #expect(try await h.events("p").filter { $0.kind == .customNotification }.count == 3)
    }

    @Test("AVChatRoom: joined members only, not stored; over the rate low is shed, then normal, high kept")
    func avChatRoomShedding() async throws {
        var configuration = TestApps.configuration()
        configuration.apps[0].limits.avChatRoomMessagesPerSecond = 4
        let clock = ManualWallClock()
        let h = try await ServiceHarness(configuration: configuration, clock: clock)
        try await h.create(.avChatRoom, id: "av", owner: "owner", as: .admin)
        expectFailure(try await h.send("av", as: .user("viewer")), .permissionDenied, reason: "NOT_A_MEMBER")
        _ = try await h.ok(Members.joinGroup, .with { $0.groupID = "av" }, as: .user("viewer"))
        let before = try await h.events("av").count

        func results(_ priority: Groupd_V1_MessagePriority, _ count: Int) async throws -> [Groupd_V1_SendResult] {
            var out: [Groupd_V1_SendResult] = []
            for _ in 0..<count { out.append(try await h.send("av", priority: priority, as: .user("viewer")).get().result) }
            return out
        }
        // A bucket of 4: two low pass (half), then low is shed while normal still passes.
        #expect(try await results(.low, 3) == [.sent, .sent, .shed])
        #expect(try await results(.normal, 3) == [.sent, .sent, .shed])
        #expect(try await results(.high, 3) == [.sent, .sent, .sent])
        let shed = try await h.send("av", "lost", priority: .low, as: .user("viewer")).get()
        #expect(shed.result == .shed)
        #expect(shed.message?.text == "lost")
        #expect(shed.message?.sequence == 0)
        clock.advance(seconds: 1)
        #expect(try await results(.normal, 1) == [.sent])
        #expect(try await h.events("av").count == before)

        // A retry of a sent room message answers it again; a shed one may be retried.
        let first = try await h.send("av", "once", clientID: "r-1", as: .user("viewer")).get()
        let again = try await h.send("av", "once", clientID: "r-1", as: .user("viewer")).get()
        #expect(again.deduplicated)
        #expect(again.message?.messageID == first.message?.messageID)
        // Even once the sender is muted: the first send succeeded.
        _ = try await h.ok(Members.muteMembers, .with { $0.groupID = "av"; $0.userIds = ["viewer"]; $0.durationSeconds = 1 }, as: .user("owner"))
        #expect(try await h.send("av", "once", clientID: "r-1", as: .user("viewer")).get().deduplicated)
        expectFailure(try await h.send("av", "new", as: .user("viewer")), .permissionDenied, reason: "MEMBER_MUTED")
        clock.advance(seconds: 1)
        _ = try await results(.high, 4)
        #expect(try await h.send("av", "later", clientID: "r-2", priority: .low, as: .user("viewer")).get().result == .shed)
        clock.advance(seconds: 1)
        let retried = try await h.send("av", "later", clientID: "r-2", priority: .low, as: .user("viewer")).get()
        #expect(retried.result == .sent)
        #expect(!retried.deduplicated)
    }
}

@Suite("AVChatRoom room state on a node")
struct MessageRoomStateTests {
    private func message(_ room: Int, clientID: String? = nil, at time: Timestamp) -> GroupMessage {
        GroupMessage(
            appID: "app", groupID: "room-\(room)", sequence: 0, messageID: "m", senderID: "u",
            content: MessageContent(text: "x", clientMessageID: clientID), time: time)
    }

    @Test("quiet rooms are forgotten once there are many; remembered retries keep a room until they expire")
    func pruning() {
        let limiter = RoomMessageLimiter()
        let t0 = Timestamp(millisecondsSince1970: 1_700_000_000_000)
        let rooms = RoomMessageLimiter.pruneThreshold + 100
        for room in 0..<rooms {
            _ = limiter.admit(message(room, clientID: room % 2 == 0 ? "c" : nil, at: t0), rate: 40, now: t0)
        }
        #expect(limiter.roomCount == rooms)
        // Two seconds later every bucket is full again: only rooms remembering a retry stay, and
        // the room just used.
        let t1 = t0.adding(seconds: 2)
        _ = limiter.admit(message(rooms, at: t1), rate: 40, now: t1)
        #expect(limiter.roomCount == (rooms + 1) / 2 + 1)
        #expect(limiter.sent(app: "app", groupID: "room-0", senderID: "u", clientMessageID: "c", now: t1) != nil)
        // Once the retries expire, those rooms go too, the next time there are many rooms: every
        // room older than the prune is forgotten, the ones used since are kept.
        let t2 = t0.adding(seconds: RoomMessageLimiter.retrySeconds + 1)
        let fresh = RoomMessageLimiter.pruneThreshold + 1
        for room in 0..<fresh { _ = limiter.admit(message(rooms + 10 + room, at: t2), rate: 40, now: t2) }
        #expect(limiter.roomCount == fresh)
    }

    @Test("a retry is answered from memory only within the retry window")
    func retryWindow() {
        let limiter = RoomMessageLimiter()
        let t0 = Timestamp(millisecondsSince1970: 1_700_000_000_000)
        let first = limiter.admit(message(1, clientID: "c", at: t0), rate: 40, now: t0)
        #expect(limiter.admit(message(1, clientID: "c", at: t0), rate: 40, now: t0) == .sent(message(1, clientID: "c", at: t0), deduplicated: true))
        #expect(first == .sent(message(1, clientID: "c", at: t0), deduplicated: false))
        let late = t0.adding(seconds: RoomMessageLimiter.retrySeconds + 1)
        #expect(limiter.sent(app: "app", groupID: "room-1", senderID: "u", clientMessageID: "c", now: late) == nil)
        #expect(limiter.admit(message(1, clientID: "c", at: late), rate: 40, now: late) == .sent(message(1, clientID: "c", at: late), deduplicated: false))
    }
}
