public import GroupModel

/// Group messages, history and read state.
///
/// A stored message is one event of kind `GROUP_MESSAGE`, numbered by the group's sequence like
/// every event (so the commit feed delivers it to subscribers), plus its body, keyed by the
/// event's `event_id`. Both commit together before the send returns.
extension Store {
    /// Stores one message, atomically with its event, unless the sender already sent one with the
    /// same client message id in the group (then that one is returned and nothing is written).
    ///
    /// In one write transaction: find the group (`GROUP_NOT_FOUND`), look for an earlier message
    /// with the same `(sender, client message id)`, load the sender's membership, run `check`
    /// (the pure send rule, which throws to refuse), append the event and the body.
    /// - Parameters:
    ///   - message: The message to store; its `sequence` is assigned here, `senderNameCard` is
    ///     replaced by what `check` returns.
    ///   - time: The send time (event time).
    ///   - reply: For a reply, the sequence of the message it answers and the pure rule that
    ///     checks it (run after `check`, handed the group, the sender's membership and that
    ///     message, `nil` when there is none) and returns the reference stored with the reply.
    ///   - check: Pure: throws to refuse; returns the sender's name card to record. Handed the
    ///     group, the sender's membership and, when the group's slow mode is on, when the sender
    ///     last sent a message to it.
    /// - Throws: `GROUP_NOT_FOUND`; what `check` or `reply` throws; `INTERNAL`.
    public func appendMessage(
        _ message: GroupMessage, at time: Timestamp,
        reply: (sequence: Int64, plan: @Sendable (Group, Member?, GroupMessage?) throws -> MessageReference)? = nil,
        check: @escaping @Sendable (Group, Member?, Timestamp?) throws -> String
    ) async throws -> AppendedMessage {
        try await mutate(
            "appendMessage",
            scope: .send(
                to: message.groupID, from: message.senderID, clientMessageID: message.content.clientMessageID,
                replyTo: reply?.sequence, app: message.appID),
            numbered: { appended, positions in
                var appended = appended
                appended.stored.eventID = positions.eventID(appended.stored.eventID, app: message.appID)
                return appended
            }
        ) { transaction, effects in
            let snapshot = try await transaction.load(SnapshotRequest(
                app: message.appID, group: message.groupID, targets: [message.senderID], time: time,
                earlierMessage: message.content.clientMessageID.map { (sender: message.senderID, clientMessageID: $0) },
                messageSequence: reply?.sequence, lastSentBy: message.senderID))
            if let earlier = snapshot.earlierMessage {
                return AppendedMessage(stored: earlier, deduplicated: true, events: [])
            }
            var group = try Self.loadedGroup(snapshot)
            var stored = message
            let sender = snapshot.members[message.senderID]
            stored.senderNameCard = try check(group, sender, snapshot.lastSentAt)
            if let reply { stored.replyTo = try reply.plan(group, sender, snapshot.message?.message) }
            stored.time = time
            let written = try await transaction.write(
                WriteSet(events: [GroupEvent.Draft(kind: .groupMessage, operatorID: message.senderID)], message: stored),
                over: snapshot)
            guard let event = written.events.first, let eventID = written.messageEventID else {
                throw GroupError.internal("the message's event was not written")
            }
            stored.sequence = event.sequence
            group.latestSequence = event.sequence
            let storedMessage = StoredMessage(eventID: eventID, message: stored)
            try await effects.wrote(written, to: group, message: storedMessage, transaction: transaction)
            return AppendedMessage(stored: storedMessage, deduplicated: false, events: written.events)
        }
    }

    /// Moves a member's read position forward, with the events `plan` returns, atomically.
    /// - Parameters:
    ///   - app: The app.
    ///   - groupID: The group.
    ///   - userID: The member whose read position moves.
    ///   - upTo: The requested sequence (`nil`: the latest).
    ///   - time: The time of the change (event time).
    ///   - plan: Pure: refuses (throws) or returns the new position and the events to append.
    /// - Returns: The read state after the call, with the group and the committed events.
    /// - Throws: `GROUP_NOT_FOUND`; what `plan` throws; `INTERNAL`.
    public func markRead(
        app: String, groupID: String, userID: String, upTo: Int64?, at time: Timestamp,
        plan: @escaping @Sendable (ReadSnapshot) throws -> (readSequence: Int64, events: [GroupEvent.Draft])
    ) async throws -> Committed<ReadState> {
        try await mutate("markRead", scope: .groups([groupID], app: app)) { transaction, effects in
            let request = SnapshotRequest(
                app: app, group: groupID, targets: [userID], time: time, parts: .readState, readState: (user: userID, upTo: upTo))
            let snapshot = try await transaction.load(request)
            var group = try Self.loadedGroup(snapshot)
            let (position, drafts) = try plan(ReadSnapshot(
                group: group, membership: snapshot.members[userID], readSequence: snapshot.readSequence,
                latestMessageSequence: snapshot.latestMessageSequence))
            var writes = WriteSet(events: drafts)
            if position != snapshot.readSequence { writes.readSequence = (user: userID, sequence: position) }
            let written = try await transaction.write(writes, over: snapshot)
            if let last = written.events.last {
                group.latestSequence = last.sequence
                try await effects.wrote(written, to: group, transaction: transaction)
            }
            let after = try await transaction.load(request)
            let state = ReadState(
                readSequence: after.readSequence, unreadCount: after.unreadCount, lastMessageAt: after.lastMessageAt,
                unreadMention: after.unreadMention)
            return Committed(value: state, group: group, events: written.events)
        }
    }

