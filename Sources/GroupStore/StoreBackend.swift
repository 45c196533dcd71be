public import GroupModel

/// The seam between ``Store`` and a database: what a storage backend implements.
///
/// ``Store`` holds everything that is the same whatever the database: the rules of each
/// mutation (what to read, the plan, what to write, sequence numbering, idempotent sends,
/// expiry before a decision), group commit, the group cache and the event feed. A backend
/// implements a small core:
/// - **Writes**: ``commit(_:scopes:then:)`` runs a batch of pieces of work in one
///   transaction, where each piece calls the transaction's two operations:
///   ``StoreTransaction/load(_:)`` (a ``StoreSnapshot``: what a plan may read) and
///   ``StoreTransaction/write(_:over:)`` (a ``WriteSet``: what the plan decided), plus
///   ``StoreTransaction/purge(_:)`` for retention.
/// - **Reads**: each a consistent snapshot of committed state: the group, member, application,
///   message and event queries below.
///
/// Rules every backend keeps (the backend conformance suite checks them):
/// - Every read and write is scoped by app id: nothing of one app is visible to another.
/// - ``commit(_:scopes:then:)`` is called by one caller at a time, and its `then` before the next call.
/// - Within a batch, each piece of work sees the writes of those before it; the batch commits
///   once (one fsync under `Durability.full`). A piece that throws before it wrote anything
///   fails alone; one that throws after writing aborts the batch (``BatchOutcome/Ending/aborted(at:)``):
///   nothing is stored and ``Store`` runs the other pieces again in a new batch. (Plans throw
///   before their writes, so aborts are rare: a constraint a write hits, an injected fault.)
/// - Events are numbered 1, 2, 3… per group without gaps, in commit order; `event_id` grows
///   with commit order across the app.
/// - Methods throw `GroupError` for what the caller got wrong (`GROUP_NOT_FOUND`,
///   `GROUP_ID_TAKEN`, `INVALID_ARGUMENT` for a malformed cursor); anything else is a storage
///   failure, which ``Store`` reports as `INTERNAL`.
/// - Dismissed groups are invisible to reads and snapshots but keep their id taken and their
///   events readable until purged.
public protocol StoreBackend: Sendable {
    // MARK: Writes

    /// Runs `work` in one write transaction, in order. An item that throws having written nothing
    /// fails alone; one that throws after writing ends the transaction: rolled back, the items
    /// after it not run (``BatchOutcome/Ending/aborted(at:)``). Then commits, and calls `then`
    /// with the outcome.
    /// - Parameters:
    ///   - work: The batch's pieces of work, each given the open transaction.
    ///   - scopes: What each piece writes, in the order of `work` (a backend several nodes share
    ///     locks it across nodes for the transaction; one only this process uses ignores it).
    ///   - then: Called once, on any thread, after the commit (or its failure).
    func commit(_ work: [TransactionWork], scopes: [WriteScope], then: @escaping @Sendable (BatchOutcome) -> Void)

    // MARK: Commits of other nodes

    /// From now on, hands `deliver` the events other nodes commit, each app's in `event_id`
    /// order and ordered with this node's (``publish(_:deliver:)``). A backend only one process
    /// uses does nothing.
    func followCommits(_ deliver: @escaping @Sendable ([LoggedEvent]) -> Void)

    /// Hands a committed batch's events to `deliver` (before the batch's mutations are answered),
    /// ordered with the events of other nodes: a backend several nodes share first delivers those
    /// of the same apps committed before them and not yet delivered.
    func publish(_ events: [LoggedEvent], deliver: ([LoggedEvent]) -> Void)

    /// Whether the database can be reached now (health: `NOT_SERVING` while it cannot).
    var isAvailable: Bool { get }

    /// Calls `observer` with every change of ``isAvailable``.
    func observeAvailability(_ observer: @escaping @Sendable (Bool) -> Void)

