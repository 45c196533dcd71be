public import GroupModel

/// What a mutation reads inside its write transaction (``StoreTransaction/load(_:)``): the
/// group, the memberships of the users it names, and the extra parts it asks for.
public struct SnapshotRequest: Sendable {
    /// Extra parts of a snapshot.
    public struct Parts: OptionSet, Sendable, Hashable {
        public let rawValue: Int
        /// Creates a set from its raw value.
        public init(rawValue: Int) { self.rawValue = rawValue }

        /// The owner's membership.
        public static let owner = Parts(rawValue: 1 << 0)
        /// The longest-standing member other than the operator (an owner quitting), and the
        /// longest-standing other admin when the group's `GroupSettings.ownerQuit` asks for one.
        public static let successor = Parts(rawValue: 1 << 1)
        /// How many groups of the app (AVChatRooms excluded) each of ``SnapshotRequest/users`` is in.
        public static let joinedGroupCounts = Parts(rawValue: 1 << 2)
        /// Mutes kept from earlier memberships of ``SnapshotRequest/users``, not yet over at ``SnapshotRequest/time``.
        public static let retainedMutes = Parts(rawValue: 1 << 3)
        /// The group's pending items whose expiry passed by ``SnapshotRequest/time``.
        public static let dueApplications = Parts(rawValue: 1 << 4)
        /// The ``SnapshotRequest/readState`` user's read position and counts.
        public static let readState = Parts(rawValue: 1 << 5)
        /// The ``SnapshotRequest/applicationReader``'s read time and unread count.
        public static let applicationReads = Parts(rawValue: 1 << 6)
        /// The group's approvers: the owner, and the admins when its join approvers include them,
        /// in join order.
        public static let approvers = Parts(rawValue: 1 << 7)
        /// The bans of ``SnapshotRequest/users`` still running at ``SnapshotRequest/time``.
        public static let bans = Parts(rawValue: 1 << 8)
        /// How many bans of the group still run at ``SnapshotRequest/time``.
        public static let banCount = Parts(rawValue: 1 << 9)
        /// The group's owner and admins, in join order.
        public static let managers = Parts(rawValue: 1 << 10)
        /// The group's attributes and counters (``StoreSnapshot/attributes``).
        public static let attributes = Parts(rawValue: 1 << 11)
        /// The group's invite links live at ``SnapshotRequest/time`` (``StoreSnapshot/inviteLinks``).
        public static let inviteLinks = Parts(rawValue: 1 << 12)
        /// For an AVChatRoom: which of ``SnapshotRequest/users`` hold a presence that has not
        /// ended at ``SnapshotRequest/time``, and the room's online count (``StoreSnapshot/presence``;
        /// other group types load nothing).
        public static let presence = Parts(rawValue: 1 << 13)
        /// How many live topics the group (a community) holds (``StoreSnapshot/topicCount``).
        public static let topicCount = Parts(rawValue: 1 << 14)
    }

    /// The app.
    public var app: String
    /// The live group to load (with custom fields); `nil`: none (creation, application reads),
    /// or the group of ``application``.
    public var group: String?
    /// An application item to load by id, with its live group (instead of ``group``).
    public var application: String?
    /// The acting user (`nil`: the backend), whose membership is loaded.
    public var operatorID: String?
    /// The users the request names, whose memberships are loaded.
    public var targets: [String]
    /// The time of the mutation (retained mutes still running, items due, unread counts).
    public var time: Timestamp
    /// What else to load.
    public var parts: Parts
    /// With a kind: the group's pending items of that kind whose subject is one of ``targets``.
    public var pendingApplications: ApplicationKind?
    /// With `.readState`: the reader and the sequence the read covers (`nil`: the latest).
    public var readState: (user: String, upTo: Int64?)?
    /// An earlier message with this sender and client message id, if the group has one.
    public var earlierMessage: (sender: String, clientMessageID: String)?
    /// With `.applicationReads`: whose read time and unread count.
    public var applicationReader: String?
    /// A stored message to load by sequence (``StoreSnapshot/message``).
    public var messageSequence: Int64?
    /// A message's reaction state to load for a user (``StoreSnapshot/reactions``): its key
    /// counts and the user's keys on it.
    public var reactionsOf: (sequence: Int64, user: String)?
    /// A sender whose previous message time to load (``StoreSnapshot/lastSentAt``), read only
    /// when the group's slow mode is on.
    public var lastSentBy: String?
    /// An invite link to load (``StoreSnapshot/inviteLink``), by its token's hash or by its id,
    /// whatever its state.
    public var inviteLink: InviteLinkKey?
    /// The id of a group the mutation is about to create: a backend may learn with the snapshot
    /// whether the id is taken and reserve the new group's key (PostgreSQL does; the creation's
    /// write checks again when it did not).
    public var newGroup: String?
    /// A live topic of ``group`` (a community) to load by id (``StoreSnapshot/topic``).
    ///
    /// Distinct from naming a topic as ``group``: that loads the topic as the group of the
    /// snapshot, the way its messages, pins, receipts and read positions are written (its own
    /// row, sequences and read positions; its community's members, bans, settings and owner:
    /// ``StoreSnapshot/group`` is `Group.topic(_:in:)`, ``StoreSnapshot/community`` the
    /// community). The topic is not found (`GROUP_NOT_FOUND`) when its community is dismissed.
    public var topic: String?

