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
    /// The longest-standing member other than the operator (lowest join order), for an owner
    /// quitting; nil when the operator is the only member.
    public var successor: Member?
    /// The longest-standing admin other than the operator, loaded only when the owner acts on a
    /// group whose `GroupSettings.ownerQuit` is `to_longest_standing_admin`; nil otherwise or
    /// when there is no other admin.
    public var successorAdmin: Member?
    /// How many (undismissed) groups of the app each of the operator and the targets is in.
    public var joinedGroupCounts: [String: Int]
    /// Mutes kept from earlier memberships of the targets and the operator (RongCloud's quit
    /// option), keyed by user id.
    public var retainedMutes: [String: Timestamp]
    /// Running bans of the targets and the operator, keyed by user id (`.bans`).
    public var bans: [String: GroupBan] = [:]
    /// How many running bans the group has (`.banCount`).
    public var banCount: Int = 0
    /// The group's owner and admins, in join order (`.managers`).
    public var managers: [String] = []

    /// Creates a snapshot.
    public init(
        group: Group, operatorMembership: Member?, targets: [String: Member], owner: Member?, successor: Member?,
        joinedGroupCounts: [String: Int], retainedMutes: [String: Timestamp], successorAdmin: Member? = nil
    ) {
        self.group = group
        self.operatorMembership = operatorMembership
        self.targets = targets
        self.owner = owner
        self.successor = successor
        self.successorAdmin = successorAdmin
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

/// Groups by id as one user asks for them (GetGroupsInfo): the live groups, the user's stored
/// memberships of them, the user's remarks and unread mentions (on PostgreSQL one statement for
/// the calls that queue together; on SQLite the groups through the group cache, the rest in one
/// read for the calls that queue together).
public struct GroupsForUser: Sendable {
    /// The live groups found, by id.
    public var groups: [String: Group]
    /// The user's memberships of them, by group id (an AVChatRoom's audience is not stored).
    public var memberships: [String: Member]
    /// The user's remarks by group id, for the groups the user is a stored member of and for
    /// AVChatRooms (whose audience is not stored); groups without a remark are absent.
    public var remarks: [String: String]
    /// The user's unread mentions by group id, for every group of ``memberships``, when the
    /// backend read them with the memberships (PostgreSQL and SQLite do); `nil`: ask
    /// ``Store/unreadMentions(app:userID:groupIDs:)``.
    public var unreadMentions: [String: UnreadMention]?

    /// Creates the answer.
    public init(
        groups: [String: Group] = [:], memberships: [String: Member] = [:], remarks: [String: String] = [:],
        unreadMentions: [String: UnreadMention]? = nil
    ) {
        self.groups = groups
        self.memberships = memberships
        self.remarks = remarks
        self.unreadMentions = unreadMentions
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

/// A topic of a community a user belongs to, with the user's read state in it
/// (``Store/joinedTopics(app:userID:communities:)``).
public struct JoinedTopic: Sendable, Hashable {
    /// The topic: in its community's view from the store, as stored (its own row) from a backend.
    public var topic: Group
    /// The user's read state in the topic, as ``Store/readStates(app:userID:groupIDs:)`` gives it.
    public var read: ReadState

    /// Creates an entry.
    public init(topic: Group, read: ReadState) {
        self.topic = topic
        self.read = read
    }
}

/// A group's attributes and counters, as stored.
public struct GroupAttributeSet: Sendable, Hashable {
    /// The attributes by key.
    public var attributes: [String: GroupAttribute]
    /// The counters by key (a counter never incremented is absent: 0).
    public var counters: [String: Int64]

    /// Creates a set.
    public init(attributes: [String: GroupAttribute] = [:], counters: [String: Int64] = [:]) {
        self.attributes = attributes
        self.counters = counters
    }
}

/// One page of a versioned sync: what changed after the client's version, up to ``version``.
public struct SyncPage<Item: Sendable>: Sendable {
    /// Items added or changed (full records), in the order of their change.
    public var changed: [Item]
    /// Ids of the items removed.
    public var removed: [String]
    /// Where the next page starts (nil: this was the last).
    public var next: String?
    /// The version the pages describe (fixed at the first page).
    public var version: Int64
    /// The client's version cannot be brought up to date by changes: reload from 0 (no items and
    /// no next page; ``version`` is the current one, for the store's callers: the API answers
    /// `version` 0 with it, as the protos say).
    public var fullReloadRequired: Bool

    /// Creates a page.
    public init(changed: [Item], removed: [String], next: String?, version: Int64, fullReloadRequired: Bool = false) {
        self.changed = changed
        self.removed = removed
        self.next = next
        self.version = version
        self.fullReloadRequired = fullReloadRequired
    }

    /// The answer to a version that cannot be brought up to date.
    public static func fullReload(version: Int64) -> SyncPage {
        SyncPage(changed: [], removed: [], next: nil, version: version, fullReloadRequired: true)
    }
}

/// What a member search matches.
public enum MemberSearchField: Sendable, Hashable {
    /// User ids starting with the keyword, byte for byte, in user id order.
    case userIDPrefix
    /// Name cards containing the keyword (case-insensitive for ASCII), in join order.
    case nameCard
}

extension GroupsForUser {
    /// `groups` with the user's memberships of them and the remarks where the user may have one
    /// (a stored membership, or an AVChatRoom), each read only when there is something to read.
    static func compose(
        groups: [String: Group], memberships: ([String]) async throws -> [String: Member],
        remarks: ([String]) async throws -> [String: String]
    ) async throws -> GroupsForUser {
        if groups.isEmpty { return GroupsForUser() }
        let members = try await memberships(Array(groups.keys))
        let remarkable = groups.values.filter { members[$0.id] != nil || $0.type == .avChatRoom }.map(\.id)
        return GroupsForUser(groups: groups, memberships: members, remarks: remarkable.isEmpty ? [:] : try await remarks(remarkable))
    }
}

/// A member of a community who is in permission groups (``Store/permissionAssignments(app:groupID:)``).
public struct PermissionAssignment: Sendable, Hashable {
    /// The member.
    public var userID: String
    /// The ids of their permission groups, as stored (`Member.permissionGroups`).
    public var permissionGroups: [String]

    /// Creates an assignment.
    public init(userID: String, permissionGroups: [String]) {
        self.userID = userID
        self.permissionGroups = permissionGroups
    }
}