    /// The bytes the database library holds in this process now (its page caches, schemas and
    /// prepared statements), when it lives in the process (SQLite); nil otherwise.
    var libraryMemoryBytes: Int? { get }

    /// Hands an AVChatRoom message (live only, no history) to the other nodes' streams; a backend
    /// only one process uses does nothing.
    func relayRoomMessage(_ message: GroupMessage) async throws

    /// From now on, hands `deliver` the AVChatRoom messages other nodes relay, each app's in
    /// the order they were relayed; a backend only one process uses does nothing.
    func followRoomMessages(_ deliver: @escaping @Sendable ([GroupMessage]) -> Void)

    /// Whether other processes may write the same database (then each node's in-memory state
    /// follows their events, and reads of it first catch up: ``catchUp(app:)``).
    var isShared: Bool { get }

    /// Returns once every event of `app` committed before the call (by any node) has been handed
    /// to ``followCommits(_:)``'s `deliver` (a backend only one process uses: at once).
    func catchUp(app: String) async throws

    /// Runs `body` unless another process sharing the database runs the pass named `pass` now
    /// (then returns `nil` at once): periodic passes (retention, expiry) run on one node at a time.
    func exclusively<T: Sendable>(_ pass: String, _ body: @Sendable () async throws -> T) async throws -> T?

    // MARK: Group and member reads

    /// Live groups of one app by id, with member count, owner and custom fields, read at one
    /// instant; ids not found (or dismissed) are absent.
    func groups(app: String, ids: [String]) async throws -> [String: Group]

    /// The live topics of live communities of one app as stored (their own rows; the store
    /// merges them with their community), oldest first; communities without topics are absent.
    func topics(app: String, communities: [String]) async throws -> [String: [Group]]

    /// The live topics of the live communities of one app that `userID` belongs to, as stored
    /// (their own rows), each with the user's read state in it (``readStates(app:userID:groupIDs:)``'s
    /// for a topic), oldest first, in one statement; the other communities are absent.
    func joinedTopics(app: String, userID: String, communities: [String]) async throws -> [String: [JoinedTopic]]

    /// One user's memberships (with custom fields) in several live groups of one app.
    func memberships(app: String, userID: String, groupIDs: [String]) async throws -> [String: Member]

    /// See ``Store/groupsForUser(app:userID:ids:)``; asked of a shared backend only (the store
    /// composes the answer from its group cache otherwise). `ids` are distinct.
    func groupsForUser(app: String, userID: String, ids: [String]) async throws -> GroupsForUser

    /// The user's view of `groups`, live groups the store read through its group cache: their
    /// memberships, remarks and, where the backend reads them at once, unread mentions;
    /// asked of a backend that is not shared (``groupsForUser(app:userID:ids:)`` otherwise).
    func userView(app: String, userID: String, of groups: [String: Group]) async throws -> GroupsForUser

    /// Several members (with custom fields) of one live group by user id.
    /// - Throws: `GROUP_NOT_FOUND`.
    func members(app: String, groupID: String, userIDs: [String]) async throws -> [String: Member]

    /// See ``Store/listMembers(app:groupID:filter:after:limit:)``.
    func listMembers(app: String, groupID: String, filter: MemberListFilter, after cursor: String?, limit: Int) async throws -> Page<Member>

    /// See ``Store/joinedGroups(app:userID:after:limit:)``.
    func joinedGroups(app: String, userID: String, after cursor: String?, limit: Int) async throws -> Page<JoinedGroup>

    /// See ``Store/searchGroups(app:keyword:userID:matchNameCards:after:limit:)``.
    func searchGroups(
        app: String, keyword: String, userID: String?, matchNameCards: Bool, after cursor: String?, limit: Int
    ) async throws -> Page<Group>

    /// See ``Store/joinedGroupCount(app:userID:types:)``.
    func joinedGroupCount(app: String, userID: String, types: Set<GroupType>) async throws -> Int

    /// See ``Store/nameCardMatches(app:groupIDs:keyword:limit:)``.
    func nameCardMatches(app: String, groupIDs: [String], keyword: String, limit: Int) async throws -> [String: [Member]]

