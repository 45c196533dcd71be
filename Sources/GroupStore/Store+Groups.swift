public import GroupModel
import Synchronization

/// Groups and members: creation, the one mutation path of every group operation, dismissal,
/// remarks, and the reads.
extension Store {
    // MARK: Creation

    /// Creates a group with its members and events, atomically.
    /// - Parameter plan: From `GroupRules.planCreation(_:appID:creatorID:limits:now:generateID:)`.
    /// - Returns: The stored group (with `latestSequence`) and its numbered events.
    /// - Throws: `ALREADY_EXISTS` / `GROUP_ID_TAKEN` if the id is taken in that app (nothing is
    ///   written); `INTERNAL` on storage failure.
    public func createGroup(_ plan: GroupCreationPlan) async throws -> Committed<Group> {
        let committed = try await createGroup(plan) { _ in (plan, ()) }
        return committed.map { _ in committed.group }
    }

    /// Creates a group as ``createGroup(_:)`` does, after `revise` has seen, in the same write
    /// transaction, how many groups of the app each member of `plan` is in (undismissed,
    /// AVChatRoom excluded), so a limit check and the insert cannot be separated by a concurrent join.
    /// - Parameters:
    ///   - plan: The creation as planned (from
    ///     `GroupRules.planCreation(_:appID:creatorID:limits:now:generateID:)`), whose members'
    ///     joined-group counts `revise` is shown.
    ///   - revise: Pure: returns the plan to write (members left out, say) and a value for
    ///     the caller, or throws a `GroupError` (nothing is written).
    /// - Throws: `GROUP_ID_TAKEN`; what `revise` throws; `INTERNAL`.
    public func createGroup<Value: Sendable>(
        _ plan: GroupCreationPlan,
        revise: @escaping @Sendable (_ joinedGroupCounts: [String: Int]) throws -> (GroupCreationPlan, Value)
    ) async throws -> Committed<Value> {
        try await mutate(
            "createGroup", scope: .groups([plan.group.id], users: plan.members.map(\.userID), app: plan.group.appID)
        ) { transaction, effects in
            var request = SnapshotRequest(
                app: plan.group.appID, targets: plan.members.map(\.userID), time: plan.group.createdAt,
                parts: .joinedGroupCounts)
            request.newGroup = plan.group.id
            let snapshot = try await transaction.load(request)
            let (revised, value) = try revise(snapshot.joinedGroupCounts)
            var group = revised.group
            let written = try await transaction.write(WriteSet(newGroup: revised), over: snapshot)
            group.memberCount = revised.members.count
            group.latestSequence = written.events.last?.sequence ?? 0
            group.memberVersion = revised.members.isEmpty ? 0 : 1
            try await effects.wrote(written, to: group, transaction: transaction)
            return Committed(value: value, group: group, events: written.events)
        }
    }

    // MARK: Changes

    /// The parts of a snapshot a group operation loads unless it asks for fewer.
    public static let groupSnapshotParts: SnapshotRequest.Parts = [.owner, .successor, .joinedGroupCounts, .retainedMutes, .bans]

