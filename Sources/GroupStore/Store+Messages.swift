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
    ///   - check: Pure: throws to refuse; returns the sender's name card to record.
    /// - Throws: `GROUP_NOT_FOUND`; what `check` throws; `INTERNAL`.
    public func appendMessage(
        _ message: GroupMessage, at time: Timestamp,
        check: @escaping @Sendable (Group, Member?) throws -> String
    ) async throws -> AppendedMessage {
        try await mutate("appendMessage", app: message.appID) { transaction, effects in
            let snapshot = try transaction.load(SnapshotRequest(
                app: message.appID, group: message.groupID, targets: [message.senderID], time: time,
                earlierMessage: message.content.clientMessageID.map { (sender: message.senderID, clientMessageID: $0) }))
            if let earlier = snapshot.earlierMessage {
                return AppendedMessage(stored: earlier, deduplicated: true, events: [])
            }
            var group = try Self.loadedGroup(snapshot)
            var stored = message
            stored.senderNameCard = try check(group, snapshot.members[message.senderID])
            stored.time = time
            let written = try transaction.write(
                WriteSet(events: [GroupEvent.Draft(kind: .groupMessage, operatorID: message.senderID)], message: stored),
                over: snapshot)
            guard let event = written.events.first, let eventID = written.messageEventID else {
                throw GroupError.internal("the message's event was not written")
            }
            stored.sequence = event.sequence
            group.latestSequence = event.sequence
            let storedMessage = StoredMessage(eventID: eventID, message: stored)
            try effects.wrote(written, to: group, message: storedMessage, transaction: transaction)
            return AppendedMessage(stored: storedMessage, deduplicated: false, events: written.events)
        }
    }

    /// Moves a member's read position forward, with the events `plan` returns, atomically.
    /// - Parameters:
    ///   - upTo: The requested sequence (`nil`: the latest).
    ///   - plan: Pure: refuses (throws) or returns the new position and the events to append.
    /// - Returns: The read state after the call, the group, and the committed events.
    /// - Throws: `GROUP_NOT_FOUND`; what `plan` throws; `INTERNAL`.
    public func markRead(
        app: String, groupID: String, userID: String, upTo: Int64?, at time: Timestamp,
        plan: @escaping @Sendable (ReadSnapshot) throws -> (readSequence: Int64, events: [GroupEvent.Draft])
    ) async throws -> Committed<(state: ReadState, group: Group)> {
        try await mutate("markRead", app: app) { transaction, effects in
            let request = SnapshotRequest(
                app: app, group: groupID, targets: [userID], time: time, parts: .readState, readState: (user: userID, upTo: upTo))
            let snapshot = try transaction.load(request)
            var group = try Self.loadedGroup(snapshot)
            let (position, drafts) = try plan(ReadSnapshot(
                group: group, membership: snapshot.members[userID], readSequence: snapshot.readSequence,
                latestMessageSequence: snapshot.latestMessageSequence))
            var writes = WriteSet(events: drafts)
            if position != snapshot.readSequence { writes.readSequence = (user: userID, sequence: position) }
            let written = try transaction.write(writes, over: snapshot)
            if let last = written.events.last {
                group.latestSequence = last.sequence
                try effects.wrote(written, to: group, transaction: transaction)
            }
            let after = try transaction.load(request)
            let state = ReadState(readSequence: after.readSequence, unreadCount: after.unreadCount, lastMessageAt: after.lastMessageAt)
            return Committed(value: (state: state, group: group), events: written.events)
        }
    }

    /// Deletes up to `limit` of an app's messages sent before `cutoff` (the body and its
    /// `GROUP_MESSAGE` event row, in one transaction). Sequences are never reused: history reads
    /// simply find nothing below the oldest kept message.
    /// - Returns: How many messages were deleted.
    public func purgeMessages(app: String, olderThan cutoff: Timestamp, limit: Int) async throws -> Int {
        try await mutate("purgeMessages", app: app) { transaction, _ in
            try transaction.purge(PurgeRequest(kind: .messages, app: app, before: cutoff, limit: max(0, limit)))
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
    public func readStates(app: String, userID: String, groupIDs: [String]) async throws -> [String: ReadState] {
        let groupIDs = groupIDs.count > 1 ? Array(Set(groupIDs)) : groupIDs
        if groupIDs.isEmpty { return [:] }
        return try await read { try await backend.readStates(app: app, userID: userID, groupIDs: groupIDs) }
    }
}
