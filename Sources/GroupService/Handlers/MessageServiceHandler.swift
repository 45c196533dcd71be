import GroupAPI
import GroupModel
import GroupStore
import PolicyHost
import Synchronization

/// The handler of `groupd.v1.MessageService` (message.proto). This file holds SendGroupMessage,
/// GetGroupMessages, MarkGroupRead, SendSystemNotification and RecallGroupMessage; edits, pins, read
/// receipts, reactions and the replies list are in `MessageServiceHandler+Edits.swift`,
/// `MessageServiceHandler+Pins.swift`, `MessageServiceHandler+ReadReceipts.swift`,
/// `MessageServiceHandler+Reactions.swift` and `MessageServiceHandler+Replies.swift`.
struct MessageServiceHandler: GroupdHandler {
    let service: GroupdService

    /// Registers every MessageService method, in the order of message.proto.
    func register(in routes: inout Routes) {
        routes.unary(Groupd_V1_MessageService.Method.sendGroupMessage, sendGroupMessage)
        routes.unary(Groupd_V1_MessageService.Method.getGroupMessages, getGroupMessages)
        routes.unary(Groupd_V1_MessageService.Method.markGroupRead, markGroupRead)
        routes.unary(Groupd_V1_MessageService.Method.sendSystemNotification, sendSystemNotification)
        routes.unary(Groupd_V1_MessageService.Method.recallGroupMessage, recallGroupMessage)
        routes.unary(Groupd_V1_MessageService.Method.editGroupMessage, editGroupMessage)
        routes.unary(Groupd_V1_MessageService.Method.pinGroupMessage, pinGroupMessage)
        routes.unary(Groupd_V1_MessageService.Method.unpinGroupMessage, unpinGroupMessage)
        routes.unary(Groupd_V1_MessageService.Method.getMessageReadReceipts, getMessageReadReceipts)
        routes.unary(Groupd_V1_MessageService.Method.addMessageReaction, addMessageReaction)
        routes.unary(Groupd_V1_MessageService.Method.removeMessageReaction, removeMessageReaction)
        routes.unary(Groupd_V1_MessageService.Method.getMessageReactions, getMessageReactions)
        routes.unary(Groupd_V1_MessageService.Method.listMessageReactionUsers, listMessageReactionUsers)
        routes.unary(Groupd_V1_MessageService.Method.listMessageReplies, listMessageReplies)
    }

