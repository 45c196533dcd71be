/// How member changes of a type produce events.
public enum MemberChangeEvents: String, Sendable, Hashable {
    /// Every join, quit, kick… emits an event.
    case all
    /// No member-change events (Meeting, Tencent's V2 group guide FAQ).
    case none
    /// Emitted, but rate-limited on the stream (AVChatRoom).
    case rateLimited = "rate_limited"
}

/// Who may dismiss a group of a type.
public enum DismissalRule: String, Sendable, Hashable {
    /// Only the app's backend (admin token without `x-operator-id`): Work groups (Tencent's V2 group guide).
    case adminTokenOnly = "admin_token_only"
    /// The owner, or the app's backend.
    case ownerOrAdminToken = "owner_or_admin_token"
}

/// What a group type fixes about how groups of it behave; nothing here can be changed per group.
public struct GroupTypeBehaviour: Sendable, Hashable {
    /// The roles a member may hold (admins exist only in Public and Meeting).
    public var allowedRoles: Set<MemberRole>
    /// Who may dismiss the group.
    public var dismissal: DismissalRule
    /// Whether ownership can be transferred.
    public var transferAllowed: Bool
    /// Who may mute members and the whole group.
    public var mutePermission: OperationPermission
    /// Whether members can be removed at all (AVChatRoom: no, mute instead).
    public var kickSupported: Bool
    /// Whether users can be invited or added by anyone, the backend included.
    public var invitationsSupported: Bool
    /// Whether messages are stored (roaming).
    public var historyKept: Bool
    /// Whether members see messages sent before they joined.
    public var historyVisibleBeforeJoin: Bool
    /// Whether unread counts are kept.
    public var unreadCounting: Bool
    /// How member changes produce events.
    public var memberChangeEvents: MemberChangeEvents
    /// Whether the group appears in a user's joined-group list.
    public var listedInJoinedGroups: Bool
    /// Whether membership is stored durably (`false`: kept in memory on the node; the owner is
    /// still stored).
    public var membershipStored: Bool
    /// Whether non-members may read the public subset of the profile (Tencent's TIMGroupManager guide); if not, the
    /// group does not exist for them (`GROUP_NOT_FOUND`).
    public var publicProfileVisibleToNonMembers: Bool
    /// Whether the app's backend may create a group of this type without an owner.
    public var ownerlessCreationAllowed: Bool
    /// The default maximum member count (`nil`: unlimited); the per-app value is in ``AppLimits``.
    public var defaultMaxMembers: Int?
    /// Whether groups of the type hold topics: conversations of their own inside the group that
    /// share its members (Community, as Tencent's `createTopicInCommunity`).
    public var topicsSupported: Bool

    /// Create a behaviour record with every value given.
    public init(
        allowedRoles: Set<MemberRole>, dismissal: DismissalRule,
        transferAllowed: Bool, mutePermission: OperationPermission, kickSupported: Bool,
        invitationsSupported: Bool, historyKept: Bool, historyVisibleBeforeJoin: Bool,
        unreadCounting: Bool, memberChangeEvents: MemberChangeEvents, listedInJoinedGroups: Bool,
        membershipStored: Bool, publicProfileVisibleToNonMembers: Bool,
        ownerlessCreationAllowed: Bool, defaultMaxMembers: Int?, topicsSupported: Bool = false
    ) {
        self.allowedRoles = allowedRoles
        self.dismissal = dismissal
        self.transferAllowed = transferAllowed
        self.mutePermission = mutePermission
        self.kickSupported = kickSupported
        self.invitationsSupported = invitationsSupported
        self.historyKept = historyKept
        self.historyVisibleBeforeJoin = historyVisibleBeforeJoin
        self.unreadCounting = unreadCounting
        self.memberChangeEvents = memberChangeEvents
        self.listedInJoinedGroups = listedInJoinedGroups
        self.membershipStored = membershipStored
        self.publicProfileVisibleToNonMembers = publicProfileVisibleToNonMembers
        self.ownerlessCreationAllowed = ownerlessCreationAllowed
        self.defaultMaxMembers = defaultMaxMembers
        self.topicsSupported = topicsSupported
    }
}

/// A group type as data: its default settings, the settings it fixes, and its fixed behaviours.
///
/// This is the type table, in one place. Every permission decision
/// (``GroupRules/authorize(_:type:settings:actor:)``) reads it; nothing else tests a type.
public struct GroupTypePreset: Sendable, Hashable {
    /// The type this preset describes.
    public var type: GroupType
    /// The settings a new group of this type starts with.
    public var defaultSettings: GroupSettings
    /// The settings the type fixes at their default value; changing one to another value fails
    /// with `FAILED_PRECONDITION` / `SETTING_FIXED_BY_TYPE`.
    public var fixedSettings: Set<GroupSettingKey>
    /// The fixed behaviours.
    public var behaviour: GroupTypeBehaviour

