/// Whether and how a non-member may join by themselves (Tencent `addOpt`, ZIM `joinMode`,
/// RongCloud `joinPermission`).
public enum JoinOption: String, Sendable, Hashable, CaseIterable {
    /// Anyone may join at once.
    case any
    /// Joining creates an application that an approver accepts or refuses.
    case approval
    /// Nobody may join by themselves (invitation only).
    case forbidden
}

/// Who approves join applications (and invitations that need approval).
public enum ApproverSet: String, Sendable, Hashable, CaseIterable {
    /// Only the owner.
    case owner
    /// The owner and the admins.
    case ownerAndAdmins = "owner_and_admins"

    /// Whether a member of `role` is an approver.
    public func includes(_ role: MemberRole) -> Bool {
        switch self {
        case .owner: role == .owner
        case .ownerAndAdmins: role == .owner || role == .admin
        }
    }
}

/// Which members may perform an operation (RongCloud `RCGroupOperationPermission`, plus `nobody`).
public enum OperationPermission: String, Sendable, Hashable, CaseIterable {
    /// No member (the app's backend still may, unless the type forbids the operation itself).
    case nobody
    /// Only the owner.
    case owner
    /// The owner and the admins.
    case ownerAndAdmins = "owner_and_admins"
    /// Every member.
    case everyone

    /// Whether a member of `role` holds this permission.
    public func grants(_ role: MemberRole) -> Bool {
        switch self {
        case .nobody: false
        case .owner: role == .owner
        case .ownerAndAdmins: role == .owner || role == .admin
        case .everyone: true
        }
    }
}

/// Who may edit a member's profile in the group: name card and member custom fields
/// (RongCloud `RCGroupMemberInfoEditPermission`).
public enum MemberInfoEditPermission: String, Sendable, Hashable, CaseIterable {
    /// Each member edits only their own.
    case selfOnly = "self"
    /// Each member their own; the owner anyone's.
    case ownerAndSelf = "owner_and_self"
    /// Each member their own; the owner anyone's; admins those of ordinary members.
    case ownerAdminsAndSelf = "owner_admins_and_self"
}

/// What happens when the owner quits (Tencent Work and ZIM: ownership passes on; Tencent's
/// other types: refused).
public enum OwnerQuitRule: String, Sendable, Hashable, CaseIterable {
    /// The owner cannot quit (`OWNER_CANNOT_QUIT`): transfer ownership or dismiss the group first.
    case refused
    /// Ownership passes to the longest-standing other member: the lowest join order, whatever
    /// their role (Tencent Work, ZIM "the first group member").
    case longestStandingMember = "to_longest_standing_member"
    /// Ownership passes to the longest-standing other admin; with no admin, to the
    /// longest-standing other member.
    case longestStandingAdminElseMember = "to_longest_standing_admin"

    /// Whether the owner may quit at all.
    public var ownerMayQuit: Bool { self != .refused }
}

/// The names of the per-group settings in the model: in stored events' changes, in the domain
/// errors' `metadata["setting"]` and in ``GroupTypePreset/fixedSettings``. The API names them by
/// their `GroupSettings` fields (``apiName``).
public enum GroupSettingKey: String, Sendable, Hashable, CaseIterable, Comparable {
    /// ``GroupSettings/joinOption``.
    case joinOption = "join_option"
    /// ``GroupSettings/joinApprovers``.
    case joinApprovers = "join_approvers"
    /// ``GroupSettings/invitePermission``.
    case invitePermission = "invite_permission"
    /// ``GroupSettings/inviteeMustAccept``.
    case inviteeMustAccept = "invitee_must_accept"
    /// ``GroupSettings/invitationNeedsApproval``.
    case invitationNeedsApproval = "invitation_needs_approval"
    /// ``GroupSettings/removeMembersPermission``.
    case removeMembersPermission = "remove_members_permission"
    /// ``GroupSettings/editProfilePermission``.
    case editProfilePermission = "edit_profile_permission"
    /// ``GroupSettings/editMemberInfoPermission``.
    case editMemberInfoPermission = "edit_member_info_permission"
    /// ``GroupSettings/editSettingsPermission``.
    case editSettingsPermission = "edit_settings_permission"
    /// ``GroupSettings/ownerQuit``.
    case ownerQuit = "owner_quit"
    /// ``GroupSettings/mentionAllPermission``.
    case mentionAllPermission = "mention_all_permission"
    /// ``GroupSettings/slowModeIntervalSeconds``.
    case slowModeInterval = "slow_mode_interval_seconds"
    /// ``GroupSettings/inviteLinkPermission``.
    case inviteLinkPermission = "invite_link_permission"
    /// ``GroupSettings/pinPermission``.
    case pinPermission = "pin_permission"

