import GroupAPI
import GroupModel
import GroupStore

/// The shared machinery of the issue-3 operations: the one write path (snapshot → pure plan →
/// store), the AVChatRoom audience kept in memory around it, and the caller's view of groups and
/// members (visibility, readable custom fields).
extension GroupdService {
    /// The model's operator for the caller, with their membership (nil: none, or the backend).
    static func groupOperator(_ caller: Caller, membership: Member?) -> GroupOperator {
        guard let user = caller.operatorID else { return .backend }
        return .user(user, membership: membership)
    }

    /// `INVALID_ARGUMENT` naming `group_id` when it is empty.
    static func requireGroupID(_ id: String) throws {
        if id.isEmpty { throw GroupError.invalidArgument(field: "group_id", "group_id must not be empty") }
    }

    /// What the plan closure hands out of the transaction.
    struct MutationOutcome<Value: Sendable>: Sendable {
        var value: Value
        var upserts: [Member] = []
        var removals: [String] = []
        var live: Bool = false
        var membership: Member?
    }

    /// What a committed mutation gives back.
    struct Mutation<Value: Sendable>: Sendable {
        var value: Value
        /// The group after the change (for AVChatRoom, `memberCount` counts the live audience).
        var group: Group
        /// The operator's membership after the change.
        var membership: Member?
        var events: [GroupEvent]
    }

    /// Runs `plan` against the group's snapshot in one write transaction and applies its change.
    ///
    /// For an AVChatRoom the snapshot is completed with the node's audience (operator and target
    /// memberships, live member count) before the plan runs; the audience's part of the change
    /// (joins, leaves, member updates of users not stored) is taken out of what the store writes
    /// and applied to the in-memory registry after the commit. The events are stored either way.
    func mutate<Value: Sendable>(
        _ call: CallContext, groupID: String, targets: [String] = [], parts: SnapshotRequest.Parts = Store.groupSnapshotParts,
        _ plan: @escaping @Sendable (GroupSnapshot, GroupOperator) throws -> (GroupChange, Value)
    ) async throws -> Mutation<Value> {
        try Self.requireGroupID(groupID)
        let caller = call.caller
        let app = caller.appID
        try await syncAudience(app: app, groupID: groupID)
        let audience = self.audience
        // AVChatRoom: the online count, and which of the operator and targets are present (a
        // viewer whose presence ended is no longer in the audience).
        var online = 0
        var present: Set<String> = []
        if try await store.groupType(app: app, id: groupID) == .avChatRoom {
            let now = clock.now()
            online = try await onlineCounts(app: app, groupIDs: [groupID])[groupID] ?? 0
            let users = Array(Set(targets + [caller.operatorID].compactMap { $0 }))
            present = try await store.presentUsers(app: app, groupID: groupID, users: users, now: now)
        }
        let (counted, presentUsers) = (online, present)
        let committed = try await store.mutateGroup(
            app: app, groupID: groupID, operatorID: caller.operatorID, targets: targets, at: clock.now(), parts: parts
        ) { stored in
            var snapshot = stored
            let live = !stored.group.type.preset.behaviour.membershipStored
            var storedIDs: Set<String> = Set(stored.targets.keys)
            if let owner = stored.owner { storedIDs.insert(owner.userID) }
            if let own = stored.operatorMembership { storedIDs.insert(own.userID) }
            if live {
                let listeners = audience.members(app: app, group: groupID, users: targets + [caller.operatorID].compactMap { $0 })
                    .filter { presentUsers.contains($0.key) }
                for (user, member) in listeners where snapshot.targets[user] == nil { snapshot.targets[user] = member }
                if snapshot.operatorMembership == nil, let user = caller.operatorID { snapshot.operatorMembership = listeners[user] }
                snapshot.group.memberCount = stored.group.memberCount + counted
            }
            let op = Self.groupOperator(caller, membership: snapshot.operatorMembership)
            var (change, value) = try plan(snapshot, op)
            // Here as well as in the store: below, an AVChatRoom's viewers leave `removedMembers`
            // (their audience is not stored), and a viewer kicked or banned must leave the list too.
            change = change.droppingLeaversFromMuteBypass()
            var outcome = MutationOutcome(value: value, live: live)
            let operatorID = caller.operatorID
            outcome.membership = operatorID.flatMap { user in
                if change.removedMembers.contains(user) { return nil }
                return change.insertedMembers.first { $0.userID == user }
                    ?? change.updatedMembers.first { $0.userID == user } ?? snapshot.operatorMembership
            }
            if live {
                outcome.upserts = change.insertedMembers + change.updatedMembers.filter { !storedIDs.contains($0.userID) }
                outcome.removals = change.removedMembers.filter { !storedIDs.contains($0) }
                change.insertedMembers = []
                change.updatedMembers.removeAll { !storedIDs.contains($0.userID) }
                change.removedMembers.removeAll { !storedIDs.contains($0) }
                change.group.memberCount = stored.group.memberCount - change.removedMembers.count
            }
            return (change, outcome)
        }
        let outcome = committed.value.value
        var group = committed.value.group
        if outcome.live {
            audience.apply(app: app, group: groupID, upserts: outcome.upserts, removals: outcome.removals)
            let joined = committed.events.filter { $0.kind == .memberJoined || $0.kind == .memberInvited }.flatMap(\.targets)
            let left = committed.events.filter { $0.kind == .memberQuit || $0.kind == .memberKicked }.flatMap(\.targets)
            let now = clock.now()
            try await store.holdPresence(app: app, groupID: groupID, users: joined, until: Self.presenceEnd(from: now))
            try await store.dropPresence(app: app, groupID: groupID, users: left)
            group.memberCount += try await onlineCounts(app: app, groupIDs: [groupID])[groupID] ?? 0
        }
        return Mutation(value: outcome.value, group: group, membership: outcome.membership, events: committed.events)
    }

