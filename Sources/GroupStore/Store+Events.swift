public import GroupModel

/// The event log as the event stream reads it: committed events pushed once per commit
/// (``observeCommittedEvents(_:)``), backlogs read from the backend, and retention.
extension Store {
    /// Reads a group's events with sequence greater than `sequence`, in order (dismissed groups
    /// included, so their last events can still be delivered).
    /// - Throws: `GROUP_NOT_FOUND` if the app has no such group, dismissed or not.
    public func events(app: String, groupID: String, after sequence: Int64, limit: Int) async throws -> [GroupEvent] {
        try await read { try await backend.events(app: app, groupID: groupID, after: sequence, limit: max(0, limit)) }
    }

    /// The highest `event_id` committed so far (deleted rows included); 0 when none.
    public func latestEventID() async throws -> Int64 {
        try await read { try await backend.latestEventID() }
    }

    /// The highest committed `event_id` of `app` (0: none): where a live stream of the app starts.
    public func latestEventID(app: String) async throws -> Int64 {
        try await read { try await backend.latestEventID(app: app) }
    }

    /// Every event of `app` after `eventID`, in order, at most `limit` rows examined (the
    /// backend firehose).
    public func appEvents(app: String, after eventID: Int64, limit: Int) async throws -> EventLogPage {
        try await read { try await backend.appEvents(app: app, after: eventID, limit: max(1, limit)) }
    }

    /// The events of `app` a user's stream carries after `eventID`: those addressed to the user,
    /// the group and approver events of the groups (AVChatRoom: only the stored owner) while the
    /// user was a member (from the join on; through the kick or quit for groups left since
    /// `eventID`), approver events where the user approves now. At most `limit` rows examined.
    public func userEvents(app: String, userID: String, after eventID: Int64, limit: Int) async throws -> EventLogPage {
        try await read { try await backend.userEvents(app: app, userID: userID, after: eventID, limit: max(1, limit)) }
    }

    /// The user's stored memberships of `app` with the snapshot's watermark.
    public func streamMemberships(app: String, userID: String) async throws -> MembershipSnapshot {
        try await read { try await backend.streamMemberships(app: app, userID: userID) }
    }

    /// The oldest retained position of `app` given the retention `cutoff` (events older than it
    /// are expired, purged or not).
    public func retainedStart(app: String, cutoff: Timestamp) async throws -> RetainedStart {
        try await read { try await backend.retainedStart(app: app, cutoff: cutoff) }
    }

    /// Deletes up to `limit` events of `app` older than `cutoff` (group messages stay: they are
    /// the history). Returns how many were deleted.
    public func purgeEvents(app: String, olderThan cutoff: Timestamp, limit: Int) async throws -> Int {
        try await mutate("purgeEvents", scope: .app(app)) { transaction, _ in
            try await transaction.purge(PurgeRequest(kind: .events, app: app, before: cutoff, limit: max(0, limit)))
        }
    }
}
