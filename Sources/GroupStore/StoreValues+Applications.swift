public import GroupModel

/// What an application plan reads, loaded inside the write transaction that applies it.
public struct ApplicationSnapshot: Sendable {
    /// The group, the operator's and the named users' memberships, their joined-group counts and
    /// retained mutes (as ``Store/mutateGroup(app:groupID:operatorID:targets:at:parts:plan:)``
    /// loads them).
    public var group: GroupSnapshot
    /// The pending items of the group (not yet marked expired) whose subject is one of the named
    /// users, of the requested kind, keyed by subject.
    public var pending: [String: Application]
    /// The item being decided on (``Store/decideApplication(app:id:operatorID:at:plan:)``).
    public var application: Application?
    /// The invite link the mutation names by its token, whatever its state (`nil`: none).
    public var inviteLink: InviteLink?

    /// Creates a snapshot.
    public init(group: GroupSnapshot, pending: [String: Application], application: Application?, inviteLink: InviteLink? = nil) {
        self.inviteLink = inviteLink
        self.group = group
        self.pending = pending
        self.application = application
    }
}

/// What an application plan writes: the group change (members, events) and the items, inserted
/// when their id is new, updated otherwise.
public struct ApplicationChange: Sendable {
    /// The group change.
    public var group: GroupChange
    /// Items to insert or update.
    public var applications: [Application]
    /// Invite links to update (a join through one counts a use).
    public var inviteLinks: [InviteLink]

    /// Creates a change.
    public init(group: GroupChange, applications: [Application] = [], inviteLinks: [InviteLink] = []) {
        self.group = group
        self.applications = applications
        self.inviteLinks = inviteLinks
    }
}

/// What a committed application mutation gives back.
public struct ApplicationCommit<Value: Sendable>: Sendable {
    /// The plan's value.
    public var value: Value
    /// The items as written.
    public var applications: [Application]

    /// Creates a result.
    public init(value: Value, applications: [Application]) {
        self.value = value
        self.applications = applications
    }
}

/// The filters of a listing of applications (`ListApplications`).
public struct ApplicationQuery: Sendable, Hashable {
    /// The caller (`nil`: the backend, which approves every item needing approval).
    public var userID: String?
    /// Only these kinds (empty: both).
    public var kinds: Set<ApplicationKind>
    /// Only these states, as seen at ``now`` (empty: all).
    public var states: Set<ApplicationState>
    /// Only this group.
    public var groupID: String?
    /// Only items where the caller has one of these relations (empty: any).
    public var roles: Set<ApplicationRole>
    /// The time states are seen at (a pending item past its expiry is `expired`).
    public var now: Timestamp

    /// Creates a query.
    public init(
        userID: String?, kinds: Set<ApplicationKind> = [], states: Set<ApplicationState> = [], groupID: String? = nil,
        roles: Set<ApplicationRole> = [], now: Timestamp
    ) {
        self.userID = userID
        self.kinds = kinds
        self.states = states
        self.groupID = groupID
        self.roles = roles
        self.now = now
    }
}

/// One item of a listing, with what the caller sees of it.
public struct ListedApplication: Sendable, Hashable {
    /// The item.
    public var application: Application
    /// Its group's name.
    public var groupName: String
    /// The caller's relations to it.
    public var roles: Set<ApplicationRole>

    /// Creates a listed item.
    public init(application: Application, groupName: String, roles: Set<ApplicationRole>) {
        self.application = application
        self.groupName = groupName
        self.roles = roles
    }
}

/// One page of a listing, with the unread count over every matching item and the read time.
public struct ApplicationListing: Sendable {
    /// The page, newest first.
    public var page: Page<ListedApplication>
    /// Matching items created after the caller's read time (all matching items when never read),
    /// counted in the same read transaction as the page.
    public var unreadCount: Int
    /// The caller's read time (`nil`: never reported).
    public var readTime: Timestamp?

    /// Creates a listing.
    public init(page: Page<ListedApplication>, unreadCount: Int, readTime: Timestamp?) {
        self.page = page
        self.unreadCount = unreadCount
        self.readTime = readTime
    }
}