    /// On a database other nodes write: when the group is an AVChatRoom, waits until this node's
    /// audiences hold every event of the app committed so far, by any node (a join answered on
    /// another node is seen here). Otherwise returns at once.
    func syncAudience(app: String, groupID: String) async throws {
        guard store.isShared, try await store.groupType(app: app, id: groupID) == .avChatRoom else { return }
        try await store.catchUp(app: app)
    }

    /// The group and the operator's membership, outside a transaction (reads and checks that need
    /// no atomic write): `GROUP_NOT_FOUND` when missing. For AVChatRoom the membership may come
    /// from the audience and the member count is the live one.
    func loadGroup(_ call: CallContext, groupID: String) async throws -> (group: Group, membership: Member?) {
        try Self.requireGroupID(groupID)
        let app = call.caller.appID
        try await syncAudience(app: app, groupID: groupID)
        guard var group = try await store.groups(app: app, ids: [groupID])[groupID] else {
            throw GroupError.groupNotFound(groupID)
        }
        var membership: Member?
        if let user = call.caller.operatorID {
            membership = try await store.memberships(app: app, userID: user, groupIDs: [groupID])[groupID]
        }
        if !group.type.preset.behaviour.membershipStored {
            group.memberCount += try await onlineCounts(app: app, groupIDs: [groupID])[groupID] ?? 0
            if membership == nil, let user = call.caller.operatorID {
                membership = try await presentAudienceMember(app: app, groupID: groupID, user: user)
            }
        }
        return (group, membership)
    }

    // MARK: Views

    /// A member as `actor` may see it: custom values limited to the readable keys (and, when
    /// `keys` is given, to those keys).
    static func memberView(_ member: Member, actor: ActingRole, call: CallContext, keys: Set<String>? = nil) -> Groupd_V1_Member {
        var out = APIMapping.member(member, now: call.now)
        out.receiveMessageOption = receiveOptionView(member, call: call)
        var custom = member.custom
        if let keys { custom = custom.filter { keys.contains($0.key) } }
        if let schema = call.customFields { custom = schema.readable(custom, scope: .member, for: actor) }
        out.custom = custom
        return out
    }