    /// The preset of `type`.
    public static func of(_ type: GroupType) -> GroupTypePreset {
        switch type {
        case .work: work
        case .public: `public`
        case .meeting: meeting
        case .avChatRoom: avChatRoom
        case .community: community
        }
    }

    // MARK: The table (Tencent Cloud IM, ZIM, RongCloud)

    /// Work (legacy Private): invitation only, any member invites and edits the profile, the owner
    /// changes settings, the owner may quit (ownership passes to the longest-standing member),
    /// only the backend dismisses.
    public static let work = GroupTypePreset(
        type: .work,
        defaultSettings: GroupSettings(
            joinOption: .forbidden,
            joinApprovers: .owner,
            invitePermission: .everyone,
            inviteeMustAccept: false,
            invitationNeedsApproval: false,
            removeMembersPermission: .owner,
            editProfilePermission: .everyone,
            editMemberInfoPermission: .ownerAdminsAndSelf,
            editSettingsPermission: .owner,
            ownerQuit: .longestStandingMember,
            mentionAllPermission: .everyone,
            slowModeIntervalSeconds: 0,
            inviteLinkPermission: .everyone,
            pinPermission: .owner
        ),
        fixedSettings: [.joinOption],
        behaviour: GroupTypeBehaviour(
            allowedRoles: [.owner, .member], dismissal: .adminTokenOnly,
            transferAllowed: true, mutePermission: .owner, kickSupported: true,
            invitationsSupported: true, historyKept: true, historyVisibleBeforeJoin: false,
            unreadCounting: true, memberChangeEvents: .all, listedInJoinedGroups: true,
            membershipStored: true, publicProfileVisibleToNonMembers: false,
            ownerlessCreationAllowed: false, defaultMaxMembers: 200
        )
    )

    /// Public: join by approval (changeable), owner and admins invite, remove, edit the profile and
    /// change settings (the `TIMGroupManager` guide's `modifyGroupAddOpt`); invitees accept and ordinary members'
    /// invitations are approved; the owner cannot quit.
    public static let `public` = GroupTypePreset(
        type: .public,
        defaultSettings: GroupSettings(
            joinOption: .approval,
            joinApprovers: .ownerAndAdmins,
            invitePermission: .ownerAndAdmins,
            inviteeMustAccept: true,
            invitationNeedsApproval: true,
            removeMembersPermission: .ownerAndAdmins,
            editProfilePermission: .ownerAndAdmins,
            editMemberInfoPermission: .ownerAdminsAndSelf,
            editSettingsPermission: .ownerAndAdmins,
            ownerQuit: .refused,
            mentionAllPermission: .ownerAndAdmins,
            slowModeIntervalSeconds: 0,
            inviteLinkPermission: .ownerAndAdmins,
            pinPermission: .ownerAndAdmins
        ),
        fixedSettings: [],
        behaviour: GroupTypeBehaviour(
            allowedRoles: [.owner, .admin, .member], dismissal: .ownerOrAdminToken,
            transferAllowed: true, mutePermission: .ownerAndAdmins, kickSupported: true,
            invitationsSupported: true, historyKept: true, historyVisibleBeforeJoin: false,
            unreadCounting: true, memberChangeEvents: .all, listedInJoinedGroups: true,
            membershipStored: true, publicProfileVisibleToNonMembers: true,
            ownerlessCreationAllowed: false, defaultMaxMembers: 2000
        )
    )

    /// Meeting (legacy ChatRoom): join freely, no invitations by members, owner and admins change
    /// settings, the owner cannot quit, history visible from before joining, no unread counts, no
    /// member-change events.
    public static let meeting = GroupTypePreset(
        type: .meeting,
        defaultSettings: GroupSettings(
            joinOption: .any,
            joinApprovers: .ownerAndAdmins,
            invitePermission: .nobody,
            inviteeMustAccept: false,
            invitationNeedsApproval: false,
            removeMembersPermission: .ownerAndAdmins,
            editProfilePermission: .ownerAndAdmins,
            editMemberInfoPermission: .ownerAdminsAndSelf,
            editSettingsPermission: .ownerAndAdmins,
            ownerQuit: .refused,
            mentionAllPermission: .ownerAndAdmins,
            slowModeIntervalSeconds: 0,
            inviteLinkPermission: .ownerAndAdmins,
            pinPermission: .ownerAndAdmins
        ),
        fixedSettings: [.invitePermission, .inviteeMustAccept, .invitationNeedsApproval],
        behaviour: GroupTypeBehaviour(
            allowedRoles: [.owner, .admin, .member], dismissal: .ownerOrAdminToken,
            transferAllowed: true, mutePermission: .ownerAndAdmins, kickSupported: true,
            invitationsSupported: true, historyKept: true, historyVisibleBeforeJoin: true,
            unreadCounting: false, memberChangeEvents: .none, listedInJoinedGroups: true,
            membershipStored: true, publicProfileVisibleToNonMembers: true,
            ownerlessCreationAllowed: false, defaultMaxMembers: 6000
        )
    )