    /// The settings only the owner (and the app's backend) may change, whatever
    /// ``GroupSettings/editSettingsPermission`` says: the two that decide who holds power in the
    /// group, so a role granted settings cannot widen its own grant or keep the owner in.
    public static let ownerOnly: Set<GroupSettingKey> = [.editSettingsPermission, .ownerQuit]

    /// The setting's field in the API's `GroupSettings`: what a gRPC error's `setting` metadata
    /// and a `GROUP_SETTINGS_CHANGED` event's `changed_fields` say.
    public var apiName: String {
        switch self {
        case .joinOption: "join_option"
        case .joinApprovers: "approver_scope"
        case .invitePermission: "invite_scope"
        case .inviteeMustAccept: "invitee_consent"
        case .invitationNeedsApproval: "invite_approval"
        case .removeMembersPermission: "remove_scope"
        case .editProfilePermission: "profile_edit_scope"
        case .editMemberInfoPermission: "member_edit_scope"
        case .editSettingsPermission: "settings_edit_scope"
        case .ownerQuit: "owner_quit"
        case .mentionAllPermission: "mention_all_scope"
        case .slowModeInterval: "slow_mode_interval_seconds"
        case .inviteLinkPermission: "invite_link_scope"
        case .pinPermission: "pin_scope"
        }
    }

    /// Orders by declaration order.
    public static func < (lhs: Self, rhs: Self) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}

/// The permission settings of one group. Defaults come from the group's type;
/// the roles in ``editSettingsPermission`` may change those the type does not fix (the owner
/// alone those in ``GroupSettingKey/ownerOnly``).
public struct GroupSettings: Sendable, Hashable {
    /// Whether and how non-members may join by themselves.
    public var joinOption: JoinOption
    /// Who approves join applications and invitations that need approval.
    public var joinApprovers: ApproverSet
    /// Who may invite users.
    public var invitePermission: OperationPermission
    /// Whether an invitee must accept before becoming a member (ZIM `beInviteMode` AUTH).
    public var inviteeMustAccept: Bool
    /// Whether an invitation by an ordinary member needs an approver's approval (Tencent Public).
    public var invitationNeedsApproval: Bool
    /// Who may remove (kick) members.
    public var removeMembersPermission: OperationPermission
    /// Who may edit the group profile (name, introduction, notification, avatar, custom fields).
    public var editProfilePermission: OperationPermission
    /// Who may edit members' name cards and member custom fields.
    public var editMemberInfoPermission: MemberInfoEditPermission
    /// Who may change the other settings (``GroupSettingKey/ownerOnly`` stay the owner's).
    public var editSettingsPermission: OperationPermission
    /// What happens when the owner quits.
    public var ownerQuit: OwnerQuitRule
    /// Who may mention everyone (@all) in a message.
    public var mentionAllPermission: OperationPermission
    /// Slow mode: seconds an ordinary member waits between two messages (0: off). The owner,
    /// admins and the backend are exempt.
    public var slowModeIntervalSeconds: Int
    /// Who may create, list and revoke invite links.
    public var inviteLinkPermission: OperationPermission
    /// Who may pin and unpin messages.
    public var pinPermission: OperationPermission

