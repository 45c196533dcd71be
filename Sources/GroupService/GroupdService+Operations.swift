import GroupAPI
import GroupModel
import GroupStore

/// The shared machinery of the group operations: the one write path (snapshot → pure plan →
/// store, with an AVChatRoom's audience through ``LiveRooms``), and the caller's view of groups
/// and members (visibility, readable custom fields).
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

    /// Runs `plan` against the group's snapshot in one write transaction and applies its change.
    ///
    /// For an AVChatRoom (``LiveRooms``) the transaction's snapshot carries the room's presences;
    /// the snapshot is completed with the node's audience (operator and target memberships, live
    /// member count) before the plan runs; the audience's part of the change (joins, leaves,
    /// member updates of users not stored) is taken out of what the store writes to its rows, its
    /// presences are held and dropped in the same transaction, and it is handed to the in-memory
    /// audience after the commit. The events are stored either way.
    /// - Returns: The plan's value, the group after the change (for an AVChatRoom, `memberCount`
    ///   counts the live audience) and the committed events.
    func mutate<Value: Sendable>(
        _ call: CallContext, groupID: String, targets: [String] = [], parts: SnapshotRequest.Parts = Store.groupSnapshotParts,
        _ plan: @escaping @Sendable (GroupSnapshot, GroupOperator) throws -> (GroupChange, Value)
    ) async throws -> Committed<Value> {
        try Self.requireGroupID(groupID)
        let caller = call.caller
        let app = caller.appID
        try await rooms.sync(app: app, groupID: groupID)
        let rooms = self.rooms
        let now = clock.now()
        let committed = try await store.mutateGroup(
            app: app, groupID: groupID, operatorID: caller.operatorID, targets: targets, at: now, parts: parts.union(.presence)
        ) { stored, presence in
            let room = rooms.complete(stored, presence: presence, app: app, operatorID: caller.operatorID, targets: targets)
            let snapshot = room?.snapshot ?? stored
            var (change, value) = try plan(snapshot, Self.groupOperator(caller, membership: snapshot.operatorMembership))
            // Here as well as in the store: below, an AVChatRoom's viewers leave `removedMembers`
            // (their audience is not stored), and a viewer kicked or banned must leave the list too.
            change = change.droppingLeaversFromMuteBypass()
            guard let room else { return (change, nil, RoomMutation(value: value)) }
            // The operator's membership may be the audience's: taken before the audience's part
            // leaves the change.
            let membership = change.membership(of: caller.operatorID, before: snapshot.operatorMembership)
            let roomChange = room.split(&change, until: LiveRooms.presenceEnd(from: now))
            return (change, roomChange.presence, RoomMutation(value: value, room: roomChange, membership: membership))
        }
        var result = committed.map(\.value)
        guard let roomChange = committed.value.room else { return result }
        rooms.apply(roomChange, app: app, groupID: groupID)
        result.group.memberCount += roomChange.online
        result.membership = committed.value.membership
        return result
    }

    /// What ``mutate(_:groupID:targets:parts:_:)``'s transaction hands out: the plan's value and,
    /// for an AVChatRoom, the audience's part of the change and the operator's membership after it.
    private struct RoomMutation<Value: Sendable>: Sendable {
        var value: Value
        var room: LiveRooms.RoomChange?
        var membership: Member?
    }

    /// The group and the operator's membership, outside a transaction (reads and checks that need
    /// no atomic write): `GROUP_NOT_FOUND` when missing. For AVChatRoom the membership may come
    /// from the audience and the member count is the live one.
    func loadGroup(_ call: CallContext, groupID: String) async throws -> (group: Group, membership: Member?) {
        try Self.requireGroupID(groupID)
        let app = call.caller.appID
        try await rooms.sync(app: app, groupID: groupID)
        guard var group = try await store.groups(app: app, ids: [groupID])[groupID] else {
            throw GroupError.groupNotFound(groupID)
        }
        var membership: Member?
        if let user = call.caller.operatorID {
            membership = try await store.memberships(app: app, userID: user, groupIDs: [groupID])[groupID]
        }
        if !group.type.preset.behaviour.membershipStored {
            group.memberCount += try await rooms.onlineCounts(app: app, groupIDs: [groupID])[groupID] ?? 0
            if membership == nil, let user = call.caller.operatorID {
                membership = try await rooms.presentMember(app: app, groupID: groupID, user: user)
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