    /// Creates a request.
    public init(
        app: String, group: String? = nil, application: String? = nil, operatorID: String? = nil, targets: [String] = [],
        time: Timestamp, parts: Parts = [], pendingApplications: ApplicationKind? = nil,
        readState: (user: String, upTo: Int64?)? = nil, earlierMessage: (sender: String, clientMessageID: String)? = nil,
        applicationReader: String? = nil, messageSequence: Int64? = nil, lastSentBy: String? = nil
    ) {
        self.messageSequence = messageSequence
        self.lastSentBy = lastSentBy
        self.app = app
        self.group = group
        self.application = application
        self.operatorID = operatorID
        self.targets = targets
        self.time = time
        self.parts = parts
        self.pendingApplications = pendingApplications
        self.readState = readState
        self.earlierMessage = earlierMessage
        self.applicationReader = applicationReader
    }

    /// How an invite link is looked up.
    public enum InviteLinkKey: Sendable, Hashable {
        /// By the SHA-256 of its token (`InviteLink.tokenHash`).
        case tokenHash(String)
        /// By its id.
        case id(String)
    }

    /// The operator and the targets, each once (whose counts, retained mutes and bans are loaded).
    public var users: [String] {
        var seen = Set<String>()
        var users: [String] = []
        for user in targets + (operatorID.map { [$0] } ?? []) where seen.insert(user).inserted { users.append(user) }
        return users
    }
}

/// A backend's handle of a stored group row (its surrogate key), opaque to ``Store``.
public struct GroupRowID: Sendable, Hashable {
    /// The backend's key.
    public var value: Int64

    /// Creates a handle.
    public init(_ value: Int64) { self.value = value }
}

