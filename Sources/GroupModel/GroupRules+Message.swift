extension GroupRules {
    /// The most bytes of a message's type tag (`type`).
    public static let messageTypeBytes = 32
    /// The most bytes of a client message id (`client_message_id`).
    public static let clientMessageIDBytes = 64
    /// The most bytes of a message or custom notification body, text and payload together
    /// (Tencent's 12 KB per message).
    public static let messageBodyBytes = 12 * 1024

    /// Validate what a sender gives, before anything is read or written.
    ///
    /// - A text or a payload is needed (`INVALID_ARGUMENT` naming `text`).
    /// - Text and payload together at most ``messageBodyBytes`` (naming `text` when the text
    ///   alone is over, else `payload`).
    /// - The type tag at most ``messageTypeBytes``, the client message id at most
    ///   ``clientMessageIDBytes`` and free of control characters.
    /// - Throws: `GroupError` `INVALID_ARGUMENT` with `field` and `limit`.
    public static func validateMessage(_ content: MessageContent) throws {
        try validateBody(text: content.text, payload: content.payload, what: "a message")
        try FieldValidation.checkBytes(content.type, field: "type", limit: messageTypeBytes)
        if let id = content.clientMessageID {
            try FieldValidation.checkUserID(id, field: "client_message_id", limit: clientMessageIDBytes)
        }
    }

    /// Validate a message's mentions, before anything is read or written: at most
    /// ``AppLimits/maxMentionsPerMessage`` ids (`INVALID_ARGUMENT` naming `mentioned_user_ids`,
    /// with `limit`), each a valid user id listed once (naming `mentioned_user_ids[i]`).
    public static func validateMentions(_ content: MessageContent, limits: AppLimits) throws {
        let field = "mentioned_user_ids"
        let ids = content.mentionedUserIDs
        if ids.count > limits.maxMentionsPerMessage {
            throw GroupError.invalidArgument(
                field: field, "\(ids.count) mentions exceed the limit of \(limits.maxMentionsPerMessage) per message",
                limit: limits.maxMentionsPerMessage)
        }
        var seen: Set<String> = []
        for (index, user) in ids.enumerated() {
            if let error = batchEntryError(user, index: index, field: field, seen: &seen, limits: limits) { throw error }
        }
    }

    /// The slow mode refusal of a message sent at `now` by a member of `role` whose previous
    /// message in `group` was sent at `lastSent`, if any: ordinary members wait
    /// ``GroupSettings/slowModeIntervalSeconds`` between two messages; the owner and admins are
    /// exempt. `SLOW_MODE` (`RESOURCE_EXHAUSTED`), metadata `interval_seconds` and
    /// `retry_delay_ms` (when the next message passes).
    public static func slowModeRefusal(
        in group: Group, role: MemberRole, lastSent: Timestamp?, now: Timestamp
    ) -> GroupError? {
        let interval = group.settings.slowModeIntervalSeconds
        guard interval > 0, role == .member, let lastSent else { return nil }
        let next = lastSent.adding(seconds: Int64(interval))
        guard next > now else { return nil }
        let delay = next.millisecondsSince1970 - now.millisecondsSince1970
        return GroupError(
            code: .resourceExhausted, reason: .slowMode,
            message: "slow mode: one message every \(interval) s; retry in \(delay) ms",
            metadata: ["interval_seconds": String(interval), "retry_delay_ms": String(delay)])
    }

    /// Check that the operator may send `content` to the group now: ``checkSend(in:by:now:)``,
    /// then @all against ``GroupSettings/mentionAllPermission`` (`PERMISSION_DENIED`, `setting`),
    /// then slow mode (``slowModeRefusal(in:role:lastSent:now:)``, `lastSent` being the sender's
    /// previous message in the group).
    /// - Returns: The sender's name card, recorded with the message.
    public static func checkSend(
        _ content: MessageContent, in group: Group, by op: GroupOperator, now: Timestamp, lastSent: Timestamp?
    ) throws -> String {
        let card = try checkSend(in: group, by: op, now: now)
        if content.mentionAll {
            try authorize(.mentionAll, in: group, by: op).get()
        }
        if let role = op.membership?.role, let refusal = slowModeRefusal(in: group, role: role, lastSent: lastSent, now: now) {
            throw refusal
        }
        return card
    }

    /// Validate a slow mode interval a request sets (`nil`: not set): 0 (off) up to
    /// ``AppLimits/maxSlowModeIntervalSeconds`` (`INVALID_ARGUMENT` naming `field`, with `limit`).
    public static func validateSlowModeInterval(_ seconds: Int?, field: String, limits: AppLimits) throws {
        guard let seconds else { return }
        if seconds < 0 || seconds > limits.maxSlowModeIntervalSeconds {
            throw GroupError.invalidArgument(
                field: field, "a slow mode interval is 0 (off) to \(limits.maxSlowModeIntervalSeconds) seconds",
                limit: limits.maxSlowModeIntervalSeconds)
        }
    }

    /// Plan the recall of the stored message `sequence` of a group.
    ///
    /// The order of checks: history kept (`HISTORY_NOT_KEPT`) and membership
    /// (``authorize(_:type:settings:actor:)``); the message exists and the operator's history
    /// shows it (above `floor`; `MESSAGE_NOT_FOUND`, field `sequence`); not recalled already
    /// (`MESSAGE_ALREADY_RECALLED`, metadata `recalled_by`); then who: the owner, admins and the
    /// backend recall any message at any time, a member only their own
    /// (`PERMISSION_DENIED`) and within ``AppLimits/recallWindowSeconds`` of sending it
    /// (`RECALL_WINDOW_PASSED`, metadata `window_seconds`; the end of the window is the last
    /// moment allowed).
    /// - Parameters:
    ///   - message: The stored message with that sequence (`nil`: none).
    ///   - sequence: The sequence of the message to recall (the request's).
    ///   - group: The group as stored.
    ///   - op: The recalling user and their membership, or the app's backend.
    ///   - now: The time of the recall: recorded with it, and compared with the end of a member's recall
    ///     window.
    ///   - limits: The app's limits (``AppLimits/recallWindowSeconds``).
    /// - Returns: The recall to store and its `MESSAGE_RECALLED` event (to the group).
    public static func planRecall(
        _ message: GroupMessage?, sequence: Int64, in group: Group, by op: GroupOperator, now: Timestamp,
        limits: AppLimits
    ) throws -> (recall: MessageRecall, event: GroupEvent.Draft) {
        let message = try readableMessage(message, sequence: sequence, in: group, by: op)
        if let recall = message.recall {
            throw GroupError(
                code: .failedPrecondition, reason: .messageAlreadyRecalled,
                message: "message \(sequence) was recalled already", metadata: ["recalled_by": recall.by ?? ""])
        }
        let own = op.userID == message.senderID
        try authorize(.recallMessage(own: own), in: group, by: op).get()
        if own, op.role == .member {
            let window = limits.recallWindowSeconds
            if now > message.time.adding(seconds: Int64(window)) {
                throw GroupError(
                    code: .failedPrecondition, reason: .recallWindowPassed,
                    message: "a message is recalled by its sender within \(window) s of sending it",
                    metadata: ["window_seconds": String(window)])
            }
        }
        let event = GroupEvent.Draft(
            kind: .messageRecalled, operatorID: op.userID, targets: [message.senderID],
            changes: ["sequence": String(sequence), "message_id": message.messageID])
        return (MessageRecall(by: op.userID, time: now), event)
    }

    /// The stored message a recall, an edit or a reply acts on: the group keeps history
    /// (`HISTORY_NOT_KEPT`) and the operator may read it (``historyFloor(in:by:)``); the message
    /// exists above the operator's history floor (`MESSAGE_NOT_FOUND`, metadata `field`).
    /// - Parameters:
    ///   - message: The stored message with that sequence (`nil`: none).
    ///   - sequence: The request's sequence.
    ///   - group: The group as stored.
    ///   - op: The acting user and their membership, or the app's backend.
    ///   - field: The request's field naming the message (`sequence` unless given).
    /// - Returns: The message.
    static func readableMessage(
        _ message: GroupMessage?, sequence: Int64, in group: Group, by op: GroupOperator, field: String = "sequence"
    ) throws -> GroupMessage {
        try checkHistoryKept(group.type)
        let floor = try historyFloor(in: group, by: op)
        guard let message, message.sequence > floor else {
            throw GroupError(
                code: .notFound, reason: .messageNotFound, message: "no message \(sequence) in the group",
                metadata: ["field": field])
        }
        return message
    }

    /// The refusal of a change to a recalled message other than its recall (an edit, a reaction,
    /// a reply): `MESSAGE_RECALLED` (`FAILED_PRECONDITION`), metadata `field` (the request's field
    /// naming the message) and `sequence`.
    static func recalledRefusal(_ sequence: Int64, field: String = "sequence") -> GroupError {
        GroupError(
            code: .failedPrecondition, reason: .messageRecalled, message: "message \(sequence) was recalled",
            metadata: ["field": field, "sequence": String(sequence)])
    }

    /// Validate a body (message or custom notification): not empty, not over ``messageBodyBytes``.
    static func validateBody(text: String, payload: [UInt8], what: String) throws {
        if text.isEmpty && payload.isEmpty {
            throw GroupError.invalidArgument(field: "text", "\(what) needs a text or a payload")
        }
        let textBytes = text.utf8.count
        if textBytes + payload.count > messageBodyBytes {
            throw GroupError.invalidArgument(
                field: textBytes > messageBodyBytes ? "text" : "payload",
                "text and payload together exceed \(messageBodyBytes) bytes", limit: messageBodyBytes)
        }
    }

    /// The refusal of a message from the backend acting for no user (`OPERATOR_REQUIRED`): a
    /// message needs a sender.
    public static var senderRequired: GroupError {
        GroupError(
            code: .invalidArgument, reason: .operatorRequired,
            message: "a message needs a sender: send x-operator-id with the admin token",
            metadata: ["field": "x-operator-id"])
    }

    /// Check that the operator may send a message to the group now.
    ///
    /// The order of checks: the backend must act for a user (`OPERATOR_REQUIRED`); membership
    /// (``authorize(_:type:settings:actor:)``: a non-member of a Work group gets
    /// `GROUP_NOT_FOUND`, of any other type `NOT_A_MEMBER`; an AVChatRoom member is whoever has
    /// joined the room's audience); the member's own mute (`MEMBER_MUTED`, metadata `mute_until`
    /// in ms); the whole-group mute in its mode (`GROUP_MUTED`, metadata `mode` and `until`, `0` =
    /// until lifted), except for members on the group's mute bypass list (``Group/muteBypass``).
    /// A mute whose end is at or before `now` no longer applies. In a topic, its community's
    /// whole-group mute (``Group/communityMute``) applies as well as the topic's own.
    /// - Returns: The sender's name card, recorded with the message.
    /// - Throws: `GroupError` as above (`PERMISSION_DENIED` for the three refusals).
    public static func checkSend(in group: Group, by op: GroupOperator, now: Timestamp) throws -> String {
        guard op.userID != nil else { throw senderRequired }
        try authorize(.sendMessage, in: group, by: op).get()
        guard let member = op.membership else { throw GroupError.internal("a member without a membership") }
        if member.isMuted(at: now), let until = member.mutedUntil {
            throw GroupError(
                code: .permissionDenied, reason: .memberMuted, message: "you are muted in this group",
                metadata: ["mute_until": millisText(until)])
        }
        try checkGroupMute(group.mute, of: group, for: member, now: now)
        // A topic's community's mute silences the topic too.
        if group.isTopic { try checkGroupMute(group.communityMute, of: group, for: member, now: now) }
        return member.nameCard
    }

    /// `GROUP_MUTED` when `mute` applies to `member` (not on the group's bypass list) at `now`.
    private static func checkGroupMute(_ mute: GroupMuteState, of group: Group, for member: Member, now: Timestamp) throws {
        if mute.mutes(member.role, at: now), !group.muteBypass.contains(member.userID) {
            throw GroupError(
                code: .permissionDenied, reason: .groupMuted,
                message: "the group is muted for \(member.role) members",
                metadata: ["mode": muteChanges(mute)["mode"] ?? "", "until": millisText(mute.until)])
        }
    }

    /// The messages of a group an operator may read: those with a sequence above the returned
    /// floor. Members of types that show history from before joining (Meeting) and the backend
    /// read from the first; Work and Public members from their join on (``Member/joinSequence``).
    /// - Throws: `HISTORY_NOT_KEPT` (`FAILED_PRECONDITION`) for types that keep none (AVChatRoom);
    ///   `GROUP_NOT_FOUND` / `NOT_A_MEMBER` for a non-member, as ``authorize(_:type:settings:actor:)``.
    public static func historyFloor(in group: Group, by op: GroupOperator) throws -> Int64 {
        try authorize(.readHistory, in: group, by: op).get()
        guard let member = op.membership, !group.type.preset.behaviour.historyVisibleBeforeJoin else { return 0 }
        return max(0, member.joinSequence)
    }

    /// Check that a group has a history to read or mark (`HISTORY_NOT_KEPT` for AVChatRoom).
    public static func checkHistoryKept(_ type: GroupType) throws {
        if !type.preset.behaviour.historyKept { throw historyNotKept(type) }
    }

    /// Whether a member's unread count of a group of `type` is shown (Work and Public; not
    /// Meeting and AVChatRoom, Tencent's V2 group guide).
    public static func showsUnreadCount(_ type: GroupType) -> Bool {
        type.preset.behaviour.unreadCounting
    }

    /// Plan a `MarkGroupRead`: move the operator's read position forward to `latestMessage`, the
    /// latest message at or below the requested sequence. The position never moves back; moving
    /// it emits one `GROUP_READ` to the user's devices (`changes["read_sequence"]`).
    /// - Parameters:
    ///   - group: The group as stored.
    ///   - op: The reading user and their membership.
    ///   - current: The read position now.
    ///   - latestMessage: The latest message sequence the request covers (0: none).
    /// - Returns: The new position and its events (none if it did not move).
    /// - Throws: `HISTORY_NOT_KEPT` (AVChatRoom); `OPERATOR_REQUIRED` for the backend;
    ///   `GROUP_NOT_FOUND` / `NOT_A_MEMBER` for a non-member.
    public static func planRead(
        in group: Group, by op: GroupOperator, current: Int64, latestMessage: Int64
    ) throws -> (readSequence: Int64, events: [GroupEvent.Draft]) {
        try checkHistoryKept(group.type)
        try authorize(.markRead, in: group, by: op).get()
        guard let user = op.userID else { throw GroupError.internal("a reader without a user") }
        let position = max(current, latestMessage)
        if position == current { return (current, []) }
        return (position, [
            GroupEvent.Draft(
                kind: .groupRead, operatorID: user, changes: ["read_sequence": String(position)],
                recipient: .user(user)),
        ])
    }

    /// Plan a custom system notification (Tencent's `TIM_GROUP_SYSTEM_CUSTOM_INFO`) from the
    /// app's backend: one `CUSTOM_NOTIFICATION` to the group when `recipients` is empty, else one
    /// to each listed member, in the order given.
    /// - Parameters:
    ///   - text: The notification's text ("" when none; a text or a payload is needed).
    ///   - payload: The notification's opaque payload (empty when none), passed through to the
    ///     recipients.
    ///   - recipients: The members to notify, in order; empty: the whole group.
    ///   - group: The group as stored.
    ///   - op: Who sends it: only the app's backend may.
    ///   - memberships: The memberships of the listed recipients (absent: not a member).
    ///   - limits: The app's limits (at most ``AppLimits/maxUsersPerBatch`` recipients).
    /// - Throws: `ADMIN_TOKEN_REQUIRED` unless `op` is the backend; `INVALID_ARGUMENT` for an empty
    ///   or oversized body (`text`, `payload`), too many recipients, or a recipient who is
    ///   malformed, listed twice or not a member (`recipient_user_ids[i]`).
    public static func planCustomNotification(
        text: String, payload: [UInt8], recipients: [String], in group: Group, by op: GroupOperator,
        memberships: [String: Member], limits: AppLimits
    ) throws -> GroupChange {
        try authorize(.sendCustomNotification, in: group, by: op).get()
        try validateBody(text: text, payload: payload, what: "a notification")
        let field = "recipient_user_ids"
        if recipients.count > limits.maxUsersPerBatch {
            throw GroupError.invalidArgument(
                field: field, "\(recipients.count) recipients exceed the limit of \(limits.maxUsersPerBatch) per call",
                limit: limits.maxUsersPerBatch)
        }
        var seen: Set<String> = []
        for (index, user) in recipients.enumerated() {
            if let error = batchEntryError(user, index: index, field: field, seen: &seen, limits: limits) { throw error }
            if memberships[user] == nil {
                throw GroupError.invalidArgument(field: "\(field)[\(index)]", "\(user) is not a member of the group")
            }
        }
        let changes = CustomNotification(text: text, payload: payload).changes
        if recipients.isEmpty {
            return GroupChange(group: group, events: [
                GroupEvent.Draft(kind: .customNotification, operatorID: nil, changes: changes),
            ])
        }
        return GroupChange(group: group, events: recipients.map {
            GroupEvent.Draft(kind: .customNotification, operatorID: nil, changes: changes, recipient: .user($0))
        })
    }
}

/// The body of a `CUSTOM_NOTIFICATION` event, as kept in the event's `changes`: `text`, and the
/// payload as lowercase hex in `payload_hex` (changes hold text).
public struct CustomNotification: Sendable, Hashable {
    /// Optional text.
    public var text: String
    /// Opaque pass-through payload (Tencent `userData`).
    public var payload: [UInt8]

    /// Create a notification body.
    public init(text: String, payload: [UInt8]) {
        self.text = text
        self.payload = payload
    }

    /// Read the body from an event's changes (missing keys are empty; malformed hex is empty).
    public init(changes: [String: String]) {
        self.text = changes["text"] ?? ""
        self.payload = Hex.decode(changes["payload_hex"] ?? "") ?? []
    }

    /// The body as event changes.
    public var changes: [String: String] {
        var changes = ["text": self.text]
        if !self.payload.isEmpty { changes["payload_hex"] = Hex.encode(self.payload) }
        return changes
    }
}