    /// Recalls the stored message `sequence` of a group, atomically with the event `plan` returns.
    ///
    /// In one write transaction: find the group (`GROUP_NOT_FOUND`), load the operator's
    /// membership and the message, run `plan` (the pure recall rule, which throws to refuse),
    /// turn the message into a tombstone (body and mentions cleared, its mention rows deleted)
    /// and append the event.
    /// - Parameters:
    ///   - app: The app.
    ///   - groupID: The group.
    ///   - sequence: The sequence of the message to recall.
    ///   - operatorID: The acting user (`nil`: the backend).
    ///   - time: The time of the recall (event time).
    ///   - plan: Pure: handed the group, the operator's membership and the message (`nil`: none);
    ///     returns the recall and its event.
    /// - Returns: The tombstone, the group after the change, and the committed events.
    /// - Throws: `GROUP_NOT_FOUND`; what `plan` throws; `INTERNAL`.
    public func recallMessage(
        app: String, groupID: String, sequence: Int64, operatorID: String?, at time: Timestamp,
        plan: @escaping @Sendable (Group, Member?, GroupMessage?) throws -> (recall: MessageRecall, event: GroupEvent.Draft)
    ) async throws -> Committed<GroupMessage> {
        try await mutate("recallMessage", scope: .groups([groupID], app: app)) { transaction, effects in
            let snapshot = try await transaction.load(SnapshotRequest(
                app: app, group: groupID, operatorID: operatorID, time: time, messageSequence: sequence))
            var group = try Self.loadedGroup(snapshot)
            let (recall, draft) = try plan(group, operatorID.flatMap { snapshot.members[$0] }, snapshot.message?.message)
            guard var message = snapshot.message?.message else { throw GroupError.internal("a recall without its message") }
            let written = try await transaction.write(
                WriteSet(events: [draft], recall: (sequence: sequence, recall: recall)), over: snapshot)
            if let last = written.events.last { group.latestSequence = last.sequence }
            try await effects.wrote(written, to: group, transaction: transaction)
            message.content = MessageContent(priority: message.content.priority, clientMessageID: message.content.clientMessageID)
            message.recall = recall
            return Committed(value: message, group: group, events: written.events)
        }
    }

    /// Edits the stored message `sequence` of a group: its text and payload become `text` and
    /// `payload`, atomically with the event `plan` returns.
    ///
    /// In one write transaction: find the group (`GROUP_NOT_FOUND`), load the operator's
    /// membership and the message, run `plan` (the pure edit rule, which throws to refuse). An
    /// `MessageEditPlan.unchanged` plan writes nothing; an edit replaces the body, records the
    /// edit and appends the event, unless `write` is false (a policy plugin discarded the edit):
    /// then nothing is written either, and the answer is the message as the edit would have left it.
    /// - Parameters:
    ///   - app: The app.
    ///   - groupID: The group.
    ///   - sequence: The sequence of the message to edit.
    ///   - text: The new text.
    ///   - payload: The new payload.
    ///   - operatorID: The acting user (`nil`: the backend).
    ///   - time: The time of the edit (event time).
    ///   - write: Whether an edit the plan allows is stored (`false`: answered only).
    ///   - plan: Pure: handed the group, the operator's membership and the message (`nil`: none);
    ///     returns what the edit comes to.
    /// - Returns: The message as history shows it after the call and whether it is unchanged, the
    ///   group, and the committed events (none when unchanged or not written).
    /// - Throws: `GROUP_NOT_FOUND`; what `plan` throws; `INTERNAL`.
    public func editMessage(
        app: String, groupID: String, sequence: Int64, text: String, payload: [UInt8], operatorID: String?,
        at time: Timestamp, write: Bool = true,
        plan: @escaping @Sendable (Group, Member?, GroupMessage?) throws -> MessageEditPlan
    ) async throws -> Committed<EditedMessage> {
        try await mutate("editMessage", scope: .groups([groupID], app: app)) { transaction, effects in
            let snapshot = try await transaction.load(SnapshotRequest(
                app: app, group: groupID, operatorID: operatorID, time: time, messageSequence: sequence))
            var group = try Self.loadedGroup(snapshot)
            let decided = try plan(group, operatorID.flatMap { snapshot.members[$0] }, snapshot.message?.message)
            guard var message = snapshot.message?.message else { throw GroupError.internal("an edit without its message") }
            guard case .edit(let edit, let draft) = decided else {
                return Committed(value: EditedMessage(message: message, unchanged: true), group: group, events: [])
            }
            message.content.text = text
            message.content.payload = payload
            message.edit = edit
            guard write else {
                return Committed(value: EditedMessage(message: message, unchanged: false), group: group, events: [])
            }
            let written = try await transaction.write(
                WriteSet(events: [draft], edit: MessageBodyEdit(sequence: sequence, text: text, payload: payload, edit: edit)),
                over: snapshot)
            if let last = written.events.last { group.latestSequence = last.sequence }
            try await effects.wrote(written, to: group, transaction: transaction)
            return Committed(value: EditedMessage(message: message, unchanged: false), group: group, events: written.events)
        }
    }

