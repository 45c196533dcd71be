/// What an edit of a stored message comes to: nothing (the body is already the requested one),
/// or a new body with its edit and event.
public enum MessageEditPlan: Sendable, Hashable {
    /// The stored text and payload are the requested ones (a retry): nothing to write.
    case unchanged
    /// Store the body with the edit, and append the event (`MESSAGE_EDITED`, to the group).
    case edit(MessageEdit, event: GroupEvent.Draft)
}

extension GroupRules {
    /// Validate an edit's new body as a send's: not empty, not over ``messageBodyBytes``
    /// (`INVALID_ARGUMENT` naming `text`, or `payload` when the payload is what is too large).
    public static func validateEdit(text: String, payload: [UInt8]) throws {
        try validateBody(text: text, payload: payload, what: "an edited message")
    }

    /// Plan the edit of the stored message `sequence` of a group to the body `text` and `payload`.
    ///
    /// The order of checks: the message as a recall's (``readableMessage(_:sequence:in:by:field:)``:
    /// `HISTORY_NOT_KEPT`, membership, `MESSAGE_NOT_FOUND`); not recalled (`MESSAGE_RECALLED`,
    /// metadata `field`, `sequence`, as a reaction's); who: the owner, admins and the backend
    /// edit any message, a member only their own (`PERMISSION_DENIED`). Then a body equal to the
    /// stored one is ``MessageEditPlan/unchanged`` (a retry of an edit that was applied succeeds
    /// whatever changed since). Else a user edits only as they may send now (`MEMBER_MUTED`,
    /// `GROUP_MUTED`: ``checkSend(in:by:now:)``), and a member their own message only within
    /// ``AppLimits/editWindowSeconds`` of sending it (`EDIT_WINDOW_PASSED`, metadata
    /// `window_seconds`; the end of the window is the last moment allowed).
    /// - Parameters:
    ///   - message: The stored message with that sequence (`nil`: none).
    ///   - sequence: The sequence of the message to edit (the request's).
    ///   - text: The new text.
    ///   - payload: The new payload.
    ///   - group: The group as stored.
    ///   - op: The editing user and their membership, or the app's backend.
    ///   - now: The time of the edit: recorded with it, and compared with the end of a member's edit
    ///     window.
    ///   - limits: The app's limits (``AppLimits/editWindowSeconds``).
    /// - Returns: The plan: nothing, or the edit to store and its `MESSAGE_EDITED` event.
    public static func planEdit(
        _ message: GroupMessage?, sequence: Int64, text: String, payload: [UInt8], in group: Group,
        by op: GroupOperator, now: Timestamp, limits: AppLimits
    ) throws -> MessageEditPlan {
        let message = try readableMessage(message, sequence: sequence, in: group, by: op)
        if message.recall != nil { throw recalledRefusal(sequence) }
        let own = op.userID == message.senderID
        try authorize(.editMessage(own: own), in: group, by: op).get()
        if message.content.text == text && message.content.payload == payload { return .unchanged }
        if op.userID != nil { _ = try checkSend(in: group, by: op, now: now) }
        if own, op.role == .member {
            let window = limits.editWindowSeconds
            if now > message.time.adding(seconds: Int64(window)) {
                throw GroupError(
                    code: .failedPrecondition, reason: .editWindowPassed,
                    message: "a message is edited by its sender within \(window) s of sending it",
                    metadata: ["window_seconds": String(window)])
            }
        }
        let edit = MessageEdit(by: op.userID, time: now, count: (message.edit?.count ?? 0) + 1)
        var changes = CustomNotification(text: text, payload: payload).changes
        changes["sequence"] = String(sequence)
        changes["message_id"] = message.messageID
        changes["edit_count"] = String(edit.count)
        let event = GroupEvent.Draft(
            kind: .messageEdited, operatorID: op.userID, targets: [message.senderID], changes: changes)
        return .edit(edit, event: event)
    }
}