    /// Create a settings record with every value given (``pinPermission`` defaults to
    /// `owner_and_admins`).
    public init(
        joinOption: JoinOption,
        joinApprovers: ApproverSet,
        invitePermission: OperationPermission,
        inviteeMustAccept: Bool,
        invitationNeedsApproval: Bool,
        removeMembersPermission: OperationPermission,
        editProfilePermission: OperationPermission,
        editMemberInfoPermission: MemberInfoEditPermission,
        editSettingsPermission: OperationPermission,
        ownerQuit: OwnerQuitRule,
        mentionAllPermission: OperationPermission = .everyone,
        slowModeIntervalSeconds: Int = 0,
        inviteLinkPermission: OperationPermission = .ownerAndAdmins,
        pinPermission: OperationPermission = .ownerAndAdmins
    ) {
        self.inviteLinkPermission = inviteLinkPermission
        self.joinOption = joinOption
        self.joinApprovers = joinApprovers
        self.invitePermission = invitePermission
        self.inviteeMustAccept = inviteeMustAccept
        self.invitationNeedsApproval = invitationNeedsApproval
        self.removeMembersPermission = removeMembersPermission
        self.editProfilePermission = editProfilePermission
        self.editMemberInfoPermission = editMemberInfoPermission
        self.editSettingsPermission = editSettingsPermission
        self.ownerQuit = ownerQuit
        self.mentionAllPermission = mentionAllPermission
        self.slowModeIntervalSeconds = slowModeIntervalSeconds
        self.pinPermission = pinPermission
    }

    /// The value of one setting as its API text (`approval`, `owner_and_admins`, `true`).
    public func value(of key: GroupSettingKey) -> String {
        switch key {
        case .joinOption: self.joinOption.rawValue
        case .joinApprovers: self.joinApprovers.rawValue
        case .invitePermission: self.invitePermission.rawValue
        case .inviteeMustAccept: String(self.inviteeMustAccept)
        case .invitationNeedsApproval: String(self.invitationNeedsApproval)
        case .removeMembersPermission: self.removeMembersPermission.rawValue
        case .editProfilePermission: self.editProfilePermission.rawValue
        case .editMemberInfoPermission: self.editMemberInfoPermission.rawValue
        case .editSettingsPermission: self.editSettingsPermission.rawValue
        case .ownerQuit: self.ownerQuit.rawValue
        case .mentionAllPermission: self.mentionAllPermission.rawValue
        case .slowModeInterval: String(self.slowModeIntervalSeconds)
        case .inviteLinkPermission: self.inviteLinkPermission.rawValue
        case .pinPermission: self.pinPermission.rawValue
        }
    }

    /// The settings whose values differ between `self` and `other`.
    public func differences(from other: GroupSettings) -> Set<GroupSettingKey> {
        Set(GroupSettingKey.allCases.filter { self.value(of: $0) != other.value(of: $0) })
    }
}