    /// AVChatRoom: join freely, unlimited members in memory, no kick (mute instead), no admins,
    /// no transfer, no history; only the owner edits, changes settings and mutes; the owner cannot
    /// quit (fixed: the audience is not stored, so there is nobody to pass ownership to).
    public static let avChatRoom = GroupTypePreset(
        type: .avChatRoom,
        defaultSettings: GroupSettings(
            joinOption: .any,
            joinApprovers: .owner,
            invitePermission: .nobody,
            inviteeMustAccept: false,
            invitationNeedsApproval: false,
            removeMembersPermission: .nobody,
            editProfilePermission: .owner,
            editMemberInfoPermission: .ownerAdminsAndSelf,
            editSettingsPermission: .owner,
            ownerQuit: .refused,
            mentionAllPermission: .owner,
            slowModeIntervalSeconds: 0,
            inviteLinkPermission: .nobody,
            pinPermission: .owner
        ),
        fixedSettings: [
            .joinOption, .joinApprovers, .invitePermission, .inviteeMustAccept,
            .invitationNeedsApproval, .removeMembersPermission, .ownerQuit, .slowModeInterval,
            .inviteLinkPermission,
        ],
        behaviour: GroupTypeBehaviour(
            allowedRoles: [.owner, .member], dismissal: .ownerOrAdminToken,
            transferAllowed: false, mutePermission: .owner, kickSupported: false,
            invitationsSupported: false, historyKept: false, historyVisibleBeforeJoin: false,
            unreadCounting: false, memberChangeEvents: .rateLimited, listedInJoinedGroups: false,
            membershipStored: false, publicProfileVisibleToNonMembers: true,
            ownerlessCreationAllowed: true, defaultMaxMembers: nil
        )
    )

    /// Community: a large group (100,000 members) that keeps history and counts unread messages,
    /// with admins. Tencent's group type table (cloud.tencent.com/document/product/269/70394):
    /// anyone applies and joins without approval ("支持,且无需审批"; `join_option` changes it to
    /// approval or invitation only), members invite others (without approval or consent), owner
    /// and admins edit the profile, the owner cannot quit, unread counts are kept, and members see
    /// the history from before they joined ("默认开启查看入群前漫游消息"); 100,000 members
    /// ("社群(Community)常规为10万人"). Owner and admins remove members, change settings, mute,
    /// pin and @all, as in Public groups.
    public static let community = GroupTypePreset(
        type: .community,
        defaultSettings: GroupSettings(
            joinOption: .any,
            joinApprovers: .ownerAndAdmins,
            invitePermission: .everyone,
            inviteeMustAccept: false,
            invitationNeedsApproval: false,
            removeMembersPermission: .ownerAndAdmins,
            editProfilePermission: .ownerAndAdmins,
            editMemberInfoPermission: .ownerAdminsAndSelf,
            editSettingsPermission: .ownerAndAdmins,
            ownerQuit: .refused,
            mentionAllPermission: .ownerAndAdmins,
            slowModeIntervalSeconds: 0,
            inviteLinkPermission: .everyone,
            pinPermission: .ownerAndAdmins
        ),
        fixedSettings: [],
        behaviour: GroupTypeBehaviour(
            allowedRoles: [.owner, .admin, .member], dismissal: .ownerOrAdminToken,
            transferAllowed: true, mutePermission: .ownerAndAdmins, kickSupported: true,
            invitationsSupported: true, historyKept: true, historyVisibleBeforeJoin: true,
            unreadCounting: true, memberChangeEvents: .all, listedInJoinedGroups: true,
            membershipStored: true, publicProfileVisibleToNonMembers: true,
            ownerlessCreationAllowed: false, defaultMaxMembers: 100_000, topicsSupported: true
        )
    )

    // MARK: Applying changes

    /// Apply `changes` to `settings`, refusing any that would move a setting the type fixes.
    ///
    /// A change that sets a fixed setting to the value it already has is accepted as a no-op, so a
    /// client may send back the whole record it read.
    /// - Returns: The new settings and the keys whose value actually changed.
    /// - Throws: `GroupError` `FAILED_PRECONDITION` / `SETTING_FIXED_BY_TYPE` with
    ///   `metadata["setting"]` naming the first offending setting.
    public func apply(
        _ changes: GroupSettings.Changes, to settings: GroupSettings
    ) throws -> (settings: GroupSettings, changed: Set<GroupSettingKey>) {
        let result = settings.applying(changes)
        let changed = result.differences(from: settings)
        if let fixed = changed.intersection(self.fixedSettings).sorted().first {
            throw GroupError(
                code: .failedPrecondition, reason: .settingFixedByType,
                message: "\(fixed.rawValue) is fixed to \(settings.value(of: fixed)) for \(self.type) groups",
                metadata: ["setting": fixed.rawValue, "group_type": self.type.name]
            )
        }
        return (result, changed)
    }
}