    /// Applies one planned change to a group, atomically with its events.
    ///
    /// One path serves every group operation: load a ``GroupSnapshot`` in the write transaction,
    /// run the pure plan, write the `GroupChange` it returns (group row, members inserted with
    /// fresh join orders, updated, removed, retained mutes, dismissal) with its events.
    /// - Parameters:
    ///   - app: The app.
    ///   - groupID: The group.
    ///   - operatorID: The acting user (nil: the backend).
    ///   - targets: The users the request names, whose memberships the snapshot carries.
    ///   - time: The change's time.
    ///   - parts: What the snapshot loads besides the group and those memberships (the plan
    ///     reads nothing else).
    ///   - plan: Pure: reads the snapshot, returns the change (or throws a `GroupError`, which
    ///     rolls back and is rethrown) and a value for the caller.
    /// - Returns: The caller's value, the group and the operator's membership after the change,
    ///   and the committed events.
    /// - Throws: `NOT_FOUND` / `GROUP_NOT_FOUND` when the group does not exist (or is dismissed);
    ///   the plan's error; `INTERNAL` on storage failure.
    public func mutateGroup<Value: Sendable>(
        app: String, groupID: String, operatorID: String?, targets: [String], at time: Timestamp,
        parts: SnapshotRequest.Parts = Store.groupSnapshotParts,
        plan: @escaping @Sendable (GroupSnapshot) throws -> (GroupChange, Value)
    ) async throws -> Committed<Value> {
        try await mutateGroup(
            "mutateGroup", app: app, groupID: groupID, operatorID: operatorID, targets: targets, at: time, parts: parts
        ) { snapshot, _ in
            let (change, value) = try plan(snapshot)
            return (change, nil, value)
        }
    }

    /// ``mutateGroup(app:groupID:operatorID:targets:at:parts:plan:)`` for a plan that also reads
    /// and writes an AVChatRoom's presences in the same transaction: with `.presence` in
    /// `parts`, the plan is handed the room's ``RoomPresence`` (`nil` for other group types), and
    /// the ``PresenceChange`` it returns is written with the change and its events.
    public func mutateGroup<Value: Sendable>(
        app: String, groupID: String, operatorID: String?, targets: [String], at time: Timestamp,
        parts: SnapshotRequest.Parts = Store.groupSnapshotParts,
        presencePlan plan: @escaping @Sendable (GroupSnapshot, RoomPresence?) throws -> (GroupChange, PresenceChange?, Value)
    ) async throws -> Committed<Value> {
        try await mutateGroup(
            "mutateGroup", app: app, groupID: groupID, operatorID: operatorID, targets: targets, at: time, parts: parts,
            plan: plan)
    }

    /// ``mutateGroup(app:groupID:operatorID:targets:at:parts:presencePlan:)`` under the name
    /// `method` (fault injection).
    private func mutateGroup<Value: Sendable>(
        _ method: String, app: String, groupID: String, operatorID: String?, targets: [String], at time: Timestamp,
        parts: SnapshotRequest.Parts,
        plan: @escaping @Sendable (GroupSnapshot, RoomPresence?) throws -> (GroupChange, PresenceChange?, Value)
    ) async throws -> Committed<Value> {
        try await mutate(method, scope: .groups([groupID], users: targets + [operatorID].compactMap { $0 }, app: app)) { transaction, effects in
            let snapshot = try await transaction.load(SnapshotRequest(
                app: app, group: groupID, operatorID: operatorID, targets: targets, time: time, parts: parts))
            let before = try Self.loadedGroup(snapshot)
            let (planned, presence, value) = try plan(
                GroupSnapshot(snapshot, group: before, operatorID: operatorID, targets: targets), snapshot.presence)
            let change = planned.droppingLeaversFromMuteBypass()
            try Self.refuseBanned(change, snapshot: snapshot)
            let membership = change.membership(of: operatorID, before: operatorID.flatMap { snapshot.members[$0] })
            if change.isEmpty && (presence?.isEmpty ?? true) {
                return Committed(value: value, group: before, membership: membership, events: [])
            }
            var writes = WriteSet(change: change.isEmpty ? nil : change)
            writes.presence = presence.flatMap { $0.isEmpty ? nil : $0 }
            let written = try await transaction.write(writes, over: snapshot)
            let after = change.isEmpty ? before : Self.group(after: change, before: before, events: written.events)
            try await effects.wrote(written, to: after, dismissed: change.dismissesGroup, transaction: transaction)
            return Committed(value: value, group: after, membership: membership, events: written.events)
        }
    }