extension GroupSettings {
    /// A partial settings record: the values a request wants changed (`nil` = keep).
    public struct Changes: Sendable, Hashable {
        /// New ``GroupSettings/joinOption``, if any.
        public var joinOption: JoinOption?
        /// New ``GroupSettings/joinApprovers``, if any.
        public var joinApprovers: ApproverSet?
        /// New ``GroupSettings/invitePermission``, if any.
        public var invitePermission: OperationPermission?
        /// New ``GroupSettings/inviteeMustAccept``, if any.
        public var inviteeMustAccept: Bool?
        /// New ``GroupSettings/invitationNeedsApproval``, if any.
        public var invitationNeedsApproval: Bool?
        /// New ``GroupSettings/removeMembersPermission``, if any.
        public var removeMembersPermission: OperationPermission?
        /// New ``GroupSettings/editProfilePermission``, if any.
        public var editProfilePermission: OperationPermission?
        /// New ``GroupSettings/editMemberInfoPermission``, if any.
        public var editMemberInfoPermission: MemberInfoEditPermission?
        /// New ``GroupSettings/editSettingsPermission``, if any.
        public var editSettingsPermission: OperationPermission?
        /// New ``GroupSettings/ownerQuit``, if any.
        public var ownerQuit: OwnerQuitRule?
        /// New ``GroupSettings/mentionAllPermission``, if any.
        public var mentionAllPermission: OperationPermission?
        /// New ``GroupSettings/slowModeIntervalSeconds``, if any.
        public var slowModeIntervalSeconds: Int?
        /// New ``GroupSettings/inviteLinkPermission``, if any.
        public var inviteLinkPermission: OperationPermission?
        /// New ``GroupSettings/pinPermission``, if any.
        public var pinPermission: OperationPermission?

        /// Create a change set; every value defaults to "keep".
        public init(
            joinOption: JoinOption? = nil,
            joinApprovers: ApproverSet? = nil,
            invitePermission: OperationPermission? = nil,
            inviteeMustAccept: Bool? = nil,
            invitationNeedsApproval: Bool? = nil,
            removeMembersPermission: OperationPermission? = nil,
            editProfilePermission: OperationPermission? = nil,
            editMemberInfoPermission: MemberInfoEditPermission? = nil,
            editSettingsPermission: OperationPermission? = nil,
            ownerQuit: OwnerQuitRule? = nil,
            mentionAllPermission: OperationPermission? = nil,
            slowModeIntervalSeconds: Int? = nil,
            inviteLinkPermission: OperationPermission? = nil,
            pinPermission: OperationPermission? = nil
        ) {
            self.inviteLinkPermission = inviteLinkPermission
            self.joinOption = joinOption
            self.joinApprovers = joinApprovers
            self.invitePermission = invitePermission
            self.inviteeMustAccept = inviteeMustAccept
            self.invitationNeedsApproval = invitationNeedsApproval
            self.removeMembersPermission = removeMembersPermission
            self.editProfilePermission = editProfilePermission
            self.editMemberInfoPermission = editMemberInfoPermission
            self.editSettingsPermission = editSettingsPermission
            self.ownerQuit = ownerQuit
            self.mentionAllPermission = mentionAllPermission
            self.slowModeIntervalSeconds = slowModeIntervalSeconds
            self.pinPermission = pinPermission
        }

        /// Whether no value is set.
        public var isEmpty: Bool { self == Changes() }
    }

    /// `self` with every non-`nil` value of `changes` applied (no checks; see
    /// ``GroupTypePreset/apply(_:to:)`` for the checked version).
    public func applying(_ changes: Changes) -> GroupSettings {
        var result = self
        if let v = changes.joinOption { result.joinOption = v }
        if let v = changes.joinApprovers { result.joinApprovers = v }
        if let v = changes.invitePermission { result.invitePermission = v }
        if let v = changes.inviteeMustAccept { result.inviteeMustAccept = v }
        if let v = changes.invitationNeedsApproval { result.invitationNeedsApproval = v }
        if let v = changes.removeMembersPermission { result.removeMembersPermission = v }
        if let v = changes.editProfilePermission { result.editProfilePermission = v }
        if let v = changes.editMemberInfoPermission { result.editMemberInfoPermission = v }
        if let v = changes.editSettingsPermission { result.editSettingsPermission = v }
        if let v = changes.ownerQuit { result.ownerQuit = v }
        if let v = changes.mentionAllPermission { result.mentionAllPermission = v }
        if let v = changes.slowModeIntervalSeconds { result.slowModeIntervalSeconds = v }
        if let v = changes.inviteLinkPermission { result.inviteLinkPermission = v }
        if let v = changes.pinPermission { result.pinPermission = v }
        return result
    }
}
