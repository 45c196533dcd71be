import GroupModel
import Testing

/// A group of `type` with the type's default settings, owned by `owner`, at sequence 10.
private func messageGroup(_ type: GroupType, mute: GroupMuteState = .unmuted) -> Group {
    Group(
        appID: "app", id: "g1", type: type, name: "room", settings: type.preset.defaultSettings, ownerID: "owner",
        maxMembers: nil, createdAt: now, updatedAt: now, latestSequence: 10, mute: mute)
}

private func member(_ id: String, _ role: MemberRole, joinSequence: Int64 = 0, mutedUntil: Timestamp? = nil) -> Member {
    Member(userID: id, role: role, joinedAt: now, joinSequence: joinSequence, nameCard: "card-\(id)", mutedUntil: mutedUntil)
}

@Suite("Message rules: validation")
struct MessageValidationTests {
    @Test("a message needs a text or a payload")
    func emptyMessage() {
        let error = groupError { try GroupRules.validateMessage(MessageContent(type: "text")) }
        #expect(error?.code == .invalidArgument)
        #expect(error?.metadata["field"] == "text")
    }

    @Test("text alone, payload alone and both are accepted")
    func bodies() throws {
        try GroupRules.validateMessage(MessageContent(text: "hi"))
        try GroupRules.validateMessage(MessageContent(payload: [0, 1, 2]))
        try GroupRules.validateMessage(MessageContent(type: "custom", text: "hi", payload: [1]))
    }

    @Test("text and payload together are limited to 12 KiB")
    func bodyLimit() throws {
        let limit = GroupRules.messageBodyBytes
        try GroupRules.validateMessage(MessageContent(text: String(repeating: "a", count: limit)))
        try GroupRules.validateMessage(MessageContent(text: "ab", payload: Array(repeating: 1, count: limit - 2)))
        let overText = groupError { try GroupRules.validateMessage(MessageContent(text: String(repeating: "a", count: limit + 1))) }
        #expect(overText?.metadata["field"] == "text")
        #expect(overText?.metadata["limit"] == String(limit))
        let overBoth = groupError {
            try GroupRules.validateMessage(MessageContent(text: "abc", payload: Array(repeating: 1, count: limit - 2)))
        }
        #expect(overBoth?.metadata["field"] == "payload")
    }

    @Test("type tag and client message id have byte limits")
    func tagLimits() throws {
        try GroupRules.validateMessage(MessageContent(type: String(repeating: "t", count: 32), text: "x"))
        let type = groupError { try GroupRules.validateMessage(MessageContent(type: String(repeating: "t", count: 33), text: "x")) }
        #expect(type?.metadata["field"] == "type")
        try GroupRules.validateMessage(MessageContent(text: "x", clientMessageID: String(repeating: "c", count: 64)))
        let id = groupError {
            try GroupRules.validateMessage(MessageContent(text: "x", clientMessageID: String(repeating: "c", count: 65)))
        }
        #expect(id?.metadata["field"] == "client_message_id")
        let control = groupError { try GroupRules.validateMessage(MessageContent(text: "x", clientMessageID: "a\u{1}b")) }
        #expect(control?.metadata["field"] == "client_message_id")
    }
}

@Suite("Message rules: who may send")
struct MessageSendTests {
    @Test("members of every type may send; the answer is their name card", arguments: GroupType.allCases)
    func membersSend(type: GroupType) throws {
        let card = try GroupRules.checkSend(in: messageGroup(type), by: .user("m", membership: member("m", .member)), now: now)
        #expect(card == "card-m")
    }

    @Test("a non-member gets NOT_A_MEMBER, or GROUP_NOT_FOUND for a Work group", arguments: GroupType.allCases)
    func nonMember(type: GroupType) {
        let error = groupError { _ = try GroupRules.checkSend(in: messageGroup(type), by: .user("x", membership: nil), now: now) }
        if type == .work {
            #expect(error?.reason == .groupNotFound)
        } else {
            #expect(error?.code == .permissionDenied)
            #expect(error?.reason == .notAMember)
        }
    }

    @Test("the backend must act for a user")
    func backend() {
        let error = groupError { _ = try GroupRules.checkSend(in: messageGroup(.public), by: .backend, now: now) }
        #expect(error?.reason == .operatorRequired)
    }

    @Test("a muted member is refused until the mute ends")
    func memberMute() throws {
        let until = now.adding(seconds: 60)
        let muted = member("m", .member, mutedUntil: until)
        let error = groupError { _ = try GroupRules.checkSend(in: messageGroup(.public), by: .user("m", membership: muted), now: now) }
        #expect(error?.code == .permissionDenied)
        #expect(error?.reason == .memberMuted)
        #expect(error?.metadata["mute_until"] == String(until.millisecondsSince1970))
        // At the end instant the mute no longer applies.
        _ = try GroupRules.checkSend(in: messageGroup(.public), by: .user("m", membership: muted), now: until)
    }