    /// Dismisses a group: check, mark dismissed and append events, in one transaction.
    ///
    /// `plan` runs inside the transaction with the group and the operator's membership as they
    /// are at that moment, so the permission check and the change cannot be separated by a
    /// concurrent write (ownership transferred in between, say).
    /// - Parameters:
    ///   - app: The app.
    ///   - groupID: The group to dismiss.
    ///   - operatorID: The acting user, whose membership `plan` receives; `nil` for the backend.
    ///   - time: The time of the change (event time).
    ///   - plan: The pure rule: throws to refuse, returns the events to append.
    /// - Returns: The committed events.
    /// - Throws: `GROUP_NOT_FOUND`, whatever `plan` throws, `INTERNAL`.
    public func dismissGroup(
        app: String, groupID: String, operatorID: String?, at time: Timestamp,
        plan: @escaping @Sendable (Group, Member?) throws -> [GroupEvent.Draft]
    ) async throws -> [GroupEvent] {
        try await mutateGroup(
            "dismissGroup", app: app, groupID: groupID, operatorID: operatorID, targets: [], at: time, parts: []
        ) { snapshot, _ in
            let drafts = try plan(snapshot.group, snapshot.operatorMembership)
            var group = snapshot.group
            group.updatedAt = time
            return (GroupChange(group: group, dismissesGroup: true, events: drafts), nil, ())
        }.events
    }

    /// Sets or clears (nil) a user's private remark for a group, with its events.
    public func setRemark(app: String, groupID: String, plan: RemarkPlan, at time: Timestamp) async throws -> [GroupEvent] {
        try await mutate("setRemark", scope: .groups([groupID], app: app)) { transaction, effects in
            let snapshot = try await transaction.load(SnapshotRequest(app: app, group: groupID, time: time))
            var group = try Self.loadedGroup(snapshot)
            let written = try await transaction.write(
                WriteSet(events: plan.events, remark: (user: plan.userID, remark: plan.remark)), over: snapshot)
            if let last = written.events.last {
                group.latestSequence = last.sequence
                try await effects.wrote(written, to: group, transaction: transaction)
            }
            return written.events
        }
    }

    // MARK: Reads

    /// Reads groups of one app by id, with member count, owner and custom fields.
    ///
    /// Answers from the cache when every id is cached, exactly: never older than a mutation that
    /// has returned, and one consistent instant for the whole batch.
    /// - Returns: The groups found, keyed by id; ids not found (or dismissed) are absent.
    /// A topic comes in its community's view (`Group.topic(_:in:)`), and is absent when its
    /// community is.
    public func groups(app: String, ids: [String]) async throws -> [String: Group] {
        try await mergingTopics(rawGroups(app: app, ids: ids), app: app)
    }

    /// ``groups(app:ids:)`` with topics as stored (their own rows, not merged with their community).
    func rawGroups(app: String, ids: [String]) async throws -> [String: Group] {
        let ids = ids.count > 1 ? Array(Set(ids)) : ids
        if ids.isEmpty { return [:] }
        let generation: UInt64
        switch cache.lookup(app: app, ids: ids) {
        case .hit(let groups): return groups
        case .miss(let since): generation = since
        }
        let groups = try await read { try await backend.groups(app: app, ids: ids) }
        cache.fill(app: app, groups: groups.values, generation: generation)
        return groups
    }

    /// A live group's type (`nil`: no such group): from the cache when it holds the group, even
    /// while a write to it is in flight, since a group's type never changes; otherwise read.
    public func groupType(app: String, id: String) async throws -> GroupType? {
        if let type = cache.type(app: app, id: id) { return type }
        let key = GroupCache.Key(app: app, id: id)
        if let type = types.withLock({ $0[key] }) { return type }
        guard let type = try await groups(app: app, ids: [id])[id]?.type else { return nil }
        // A group's type never changes and groups are never deleted (an id stays taken), so what
        // any node read stays true: kept even without the group cache (a shared database).
        types.withLock { types in
            if types.count >= Self.defaultCacheCapacity { types.removeAll(keepingCapacity: true) }
            types[key] = type
        }
        return type
    }