    /// See ``Store/memberChanges(app:groupID:since:after:limit:)``.
    func memberChanges(app: String, groupID: String, since version: Int64, after cursor: String?, limit: Int) async throws -> SyncPage<Member>

    /// See ``Store/joinedGroupChanges(app:userID:since:after:limit:)``.
    func joinedGroupChanges(app: String, userID: String, since version: Int64, after cursor: String?, limit: Int) async throws -> SyncPage<JoinedGroup>

    /// See ``Store/searchMembers(app:groupID:keyword:field:after:limit:)``.
    func searchMembers(
        app: String, groupID: String, keyword: String, field: MemberSearchField, after cursor: String?, limit: Int
    ) async throws -> Page<Member>

    /// A user's remark for a live group ("" when none).
    /// - Throws: `GROUP_NOT_FOUND`.
    func remark(app: String, groupID: String, userID: String) async throws -> String

    /// See ``Store/permissionAssignments(app:groupID:)``.
    func permissionAssignments(app: String, groupID: String) async throws -> [PermissionAssignment]

    /// See ``Store/bans(app:groupID:after:limit:now:)``.
    func bans(app: String, groupID: String, after cursor: String?, limit: Int, now: Timestamp) async throws -> Page<GroupBan>

    /// See ``Store/remarks(app:userID:groupIDs:)``.
    func remarks(app: String, userID: String, groupIDs: [String]) async throws -> [String: String]

    /// A live group's attributes and counters, read at one instant.
    /// - Throws: `GROUP_NOT_FOUND`.
    func attributes(app: String, groupID: String) async throws -> GroupAttributeSet

    /// See ``Store/inviteLink(app:tokenHash:)``.
    func inviteLink(app: String, tokenHash: String) async throws -> InviteLink?

    /// See ``Store/inviteLinks(app:groupID:now:)``.
    func inviteLinks(app: String, groupID: String, now: Timestamp) async throws -> [InviteLink]

    // MARK: Application reads

    /// One item by id (`nil`: none in the app).
    func application(app: String, id: String) async throws -> Application?

    /// See ``Store/listApplications(app:query:after:limit:)``.
    func listApplications(app: String, query: ApplicationQuery, after cursor: String?, limit: Int) async throws -> ApplicationListing

    /// Up to `limit` live groups of the app holding pending items whose expiry passed by `now`.
    func groupsWithDueApplications(app: String, now: Timestamp, limit: Int) async throws -> [String]

    // MARK: Message reads

    /// See ``Store/message(app:groupID:senderID:clientMessageID:)``.
    func message(app: String, groupID: String, senderID: String, clientMessageID: String) async throws -> StoredMessage?

    /// See ``Store/messages(app:groupID:range:limit:)``.
    func messages(app: String, groupID: String, range: MessageRange, limit: Int) async throws -> MessagePage

    /// See ``Store/replies(app:groupID:to:after:limit:)``.
    func replies(app: String, groupID: String, to sequence: Int64, after: Int64, limit: Int) async throws -> MessagePage

    /// See ``Store/eventIDs(app:groupID:sequences:)``.
    func eventIDs(app: String, groupID: String, sequences: [Int64]) async throws -> [Int64: Int64]

    /// See ``Store/readStates(app:userID:groupIDs:)``.
    func readStates(app: String, userID: String, groupIDs: [String]) async throws -> [String: ReadState]

    /// See ``Store/unreadMentions(app:userID:groupIDs:)``.
    func unreadMentions(app: String, userID: String, groupIDs: [String]) async throws -> [String: UnreadMention]
    /// See ``Store/readPositions(app:groupID:)``.
    func readPositions(app: String, groupID: String) async throws -> [MemberReadPosition]

    /// See ``Store/reactions(app:groupID:sequences:reader:usersPerKey:)``.
    func reactions(
        app: String, groupID: String, sequences: [Int64], reader: String?, usersPerKey: Int
    ) async throws -> [Int64: [ReactionSummary]]