    /// SendGroupMessage.
    ///
    /// 1. Validate the request (`INVALID_ARGUMENT`: body, mentions); the backend must act for a
    ///    user.
    /// 2. Load the group and the sender's membership (an AVChatRoom's audience from memory).
    /// 3. A retry (same sender, same `client_message_id`) answers the first result, `deduplicated`,
    ///    before any other check: the first send succeeded. AVChatRoom messages are remembered by
    ///    this node for a while (``RoomMessageLimiter``), stored ones by the store.
    /// 4. Check membership, mutes and @all (`GroupRules.checkSend(_:in:by:now:lastSent:)`), so
    ///    a refusal costs no moderation. Slow mode is checked in the store's transaction, against
    ///    the sender's previous stored message (AVChatRoom has none: its type fixes slow mode off).
    /// 5. Moderation (the policy plugins' before-send-message hook).
    /// 6. AVChatRoom: the room's rate admits or sheds it (not stored), then it is published to the
    ///    room's subscribers. Other types: stored with its event in one transaction, the check
    ///    run again inside it, committed before the answer; the commit delivers it.
    ///
    /// When the app has no moderation plugin and the group keeps history, steps 2–4 run only in
    /// the store's transaction (same checks, same order, same errors): the group's type comes
    /// from the cache and no read precedes the write.
    func sendGroupMessage(
        _ request: Groupd_V1_SendGroupMessageRequest, _ call: CallContext
    ) async throws -> Groupd_V1_SendGroupMessageResponse {
        try GroupdService.requireGroupID(request.groupID)
        let content = MessageContent(
            type: request.type, text: request.text, payload: request.payload,
            priority: try MessageMapping.priority(request.priority),
            clientMessageID: request.clientMessageID.isEmpty ? nil : request.clientMessageID,
            mentionedUserIDs: request.mentionedUserIds, mentionAll: request.mentionAll)
        try GroupRules.validateMessage(content)
        try GroupRules.validateMentions(content, limits: call.limits)
        let replyTo = request.replyToSequence == 0
            ? nil : try GroupRules.messageSequence(request.replyToSequence, field: "reply_to_sequence")
        guard let sender = call.caller.operatorID else { throw GroupRules.senderRequired }
        let app = call.caller.appID
        let groupID = request.groupID
        if !service.hasPolicy(.beforeSendGroupMessage, call), let type = try await store.groupType(app: app, id: groupID),
            type.preset.behaviour.historyKept
        {
            // No moderation to spare a refusal: steps 2–4 are the store's, in its transaction.
            let now = clock.now()
            let message = GroupMessage(
                appID: app, groupID: groupID, sequence: 0, messageID: Self.newMessageID(), senderID: sender,
                senderNameCard: "", content: content, time: now)
            return Self.sendResponse(try await storeMessage(message, sender: sender, replyTo: replyTo, now: now))
        }

        let (group, membership) = try await service.loadGroup(call, groupID: groupID)
        let stored = group.type.preset.behaviour.historyKept
        let now = clock.now()
        if let clientID = content.clientMessageID {
            let earlier = stored
                ? try await store.message(app: app, groupID: groupID, senderID: sender, clientMessageID: clientID)?.message
                : roomMessages.sent(app: app, groupID: groupID, senderID: sender, clientMessageID: clientID, now: now)
            if let earlier { return Self.sendResponse(.sent(earlier, deduplicated: true)) }
        }
        _ = try GroupRules.checkSend(
            content, in: group, by: GroupdService.groupOperator(call.caller, membership: membership), now: now, lastSent: nil)
        if replyTo != nil { try GroupRules.checkHistoryKept(group.type) }

        // Moderation: the policy plugins' before-send-message hook runs here, before anything is
        // stored or delivered. It may refuse (throw), rewrite the text, or discard the message
        // (answer SENT, store and deliver nothing).
        var moderated = content
        let keep = try await checkMessagePolicy(&moderated, groupID: groupID, groupType: group.type, replyTo: replyTo, call)

        let message = GroupMessage(
            appID: app, groupID: groupID, sequence: 0, messageID: Self.newMessageID(), senderID: sender,
            senderNameCard: membership?.nameCard ?? "", content: moderated, time: now)
        if !keep { return Self.sendResponse(.sent(message, deduplicated: false)) }
        if !stored {
            let outcome = roomMessages.admit(message, rate: call.limits.avChatRoomMessagesPerSecond, now: now)
            if case .sent(let sent, deduplicated: false) = outcome {
                // Other nodes' viewers get it through the shared database (nothing to do on
                // SQLite); if it cannot be relayed, nobody gets it and the sender is told.
                try await store.relayRoomMessage(sent)
                service.publishRoomMessage(sent)
            }
            return Self.sendResponse(outcome)
        }
        return Self.sendResponse(try await storeMessage(message, sender: sender, replyTo: replyTo, now: now))
    }

    /// Stores a message of a type that keeps history: in one transaction, a retry's first result,
    /// or the send rule (membership, mutes, @all, slow mode) run again on the state of that
    /// moment, then for a reply the message it answers (`GroupRules.planReply`), then the message
    /// with its event. The commit delivers it.
    private func storeMessage(
        _ message: GroupMessage, sender: String, replyTo: Int64?, now: Timestamp
    ) async throws -> SendOutcome {
        let content = message.content
        let reply = replyTo.map { sequence in
            (sequence: sequence, plan: { @Sendable (group: Group, member: Member?, original: GroupMessage?) in
                try GroupRules.planReply(to: original, sequence: sequence, in: group, by: .user(sender, membership: member))
            })
        }
        let appended = try await store.appendMessage(message, at: now, reply: reply) { group, member, lastSent in
            try GroupRules.checkSend(content, in: group, by: .user(sender, membership: member), now: now, lastSent: lastSent)
        }
        return .sent(appended.stored.message, deduplicated: appended.deduplicated)
    }