    /// Reads one user's membership in several groups of one app (for visibility and permissions).
    /// - Returns: The user's member record per group id where the user is a member.
    /// For a topic, the membership is the user's membership of its community.
    public func memberships(app: String, userID: String, groupIDs: [String]) async throws -> [String: Member] {
        let groupIDs = groupIDs.count > 1 ? Array(Set(groupIDs)) : groupIDs
        if groupIDs.isEmpty { return [:] }
        let owners = groupIDs.map { GroupID.communityID(ofTopic: $0) ?? $0 }
        let asked = owners.count > 1 ? Array(Set(owners)) : owners
        let found = try await read { try await backend.memberships(app: app, userID: userID, groupIDs: asked) }
        if owners == groupIDs { return found }
        var memberships: [String: Member] = [:]
        for (id, owner) in zip(groupIDs, owners) { memberships[id] = found[owner] }
        return memberships
    }

    /// Groups by id as `userID` asks for them: the live groups, the user's memberships of them,
    /// the user's remarks and unread mentions (``GroupsForUser``). On a shared database one
    /// statement reads them all, at one instant; otherwise the groups come through the group
    /// cache and the rest from one read (``StoreBackend/userView(app:userID:of:)``).
    public func groupsForUser(app: String, userID: String, ids: [String]) async throws -> GroupsForUser {
        let ids = ids.count > 1 ? Array(Set(ids)) : ids
        if ids.isEmpty { return GroupsForUser() }
        if backend.isShared {
            return try await read { try await backend.groupsForUser(app: app, userID: userID, ids: ids) }
        }
        let groups = try await groups(app: app, ids: ids)
        if groups.isEmpty { return GroupsForUser() }
        return try await read { try await backend.userView(app: app, userID: userID, of: groups) }
    }

    /// The group's running bans by user id, one page at a time (a user banned or unbanned during
    /// the listing may or may not appear; nobody appears twice). Ended bans are left out.
    /// - Throws: `GROUP_NOT_FOUND`.
    public func bans(app: String, groupID: String, after cursor: String?, limit: Int, now: Timestamp) async throws -> Page<GroupBan> {
        try await read {
            try await backend.bans(app: app, groupID: groupID, after: cursor, limit: max(1, limit), now: now)
        }
    }

    /// The members of a live community who are in any permission group, with the ids of theirs
    /// as stored (ids of deleted groups included), by user id.
    /// - Throws: `GROUP_NOT_FOUND`.
    public func permissionAssignments(app: String, groupID: String) async throws -> [PermissionAssignment] {
        try await read { try await backend.permissionAssignments(app: app, groupID: groupID) }
    }

    /// A user's remark for a group ("" when none).
    public func remark(app: String, groupID: String, userID: String) async throws -> String {
        try await read { try await backend.remark(app: app, groupID: groupID, userID: userID) }
    }

    /// One user's remarks for several live groups of one app, by group id (groups without one are
    /// absent).
    public func remarks(app: String, userID: String, groupIDs: [String]) async throws -> [String: String] {
        let groupIDs = groupIDs.count > 1 ? Array(Set(groupIDs)) : groupIDs
        if groupIDs.isEmpty { return [:] }
        return try await read { try await backend.remarks(app: app, userID: userID, groupIDs: groupIDs) }
    }

    /// Members of one group in join order (the owner and the longest-standing first), filtered by
    /// role, one page at a time. Stable under concurrent joins and quits: a member present for
    /// the whole listing appears exactly once; nobody appears twice.
    /// - Throws: `GROUP_NOT_FOUND`; `INVALID_ARGUMENT` naming `page_token` for a malformed cursor.
    public func listMembers(
        app: String, groupID: String, filter: MemberListFilter, after cursor: String?, limit: Int
    ) async throws -> Page<Member> {
        try await read {
            try await backend.listMembers(app: app, groupID: groupID, filter: filter, after: cursor, limit: max(1, limit))
        }
    }

