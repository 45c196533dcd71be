/// One permission a community's permission groups grant (Tencent's
/// `V2TIMCommunityPermissionValue` and `V2TIMTopicPermissionValue`, as named permissions rather
/// than bits of an integer).
///
/// A permission grants what a role would: the decision stays ``GroupRules/authorize(_:in:by:)``,
/// which asks the permission only where the member's role alone is refused. What acts on
/// another member acts on ordinary members only (a grant never reaches an admin or the owner).
public enum Permission: Int, Sendable, Hashable, CaseIterable, Comparable, CustomStringConvertible {
    /// Change the community's profile and custom fields (``GroupAction/updateProfile(_:)``).
    case manageProfile = 0
    /// Remove ordinary members, handle join applications and invitations, edit ordinary
    /// members' name cards and custom fields.
    case manageMembers = 1
    /// Create, update and delete permission groups and set who is in them
    /// (``GroupAction/managePermissionGroups``).
    case managePermissionGroups = 2
    /// Create, update and delete topics; for one topic (a topic value): update and delete it.
    case manageTopics = 3
    /// Mute and unmute ordinary members and the whole community; for one topic (a topic value):
    /// mute and unmute that topic as a whole.
    case muteMembers = 4
    /// Ban ordinary members and non-members, lift bans and read the ban list.
    case banMembers = 5
    /// Invite users and manage invite links.
    case invite = 6
    /// Send messages: in every topic (a community value), or in one topic (a topic value),
    /// where the topic's defaults for ordinary members leave it out.
    case sendMessage = 7
    /// Mention everyone (@all).
    case mentionAll = 8
    /// Recall and edit other members' messages.
    case manageMessages = 9
    /// Pin and unpin messages.
    case pinMessages = 10
    /// See private topics (``Group/isPrivate``): all of them (a community value), or one (a topic
    /// value). Who does not see a private topic finds it nowhere: not in lists, not on the stream,
    /// and every call naming it answers `GROUP_NOT_FOUND`. The owner and admins see every topic.
    case viewTopic = 11

    /// The permissions a topic value may hold: what acts on one topic's conversation.
    public static let topicPermissions: PermissionSet = [
        .manageTopics, .muteMembers, .sendMessage, .mentionAll, .manageMessages, .pinMessages, .viewTopic,
    ]

    /// The permissions of a topic's defaults (``PermissionGroup/everyoneID``'s topic values):
    /// what every ordinary member holds in that topic in place of what their role and the
    /// community's settings give them.
    public static let topicDefaults: PermissionSet = [.sendMessage, .mentionAll, .pinMessages]

    /// The API name: `manage_profile`, `send_message`, …
    public var name: String {
        switch self {
        case .manageProfile: "manage_profile"
        case .manageMembers: "manage_members"
        case .managePermissionGroups: "manage_permission_groups"
        case .manageTopics: "manage_topics"
        case .muteMembers: "mute_members"
        case .banMembers: "ban_members"
        case .invite: "invite"
        case .sendMessage: "send_message"
        case .mentionAll: "mention_all"
        case .manageMessages: "manage_messages"
        case .pinMessages: "pin_messages"
        case .viewTopic: "view_topic"
        }
    }

    /// ``name``.
    public var description: String { self.name }

    /// Orders by declaration order.
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// A set of ``Permission``s (one bit each, as stored).
public struct PermissionSet: OptionSet, Sendable, Hashable {
    public let rawValue: UInt32

    /// Creates a set from its stored bits.
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// The set of one permission.
    public init(_ permission: Permission) { self.rawValue = 1 << UInt32(permission.rawValue) }

    /// The set of `permissions`.
    public init(_ permissions: some Sequence<Permission>) {
        self = permissions.reduce(into: PermissionSet()) { $0.insert(PermissionSet($1)) }
    }

    /// Whether the set holds `permission`.
    public func contains(_ permission: Permission) -> Bool { self.contains(PermissionSet(permission)) }

    /// Every permission.
    public static let all = PermissionSet(Permission.allCases)

    /// The permissions, in declaration order.
    public var members: [Permission] { Permission.allCases.filter { self.contains($0) } }

    public static let manageProfile = PermissionSet(Permission.manageProfile)
    public static let manageMembers = PermissionSet(Permission.manageMembers)
    public static let managePermissionGroups = PermissionSet(Permission.managePermissionGroups)
    public static let manageTopics = PermissionSet(Permission.manageTopics)
    public static let muteMembers = PermissionSet(Permission.muteMembers)
    public static let banMembers = PermissionSet(Permission.banMembers)
    public static let invite = PermissionSet(Permission.invite)
    public static let sendMessage = PermissionSet(Permission.sendMessage)
    public static let mentionAll = PermissionSet(Permission.mentionAll)
    public static let manageMessages = PermissionSet(Permission.manageMessages)
    public static let pinMessages = PermissionSet(Permission.pinMessages)
    public static let viewTopic = PermissionSet(Permission.viewTopic)
}

/// A named set of permissions in a Community group, with values for the whole community and
/// for single topics; members are assigned to any number of them (``Member/permissionGroups``).
///
/// The built-in ``everyoneID`` group holds every member: its community value adds to every
/// member's permissions, and its topic values are a topic's defaults for ordinary members
/// (``Permission/topicDefaults``).
public struct PermissionGroup: Sendable, Hashable, Identifiable {
    /// The id of the built-in group every member is in (never stored in a member row; it cannot
    /// be created, deleted or have members added or removed).
    public static let everyoneID = "everyone"

