public import GroupModel

/// Invite links: creation and revocation (one write path: snapshot with the group's live links
/// and the named link, pure plan, write with its events in the same transaction) and the reads.
/// Joins through a link run on ``Store/mutateApplications(app:groupID:operatorID:targets:kind:at:parts:inviteLinkTokenHash:plan:)``.
extension Store {
    /// Runs a plan over a group, the operator's membership, the group's live invite links and the
    /// link `linkID` (when given), and writes the links it returns with their events atomically.
    /// - Throws: `GROUP_NOT_FOUND`; the plan's error; `INTERNAL`.
    public func mutateInviteLinks<Value: Sendable>(
        app: String, groupID: String, operatorID: String?, linkID: String? = nil, at time: Timestamp,
        plan: @escaping @Sendable (_ snapshot: GroupSnapshot, _ live: [InviteLink], _ named: InviteLink?) throws
            -> (links: [InviteLink], events: [GroupEvent.Draft], value: Value)
    ) async throws -> Committed<Value> {
        try await mutate("mutateInviteLinks", scope: .groups([groupID], app: app)) { transaction, effects in
            var request = SnapshotRequest(app: app, group: groupID, operatorID: operatorID, time: time, parts: .inviteLinks)
            request.inviteLink = linkID.map { .id($0) }
            let snapshot = try await transaction.load(request)
            var group = try Self.loadedGroup(snapshot)
            let (links, events, value) = try plan(
                GroupSnapshot(snapshot, group: group, operatorID: operatorID, targets: []), snapshot.inviteLinks,
                snapshot.inviteLink)
            var writes = WriteSet(events: events)
            writes.inviteLinks = links
            let written = try await transaction.write(writes, over: snapshot)
            if let last = written.events.last {
                group.latestSequence = last.sequence
                try await effects.wrote(written, to: group, transaction: transaction)
            }
            return Committed(value: value, group: group, events: written.events)
        }
    }

    /// The invite link whose token has this SHA-256 (`nil`: none in the app), whatever its state.
    public func inviteLink(app: String, tokenHash: String) async throws -> InviteLink? {
        try await read { try await backend.inviteLink(app: app, tokenHash: tokenHash) }
    }

    /// A live group's invite links live at `now`, oldest first.
    /// - Throws: `GROUP_NOT_FOUND`.
    public func inviteLinks(app: String, groupID: String, now: Timestamp) async throws -> [InviteLink] {
        try await read { try await backend.inviteLinks(app: app, groupID: groupID, now: now) }
    }
}
