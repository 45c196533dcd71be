/// A group as stored and read: profile, settings, owner, limits, counters.
public struct Group: Sendable, Hashable, Identifiable {
    /// The app (tenant) the group belongs to.
    public var appID: String
    /// The group id, unique within the app (custom, or generated `@TGS#…`).
    public var id: String
    /// The group's type; fixes its presets and behaviours.
    public var type: GroupType
    /// The name (≤ ``AppLimits/groupNameBytes``).
    public var name: String
    /// The introduction (≤ ``AppLimits/introductionBytes``).
    public var introduction: String
    /// The notification, i.e. announcement (≤ ``AppLimits/notificationBytes``).
    public var notification: String
    /// The avatar URL (≤ ``AppLimits/faceURLBytes``).
    public var faceURL: String
    /// The permission settings.
    public var settings: GroupSettings
    /// The owner's user id; `nil` only for AVChatRoom rooms the backend created without owner.
    public var ownerID: String?
    /// The maximum member count (`nil`: unlimited, AVChatRoom).
    public var maxMembers: Int?
    /// The number of stored members (for AVChatRoom: only those stored, i.e. the owner; the live
    /// audience is counted in memory).
    public var memberCount: Int
    /// When the group was created.
    public var createdAt: Timestamp
    /// When the profile or settings last changed.
    public var updatedAt: Timestamp
    /// Group custom fields: key → opaque bytes.
    public var custom: [String: [UInt8]]
    /// The sequence of the group's latest event (0 before any).
    public var latestSequence: Int64
    /// The whole-group mute state.
    public var mute: GroupMuteState
    /// Members a group mute does not apply to (their own member mute still does), in the order
    /// they were added; only members are on it (a member who leaves drops off).
    public var muteBypass: [String] = []
    /// The pinned messages, the earliest pinned first (at most ``AppLimits/maxPinnedMessages``).
    public var pins: [PinnedMessage]
    /// The version of the member list: one more with every write that inserts, updates or
    /// removes member rows (0: none since the store kept versions). Each member row keeps the
    /// version of its last change; versioned member sync reads the rows after a version.
    public var memberVersion: Int64 = 0
    /// For a topic of a community: the community's id (`nil` for every other group). A topic is a
    /// conversation of its own (name, profile, custom fields, its own mute, messages, sequences,
    /// pins, read positions) whose members, roles, member mutes, bans, settings and owner are its
    /// community's; see ``topic(_:in:)``.
    public var parentID: String?
    /// For a topic: the community's whole-group mute, which applies to its topics as well as the
    /// topic's own ``mute`` (``GroupMuteState/unmuted`` for every other group).
    public var communityMute: GroupMuteState = .unmuted
    /// For a community: its permission groups (``PermissionGroup``), the built-in
    /// ``PermissionGroup/everyoneID`` one included when it was set; a topic carries its
    /// community's (``topic(_:in:)``). Empty for every other group.
    public var permissionGroups: [PermissionGroup] = []

    /// For a topic: whether it is private, seen only by the community's owner and admins and the
    /// members granted ``Permission/viewTopic`` (``isVisible(to:inGroups:)``). False for every
    /// other group.
    public var isPrivate = false

    /// Whether this is a topic of a community (``parentID`` is set).
    public var isTopic: Bool { parentID != nil }

    /// The group value of a topic as its rules see it: the topic's own profile, custom fields,
    /// mute, pins and sequences (`stored`, its row), with the community's type, settings, owner,
    /// member limit, member count, member version, mute bypass and mute (as ``communityMute``).
    public static func topic(_ stored: Group, in community: Group) -> Group {
        var topic = stored
        topic.parentID = community.id
        topic.type = community.type
        topic.settings = community.settings
        topic.ownerID = community.ownerID
        topic.maxMembers = community.maxMembers
        topic.memberCount = community.memberCount
        topic.memberVersion = community.memberVersion
        topic.muteBypass = community.muteBypass
        topic.communityMute = community.mute
        topic.permissionGroups = community.permissionGroups
        return topic
    }