    /// Several members of one group by user id (absent: not a member).
    /// - Throws: `GROUP_NOT_FOUND`.
    public func members(app: String, groupID: String, userIDs: [String]) async throws -> [String: Member] {
        let userIDs = userIDs.count > 1 ? Array(Set(userIDs)) : userIDs
        return try await read { try await backend.members(app: app, groupID: groupID, userIDs: userIDs) }
    }

    /// What changed in a group's member list after member version `version` (0: every member),
    /// one page at a time: members inserted or updated (full records, with custom fields) in the
    /// order of their change, then the user ids removed; every page describes the changes up to
    /// the version of the first (``SyncPage/version``: the group's `Group.memberVersion` then).
    /// Reads only the rows changed after `version` (an index range per part). Answers
    /// ``SyncPage/fullReloadRequired`` when `version` is newer than the group's, or older than
    /// the removals it keeps (retention raised its floor past it).
    /// - Throws: `GROUP_NOT_FOUND`; `INVALID_ARGUMENT` naming `page_token` for a malformed cursor
    ///   or one of another version.
    public func memberChanges(
        app: String, groupID: String, since version: Int64, after cursor: String?, limit: Int
    ) async throws -> SyncPage<Member> {
        try await read {
            try await backend.memberChanges(app: app, groupID: groupID, since: max(0, version), after: cursor, limit: max(1, limit))
        }
    }

    /// What changed in a user's joined-group list after `version` (an app `event_id`; 0: every
    /// joined group), one page at a time in group order: the groups joined or whose record or
    /// the user's entry (membership, remark) changed, as ``JoinedGroup``s, and the ids of the
    /// groups the user is no longer in (left, removed, dismissed). AVChatRooms are never listed.
    /// ``SyncPage/version`` is the latest `event_id` at the first page; a `version` above it
    /// answers ``SyncPage/fullReloadRequired``.
    /// - Throws: `INVALID_ARGUMENT` naming `page_token`.
    public func joinedGroupChanges(
        app: String, userID: String, since version: Int64, after cursor: String?, limit: Int
    ) async throws -> SyncPage<JoinedGroup> {
        try await read {
            try await backend.joinedGroupChanges(app: app, userID: userID, since: max(0, version), after: cursor, limit: max(1, limit))
        }
    }

    /// A group's members whose user id starts with `keyword` (byte order, one index range; in
    /// user id order) or whose name card contains it (case-insensitive for ASCII; in join
    /// order), one page at a time.
    /// - Throws: `GROUP_NOT_FOUND`; `INVALID_ARGUMENT` naming `keyword` when empty, or `page_token`.
    public func searchMembers(
        app: String, groupID: String, keyword: String, field: MemberSearchField, after cursor: String?, limit: Int
    ) async throws -> Page<Member> {
        if keyword.isEmpty { throw GroupError.invalidArgument(field: "keyword", "the search keyword must not be empty") }
        return try await read {
            try await backend.searchMembers(
                app: app, groupID: groupID, keyword: keyword, field: field, after: cursor, limit: max(1, limit))
        }
    }

    /// Deletes up to `limit` member tombstones (removals kept for versioned member sync) older than
    /// `cutoff`, raising each group's floor (a sync from below it reloads the list); returns how many.
    public func purgeMemberTombstones(app: String, olderThan cutoff: Timestamp, limit: Int) async throws -> Int {
        try await mutate("purgeMemberTombstones", scope: .app(app)) { transaction, _ in
            try await transaction.purge(PurgeRequest(kind: .memberTombstones, app: app, before: cutoff, limit: max(0, limit)))
        }
    }