    /// GetGroupMessages: a page of history walked from an anchor or a page token, ascending by
    /// sequence. The model decides what the caller may see (`GroupRules.historyFloor(in:by:)`).
    func getGroupMessages(
        _ request: Groupd_V1_GetGroupMessagesRequest, _ call: CallContext
    ) async throws -> Groupd_V1_GetGroupMessagesResponse {
        try GroupdService.requireGroupID(request.groupID)
        let size = try GroupdService.pageSize(request.pageSize, fallback: 20, max: 100)
        var direction: MessageRange.Direction
        var anchor: Int64?
        if request.pageToken.isEmpty {
            switch request.direction {
            case .unspecified, .older: direction = .older
            case .newer: direction = .newer
            case .UNRECOGNIZED(let value):
                throw GroupError.invalidArgument(field: "direction", "unknown direction \(value)")
            }
            anchor = request.anchorSequence == 0 ? nil : Int64(clamping: request.anchorSequence)
        } else {
            (direction, anchor) = try HistoryToken.decode(request.pageToken)
        }
        let (group, membership) = try await service.loadGroup(call, groupID: request.groupID)
        let floor = try GroupRules.historyFloor(in: group, by: GroupdService.groupOperator(call.caller, membership: membership))
        let page = try await store.messages(
            app: call.caller.appID, groupID: request.groupID,
            range: MessageRange(direction: direction, anchor: anchor, floor: floor), limit: size)
        var messages = page.messages.map(MessageMapping.message)
        if !page.messages.isEmpty, GroupRules.readReceiptsKept(group, limits: call.limits) {
            let positions = try await store.readPositions(app: call.caller.appID, groupID: request.groupID)
            for (index, message) in page.messages.enumerated() {
                let count = GroupRules.readCount(of: message.sequence, sentBy: message.senderID, positions: positions)
                messages[index].readCount = UInt32(clamping: count.readCount)
                messages[index].unreadCount = UInt32(clamping: count.unreadCount)
                messages[index].readReceiptsCounted = true
            }
        }
        return .with {
            $0.messages = messages
            $0.latestSequence = UInt64(max(page.latestSequence, 0))
            if page.hasMore, let edge = direction == .older ? page.messages.first : page.messages.last {
                $0.nextPageToken = HistoryToken.encode(direction, anchor: edge.sequence)
            }
        }
    }

    /// MarkGroupRead: moves the operator's read position forward (never back) to the latest
    /// message at or below `read_sequence` (0: the latest), with a `GROUP_READ` to the user's
    /// devices when it moved. The unread count is reported for Work and Public groups only.
    func markGroupRead(
        _ request: Groupd_V1_MarkGroupReadRequest, _ call: CallContext
    ) async throws -> Groupd_V1_MarkGroupReadResponse {
        try GroupdService.requireGroupID(request.groupID)
        guard let user = call.caller.operatorID else {
            throw GroupError.operatorRequired("marking a group read")
        }
        let before = Mutex<Int64>(0)
        let committed = try await store.markRead(
            app: call.caller.appID, groupID: request.groupID, userID: user,
            upTo: request.readSequence == 0 ? nil : Int64(clamping: request.readSequence), at: clock.now()
        ) { snapshot in
            before.withLock { $0 = max(snapshot.readSequence, snapshot.membership?.joinSequence ?? 0) }
            return try GroupRules.planRead(
                in: snapshot.group, by: .user(user, membership: snapshot.membership), current: snapshot.readSequence,
                latestMessage: snapshot.latestMessageSequence)
        }
        let (state, group) = (committed.value, committed.group)
        let previous = before.withLock { $0 }
        if state.readSequence > previous, GroupRules.readReceiptsKept(group, limits: call.limits) {
            try await noteReadReceipts(
                app: call.caller.appID, group: group, reader: user, from: previous, to: state.readSequence,
                limits: call.limits)
        }
        return .with {
            $0.readSequence = UInt64(max(state.readSequence, 0))
            $0.unreadCount = GroupRules.showsUnreadCount(group.type) ? UInt32(clamping: state.unreadCount) : 0
        }
    }