    /// Each group-mute mode against each role: who is refused.
    static let muteCases: [(GroupMuteMode, MemberRole, Bool)] = [
        (.all, .owner, true), (.all, .admin, true), (.all, .member, true),
        (.ordinaryMembers, .owner, false), (.ordinaryMembers, .admin, false), (.ordinaryMembers, .member, true),
        (.roles([.admin]), .owner, false), (.roles([.admin]), .admin, true), (.roles([.admin]), .member, false),
        (.roles([.owner, .member]), .owner, true), (.roles([.owner, .member]), .admin, false),
        (.roles([.owner, .member]), .member, true),
        (.none, .member, false),
    ]

    @Test("each group-mute mode refuses exactly its roles with GROUP_MUTED", arguments: muteCases)
    func groupMuteModes(mode: GroupMuteMode, role: MemberRole, refused: Bool) throws {
        let group = messageGroup(.public, mute: GroupMuteState(mode: mode, until: nil))
        let sender = member("u", role)
        let error = groupError { _ = try GroupRules.checkSend(in: group, by: .user("u", membership: sender), now: now) }
        if refused {
            #expect(error?.code == .permissionDenied)
            #expect(error?.reason == .groupMuted)
            #expect(error?.metadata["until"] == "0")
        } else {
            #expect(error == nil)
        }
    }

    @Test("a group mute with a duration ends at its expiry")
    func groupMuteExpiry() throws {
        let until = now.adding(seconds: 30)
        let group = messageGroup(.meeting, mute: GroupMuteState(mode: .ordinaryMembers, until: until))
        let sender = member("u", .member)
        let before = groupError { _ = try GroupRules.checkSend(in: group, by: .user("u", membership: sender), now: until.adding(milliseconds: -1)) }
        #expect(before?.reason == .groupMuted)
        #expect(before?.metadata["mode"] == "ordinary_members")
        #expect(before?.metadata["until"] == String(until.millisecondsSince1970))
        _ = try GroupRules.checkSend(in: group, by: .user("u", membership: sender), now: until)
    }

    @Test("a member's own mute is reported before the group's")
    func muteOrder() {
        let group = messageGroup(.public, mute: GroupMuteState(mode: .all, until: nil))
        let sender = member("u", .member, mutedUntil: now.adding(seconds: 5))
        let error = groupError { _ = try GroupRules.checkSend(in: group, by: .user("u", membership: sender), now: now) }
        #expect(error?.reason == .memberMuted)
    }
}

@Suite("Message rules: history and read state")
struct MessageHistoryRuleTests {
    @Test("Work and Public members read from their join on; Meeting members from the first")
    func floors() throws {
        let joined = member("m", .member, joinSequence: 7)
        #expect(try GroupRules.historyFloor(in: messageGroup(.work), by: .user("m", membership: joined)) == 7)
        #expect(try GroupRules.historyFloor(in: messageGroup(.public), by: .user("m", membership: joined)) == 7)
        #expect(try GroupRules.historyFloor(in: messageGroup(.meeting), by: .user("m", membership: joined)) == 0)
        #expect(try GroupRules.historyFloor(in: messageGroup(.public), by: .backend) == 0)
    }

    @Test("AVChatRoom keeps no history: HISTORY_NOT_KEPT, members and non-members alike")
    func avChatRoom() {
        for op in [GroupOperator.user("m", membership: member("m", .member)), .user("x", membership: nil)] {
            let error = groupError { _ = try GroupRules.historyFloor(in: messageGroup(.avChatRoom), by: op) }
            #expect(error?.code == .failedPrecondition)
            #expect(error?.reason == .historyNotKept)
        }
    }

    @Test("non-members read no history")
    func nonMembers() {
        #expect(groupError { _ = try GroupRules.historyFloor(in: messageGroup(.public), by: .user("x", membership: nil)) }?.reason == .notAMember)
        #expect(groupError { _ = try GroupRules.historyFloor(in: messageGroup(.work), by: .user("x", membership: nil)) }?.reason == .groupNotFound)
    }

    @Test("unread counts are shown for Work and Public only")
    func unreadTypes() {
        #expect(GroupRules.showsUnreadCount(.work))
        #expect(GroupRules.showsUnreadCount(.public))
        #expect(!GroupRules.showsUnreadCount(.meeting))
        #expect(!GroupRules.showsUnreadCount(.avChatRoom))
    }