/// What ``StoreTransaction/load(_:)`` read.
public struct StoreSnapshot: Sendable {
    /// The app it was loaded in.
    public var app: String
    /// The time of the mutation it was loaded for (``SnapshotRequest/time``): the time of the
    /// events and changes written over it.
    public var time: Timestamp
    /// The live group, with custom fields (`nil` when none was asked for).
    public var group: Group?
    /// The group's row.
    public var groupRow: GroupRowID?
    /// Every membership read (operator, targets, owner, successor), by user id.
    public var members: [String: Member] = [:]
    /// The successor (`.successor`).
    public var successor: Member?
    /// The longest-standing other admin (`.successor`, when the owner acts and the group's
    /// `GroupSettings.ownerQuit` is `to_longest_standing_admin`).
    public var successorAdmin: Member?
    /// Per user of the request (0 when none), their joined-group count (`.joinedGroupCounts`).
    public var joinedGroupCounts: [String: Int] = [:]
    /// Retained mutes by user (`.retainedMutes`).
    public var retainedMutes: [String: Timestamp] = [:]
    /// Pending items by subject (``SnapshotRequest/pendingApplications``).
    public var pendingApplications: [String: Application] = [:]
    /// The group's items due for expiry (`.dueApplications`), in creation order.
    public var dueApplications: [Application] = []
    /// The item of ``SnapshotRequest/application``.
    public var application: Application?
    /// The reader's read position (`.readState`).
    public var readSequence: Int64 = 0
    /// The latest message sequence at or below the read's `upTo` (`.readState`; 0: none).
    public var latestMessageSequence: Int64 = 0
    /// Messages after the read position and the reader's join, not sent by the reader (`.readState`).
    public var unreadCount: Int = 0
    /// When the group's newest message was sent (`.readState`).
    public var lastMessageAt: Timestamp?
    /// The reader's unread mention (`.readState`).
    public var unreadMention: UnreadMention = .none
    /// The earlier message with the same client message id (``SnapshotRequest/earlierMessage``).
    public var earlierMessage: StoredMessage?
    /// The reader's application read time (`.applicationReads`).
    public var applicationReadTime: Timestamp?
    /// The reader's unread applications (`.applicationReads`).
    public var unreadApplications: Int = 0
    /// The group's approvers (`.approvers`).
    public var approvers: [String] = []
    /// Running bans of the request's users, by user (`.bans`).
    public var bans: [String: GroupBan] = [:]
    /// How many running bans the group has (`.banCount`).
    public var banCount: Int = 0
    /// The group's owner and admins, in join order (`.managers`).
    public var managers: [String] = []
    /// The message of ``SnapshotRequest/messageSequence``, if stored.
    public var message: StoredMessage?
    /// The reaction state of ``SnapshotRequest/reactionsOf`` (empty when not asked for).
    public var reactions = ReactionState()
    /// When ``SnapshotRequest/lastSentBy`` last sent a message to the group (`nil`: never, or
    /// slow mode is off).
    public var lastSentAt: Timestamp?
    /// The group's attributes and counters (`.attributes`).
    public var attributes = GroupAttributeSet()
    /// The link of ``SnapshotRequest/inviteLink`` (`nil`: none in the app).
    public var inviteLink: InviteLink?
    /// The group's live invite links, oldest first (`.inviteLinks`).
    public var inviteLinks: [InviteLink] = []
    /// The room's presences (`.presence`, AVChatRoom only; `nil` otherwise).
    public var presence: RoomPresence?
    /// The topic of ``SnapshotRequest/topic`` as stored (its own row: profile, custom fields,
    /// mute, sequences; `Group.parentID` set), `nil` when the community has no such live topic.
    public var topic: Group?
    /// The row of ``topic``.
    public var topicRow: GroupRowID?
    /// How many live topics the community holds (`.topicCount`).
    public var topicCount: Int = 0
    /// When the snapshot's group is a topic: its community as stored (whose members, bans,
    /// owner and settings the snapshot carries).
    public var community: Group?

    /// Creates a snapshot.
    public init(app: String, time: Timestamp, group: Group? = nil, groupRow: GroupRowID? = nil) {
        self.app = app
        self.time = time
        self.group = group
        self.groupRow = groupRow
    }
}

/// What a plan decided: ``StoreTransaction/write(_:over:)`` writes it in the transaction (a
/// write that throws part-way aborts the batch: nothing of it is stored).
public struct WriteSet: Sendable {
    /// A group to create with its members, custom fields and events (no snapshot group).
    public var newGroup: GroupCreationPlan?
    /// The change of the snapshot's group (its row, members, retained mutes, events).
    public var change: GroupChange?
    /// Events to append after the change's (or alone), on the snapshot's group.
    public var events: [GroupEvent.Draft] = []
    /// The message whose `GROUP_MESSAGE` event is the first of ``events``: its body is stored
    /// under that event's row.
    public var message: GroupMessage?
    /// Application items to insert (new id) or update, in the snapshot's group.
    public var applications: [Application] = []
    /// A user's remark for the snapshot's group: set, or cleared (`nil`).
    public var remark: (user: String, remark: String?)?
    /// A member's new read position in the snapshot's group.
    public var readSequence: (user: String, sequence: Int64)?
    /// A user's application read time, moved forward only (never back).
    public var applicationReadTime: (user: String, time: Timestamp)?
    /// A stored message of the snapshot's group to turn into a tombstone.
    public var recall: (sequence: Int64, recall: MessageRecall)?
    /// A stored message of the snapshot's group whose text and payload an edit replaces.
    public var edit: MessageBodyEdit?
    /// A reaction of a stored message of the snapshot's group to add or remove (its user row and
    /// its key's count row).
    public var reaction: ReactionWrite?
    /// Attributes to write and delete and counters to set, in the snapshot's group.
    public var attributes: AttributeChange?
    /// Invite links of the snapshot's group to insert (new id) or update (use count, revocation).
    public var inviteLinks: [InviteLink] = []
    /// Presences of the snapshot's group (an AVChatRoom) to hold and drop.
    public var presence: PresenceChange?
    /// A topic of the snapshot's group (a community) to create, update or delete.
    public var topic: TopicWrite?