    /// Create a group value with every field given (defaults for the counters, mute and pins).
    public init(
        appID: String, id: String, type: GroupType, name: String, introduction: String = "",
        notification: String = "", faceURL: String = "", settings: GroupSettings, ownerID: String?,
        maxMembers: Int?, memberCount: Int = 0, createdAt: Timestamp, updatedAt: Timestamp,
        custom: [String: [UInt8]] = [:], latestSequence: Int64 = 0, mute: GroupMuteState = .unmuted,
        pins: [PinnedMessage] = []
    ) {
        self.appID = appID
        self.id = id
        self.type = type
        self.name = name
        self.introduction = introduction
        self.notification = notification
        self.faceURL = faceURL
        self.settings = settings
        self.ownerID = ownerID
        self.maxMembers = maxMembers
        self.memberCount = memberCount
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.custom = custom
        self.latestSequence = latestSequence
        self.mute = mute
        self.pins = pins
    }
}

/// A message pinned on a group (`PinGroupMessage`).
public struct PinnedMessage: Sendable, Hashable {
    /// The message's sequence in the group.
    public var sequence: Int64
    /// Who pinned it (`nil`: the app's backend).
    public var pinnedBy: String?
    /// When it was pinned.
    public var pinnedAt: Timestamp

    /// Create a pin.
    public init(sequence: Int64, pinnedBy: String?, pinnedAt: Timestamp) {
        self.sequence = sequence
        self.pinnedBy = pinnedBy
        self.pinnedAt = pinnedAt
    }

    /// The pin as event changes: `sequence`, `pinned_at` (ms) and, when a user pinned it,
    /// `pinned_by`.
    public var changes: [String: String] {
        var changes = ["sequence": String(sequence), "pinned_at": String(pinnedAt.millisecondsSince1970)]
        if let pinnedBy { changes["pinned_by"] = pinnedBy }
        return changes
    }

    /// The pin an event's changes describe (``changes``), or `nil`.
    public init?(changes: [String: String]) {
        guard let sequence = changes["sequence"].flatMap({ Int64($0) }),
            let at = changes["pinned_at"].flatMap({ Int64($0) })
        else { return nil }
        self.init(sequence: sequence, pinnedBy: changes["pinned_by"], pinnedAt: Timestamp(millisecondsSince1970: at))
    }
}

/// Which members a whole-group mute applies to (ZIM's three modes; Tencent's `allMuted`).
public enum GroupMuteMode: Sendable, Hashable {
    /// Not muted.
    case none
    /// Every member, the owner and admins included.
    case all
    /// Ordinary members only.
    case ordinaryMembers
    /// Members holding one of the given roles.
    case roles(Set<MemberRole>)
}

/// The whole-group mute state: a mode and when it ends.
public struct GroupMuteState: Sendable, Hashable {
    /// Who is muted.
    public var mode: GroupMuteMode
    /// When the mute ends (`nil`: until lifted).
    public var until: Timestamp?
    /// Who set the mute (`nil`: the app's backend, or not recorded).
    public var operatorID: String?

    /// Create a mute state.
    public init(mode: GroupMuteMode, until: Timestamp?, operatorID: String? = nil) {
        self.mode = mode
        self.until = until
        self.operatorID = operatorID
    }

    /// Whether the state is over at `now` (its end has passed): it then mutes nobody and is
    /// shown as no mute.
    public func hasEnded(at now: Timestamp) -> Bool {
        if let until { return until <= now }
        return false
    }

    /// The state in effect at `now`: itself, or ``unmuted`` once ended.
    public func effective(at now: Timestamp) -> GroupMuteState {
        mode == .none || hasEnded(at: now) ? .unmuted : self
    }

    /// No mute.
    public static let unmuted = GroupMuteState(mode: .none, until: nil)

    /// Whether a member of `role` is muted by this state at `now`.
    public func mutes(_ role: MemberRole, at now: Timestamp) -> Bool {
        if let until, until <= now { return false }
        switch self.mode {
        case .none: return false
        case .all: return true
        case .ordinaryMembers: return role == .member
        case .roles(let roles): return roles.contains(role)
        }
    }
}