    @Test("marking read moves forward with one GROUP_READ to the user, never back")
    func markRead() throws {
        let group = messageGroup(.public)
        let op = GroupOperator.user("m", membership: member("m", .member))
        let moved = try GroupRules.planRead(in: group, by: op, current: 3, latestMessage: 8)
        #expect(moved.readSequence == 8)
        #expect(moved.events == [
            GroupEvent.Draft(kind: .groupRead, operatorID: "m", changes: ["read_sequence": "8"], recipient: .user("m")),
        ])
        let back = try GroupRules.planRead(in: group, by: op, current: 8, latestMessage: 5)
        #expect(back.readSequence == 8)
        #expect(back.events.isEmpty)
        let same = try GroupRules.planRead(in: group, by: op, current: 8, latestMessage: 8)
        #expect(same.events.isEmpty)
    }

    @Test("marking read: non-members, the bare backend and AVChatRoom are refused")
    func markReadRefusals() {
        let nonMember = groupError { _ = try GroupRules.planRead(in: messageGroup(.meeting), by: .user("x", membership: nil), current: 0, latestMessage: 1) }
        #expect(nonMember?.reason == .notAMember)
        let backend = groupError { _ = try GroupRules.planRead(in: messageGroup(.public), by: .backend, current: 0, latestMessage: 1) }
        #expect(backend?.reason == .operatorRequired)
        let room = groupError {
            _ = try GroupRules.planRead(in: messageGroup(.avChatRoom), by: .user("m", membership: member("m", .member)), current: 0, latestMessage: 0)
        }
        #expect(room?.reason == .historyNotKept)
    }
}

@Suite("Message rules: custom notifications")
struct CustomNotificationRuleTests {
    let members = ["a": member("a", .member), "b": member("b", .admin)]

    @Test("to every member: one CUSTOM_NOTIFICATION to the group, body in its changes")
    func toGroup() throws {
        let change = try GroupRules.planCustomNotification(
            text: "hello", payload: [0xDE, 0xAD], recipients: [], in: messageGroup(.public), by: .backend,
            memberships: [:], limits: .defaults)
        #expect(change.events.count == 1)
        let event = try #require(change.events.first)
        #expect(event.kind == .customNotification)
        #expect(event.recipient == .group)
        #expect(event.operatorID == nil)
        #expect(CustomNotification(changes: event.changes) == CustomNotification(text: "hello", payload: [0xDE, 0xAD]))
        #expect(change.insertedMembers.isEmpty && change.updatedMembers.isEmpty && change.removedMembers.isEmpty)
    }

    @Test("to listed members: one event each, in order")
    func toMembers() throws {
        let change = try GroupRules.planCustomNotification(
            text: "", payload: [1], recipients: ["b", "a"], in: messageGroup(.work), by: .backend,
            memberships: members, limits: .defaults)
        #expect(change.events.map(\.recipient) == [.user("b"), .user("a")])
    }

    @Test("only the bare backend sends them")
    func backendOnly() {
        let error = groupError {
            _ = try GroupRules.planCustomNotification(
                text: "x", payload: [], recipients: [], in: messageGroup(.public), by: .user("a", membership: member("a", .owner)),
                memberships: [:], limits: .defaults)
        }
        #expect(error?.reason == .adminTokenRequired)
    }

    @Test("empty bodies, non-members, repeats and too many recipients are INVALID_ARGUMENT")
    func invalid() {
        func plan(_ text: String, _ recipients: [String], limits: AppLimits = .defaults) -> GroupError? {
            groupError {
                _ = try GroupRules.planCustomNotification(
                    text: text, payload: [], recipients: recipients, in: messageGroup(.public), by: .backend,
                    memberships: members, limits: limits)
            }
        }
        #expect(plan("", [])?.metadata["field"] == "text")
        #expect(plan("x", ["a", "z"])?.metadata["field"] == "recipient_user_ids[1]")
        #expect(plan("x", ["a", "a"])?.metadata["field"] == "recipient_user_ids[1]")
        var small = AppLimits.defaults
        small.maxUsersPerBatch = 1
        #expect(plan("x", ["a", "b"], limits: small)?.metadata["field"] == "recipient_user_ids")
    }

    @Test("the body survives its changes form, malformed hex reads as empty")
    func bodyRoundTrip() {
        let bytes: [UInt8] = Array(0...255)
        #expect(CustomNotification(changes: CustomNotification(text: "t", payload: bytes).changes).payload == bytes)
        #expect(CustomNotification(changes: ["text": "t", "payload_hex": "zz"]).payload.isEmpty)
        #expect(CustomNotification(changes: ["payload_hex": "abc"]).payload.isEmpty)
    }
}