    /// A member's receive option as the caller may see it: their own, or anyone's for the app's
    /// backend (an admin token without `x-operator-id`, which delivers pushes); UNSPECIFIED in
    /// another member's record, whatever the caller's role (a personal preference, as Tencent's
    /// `recvOpt`).
    static func receiveOptionView(_ member: Member, call: CallContext) -> Groupd_V1_ReceiveMessageOption {
        guard let caller = call.caller.operatorID, caller != member.userID else {
            return APIMapping.member(member, now: call.now).receiveMessageOption
        }
        return .unspecified
    }

    /// A group as the caller sees it: visibility by role, readable custom fields, own membership.
    static func groupView(_ group: Group, membership: Member?, call: CallContext, remark: String = "") -> Groupd_V1_Group {
        let actor = call.caller.actingRole(membership: membership?.role)
        var visibility = GroupRules.visibility(of: group.type, for: actor)
        if visibility == .hidden { visibility = .publicProfile }  // callers check hidden before
        var out = APIMapping.group(group, visibility: visibility, selfInfo: nil, now: call.now)
        if let schema = call.customFields, visibility.includes(.custom) {
            out.custom = schema.readable(group.custom, scope: .group, for: actor)
        }
        out.selfInfo = membership.map { memberView($0, actor: actor, call: call) }
        out.remark = remark
        return out
    }

    /// One batch result in the API's form.
    static func memberResult(_ result: MemberResult, actor: ActingRole, call: CallContext) -> Groupd_V1_MemberResult {
        .with {
            $0.userID = result.userID
            switch result.outcome {
            case .success(let member):
                $0.result = .success
                $0.member = memberView(member, actor: actor, call: call)
            case .alreadyMember:
                $0.result = .alreadyMember
                $0.reason = GroupError.Reason.alreadyMember.rawValue
            case .notMember:
                $0.result = .notMember
                $0.reason = GroupError.Reason.notAMember.rawValue
            case .failed(let error):
                $0.result = .failed
                $0.reason = error.reason.rawValue
            case .invalid(let error):
                $0.result = .invalid
                $0.reason = error.reason.rawValue
            case .pending:
                // The invitation record (and its id) belongs to the applications issue.
                $0.result = .pending
            }
        }
    }

    /// The distinct non-empty user ids of a batch, for the snapshot (the model checks the batch
    /// itself; an over-long list loads nothing, since the model refuses it).
    static func distinctTargets(_ users: [String], limits: AppLimits) -> [String] {
        guard users.count <= limits.maxUsersPerBatch else { return [] }
        var seen: Set<String> = []
        return users.filter { !$0.isEmpty && seen.insert($0).inserted }
    }

    /// Quit options from the API (absent: the defaults).
    static func quitOptions(_ options: Groupd_V1_QuitOptions?) -> QuitOptions {
        QuitOptions(keepMuteStatus: options?.keepMuteStatus ?? false)
    }

    /// A page size: 0 → `fallback`, above `max` → `max`, negative → `INVALID_ARGUMENT`.
    static func pageSize(_ size: Int32, fallback: Int, max: Int) throws -> Int {
        if size < 0 {
            throw GroupError.invalidArgument(field: "page_size", "page_size must not be negative", limit: max)
        }
        return size == 0 ? fallback : min(Int(size), max)
    }

    /// The `version` of a sync answer: the page's version, or 0 with `full_reload_required`, whose
    /// answer fills nothing else (a client that keeps every answer's version must not keep one
    /// with no list behind it).
    static func syncVersion<Item>(_ page: SyncPage<Item>) -> UInt64 {
        page.fullReloadRequired ? 0 : UInt64(max(page.version, 0))
    }
}