/// Whether a member receives the group's messages (Tencent `TIMGroupReceiveMessageOpt`).
public enum ReceiveOption: String, Sendable, Hashable, CaseIterable {
    /// Receive and be pushed offline.
    case receive
    /// Do not receive.
    case notReceive = "not_receive"
    /// Receive online, no offline push.
    case receiveWithoutPush = "receive_without_push"
}

/// How a member came into a group (OpenIM's `joinSource`). The raw values are the stored codes
/// (and the API's `JoinSource` numbers): an integer keeps the member row's decoding cheap.
public enum JoinSource: Int, Sendable, Hashable, CaseIterable {
    /// Not recorded: members stored before the source was kept, AVChatRoom audiences.
    case unknown = 0
    /// Created the group (its first owner).
    case creator = 1
    /// Listed as an initial member when the group was created.
    case initialMember = 2
    /// Joined a group whose join option is `any`.
    case freeJoin = 3
    /// Joined when an approver accepted the application.
    case application = 4
    /// Joined through an invitation: at once, or after the invitee's consent and/or approval.
    case invitation = 5
    /// Added by `ImportGroup`.
    case imported = 6
    /// Joined through an invite link, at once or once an approver accepted the application filed
    /// through it (``Member/inviteLinkID`` names it).
    case inviteLink = 7
}

/// A member of a group.
public struct Member: Sendable, Hashable, Identifiable {
    /// The member's user id.
    public var userID: String
    /// The member's role.
    public var role: MemberRole
    /// When the member joined.
    public var joinedAt: Timestamp
    /// A per-group number increasing with each join: orders members by seniority (the owner of a
    /// Work group who quits hands over to the lowest) and gives member lists a stable cursor.
    public var joinOrder: Int64
    /// The group's event sequence at the member's joining (history before it is hidden from
    /// members of types that do not show history from before joining).
    public var joinSequence: Int64
    /// The member's name card in the group (≤ ``AppLimits/nameCardBytes``).
    public var nameCard: String
    /// When the member's mute ends (`nil` or past: not muted).
    public var mutedUntil: Timestamp?
    /// Member custom fields: key → opaque bytes.
    public var custom: [String: [UInt8]]
    /// Whether the member receives the group's messages.
    public var receiveOption: ReceiveOption
    /// How the member came in.
    public var joinSource: JoinSource
    /// Who let the member in: the inviter (invitations, initial members of a group a user
    /// created) or the approver (applications); `nil` for the creator, free joins, imports and
    /// the backend acting for itself.
    public var inviterID: String?
    /// The invite link the member joined through (its id, not its token), for
    /// ``JoinSource/inviteLink``.
    public var inviteLinkID: String?
    /// In a community: the permission groups the member is assigned to (ids, in assignment order;
    /// an id of a deleted group is ignored and dropped at the member's next assignment change).
    public var permissionGroups: [String] = []

    /// The user id, as `Identifiable` identity.
    public var id: String { self.userID }

    /// Create a member.
    public init(
        userID: String, role: MemberRole, joinedAt: Timestamp, joinOrder: Int64 = 0,
        joinSequence: Int64 = 0, nameCard: String = "", mutedUntil: Timestamp? = nil,
        custom: [String: [UInt8]] = [:], receiveOption: ReceiveOption = .receive,
        joinSource: JoinSource = .unknown, inviterID: String? = nil, inviteLinkID: String? = nil
    ) {
        self.inviteLinkID = inviteLinkID
        self.userID = userID
        self.role = role
        self.joinedAt = joinedAt
        self.joinOrder = joinOrder
        self.joinSequence = joinSequence
        self.nameCard = nameCard
        self.mutedUntil = mutedUntil
        self.custom = custom
        self.receiveOption = receiveOption
        self.joinSource = joinSource
        self.inviterID = inviterID
    }

    /// Whether the member is muted at `now`.
    public func isMuted(at now: Timestamp) -> Bool {
        guard let mutedUntil else { return false }
        return mutedUntil > now
    }
}
