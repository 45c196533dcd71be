import GroupModel
import Testing

private func group(_ type: GroupType = .public, pins: [PinnedMessage] = [], memberCount: Int = 3) -> Group {
    Group(
        appID: "app", id: "g", type: type, name: "g", settings: type.preset.defaultSettings, ownerID: "owner",
        maxMembers: 200, memberCount: memberCount, createdAt: now, updatedAt: now, pins: pins)
}

private let owner = GroupOperator.user("owner", membership: Member(userID: "owner", role: .owner, joinedAt: now))
private let member = GroupOperator.user("mia", membership: Member(userID: "mia", role: .member, joinedAt: now))

@Suite("Pinned messages: the rules of PinGroupMessage and UnpinGroupMessage")
struct PinRuleTests {
    @Test("a pin is appended with a MESSAGE_PINNED tip carrying it")
    func pin() throws {
        let change = try GroupRules.planPin(sequence: 7, in: group(), by: owner, limits: .defaults, now: now)
        #expect(change.group.pins == [PinnedMessage(sequence: 7, pinnedBy: "owner", pinnedAt: now)])
        #expect(change.events.count == 1)
        let event = try #require(change.events.first)
        #expect(event.kind == .messagePinned && event.kind.isTip && event.recipient == .group)
        #expect(PinnedMessage(changes: event.changes) == change.group.pins.first)
        #expect(change.group.updatedAt == now)
    }

    @Test("pinning a pinned message, over the limit, or without the permission is refused")
    func pinRefusals() throws {
        let pinned = group(pins: [PinnedMessage(sequence: 7, pinnedBy: nil, pinnedAt: now)])
        let again = try #require(groupError { _ = try GroupRules.planPin(sequence: 7, in: pinned, by: owner, limits: .defaults, now: now) })
        #expect(again.code == .alreadyExists && again.reason == .messageAlreadyPinned)
        var limits = AppLimits.defaults
        limits.maxPinnedMessages = 1
        let full = try #require(groupError { _ = try GroupRules.planPin(sequence: 8, in: pinned, by: owner, limits: limits, now: now) })
        #expect(full.code == .failedPrecondition && full.reason == .tooManyPinnedMessages)
        #expect(full.metadata["limit"] == "1")
        let denied = try #require(groupError { _ = try GroupRules.planPin(sequence: 8, in: pinned, by: member, limits: .defaults, now: now) })
        #expect(denied.reason == .permissionDenied)
    }

    @Test("unpinning removes the pin with a MESSAGE_UNPINNED tip; an unpinned message is MESSAGE_NOT_PINNED")
    func unpin() throws {
        let pins = [7, 9].map { PinnedMessage(sequence: $0, pinnedBy: "owner", pinnedAt: now) }
        let change = try GroupRules.planUnpin(sequence: 7, in: group(pins: pins), by: .backend)
        #expect(change.group.pins.map(\.sequence) == [9])
        #expect(change.events.first?.kind == .messageUnpinned)
        #expect(change.events.first.flatMap { PinnedMessage(changes: $0.changes) } == pins[0])
        let missing = try #require(groupError { _ = try GroupRules.planUnpin(sequence: 8, in: group(pins: pins), by: owner) })
        #expect(missing.code == .notFound && missing.reason == .messageNotPinned)
        let room = try #require(groupError { _ = try GroupRules.planUnpin(sequence: 7, in: group(.avChatRoom), by: owner) })
        #expect(room.reason == .historyNotKept)
    }

    @Test("a sequence must name a message")
    func sequence() throws {
        let error = try #require(groupError { _ = try GroupRules.messageSequence(0) })
        #expect(error.reason == .invalidArgument && error.metadata["field"] == "sequence")
        #expect(try GroupRules.messageSequence(5) == 5)
    }

    @Test("the stored form of pins round-trips; malformed text is refused")
    func coding() {
        let pins = [
            PinnedMessage(sequence: 3, pinnedBy: "u:with:colons", pinnedAt: now),
            PinnedMessage(sequence: 10, pinnedBy: nil, pinnedAt: now.adding(milliseconds: 5)),
        ]
        #expect(PinnedMessageCoding.decode(PinnedMessageCoding.encode(pins)) == pins)
        #expect(PinnedMessageCoding.decode("") == [])
        #expect(PinnedMessageCoding.decode("x:1:u") == nil)
    }
}

@Suite("Read receipts: derived from read positions")
struct ReadReceiptRuleTests {
    static let positions = [
        MemberReadPosition(userID: "sender", joinSequence: 1, readSequence: 0),
        MemberReadPosition(userID: "b", joinSequence: 1, readSequence: 10),
        MemberReadPosition(userID: "a", joinSequence: 1, readSequence: 5),
        MemberReadPosition(userID: "c", joinSequence: 1, readSequence: 4),
        MemberReadPosition(userID: "late", joinSequence: 6, readSequence: 10),
    ]

    @Test("a member read a message when their position is at or past it; sender and later joiners excluded")
    func readers() {
        let five = GroupRules.readers(of: 5, sentBy: "sender", positions: Self.positions)
        #expect(five.read == ["a", "b"] && five.unread == ["c"])
        let seven = GroupRules.readers(of: 7, sentBy: "sender", positions: Self.positions)
        #expect(seven.read == ["b", "late"] && seven.unread == ["a", "c"])
        #expect(GroupRules.readCount(of: 7, sentBy: "b", positions: Self.positions)
            == ReadReceiptCount(sequence: 7, readCount: 1, unreadCount: 3))
    }

    @Test("one receipt event to the sender, counts ascending; none for a sender who left")
    func event() throws {
        let draft = try #require(GroupRules.planReadReceipt(to: "sender", sequences: [7, 5, 7], positions: Self.positions))
        #expect(draft.kind == .messageReadReceipt && draft.recipient == .user("sender") && draft.operatorID == nil)
        #expect(ReadReceiptCount.decode(draft.changes["receipts"] ?? "") == [
            ReadReceiptCount(sequence: 5, readCount: 2, unreadCount: 1),
            ReadReceiptCount(sequence: 7, readCount: 2, unreadCount: 2),
        ])
        #expect(GroupRules.planReadReceipt(to: "gone", sequences: [5], positions: Self.positions) == nil)
        #expect(GroupRules.planReadReceipt(to: "sender", sequences: [], positions: Self.positions) == nil)
    }

    @Test("receipts exist for Work and Public groups up to the app's member count")
    func kept() throws {
        var limits = AppLimits.defaults
        limits.readReceiptMaxMembers = 3
        #expect(GroupRules.readReceiptsKept(group(.work, memberCount: 3), limits: limits))
        #expect(!GroupRules.readReceiptsKept(group(.work, memberCount: 4), limits: limits))
        #expect(!GroupRules.readReceiptsKept(group(.meeting), limits: limits))
        let big = try #require(groupError { try GroupRules.checkReadReceipts(in: group(memberCount: 4), by: owner, limits: limits) })
        #expect(big.code == .failedPrecondition && big.reason == .readReceiptsNotSupported && big.metadata["limit"] == "3")
        try GroupRules.checkReadReceipts(in: group(memberCount: 3), by: member, limits: limits)
    }
}