    /// The id: ``everyoneID``, or `PG` and 12 Crockford base-32 characters.
    public var id: String
    /// The name (≤ ``AppLimits/groupNameBytes``).
    public var name: String
    /// Opaque data of the app (≤ ``AppLimits/permissionGroupCustomDataBytes``).
    public var customData: [UInt8]
    /// What the group grants in the community and all its topics.
    public var permissions: PermissionSet
    /// What the group grants in single topics: topic id → permissions (within
    /// ``Permission/topicPermissions``; an entry of a deleted topic is dropped at the group's
    /// next write and ignored until then).
    public var topicPermissions: [String: PermissionSet]
    /// When it was created.
    public var createdAt: Timestamp
    /// When its name, data or permissions last changed.
    public var updatedAt: Timestamp

    /// Creates a permission group.
    public init(
        id: String, name: String, customData: [UInt8] = [], permissions: PermissionSet = [],
        topicPermissions: [String: PermissionSet] = [:], createdAt: Timestamp, updatedAt: Timestamp
    ) {
        self.id = id
        self.name = name
        self.customData = customData
        self.permissions = permissions
        self.topicPermissions = topicPermissions
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }

    /// Whether this is the built-in ``everyoneID`` group.
    public var isEveryone: Bool { self.id == Self.everyoneID }

    /// A new permission group id: `PG` and 12 random Crockford base-32 characters.
    public static func generateID() -> String {
        let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ".utf8)
        var bytes: [UInt8] = Array("PG".utf8)
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<12 { bytes.append(alphabet[Int(generator.next() % 32)]) }
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension Group {
    /// This group as its community's decisions see it: a topic without its parent (its type,
    /// settings, owner and permission groups are already the community's), so that what does not
    /// apply to topics is decided rather than refused with `NOT_ALLOWED_ON_TOPIC`; any other
    /// group as it is.
    public var asCommunity: Group {
        var community = self
        community.parentID = nil
        return community
    }

    /// The permission group `id` of this community (or of this topic's community), or `nil`.
    public func permissionGroup(_ id: String) -> PermissionGroup? {
        self.permissionGroups.first { $0.id == id }
    }

    /// What `member`'s permission groups and the ``PermissionGroup/everyoneID`` group grant them
    /// here: their community values, and on a topic that topic's values too (`topic`: a topic
    /// of this community to read the values of instead; `nil`: this group when it is a topic).
    public func grantedPermissions(to member: Member?, topic: String? = nil) -> PermissionSet {
        guard let member, !self.permissionGroups.isEmpty else { return [] }
        let topicID = topic ?? (self.isTopic ? self.id : nil)
        var granted: PermissionSet = []
        for group in self.permissionGroups where group.isEveryone || member.permissionGroups.contains(group.id) {
            granted.formUnion(group.permissions)
            if let topicID, let value = group.topicPermissions[topicID] {
                granted.formUnion(group.isEveryone ? value.subtracting(Permission.topicDefaults) : value)
            }
        }
        return granted
    }

    /// Whether a caller acting with `role`, in the permission groups `ids`, sees this topic: every
    /// topic that is not private; a private one (``isPrivate``) its community's owner and admins
    /// and the backend, and an ordinary member in its ``audience``. A non-member sees no private
    /// topic. Every other group: true.
    public func isVisible(to role: ActingRole, inGroups ids: [String]) -> Bool {
        guard self.isTopic, self.isPrivate else { return true }
        switch role {
        case .owner, .admin, .backend: return true
        case .nonMember: return false
        case .member: return Self.audience(self.audience, admits: .member, inGroups: ids)
        }
    }

    /// For a private topic (``isPrivate``): the permission groups whose members see it besides
    /// the community's owner and admins, those whose community value or value for this topic
    /// holds ``Permission/viewTopic``; `nil` when every member of the community sees it (a
    /// public topic, a private one whose ``PermissionGroup/everyoneID`` group grants it, any
    /// other group). The event stream routes the topic's items by it.
    public var audience: Set<String>? {
        guard self.isTopic, self.isPrivate else { return nil }
        return Self.audience(ofPrivateTopic: self.id, permissionGroups: self.permissionGroups)
    }

    /// The ``audience`` of the private topic `topicID` of a community with `permissionGroups`.
    public static func audience(ofPrivateTopic topicID: String, permissionGroups: [PermissionGroup]) -> Set<String>? {
        var ids: Set<String> = []
        for group in permissionGroups
        where group.permissions.contains(.viewTopic) || group.topicPermissions[topicID]?.contains(.viewTopic) == true {
            if group.isEveryone { return nil }
            ids.insert(group.id)
        }
        return ids
    }

    /// Whether a member with `role`, in the permission groups `ids`, is in `audience` (a private
    /// topic's ``audience``; `nil`: every member): the owner and admins always are.
    public static func audience(_ audience: Set<String>?, admits role: MemberRole, inGroups ids: [String]) -> Bool {
        guard let audience, role == .member else { return true }
        return ids.contains(where: audience.contains)
    }

    /// ``isVisible(to:inGroups:)`` for `op`.
    public func isVisible(to op: GroupOperator) -> Bool {
        isVisible(to: op.role, inGroups: op.membership?.permissionGroups ?? [])
    }

    /// On a topic: the topic's defaults for ordinary members (``PermissionGroup/everyoneID``'s
    /// value for it, within ``Permission/topicDefaults``), or `nil` when it has none (ordinary
    /// members then hold what their role and the community's settings give them).
    public var topicDefaults: PermissionSet? {
        guard self.isTopic, let everyone = self.permissionGroup(PermissionGroup.everyoneID) else { return nil }
        return everyone.topicPermissions[self.id].map { $0.intersection(Permission.topicDefaults) }
    }
}