    /// See ``Store/reactionUsers(app:groupID:sequence:key:after:limit:)``.
    func reactionUsers(
        app: String, groupID: String, sequence: Int64, key: String, after: Int64, limit: Int
    ) async throws -> ReactionUserPage

    // MARK: Event reads

    /// A group's events after `sequence`, in order, dismissed groups included.
    /// - Throws: `GROUP_NOT_FOUND` if the app never had the group.
    func events(app: String, groupID: String, after sequence: Int64, limit: Int) async throws -> [GroupEvent]

    /// The highest `event_id` given so far (0: none).
    func latestEventID() async throws -> Int64

    /// The highest committed `event_id` of `app` (0: none): a stream that starts after it misses
    /// none of the app's later events (on a backend several nodes share, ids are in commit order
    /// only within an app).
    func latestEventID(app: String) async throws -> Int64

    /// See ``Store/appEvents(app:after:limit:)``.
    func appEvents(app: String, after eventID: Int64, limit: Int) async throws -> EventLogPage

    /// See ``Store/userEvents(app:userID:after:limit:)``.
    func userEvents(app: String, userID: String, after eventID: Int64, limit: Int) async throws -> EventLogPage

    /// See ``Store/streamMemberships(app:userID:)``.
    func streamMemberships(app: String, userID: String) async throws -> MembershipSnapshot

    /// See ``Store/retainedStart(app:cutoff:)``.
    func retainedStart(app: String, cutoff: Timestamp) async throws -> RetainedStart

    // MARK: AVChatRoom presence

    /// See ``Store/holdPresence(app:groupID:users:until:)``.
    func holdPresence(app: String, groupID: String, users: [String], until: Timestamp) async throws

    /// See ``Store/renewPresence(app:users:now:until:)``.
    func renewPresence(app: String, users: [String], now: Timestamp, until: Timestamp) async throws

    /// See ``Store/dropPresence(app:groupID:users:)``.
    func dropPresence(app: String, groupID: String, users: [String]?) async throws

    /// See ``Store/presence(app:groupIDs:now:)``.
    func presence(app: String, groupIDs: [String], now: Timestamp) async throws -> [String: Int]

    /// See ``Store/presentUsers(app:groupID:users:now:)``.
    func presentUsers(app: String, groupID: String, users: [String], now: Timestamp) async throws -> Set<String>

    /// See ``Store/sweepPresence(before:)``.
    func sweepPresence(before: Timestamp) async throws -> Int

    // MARK: Lifecycle

    /// Closes the backend; later calls fail. Called once, after the last batch ended.
    func close() async throws
}

extension StoreBackend {
    public func followCommits(_ deliver: @escaping @Sendable ([LoggedEvent]) -> Void) {}
    public func publish(_ events: [LoggedEvent], deliver: ([LoggedEvent]) -> Void) { deliver(events) }
    public var isAvailable: Bool { true }
    public func observeAvailability(_ observer: @escaping @Sendable (Bool) -> Void) {}
    public var isShared: Bool { false }
    public var libraryMemoryBytes: Int? { nil }
    /// Three reads: the groups, then the user's memberships and remarks of those found.
    public func groupsForUser(app: String, userID: String, ids: [String]) async throws -> GroupsForUser {
        try await userView(app: app, userID: userID, of: try await groups(app: app, ids: ids))
    }
    public func userView(app: String, userID: String, of groups: [String: Group]) async throws -> GroupsForUser {
        try await GroupsForUser.compose(
            groups: groups,
            memberships: { try await self.memberships(app: app, userID: userID, groupIDs: $0) },
            remarks: { try await self.remarks(app: app, userID: userID, groupIDs: $0) })
    }
    public func relayRoomMessage(_ message: GroupMessage) async throws {}
    public func followRoomMessages(_ deliver: @escaping @Sendable ([GroupMessage]) -> Void) {}
    public func catchUp(app: String) async throws {}
    /// One process uses the database: the pass always runs.
    public func exclusively<T: Sendable>(_ pass: String, _ body: @Sendable () async throws -> T) async throws -> T? {
        try await body()
    }
    /// One writer numbers every app's events in commit order: the latest of all is the app's too.
    public func latestEventID(app: String) async throws -> Int64 { try await latestEventID() }
}