    /// Deletes up to `limit` of an app's messages sent before `cutoff` (the body and its
    /// `GROUP_MESSAGE` event row, in one transaction). Sequences are never reused: history reads
    /// simply find nothing below the oldest kept message.
    /// - Returns: How many messages were deleted.
    public func purgeMessages(app: String, olderThan cutoff: Timestamp, limit: Int) async throws -> Int {
        try await mutate("purgeMessages", scope: .app(app)) { transaction, _ in
            try await transaction.purge(PurgeRequest(kind: .messages, app: app, before: cutoff, limit: max(0, limit)))
        }
    }

    /// The message a sender sent with `clientMessageID` in a group, if any.
    /// - Throws: `GROUP_NOT_FOUND` if the app has no such group (dismissed included); `INTERNAL`.
    public func message(app: String, groupID: String, senderID: String, clientMessageID: String) async throws -> StoredMessage? {
        try await read {
            try await backend.message(app: app, groupID: groupID, senderID: senderID, clientMessageID: clientMessageID)
        }
    }

    /// A page of a group's stored messages in `range`, at most `limit`.
    /// - Throws: `GROUP_NOT_FOUND` (missing or dismissed); `INTERNAL`.
    public func messages(app: String, groupID: String, range: MessageRange, limit: Int) async throws -> MessagePage {
        try await read { try await backend.messages(app: app, groupID: groupID, range: range, limit: max(1, limit)) }
    }

    /// A page of the replies to the message `sequence` of a group: the stored messages whose
    /// reference names it, with a sequence above `after` (the previous page's last, or the
    /// reader's history floor), at most `limit`, oldest first. The original need not exist.
    /// - Throws: `GROUP_NOT_FOUND` (missing or dismissed); `INTERNAL`.
    public func replies(app: String, groupID: String, to sequence: Int64, after: Int64, limit: Int) async throws -> MessagePage {
        try await read {
            try await backend.replies(app: app, groupID: groupID, to: sequence, after: after, limit: max(1, limit))
        }
    }

    /// The `event_id` of a group's events by sequence (absent: no such event).
    /// - Throws: `GROUP_NOT_FOUND` if the app has no such group (dismissed included); `INTERNAL`.
    public func eventIDs(app: String, groupID: String, sequences: [Int64]) async throws -> [Int64: Int64] {
        try await read { try await backend.eventIDs(app: app, groupID: groupID, sequences: sequences) }
    }

    /// Every stored member's join sequence and read position in a live group (read receipts),
    /// ascending by user id.
    /// - Throws: `GROUP_NOT_FOUND` (missing or dismissed); `INTERNAL`.
    public func readPositions(app: String, groupID: String) async throws -> [MemberReadPosition] {
        try await read { try await backend.readPositions(app: app, groupID: groupID) }
    }

    /// A user's read state in each of `groupIDs` where they are a stored member (absent
    /// otherwise). Unread counts are computed for every type; callers show them where the type
    /// counts unread messages.
    /// A user's unread mention in each of `groupIDs` where they are a stored member (absent
    /// otherwise): ``ReadState/unreadMention`` alone, without counting unread messages.
    public func unreadMentions(app: String, userID: String, groupIDs: [String]) async throws -> [String: UnreadMention] {
        let groupIDs = groupIDs.count > 1 ? Array(Set(groupIDs)) : groupIDs
        if groupIDs.isEmpty { return [:] }
        return try await read { try await backend.unreadMentions(app: app, userID: userID, groupIDs: groupIDs) }
    }

    public func readStates(app: String, userID: String, groupIDs: [String]) async throws -> [String: ReadState] {
        let groupIDs = groupIDs.count > 1 ? Array(Set(groupIDs)) : groupIDs
        if groupIDs.isEmpty { return [:] }
        return try await read { try await backend.readStates(app: app, userID: userID, groupIDs: groupIDs) }
    }
}
