public import GroupModel

/// What a plan may read about a group, loaded inside the write transaction that applies it, so
/// no concurrent change slips between the check and the write.
public struct GroupSnapshot: Sendable {
    /// The group as it is now.
    public var group: Group
    /// The operator's membership (nil for the backend or a non-member).
    public var operatorMembership: Member?
    /// The memberships of the users the request names, keyed by user id (absent: not a member).
    public var targets: [String: Member]
    /// The owner's membership (nil for an ownerless AVChatRoom).
    public var owner: Member?
    /// The longest-standing member other than the operator (lowest join order), for a Work owner
    /// quitting; nil when the operator is the only member.
    public var successor: Member?
    /// How many (undismissed) groups of the app each of the operator and the targets is in.
    public var joinedGroupCounts: [String: Int]
    /// Mutes kept from earlier memberships of the targets and the operator (RongCloud's quit
    /// option), keyed by user id.
    public var retainedMutes: [String: Timestamp]

    /// Creates a snapshot.
    public init(
        group: Group, operatorMembership: Member?, targets: [String: Member], owner: Member?, successor: Member?,
        joinedGroupCounts: [String: Int], retainedMutes: [String: Timestamp]
    ) {
        self.group = group
        self.operatorMembership = operatorMembership
        self.targets = targets
        self.owner = owner
        self.successor = successor
        self.joinedGroupCounts = joinedGroupCounts
        self.retainedMutes = retainedMutes
    }
}

/// One page of a listing, with the cursor of the next page (nil: this was the last).
public struct Page<Item: Sendable>: Sendable {
    /// The items, in the listing's order.
    public var items: [Item]
    /// Where the next page starts; opaque to callers, nil when there is no next page.
    public var next: String?

    /// Creates a page.
    public init(items: [Item], next: String?) {
        self.items = items
        self.next = next
    }
}

/// A group the user belongs to, as `ListJoinedGroups` shows it.
public struct JoinedGroup: Sendable, Hashable {
    /// The group.
    public var group: Group
    /// The user's membership.
    public var membership: Member
    /// The user's private remark for the group ("" when none).
    public var remark: String

    /// Creates a joined-group entry.
    public init(group: Group, membership: Member, remark: String) {
        self.group = group
        self.membership = membership
        self.remark = remark
    }
}

/// The operations of groups and members beyond create and dismiss (issue 3).
///
/// One write path serves every mutation: ``mutateGroup(app:groupID:operatorID:targets:at:plan:)``
/// loads a ``GroupSnapshot`` in a write transaction, runs the pure plan from `GroupRules`, and
/// applies the ``GroupChange`` it returns (group row, members inserted with fresh join orders,
/// updated, removed, retained mutes, dismissal) with its events, atomically.
public protocol GroupOperationStore: GroupStore {
    /// Applies one planned change to a group, atomically with its events.
    /// - Parameters:
    ///   - app: The app.
    ///   - groupID: The group.
    ///   - operatorID: The acting user (nil: the backend).
    ///   - targets: The users the request names, whose memberships the snapshot carries.
    ///   - time: The change's time.
    ///   - plan: Pure: reads the snapshot, returns the change (or throws a `GroupError`, which
    ///     rolls back and is rethrown) and a value for the caller.
    /// - Returns: The caller's value, the group after the change, and the committed events.
    /// - Throws: `NOT_FOUND` / `GROUP_NOT_FOUND` when the group does not exist (or is dismissed);
    ///   the plan's error; `INTERNAL` on storage failure.
    func mutateGroup<Value: Sendable>(
        app: String, groupID: String, operatorID: String?, targets: [String], at time: Timestamp,
        plan: @escaping @Sendable (GroupSnapshot) throws -> (GroupChange, Value)
    ) async throws -> Committed<(value: Value, group: Group)>

    /// Sets or clears (nil) a user's private remark for a group, with its events.
    func setRemark(app: String, groupID: String, plan: RemarkPlan, at time: Timestamp) async throws -> [GroupEvent]

    /// A user's remark for a group ("" when none).
    func remark(app: String, groupID: String, userID: String) async throws -> String

    /// Members of one group in join order (the owner and the longest-standing first), filtered by
    /// role, one page at a time. Stable under concurrent joins and quits: a member present for
    /// the whole listing appears exactly once; nobody appears twice.
    func listMembers(app: String, groupID: String, filter: MemberListFilter, after cursor: String?, limit: Int) async throws -> Page<Member>

    /// Several members of one group by user id (absent: not a member).
    func members(app: String, groupID: String, userIDs: [String]) async throws -> [String: Member]

    /// The groups a user belongs to, newest join first, excluding AVChatRooms, one page at a time.
    func joinedGroups(app: String, userID: String, after cursor: String?, limit: Int) async throws -> Page<JoinedGroup>

    /// Groups whose id equals `keyword` or whose name contains it (case-insensitive), among the
    /// groups `userID` belongs to and the Public, Meeting and AVChatRoom groups; with
    /// `matchNameCards`, also the joined groups where a member's name card contains it (ZIM).
    /// - Parameter userID: The searcher (nil: the backend, which sees every group).
    func searchGroups(
        app: String, keyword: String, userID: String?, matchNameCards: Bool, after cursor: String?, limit: Int
    ) async throws -> Page<Group>

    /// Creates a group as ``GroupStore/createGroup(_:)`` does, after `revise` has seen, in the
    /// same write transaction, how many groups of the app each member of `plan` is in (undismissed,
    /// AVChatRoom excluded), so a limit check and the insert cannot be separated by a concurrent join.
    /// - Parameter revise: Pure: returns the plan to write (members left out, say) and a value for
    ///   the caller, or throws a `GroupError` (nothing is written).
    /// - Throws: `GROUP_ID_TAKEN`; what `revise` throws; `INTERNAL`.
    func createGroup<Value: Sendable>(
        _ plan: GroupCreationPlan,
        revise: @escaping @Sendable (_ joinedGroupCounts: [String: Int]) throws -> (GroupCreationPlan, Value)
    ) async throws -> Committed<(value: Value, group: Group)>

    /// How many undismissed groups of `types` the user belongs to, as stored (an AVChatRoom's
    /// audience is not stored; its owner is). `types` empty: every type.
    func joinedGroupCount(app: String, userID: String, types: Set<GroupType>) async throws -> Int

    /// Per group id, the members whose name card contains `keyword` (case-insensitive for ASCII),
    /// at most `limit` per group, in join order. Groups missing, dismissed or without a match are absent.
    func nameCardMatches(app: String, groupIDs: [String], keyword: String, limit: Int) async throws -> [String: [Member]]
}