/// An error of a backend that maps to a specific `GroupError` (an unreachable database:
/// `UNAVAILABLE`; an exhausted connection pool: `RESOURCE_EXHAUSTED`), not `INTERNAL`.
public protocol StoreFailure: Error {
    /// The error callers receive.
    var groupError: GroupError { get }
}

/// One piece of a batch: runs inside the batch's transaction and keeps its own result. It may
/// be run again, in a later batch, when the batch it ran in aborted.
public typealias TransactionWork = @Sendable (any StoreTransaction) async throws -> Void

/// What one mutation writes, for a backend several nodes share to lock across nodes for the
/// transaction that writes it (``StoreBackend/commit(_:scopes:then:)``).
///
/// A mutation scoped to groups writes the rows of those groups only (members, bans, messages,
/// events, links, attributes, the per-member sync rows), and reads the per-user limits (the
/// number of groups a user is in) of ``users`` only: two mutations whose groups and users are
/// disjoint commit in parallel. A mutation of the whole app (``groups`` `nil`: retention passes,
/// a decision on an application id that names no item) excludes every other mutation of the app.
public struct WriteScope: Sendable, Hashable {
    /// The app.
    public var app: String
    /// The ids of the groups whose rows it writes; `nil`: any row of the app.
    public var groups: [String]?
    /// The users whose per-user limits (the number of groups a user is in) it may check: the
    /// operator and the targets of a group operation, the members of a group it creates.
    public var users: [String]
    /// Set for a message send (``Store/appendMessage(_:at:reply:check:)``): what its snapshot reads, so
    /// a backend can read the snapshots of a batch's sends together, before the first runs.
    /// Not part of the locks.
    public var send: Send?

    /// What a send reads besides its group: the sender's membership, (with a client message id)
    /// the sender's earlier message with that id, and (for a reply) the message it answers.
    public struct Send: Sendable, Hashable {
        public var sender: String
        public var clientMessageID: String?
        public var replyTo: Int64?
    }

    /// A mutation of the groups `groups` (the id of a group it creates included) that checks the
    /// limits of `users`.
    public static func groups(_ groups: [String], users: [String] = [], app: String) -> WriteScope {
        WriteScope(app: app, groups: groups, users: users)
    }

    /// A message `sender` sends to `group` (a reply to the message `replyTo`, when given).
    public static func send(
        to group: String, from sender: String, clientMessageID: String?, replyTo: Int64? = nil, app: String
    ) -> WriteScope {
        WriteScope(
            app: app, groups: [group], users: [],
            send: Send(sender: sender, clientMessageID: clientMessageID, replyTo: replyTo))
    }

    /// A mutation that may write any row of `app`.
    public static func app(_ app: String) -> WriteScope {
        WriteScope(app: app, groups: nil, users: [])
    }

    /// The 64-bit lock keys of the scope's groups and users: the same on every node and in
    /// every release (FNV-1a of the kind, the app and the id; never Swift's seeded `Hasher`).
    /// Two ids that collide only share a lock. A topic's id takes its community's key too: a
    /// send to a topic and a write of its community's members (a kick, say) never commit side
    /// by side on two nodes.
    public var lockKeys: [Int64] {
        var keys: [Int64] = []
        for id in groups ?? [] {
            keys.append(Self.lockKey(kind: "group", app: app, id: id))
            if let community = GroupID.communityID(ofTopic: id) {
                keys.append(Self.lockKey(kind: "group", app: app, id: community))
            }
        }
        return keys + users.map { Self.lockKey(kind: "user", app: app, id: $0) }
    }