    /// The groups a user belongs to, newest join first, excluding AVChatRooms, one page at a time.
    /// - Throws: `INVALID_ARGUMENT` naming `page_token` for a malformed cursor.
    public func joinedGroups(app: String, userID: String, after cursor: String?, limit: Int) async throws -> Page<JoinedGroup> {
        try await read { try await backend.joinedGroups(app: app, userID: userID, after: cursor, limit: max(1, limit)) }
    }

    /// Groups whose id equals `keyword` or whose name contains it (case-insensitive), among the
    /// groups `userID` belongs to and the Public, Meeting and AVChatRoom groups; with
    /// `matchNameCards`, also the joined groups where a member's name card contains it (ZIM).
    /// - Parameters:
    ///   - app: The app searched.
    ///   - keyword: What a group's id or name (or a member's name card) is matched against; not empty.
    ///   - userID: The searcher (nil: the backend, which sees every group).
    ///   - matchNameCards: Whether the searcher's joined groups also match by a member's name card
    ///     (ignored for the backend).
    ///   - cursor: Where the page starts: the previous page's `next` (`nil`: the first page).
    ///   - limit: The most groups on the page (at least 1).
    /// - Throws: `INVALID_ARGUMENT` naming `keyword` when it is empty, or `page_token`.
    public func searchGroups(
        app: String, keyword: String, userID: String?, matchNameCards: Bool, after cursor: String?, limit: Int
    ) async throws -> Page<Group> {
        if keyword.isEmpty { throw GroupError.invalidArgument(field: "keyword", "the search keyword must not be empty") }
        return try await read {
            try await backend.searchGroups(
                app: app, keyword: keyword, userID: userID, matchNameCards: matchNameCards, after: cursor, limit: max(1, limit))
        }
    }

    /// How many undismissed groups of `types` the user belongs to, as stored (an AVChatRoom's
    /// audience is not stored; its owner is). `types` empty: every type.
    public func joinedGroupCount(app: String, userID: String, types: Set<GroupType>) async throws -> Int {
        try await read { try await backend.joinedGroupCount(app: app, userID: userID, types: types) }
    }

    /// Per group id, the members whose name card contains `keyword` (case-insensitive for ASCII),
    /// at most `limit` per group, in join order. Groups missing, dismissed or without a match are absent.
    public func nameCardMatches(app: String, groupIDs: [String], keyword: String, limit: Int) async throws -> [String: [Member]] {
        let groupIDs = Array(Set(groupIDs))
        if groupIDs.isEmpty || keyword.isEmpty || limit < 1 { return [:] }
        return try await read {
            try await backend.nameCardMatches(app: app, groupIDs: groupIDs, keyword: keyword, limit: limit)
        }
    }
}

extension Store {
    /// `USER_BANNED` when `change` adds a member whose ban, loaded with the snapshot
    /// (``SnapshotRequest/Parts/bans``, part of ``groupSnapshotParts``), runs at the snapshot's
    /// time: a net under the plans, which refuse banned users themselves, for any way into a group.
    static func refuseBanned(_ change: GroupChange, snapshot: StoreSnapshot) throws {
        for member in change.insertedMembers {
            try GroupRules.checkNotBanned(snapshot.bans[member.userID], now: snapshot.time)
        }
    }
}

extension GroupSnapshot {
    /// The plan's view of a loaded snapshot.
    init(_ snapshot: StoreSnapshot, group: Group, operatorID: String?, targets: [String]) {
        var targetMembers: [String: Member] = [:]
        for user in targets { if let member = snapshot.members[user] { targetMembers[user] = member } }
        self.init(
            group: group, operatorMembership: operatorID.flatMap { snapshot.members[$0] }, targets: targetMembers,
            owner: group.ownerID.flatMap { snapshot.members[$0] }, successor: snapshot.successor,
            joinedGroupCounts: snapshot.joinedGroupCounts, retainedMutes: snapshot.retainedMutes,
            successorAdmin: snapshot.successorAdmin)
        self.bans = snapshot.bans
        self.banCount = snapshot.banCount
        self.managers = snapshot.managers
    }
}