    /// Creates a write set.
    public init(
        newGroup: GroupCreationPlan? = nil, change: GroupChange? = nil, events: [GroupEvent.Draft] = [],
        message: GroupMessage? = nil, applications: [Application] = [], remark: (user: String, remark: String?)? = nil,
        readSequence: (user: String, sequence: Int64)? = nil, applicationReadTime: (user: String, time: Timestamp)? = nil,
        recall: (sequence: Int64, recall: MessageRecall)? = nil, attributes: AttributeChange? = nil,
        edit: MessageBodyEdit? = nil
    ) {
        self.recall = recall
        self.edit = edit
        self.attributes = attributes
        self.newGroup = newGroup
        self.change = change
        self.events = events
        self.message = message
        self.applications = applications
        self.remark = remark
        self.readSequence = readSequence
        self.applicationReadTime = applicationReadTime
    }
}

extension WriteSet {
    /// Whether the set changes rows of the snapshot's group besides appending events and a
    /// message body: its row and members, applications, a remark, a read position, a recall, an
    /// edit, a reaction, attributes, invite links, presences. A new part of a write set belongs
    /// here, so that each backend's checks see it.
    public var changesGroupRows: Bool {
        change != nil || !applications.isEmpty || remark != nil || readSequence != nil || recall != nil || edit != nil
            || reaction != nil || attributes != nil || !inviteLinks.isEmpty || presence != nil || topic != nil
    }

    /// Whether the set writes any row of the snapshot's group (a backend refuses such a set over a
    /// snapshot without a group).
    public var writesGroupRows: Bool { !events.isEmpty || changesGroupRows }
}

/// A write of one topic of a community (``WriteSet/topic``), over a snapshot of the community.
public enum TopicWrite: Sendable, Hashable {
    /// Insert the topic's row under the community (`Group.id` is the topic's id,
    /// `GroupID.generateTopicID(in:)`; a taken id throws `GROUP_ID_TAKEN`).
    case create(Group)
    /// Rewrite the stored topic's profile, custom fields, mute, privacy and update time (its row as
    /// ``StoreSnapshot/topic`` loaded it, changed).
    case update(Group)
    /// Mark the topic deleted: it is no longer live (its id stays taken); the community stays.
    case delete(String)

    /// The id of the topic written.
    public var topicID: String {
        switch self {
        case .create(let topic), .update(let topic): topic.id
        case .delete(let id): id
        }
    }
}

/// A stored message's new body and the edit that gave it (``WriteSet/edit``).
public struct MessageBodyEdit: Sendable {
    /// The message's sequence.
    public var sequence: Int64
    /// The new text.
    public var text: String
    /// The new payload.
    public var payload: [UInt8]
    /// Who, when, and the message's edit count after it.
    public var edit: MessageEdit

    /// Creates a body edit.
    public init(sequence: Int64, text: String, payload: [UInt8], edit: MessageEdit) {
        self.sequence = sequence
        self.text = text
        self.payload = payload
        self.edit = edit
    }
}

/// What ``StoreTransaction/write(_:over:)`` wrote.
public struct WriteResult: Sendable {
    /// The appended events, numbered, in order.
    public var events: [GroupEvent]
    /// Their `event_id`s, in the same order (the app-wide log's order, which is commit order).
    public var eventIDs: [Int64]
    /// The created group's row (``WriteSet/newGroup``).
    public var groupRow: GroupRowID?
    /// The `event_id` of the message's event row (``WriteSet/message``).
    public var messageEventID: Int64?

    /// Creates a result.
    public init(events: [GroupEvent], eventIDs: [Int64], groupRow: GroupRowID? = nil, messageEventID: Int64? = nil) {
        self.events = events
        self.eventIDs = eventIDs
        self.groupRow = groupRow
        self.messageEventID = messageEventID
    }
}

/// Old rows to delete (retention), oldest first.
public struct PurgeRequest: Sendable, Hashable {
    /// Which rows.
    public enum Kind: Sendable, Hashable {
        /// Events other than messages (their bodies go with messages).
        case events
        /// Group messages: the body and its `GROUP_MESSAGE` event row together.
        case messages
        /// Member tombstones of versioned member sync (each group's `member_floor` rises to the
        /// highest version deleted).
        case memberTombstones
    }

    /// Which rows.
    public var kind: Kind
    /// The app.
    public var app: String
    /// Rows from before this time.
    public var before: Timestamp
    /// At most this many.
    public var limit: Int

    /// Creates a request.
    public init(kind: Kind, app: String, before: Timestamp, limit: Int) {
        self.kind = kind
        self.app = app
        self.before = before
        self.limit = limit
    }
}