    /// The lock key of one group or user of an app.
    static func lockKey(kind: String, app: String, id: String) -> Int64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for part in [kind, app, id] {
            for byte in part.utf8 {
                hash ^= UInt64(byte)
                hash &*= 0x0000_0100_0000_01b3
            }
            // A separator no UTF-8 text contains, so ("ab", "c") and ("a", "bc") differ.
            hash ^= 0xff
            hash &*= 0x0000_0100_0000_01b3
        }
        return Int64(bitPattern: hash)
    }
}

/// The outcome of a batch.
public struct BatchOutcome: Sendable {
    /// How the transaction ended.
    public enum Ending: Sendable {
        /// Committed.
        case committed
        /// Rolled back because the piece at this index threw after writing: nothing is stored;
        /// the pieces not in ``BatchOutcome/failures`` (before it, after it) may run again.
        case aborted(at: Int)
        /// Failed as a whole (the commit, an I/O error): nothing is stored, and every piece not in
        /// ``BatchOutcome/failures`` fails with this error.
        case failed(any Error)
    }

    /// The errors of the pieces that threw, by their index in the batch.
    public var failures: [Int: any Error]
    /// How the transaction ended.
    public var ending: Ending
    /// The positions a committed batch gave the events its pieces appended with provisional
    /// ids (``EventPositions/none`` for a backend that numbers them as they are written).
    public var positions: EventPositions

    /// Creates an outcome.
    public init(failures: [Int: any Error], ending: Ending, positions: EventPositions = .none) {
        self.failures = failures
        self.ending = ending
        self.positions = positions
    }
}

/// The positions (`event_id`s) a committed batch gave its events, for a backend that numbers
/// them only when the batch ends (PostgreSQL, where an app's positions are taken by each batch's
/// last statement). Until then a mutation holds *provisional* ids: the n-th event the batch
/// appended to an app is −n. ``GroupCommitQueue`` replaces them before anyone sees them (the
/// commit feed, the mutation's answer).
public struct EventPositions: Sendable, Hashable {
    /// Per app, the position before the batch's first event of that app.
    public var bases: [String: Int64]

    /// Creates positions.
    public init(bases: [String: Int64]) {
        self.bases = bases
    }

    /// A batch whose ids were final as written.
    public static let none = EventPositions(bases: [:])

    /// The position of the event `id` of `app` (an id that is not provisional is returned as is).
    public func eventID(_ id: Int64, app: String) -> Int64 {
        id < 0 ? (bases[app] ?? 0) - id : id
    }

    /// `logged` with its position (and its message's).
    public func numbered(_ logged: LoggedEvent) -> LoggedEvent {
        guard logged.eventID < 0 || (logged.message?.eventID ?? 0) < 0 else { return logged }
        var logged = logged
        let app = logged.event.appID
        logged.eventID = eventID(logged.eventID, app: app)
        if let id = logged.message?.eventID { logged.message?.eventID = eventID(id, app: app) }
        return logged
    }
}

/// The write transaction a piece of work runs in (only valid during that call).
public protocol StoreTransaction {
    /// Reads what a plan may see, as the transaction sees it (earlier work of the batch included).
    /// - Throws: `GROUP_NOT_FOUND` when ``SnapshotRequest/group`` names no live group;
    ///   `APPLICATION_NOT_FOUND` when ``SnapshotRequest/application`` names no item.
    func load(_ request: SnapshotRequest) async throws -> StoreSnapshot

    /// Writes what a plan decided, over the snapshot it was planned on (events are numbered
    /// after `snapshot.group.latestSequence`).
    /// - Throws: `GROUP_ID_TAKEN` when a new group's id is taken in its app; a storage failure.
    func write(_ writes: WriteSet, over snapshot: StoreSnapshot) async throws -> WriteResult

    /// Deletes up to `request.limit` old rows (retention); returns how many.
    func purge(_ request: PurgeRequest) async throws -> Int
}