    /// SendSystemNotification: a custom notification from the app's backend to every member or
    /// to the listed members (one stored `CUSTOM_NOTIFICATION` each). The backend is checked
    /// before the group is looked up (an admin token acting for a user is refused).
    func sendSystemNotification(
        _ request: Groupd_V1_SendSystemNotificationRequest, _ call: CallContext
    ) async throws -> Groupd_V1_SendSystemNotificationResponse {
        guard call.caller.isBackend else {
            throw GroupError(
                code: .permissionDenied, reason: .adminTokenRequired,
                message: "only the app's backend (admin token without x-operator-id) sends system notifications")
        }
        try GroupdService.requireGroupID(request.groupID)
        let text = request.text
        let payload = request.payload
        let recipients = request.recipientUserIds
        let limits = call.limits
        let result = try await service.mutate(call, groupID: request.groupID, targets: recipients) { snapshot, op in
            let change = try GroupRules.planCustomNotification(
                text: text, payload: payload, recipients: recipients, in: snapshot.group, by: op,
                memberships: snapshot.targets, limits: limits)
            return (change, ())
        }
        guard let first = result.events.first,
            let eventID = try await store.eventIDs(app: call.caller.appID, groupID: request.groupID, sequences: [first.sequence])[first.sequence]
        else { throw GroupError.internal("the notification stored no event") }
        return .with {
            $0.event = Self.notificationView(first, eventID: eventID, group: result.group, recipients: recipients)
        }
    }

    /// RecallGroupMessage: turns a stored message into a tombstone, with a `MESSAGE_RECALLED` to
    /// the group, in one transaction. The model decides who may
    /// (`GroupRules.planRecall(_:sequence:in:by:now:limits:)`).
    func recallGroupMessage(
        _ request: Groupd_V1_RecallGroupMessageRequest, _ call: CallContext
    ) async throws -> Groupd_V1_RecallGroupMessageResponse {
        try GroupdService.requireGroupID(request.groupID)
        if request.sequence == 0 {
            throw GroupError.invalidArgument(field: "sequence", "sequence must name a message (above 0)")
        }
        let sequence = Int64(clamping: request.sequence)
        let caller = call.caller
        let limits = call.limits
        let now = clock.now()
        let committed = try await store.recallMessage(
            app: caller.appID, groupID: request.groupID, sequence: sequence, operatorID: caller.operatorID, at: now
        ) { group, member, message in
            try GroupRules.planRecall(
                message, sequence: sequence, in: group, by: GroupdService.groupOperator(caller, membership: member), now: now,
                limits: limits)
        }
        return .with { $0.message = MessageMapping.message(committed.value) }
    }

    // MARK: Helpers

    /// The answer to a send.
    static func sendResponse(_ outcome: SendOutcome) -> Groupd_V1_SendGroupMessageResponse {
        .with {
            switch outcome {
            case .sent(let message, let deduplicated):
                $0.result = .sent
                $0.message = MessageMapping.message(message)
                $0.deduplicated = deduplicated
            case .shed(let message):
                $0.result = .shed
                $0.message = MessageMapping.message(message)
            }
        }
    }

    /// A stored `CUSTOM_NOTIFICATION` in the API's form, as the event stream shows it; for a
    /// notification to listed members (one stored event each) the first, listing every recipient.
    static func notificationView(
        _ event: GroupEvent, eventID: Int64, group: Group, recipients: [String]
    ) -> Groupd_V1_GroupEvent {
        var view = EventMapping.event(LoggedEvent(eventID: eventID, event: event, groupType: group.type))
        view.recipientUserIds = recipients
        view.groupName = group.name
        return view
    }

    /// A new message id: 128 random bits as 32 lowercase hex digits.
    static func newMessageID() -> String {
        var generator = SystemRandomNumberGenerator()
        func hex(_ value: UInt64) -> String {
            let digits = String(value, radix: 16)
            return String(repeating: "0", count: 16 - digits.count) + digits
        }
        return hex(generator.next()) + hex(generator.next())
    }
}

/// The page token of GetGroupMessages: the direction and the sequence to continue from,
/// `o.<base36>` (older) or `n.<base36>` (newer).
enum HistoryToken {
    static func encode(_ direction: MessageRange.Direction, anchor: Int64) -> String {
        (direction == .older ? "o." : "n.") + String(anchor, radix: 36)
    }

    /// - Throws: `INVALID_ARGUMENT` naming `page_token` for anything `encode` did not make.
    static func decode(_ token: String) throws -> (MessageRange.Direction, Int64) {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        let invalid = GroupError.invalidArgument(field: "page_token", "the page token is not valid")
        guard parts.count == 2, parts[1].count <= 13, let anchor = Int64(parts[1], radix: 36), anchor > 0 else {
            throw invalid
        }
        switch parts[0] {
        case "o": return (.older, anchor)
        case "n": return (.newer, anchor)
        default: throw invalid
        }
    }
}
