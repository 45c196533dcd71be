public import GroupModel

/// Join applications and invitations, on top of the group operations.
///
/// Every mutation runs in one write transaction: first the group's items whose expiry passed are
/// marked expired with their `APPLICATION_EXPIRED` events (kept even when the plan then refuses),
/// then the snapshot is loaded, the pure plan runs, and its group change, items and events are
/// written together.
extension Store {
    /// A mutation's result: committed, or refused by the plan after expired items were marked.
    private enum Outcome<Value: Sendable>: Sendable {
        case committed(Committed<ApplicationCommit<Value>>)
        case refused(GroupError)
    }

    /// Runs a plan over a group and the pending items of `kind` whose subject is among `targets`
    /// (JoinGroup: the applicant; InviteMembers: the invitees), and writes its change atomically.
    /// - Parameters:
    ///   - app: The app.
    ///   - groupID: The group.
    ///   - operatorID: The acting user (`nil`: the backend).
    ///   - targets: The users the request names, whose memberships and pending items the snapshot
    ///     carries.
    ///   - kind: The kind of pending items loaded (join applications or invitations).
    ///   - time: The mutation's time: items whose expiry passed by it are marked expired first
    ///     (event time).
    ///   - parts: What the group snapshot loads besides the group and the memberships.
    ///   - inviteLinkTokenHash: The SHA-256 of the invite link token the request carries, whose link the
    ///     snapshot loads whatever its state (`nil`: none).
    ///   - plan: Pure: reads the snapshot, returns the change (or throws a `GroupError`, which rolls back
    ///     what it would write; items just marked expired are kept) and a value for the caller.
    /// - Throws: `GROUP_NOT_FOUND`; the plan's error; `INTERNAL`.
    public func mutateApplications<Value: Sendable>(
        app: String, groupID: String, operatorID: String?, targets: [String], kind: ApplicationKind, at time: Timestamp,
        parts: SnapshotRequest.Parts = Store.groupSnapshotParts, inviteLinkTokenHash: String? = nil,
        plan: @escaping @Sendable (ApplicationSnapshot) throws -> (ApplicationChange, Value)
    ) async throws -> Committed<ApplicationCommit<Value>> {
        var lookup = SnapshotRequest(
            app: app, group: groupID, operatorID: operatorID, targets: targets, time: time,
            parts: parts.union(.dueApplications), pendingApplications: kind)
        lookup.inviteLink = inviteLinkTokenHash.map { .tokenHash($0) }
        let request = lookup
        let outcome: Outcome<Value> = try await mutate(
            "mutateApplications", scope: .groups([groupID], users: targets + [operatorID].compactMap { $0 }, app: app)
        ) { transaction, effects in
            let (snapshot, swept) = try await Self.loadExpiringDue(request, transaction: transaction, effects: effects)
            return try await Self.apply(snapshot, swept: swept, operatorID: operatorID, targets: targets,
                                  transaction: transaction, effects: effects, plan: plan)
        }
        switch outcome {
        case .committed(let committed): return committed
        case .refused(let error): throw error
        }
    }

    /// Runs a decision plan over one item (found by id in the app) and its group, with the subject
    /// (applicant or invitee) among the snapshot's targets, and writes its change atomically.
    /// Two concurrent decisions on one item are serialised: the second sees the first's result.
    /// - Throws: `APPLICATION_NOT_FOUND` when no such item exists in the app; `GROUP_NOT_FOUND`
    ///   when its group was dismissed; the plan's error; `INTERNAL`.
    public func decideApplication<Value: Sendable>(
        app: String, id: String, operatorID: String?, at time: Timestamp,
        plan: @escaping @Sendable (ApplicationSnapshot) throws -> (ApplicationChange, Value)
    ) async throws -> Committed<ApplicationCommit<Value>> {
        // An item's group and subject never change: on a database several nodes share, they are
        // read first, so the decision locks that group and those users rather than the whole app.
        var scope = WriteScope.app(app)
        if backend.isShared, let item = try await application(app: app, id: id) {
            scope = .groups([item.groupID], users: [item.subjectID] + [operatorID].compactMap { $0 }, app: app)
        }
        let outcome: Outcome<Value> = try await mutate("decideApplication", scope: scope) { transaction, effects in
            let found = try await transaction.load(SnapshotRequest(app: app, application: id, time: time))
            guard let subject = found.application?.subjectID else { throw GroupError.applicationNotFound(id) }
            let request = SnapshotRequest(
                app: app, application: id, operatorID: operatorID, targets: [subject], time: time,
                parts: Store.groupSnapshotParts.union(.dueApplications))
            let (snapshot, swept) = try await Self.loadExpiringDue(request, transaction: transaction, effects: effects)
            return try await Self.apply(snapshot, swept: swept, operatorID: operatorID, targets: [subject],
                                  transaction: transaction, effects: effects, plan: plan)
        }
        switch outcome {
        case .committed(let committed): return committed
        case .refused(let error): throw error
        }
    }

    /// Loads `request`; when the group has items whose expiry passed, marks them expired with
    /// their events first and loads again.
    private static func loadExpiringDue(
        _ request: SnapshotRequest, transaction: any StoreTransaction, effects: WriteRecorder
    ) async throws -> (StoreSnapshot, swept: [GroupEvent]) {
        let snapshot = try await transaction.load(request)
        if snapshot.dueApplications.isEmpty { return (snapshot, []) }
        let swept = try await expire(snapshot, now: request.time, transaction: transaction, effects: effects)
        return (try await transaction.load(request), swept)
    }

    /// Marks the snapshot's due items expired and appends their events.
    private static func expire(
        _ snapshot: StoreSnapshot, now: Timestamp, transaction: any StoreTransaction, effects: WriteRecorder
    ) async throws -> [GroupEvent] {
        var group = try loadedGroup(snapshot)
        let (expired, drafts) = GroupRules.planExpiry(of: snapshot.dueApplications, now: now)
        let written = try await transaction.write(WriteSet(events: drafts, applications: expired), over: snapshot)
        group.latestSequence = written.events.last?.sequence ?? group.latestSequence
        try await effects.wrote(written, to: group, applications: expired, transaction: transaction)
        return written.events
    }

    /// Runs `plan` and writes its change; a `GroupError` from the plan is returned as a refusal
    /// when items were just marked expired (those are kept), thrown otherwise.
    private static func apply<Value: Sendable>(
        _ snapshot: StoreSnapshot, swept: [GroupEvent], operatorID: String?, targets: [String],
        transaction: any StoreTransaction, effects: WriteRecorder,
        plan: (ApplicationSnapshot) async throws -> (ApplicationChange, Value)
    ) async throws -> Outcome<Value> {
        let before = try loadedGroup(snapshot)
        let change: ApplicationChange
        let value: Value
        do {
            (change, value) = try await plan(ApplicationSnapshot(
                group: GroupSnapshot(snapshot, group: before, operatorID: operatorID, targets: targets),
                pending: snapshot.pendingApplications, application: snapshot.application, inviteLink: snapshot.inviteLink))
        } catch let error as GroupError where !swept.isEmpty {
            return .refused(error)
        }
        do {
            try Store.refuseBanned(change.group, snapshot: snapshot)
        } catch let error as GroupError where !swept.isEmpty {
            return .refused(error)
        }
        var writes = WriteSet(applications: change.applications)
        writes.inviteLinks = change.inviteLinks
        if !change.group.isEmpty { writes.change = change.group }
        let written = try await transaction.write(writes, over: snapshot)
        var group = before
        if !change.group.isEmpty {
            group = Store.group(after: change.group, before: before, events: written.events)
        }
        try await effects.wrote(
            written, to: group, dismissed: change.group.dismissesGroup, applications: change.applications,
            transaction: transaction)
        return .committed(Committed(
            value: ApplicationCommit(value: value, applications: change.applications), group: group,
            events: swept + written.events))
    }

    /// Moves the user's read time to `time` (never backwards) and returns it, with the unread
    /// count over all the user's items afterwards.
    public func markApplicationsRead(
        app: String, userID: String, upTo time: Timestamp, now: Timestamp
    ) async throws -> (readTime: Timestamp, unreadCount: Int) {
        try await mutate("markApplicationsRead", scope: .groups([], users: [userID], app: app)) { transaction, _ in
            let request = SnapshotRequest(app: app, time: now, parts: .applicationReads, applicationReader: userID)
            _ = try await transaction.write(
                WriteSet(applicationReadTime: (user: userID, time: time)), over: StoreSnapshot(app: app, time: now))
            let after = try await transaction.load(request)
            return (readTime: after.applicationReadTime ?? time, unreadCount: after.unreadApplications)
        }
    }

    /// Marks the items of the app whose expiry passed by `now` as expired, with their events, in
    /// at most `limit` groups, one mutation per group. Returns the committed events.
    public func expireApplications(app: String, now: Timestamp, limit: Int) async throws -> [GroupEvent] {
        let groupIDs = try await read { try await backend.groupsWithDueApplications(app: app, now: now, limit: max(1, limit)) }
        var events: [GroupEvent] = []
        for groupID in groupIDs {
            do {
                events += try await mutate("expireApplications", scope: .groups([groupID], app: app)) { transaction, effects in
                    let snapshot = try await transaction.load(
                        SnapshotRequest(app: app, group: groupID, time: now, parts: .dueApplications))
                    if snapshot.dueApplications.isEmpty { return [] }
                    return try await Self.expire(snapshot, now: now, transaction: transaction, effects: effects)
                }
            } catch let error as GroupError where error.reason == .groupNotFound {
                continue  // dismissed since it was listed
            }
        }
        return events
    }

    /// One item by id as stored (`nil`: none in the app).
    public func application(app: String, id: String) async throws -> Application? {
        try await read { try await backend.application(app: app, id: id) }
    }

    /// One page of the caller's items, newest first (by creation time), with the unread count over
    /// every item matching `query` and the caller's read time, all read in one transaction. The
    /// cursor also records where the listing began, so items created later are not listed and no
    /// item is listed twice. Items of dismissed groups are left out.
    /// - Throws: `INVALID_ARGUMENT` naming `page_token` for a malformed cursor; `INTERNAL`.
    public func listApplications(app: String, query: ApplicationQuery, after cursor: String?, limit: Int) async throws -> ApplicationListing {
        try await read { try await backend.listApplications(app: app, query: query, after: cursor, limit: max(1, limit)) }
    }
}
