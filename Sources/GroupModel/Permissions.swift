/// The role a caller acts with in one group: a member's role, not a member, or the app's backend.
///
/// The backend is an admin token without `x-operator-id`; an admin token acting for a user
/// (`x-operator-id`) acts with that user's role.
public enum ActingRole: Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// The group's owner.
    case owner
    /// An admin of the group.
    case admin
    /// An ordinary member.
    case member
    /// A user who is not a member.
    case nonMember
    /// The app's backend: passes every permission check (but not what the type itself forbids).
    case backend

    /// The acting role of a user with the given membership role (`nil`: not a member).
    public init(role: MemberRole?) {
        switch role {
        case .owner: self = .owner
        case .admin: self = .admin
        case .member: self = .member
        case nil: self = .nonMember
        }
    }

    /// The backend if `isBackend`, else the acting role of a user with `role`.
    public init(isBackend: Bool, role: MemberRole?) {
        self = isBackend ? .backend : ActingRole(role: role)
    }

    /// The membership role, for owner, admin and member.
    public var role: MemberRole? {
        switch self {
        case .owner: .owner
        case .admin: .admin
        case .member: .member
        case .nonMember, .backend: nil
        }
    }

    /// `owner`, `admin`, `member`, `non_member` or `backend`.
    public var description: String {
        switch self {
        case .owner: "owner"
        case .admin: "admin"
        case .member: "member"
        case .nonMember: "non_member"
        case .backend: "backend"
        }
    }
}

/// The profile fields of a group, as named in the API and in `GROUP_INFO_CHANGED` events.
public enum ProfileField: String, Sendable, Hashable, CaseIterable, Comparable {
    /// The name.
    case name
    /// The introduction.
    case introduction
    /// The notification (announcement).
    case notification
    /// The avatar URL.
    case faceURL = "face_url"
    /// Group custom fields (per-key read/write roles are checked separately, from the app config).
    case customFields = "custom_fields"

    /// Orders by declaration order.
    public static func < (lhs: Self, rhs: Self) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}

/// Whose member profile (name card, member custom fields) an edit touches.
public enum MemberInfoTarget: Sendable, Hashable {
    /// The caller's own.
    case own
    /// Another member's, who holds the given role.
    case other(MemberRole)
}

/// Every operation on a group that a permission decision covers.
///
/// Actions that act on another member carry that member's role, because the decision depends on
/// rank (an admin may remove an ordinary member, not another admin).
public enum GroupAction: Sendable, Hashable {
    /// Create a group (checked before the group exists; any authenticated caller may).
    case createGroup
    /// Read the group's profile (non-members see the public subset; see ``GroupVisibility``).
    case viewProfile
    /// Change profile fields.
    case updateProfile(Set<ProfileField>)
    /// Change permission settings; pass only the keys whose value actually changes.
    case updateSettings(Set<GroupSettingKey>)
    /// Change the group's maximum member count (backend only).
    case setMaxMembers
    /// Dismiss the group.
    case dismiss
    /// Revoke the group (backend only).
    case revoke
    /// Transfer ownership to another member.
    case transferOwnership
    /// Invite (or, without consent and approval, add) users.
    case invite
    /// Join by oneself (free, or by application).
    case join
    /// Leave the group.
    case quit
    /// Remove a member holding `target`.
    case kick(target: MemberRole)
    /// Change the role of a member holding `target` to `to`.
    case setRole(target: MemberRole, to: MemberRole)
    /// Mute (or unmute) a member holding `target`.
    case muteMember(target: MemberRole)
    /// Mute (or unmute) the whole group, or some roles.
    case muteGroup
    /// Ban a user from the group: a member holding `target`, or a non-member (`nil`), who is
    /// ranked as an ordinary member.
    case ban(target: MemberRole?)
    /// Lift bans and list the group's ban list.
    case manageBans
    /// Change the group's mute bypass list (who a group mute does not apply to).
    case updateMuteBypass
    /// Edit a member's name card or member custom fields.
    case editMemberInfo(MemberInfoTarget)
    /// Change one's own receive option or private remark of the group.
    case setOwnPreferences
    /// List members.
    case listMembers
    /// Read members' profiles.
    case viewMemberInfo
    /// Accept or refuse a join application, or approve an invitation.
    case handleApplication
    /// Answer an invitation addressed to oneself (the service checks it is addressed to the caller).
    case answerInvitation
    /// Withdraw one's own pending application or invitation (the service checks it is the caller's).
    case withdrawApplication
    /// Send a group message (mute is checked separately, with the time).
    case sendMessage
    /// Mention everyone (@all) in a message.
    case mentionAll
    /// Recall a stored message: the operator's own (`own`; the recall window is checked
    /// separately, with the time), or another user's.
    case recallMessage(own: Bool)
    /// Edit a stored message: the operator's own (`own`; the edit window and mutes are checked
    /// separately, with the time), or another user's.
    case editMessage(own: Bool)
    /// Read message history.
    case readHistory
    /// Mark messages read.
    case markRead
    /// Send a custom system notification (backend only).
    case sendCustomNotification
    /// Import members or messages (backend only).
    case importData
    /// Read group attributes and counters (members and the backend).
    case readAttributes
    /// Create, list or revoke invite links (``GroupSettings/inviteLinkPermission``).
    case manageInviteLinks
    /// Join through an invite link (the link stands in for the join option).
    case joinByInviteLink
    /// Set or delete group attributes, or increment counters
    /// (``GroupRules/attributeWriters(for:)``: every member; the owner and admins of an AVChatRoom).
    case writeAttributes
    /// Pin or unpin a message.
    case pinMessage
    /// Read a message's read receipts (who read it, who has not).
    case readReceipts
    /// React to a message, take a reaction back, or read reactions: every member (a muted
    /// member too: a reaction is not a message) and the backend, in types that keep history.
    case react
    /// Create, update or delete a community's topics: its owner and admins, and the backend
    /// (`TOPICS_NOT_SUPPORTED` in every other type); members granted `Permission.manageTopics`
    /// (``GroupRules/authorize(_:in:by:)``).
    case manageTopics
    /// Create, update or delete a community's permission groups, or set who is in them: its
    /// owner and admins, and the backend (`PERMISSION_GROUPS_NOT_SUPPORTED` in every other type);
    /// members granted `Permission.managePermissionGroups` (``GroupRules/authorize(_:in:by:)``).
    case managePermissionGroups

    /// The permission of a community's permission groups that grants this action where the
    /// member's role does not (``Permission``), or `nil` when none does: what acts on another
    /// member names ordinary members (and non-members, for bans) only; roles, settings,
    /// ownership, dismissal and what only the backend does are never granted.
    public var permission: Permission? {
        switch self {
        case .updateProfile: .manageProfile
        case .kick(target: .member), .handleApplication, .editMemberInfo(.other(.member)): .manageMembers
        case .managePermissionGroups: .managePermissionGroups
        case .manageTopics: .manageTopics
        case .muteMember(target: .member), .muteGroup: .muteMembers
        case .ban(target: .member), .ban(target: nil), .manageBans: .banMembers
        case .invite, .manageInviteLinks: .invite
        case .sendMessage: .sendMessage
        case .mentionAll: .mentionAll
        case .recallMessage(own: false), .editMessage(own: false): .manageMessages
        case .pinMessage: .pinMessages
        default: nil
        }
    }

    /// Whether the action may name a topic of a community: what acts on the topic's own
    /// conversation (its profile, messages, pins, receipts, reactions, read position, its own
    /// mute, which the community's roles set as they set the community's). What acts
    /// on members, roles, settings or the group as a whole names the community
    /// (`NOT_ALLOWED_ON_TOPIC`).
    public var appliesToTopic: Bool {
        switch self {
        case .viewProfile, .sendMessage, .mentionAll, .recallMessage, .editMessage, .readHistory, .markRead,
            .pinMessage, .readReceipts, .react, .muteGroup:
            true
        default:
            false
        }
    }
}

/// The outcome of a permission decision.
public enum PermissionDecision: Sendable, Hashable {
    /// The action may proceed.
    case allowed
    /// The action is refused, with the error to return.
    case refused(GroupError)

    /// Whether the action may proceed.
    public var isAllowed: Bool {
        if case .allowed = self { return true }
        return false
    }

    /// The refusal, if refused.
    public var error: GroupError? {
        if case .refused(let error) = self { return error }
        return nil
    }

    /// Return if allowed.
    /// - Throws: The refusal's ``GroupError``.
    public func get() throws {
        if case .refused(let error) = self { throw error }
    }
}

/// How much of a group's profile a caller may read.
public enum GroupVisibility: Sendable, Hashable {
    /// Everything (members and the backend).
    case full
    /// The public subset of Tencent's TIMGroupManager guide (non-members of Public, Meeting and AVChatRoom groups).
    case publicProfile
    /// Nothing: the group does not exist for the caller (non-members of Work groups).
    case hidden

    /// Whether `field` may be shown.
    public func includes(_ field: GroupInfoField) -> Bool {
        switch self {
        case .full: true
        case .publicProfile: GroupInfoField.publicFields.contains(field)
        case .hidden: false
        }
    }
}

/// The fields of group info, for ``GroupVisibility``.
public enum GroupInfoField: String, Sendable, Hashable, CaseIterable {
    /// ``Group/id``.
    case id
    /// ``Group/type``.
    case type
    /// ``Group/name``.
    case name
    /// ``Group/ownerID``.
    case ownerID = "owner_id"
    /// ``Group/createdAt``.
    case createdAt = "created_at"
    /// ``Group/maxMembers``.
    case maxMembers = "max_members"
    /// ``Group/memberCount``.
    case memberCount = "member_count"
    /// ``Group/introduction``.
    case introduction
    /// ``Group/faceURL``.
    case faceURL = "face_url"
    /// The join option of ``Group/settings``.
    case joinOption = "join_option"
    /// ``Group/custom`` (subject to per-key read roles).
    case custom
    /// ``Group/notification``.
    case notification
    /// ``Group/settings`` other than the join option.
    case settings
    /// ``Group/updatedAt``.
    case updatedAt = "updated_at"
    /// ``Group/latestSequence``.
    case latestSequence = "latest_sequence"
    /// ``Group/mute``.
    case mute
    /// ``Group/pins``.
    case pins

    /// What non-members of Public, Meeting and AVChatRoom groups see (Tencent's TIMGroupManager guide: group, groupName,
    /// owner, groupType, createTime, maxMemberNum, memberNum, introduction, faceURL, addOpt,
    /// customInfo).
    public static let publicFields: Set<GroupInfoField> = [
        .id, .type, .name, .ownerID, .createdAt, .maxMembers, .memberCount, .introduction, .faceURL,
        .joinOption, .custom,
    ]
}

/// The pure rules of the group domain: one permission function and the rules of each operation.
public enum GroupRules {
    /// Decide whether `actor` may perform `action` on a group of `type` with `settings`.
    ///
    /// This is the only place permissions are decided. The order of checks:
    /// 1. A non-member acting on a group hidden from non-members (Work) gets `GROUP_NOT_FOUND`,
    ///    except for creating, answering an invitation and withdrawing an application.
    /// 2. What the type's behaviour forbids binds everyone, the backend included
    ///    (`KICK_NOT_SUPPORTED`, `TRANSFER_NOT_SUPPORTED`, `SETTING_FIXED_BY_TYPE`, …).
    /// 3. The backend passes every role and setting check; operations that need a user
    ///    (join, quit, own preferences) refuse it with `OPERATOR_REQUIRED`.
    /// 4. Users are checked against the settings and their role (`PERMISSION_DENIED`,
    ///    `NOT_A_MEMBER`, `ADMIN_TOKEN_REQUIRED`, …).
    /// - Returns: `.allowed`, or `.refused` with the error to return.
    public static func authorize(
        _ action: GroupAction, type: GroupType, settings: GroupSettings, actor: ActingRole
    ) -> PermissionDecision {
        decide(action, type: type, settings: settings, actor: actor)
    }

    /// Decide whether `actor` may perform `action` on `group`: on a topic of a community, an
    /// action that does not apply to topics (``GroupAction/appliesToTopic``) is refused with
    /// `FAILED_PRECONDITION` / `NOT_ALLOWED_ON_TOPIC` before anything else; the rest is
    /// ``authorize(_:type:settings:actor:)`` with the group's type and settings (a topic's are its
    /// community's).
    public static func authorize(_ action: GroupAction, in group: Group, actor: ActingRole) -> PermissionDecision {
        if group.isTopic, !action.appliesToTopic {
            return .refused(GroupError.notAllowedOnTopic(group.id, community: group.parentID ?? ""))
        }
        return decide(action, type: group.type, settings: group.settings, actor: actor)
    }

    /// Decide whether `op` may perform `action` on `group`, with the permissions its permission
    /// groups grant (Community groups and their topics; every other type as
    /// ``authorize(_:in:actor:)``).
    ///
    /// The role decides first. Where it refuses an admin or an ordinary member with
    /// `PERMISSION_DENIED`, the action's ``GroupAction/permission`` held by one of the member's
    /// permission groups (or by the built-in ``PermissionGroup/everyoneID`` group; on a topic,
    /// their values for that topic too) allows it. What the type forbids, `NOT_A_MEMBER`,
    /// `NOT_ALLOWED_ON_TOPIC` and acts on admins and the owner stay refused. On a topic with
    /// defaults (``Group/topicDefaults``), an ordinary member's ``Permission/topicDefaults``
    /// are those defaults and their grants, whatever the role and the settings would give.
    ///
    /// A private topic (``Group/isPrivate``) the operator does not see
    /// (``Group/isVisible(to:)``) answers `GROUP_NOT_FOUND` before anything else, as a topic that
    /// does not exist.
    public static func authorize(_ action: GroupAction, in group: Group, by op: GroupOperator) -> PermissionDecision {
        if group.isPrivate, !group.isVisible(to: op) {
            return .refused(GroupError.groupNotFound(group.id))
        }
        let actor = op.role
        let decision = authorize(action, in: group, actor: actor)
        guard !group.permissionGroups.isEmpty, actor == .admin || actor == .member, let permission = action.permission
        else { return decision }
        if case .refused(let error) = decision, error.reason != .permissionDenied { return decision }
        let granted = group.grantedPermissions(to: op.membership)
        if actor == .member, Permission.topicDefaults.contains(permission), let defaults = group.topicDefaults {
            if defaults.contains(permission) || granted.contains(permission) { return .allowed }
            return .refused(GroupError(
                code: .permissionDenied, reason: .permissionDenied,
                message: "the topic's defaults leave out \(permission) and no permission group of the member grants it",
                metadata: ["role": actor.description, "permission": permission.name]))
        }
        if decision.isAllowed || !granted.contains(permission) { return decision }
        return .allowed
    }

    private static func decide(
        _ action: GroupAction, type: GroupType, settings: GroupSettings, actor: ActingRole
    ) -> PermissionDecision {
        let preset = type.preset
        let behaviour = preset.behaviour

        if actor == .nonMember, !behaviour.publicProfileVisibleToNonMembers {
            switch action {
            case .createGroup, .answerInvitation, .withdrawApplication, .joinByInviteLink: break
            default:
                return .refused(GroupError(
                    code: .notFound, reason: .groupNotFound,
                    message: "group not found"))
            }
        }

        switch action {
        case .createGroup, .answerInvitation, .withdrawApplication:
            return .allowed

        case .viewProfile:
            return .allowed

        case .updateProfile:
            return memberCheck(actor, grantedTo: settings.editProfilePermission, setting: .editProfilePermission)

        case .updateSettings(let keys):
            if let fixed = keys.intersection(preset.fixedSettings).sorted().first {
                return .refused(GroupError(
                    code: .failedPrecondition, reason: .settingFixedByType,
                    message: "\(fixed.rawValue) is fixed for \(type) groups",
                    metadata: ["setting": fixed.rawValue, "group_type": type.name]))
            }
            // Who edits settings and what an owner's quit does stay the owner's, whatever the grant.
            if let ownerOnly = keys.intersection(GroupSettingKey.ownerOnly).sorted().first {
                let decision = memberCheck(actor, grantedTo: .owner, setting: nil)
                if var error = decision.error, error.reason == .permissionDenied {
                    error.metadata["setting"] = ownerOnly.rawValue
                    return .refused(error)
                }
                if !decision.isAllowed { return decision }
                if keys.isSubset(of: GroupSettingKey.ownerOnly) { return .allowed }
            }
            return memberCheck(actor, grantedTo: settings.editSettingsPermission, setting: .editSettingsPermission)

        case .setMaxMembers, .revoke, .sendCustomNotification, .importData:
            return backendOnly(actor)

        case .dismiss:
            switch behaviour.dismissal {
            case .adminTokenOnly:
                if actor == .backend { return .allowed }
                return .refused(GroupError(
                    code: .permissionDenied, reason: .adminTokenRequired,
                    message: "\(type) groups are dismissed only by the app's backend (admin token)"))
            case .ownerOrAdminToken:
                return memberCheck(actor, grantedTo: .owner, setting: nil)
            }

        case .transferOwnership:
            if !behaviour.transferAllowed {
                return .refused(notSupported(.transferNotSupported, "ownership transfer", type))
            }
            return memberCheck(actor, grantedTo: .owner, setting: nil)

        case .invite:
            if !behaviour.invitationsSupported {
                return .refused(notSupported(.inviteNotSupported, "invitations", type))
            }
            return memberCheck(actor, grantedTo: settings.invitePermission, setting: .invitePermission)

        case .join:
            switch actor {
            case .backend: return .refused(GroupError.operatorRequired("join"))
            case .owner, .admin, .member:
                return .refused(GroupError(
                    code: .alreadyExists, reason: .alreadyMember, message: "already a member of the group"))
            case .nonMember:
                if settings.joinOption == .forbidden {
                    return .refused(GroupError(
                        code: .permissionDenied, reason: .joinForbidden,
                        message: "the group does not accept join requests",
                        metadata: ["setting": GroupSettingKey.joinOption.rawValue]))
                }
                return .allowed
            }

        case .quit:
            switch actor {
            case .backend: return .refused(GroupError.operatorRequired("quit"))
            case .nonMember: return .refused(notAMember())
            case .owner where !settings.ownerQuit.ownerMayQuit:
                return .refused(GroupError(
                    code: .failedPrecondition, reason: .ownerCannotQuit,
                    message: "the owner of this \(type) group cannot quit; transfer ownership or dismiss it",
                    metadata: ["setting": GroupSettingKey.ownerQuit.rawValue]))
            case .owner, .admin, .member:
                return .allowed
            }

        case .kick(let target):
            if !behaviour.kickSupported {
                return .refused(notSupported(.kickNotSupported, "removing members (mute them instead)", type))
            }
            if target == .owner { return .refused(targetIsOwner("removed")) }
            let decision = memberCheck(
                actor, grantedTo: settings.removeMembersPermission, setting: .removeMembersPermission)
            guard decision.isAllowed, let role = actor.role else { return decision }
            let everyoneMayRemoveMembers = settings.removeMembersPermission == .everyone && target == .member
            return role.rank > target.rank || everyoneMayRemoveMembers ? .allowed : outranked(target)

        case .setRole(let target, let newRole):
            if newRole == .owner {
                return .refused(GroupError.invalidArgument(
                    field: "role", "ownership changes by transfer, not by setting a role"))
            }
            if !behaviour.allowedRoles.contains(.admin) {
                return .refused(notSupported(.roleNotSupported, "admins", type))
            }
            if target == .owner { return .refused(targetIsOwner("given another role")) }
            return memberCheck(actor, grantedTo: .owner, setting: nil)

        case .muteMember(let target):
            if target == .owner { return .refused(targetIsOwner("muted")) }
            let decision = memberCheck(actor, grantedTo: behaviour.mutePermission, setting: nil)
            guard decision.isAllowed, let role = actor.role else { return decision }
            return role.rank > target.rank ? .allowed : outranked(target)

        case .muteGroup, .updateMuteBypass:
            return memberCheck(actor, grantedTo: behaviour.mutePermission, setting: nil)
        case .ban(let target):
            // Whoever may remove that member; where the type removes nobody (AVChatRoom) the ban
            // is the way out of the room, granted as the type's mute.
            if target == .owner { return .refused(targetIsOwner("banned")) }
            let rank = target ?? .member
            let decision = memberCheck(actor, grantedTo: banPermission(type, settings), setting: banSetting(type))
            guard decision.isAllowed, let role = actor.role else { return decision }
            let everyoneMayBan = banPermission(type, settings) == .everyone && rank == .member
            return role.rank > rank.rank || everyoneMayBan ? .allowed : outranked(rank)
        case .manageBans:
            return memberCheck(actor, grantedTo: banPermission(type, settings), setting: banSetting(type))

        case .editMemberInfo(let target):
            switch actor {
            case .backend: return .allowed
            case .nonMember: return .refused(notAMember())
            case .owner, .admin, .member:
                guard case .other(let targetRole) = target else { return .allowed }
                let role = actor.role!
                let allowed: Bool
                switch settings.editMemberInfoPermission {
                case .selfOnly: allowed = false
                case .ownerAndSelf: allowed = role == .owner
                case .ownerAdminsAndSelf: allowed = role.rank > targetRole.rank
                }
                return allowed ? .allowed : .refused(GroupError(
                    code: .permissionDenied, reason: .permissionDenied,
                    message: "\(actor) may not edit the profile of a member with role \(targetRole)",
                    metadata: ["setting": GroupSettingKey.editMemberInfoPermission.rawValue]))
            }

        case .setOwnPreferences, .markRead:
            switch actor {
            case .backend: return .refused(GroupError.operatorRequired("this operation"))
            case .nonMember: return .refused(notAMember())
            case .owner, .admin, .member: return .allowed
            }

        case .listMembers, .viewMemberInfo, .sendMessage, .readAttributes:
            return memberCheck(actor, grantedTo: .everyone, setting: nil)

        case .mentionAll:
            return memberCheck(actor, grantedTo: settings.mentionAllPermission, setting: .mentionAllPermission)

        case .recallMessage(let own), .editMessage(let own):
            if !behaviour.historyKept { return .refused(historyNotKept(type)) }
            // The owner and admins recall and edit anyone's message, members only their own.
            return memberCheck(actor, grantedTo: own ? .everyone : .ownerAndAdmins, setting: nil)
        case .writeAttributes:
            return memberCheck(actor, grantedTo: attributeWriters(for: type), setting: nil)

        case .manageInviteLinks:
            if !behaviour.invitationsSupported {
                return .refused(notSupported(.inviteLinkNotSupported, "invite links", type))
            }
            return memberCheck(actor, grantedTo: settings.inviteLinkPermission, setting: .inviteLinkPermission)

        case .joinByInviteLink:
            if !behaviour.invitationsSupported {
                return .refused(notSupported(.inviteLinkNotSupported, "invite links", type))
            }
            switch actor {
            case .backend: return .refused(GroupError.operatorRequired("join"))
            case .owner, .admin, .member:
                return .refused(GroupError(
                    code: .alreadyExists, reason: .alreadyMember, message: "already a member of the group"))
            case .nonMember: return .allowed
            }

        case .readHistory:
            if !behaviour.historyKept { return .refused(historyNotKept(type)) }
            return memberCheck(actor, grantedTo: .everyone, setting: nil)

        case .pinMessage:
            if !behaviour.historyKept { return .refused(historyNotKept(type)) }
            return memberCheck(actor, grantedTo: settings.pinPermission, setting: .pinPermission)

        case .react:
            if !behaviour.historyKept { return .refused(historyNotKept(type)) }
            return memberCheck(actor, grantedTo: .everyone, setting: nil)

        case .manageTopics:
            if !behaviour.topicsSupported {
                return .refused(notSupported(.topicsNotSupported, "topics", type))
            }
            return memberCheck(actor, grantedTo: .ownerAndAdmins, setting: nil)

        case .managePermissionGroups:
            if !behaviour.topicsSupported {
                return .refused(notSupported(.permissionGroupsNotSupported, "permission groups", type))
            }
            return memberCheck(actor, grantedTo: .ownerAndAdmins, setting: nil)

        case .readReceipts:
            if !behaviour.historyKept { return .refused(historyNotKept(type)) }
            if !behaviour.unreadCounting {
                return .refused(GroupError(
                    code: .failedPrecondition, reason: .readReceiptsNotSupported,
                    message: "\(type) groups have no read receipts", metadata: ["group_type": type.name]))
            }
            return memberCheck(actor, grantedTo: .everyone, setting: nil)

        case .handleApplication:
            switch actor {
            case .backend: return .allowed
            case .nonMember: return .refused(notAMember())
            case .owner, .admin, .member:
                return settings.joinApprovers.includes(actor.role!) ? .allowed : .refused(GroupError(
                    code: .permissionDenied, reason: .permissionDenied,
                    message: "only \(settings.joinApprovers.rawValue) handle applications",
                    metadata: ["setting": GroupSettingKey.joinApprovers.rawValue]))
            }
        }
    }

    /// How much of a group of `type` `actor` may read: members and the backend everything,
    /// non-members the public subset or nothing (Work).
    public static func visibility(of type: GroupType, for actor: ActingRole) -> GroupVisibility {
        switch actor {
        case .owner, .admin, .member, .backend: .full
        case .nonMember: type.preset.behaviour.publicProfileVisibleToNonMembers ? .publicProfile : .hidden
        }
    }

    // MARK: Helpers

    /// Who bans: ``GroupSettings/removeMembersPermission``, or the type's mute permission where
    /// the type removes nobody (AVChatRoom).
    private static func banPermission(_ type: GroupType, _ settings: GroupSettings) -> OperationPermission {
        type.preset.behaviour.kickSupported ? settings.removeMembersPermission : type.preset.behaviour.mutePermission
    }

    /// The setting that decides who bans, for the refusal's metadata.
    private static func banSetting(_ type: GroupType) -> GroupSettingKey? {
        type.preset.behaviour.kickSupported ? .removeMembersPermission : nil
    }

    private static func memberCheck(
        _ actor: ActingRole, grantedTo permission: OperationPermission, setting: GroupSettingKey?
    ) -> PermissionDecision {
        switch actor {
        case .backend: return .allowed
        case .nonMember: return .refused(notAMember())
        case .owner, .admin, .member:
            if permission.grants(actor.role!) { return .allowed }
            var metadata: [String: String] = ["role": actor.description]
            if let setting { metadata["setting"] = setting.rawValue }
            return .refused(GroupError(
                code: .permissionDenied, reason: .permissionDenied,
                message: "a group \(actor) may not do this (allowed: \(permission.rawValue))",
                metadata: metadata))
        }
    }

    private static func backendOnly(_ actor: ActingRole) -> PermissionDecision {
        actor == .backend ? .allowed : .refused(GroupError(
            code: .permissionDenied, reason: .adminTokenRequired,
            message: "only the app's backend (admin token) may do this"))
    }

    private static func notAMember() -> GroupError {
        GroupError(code: .permissionDenied, reason: .notAMember, message: "not a member of the group")
    }

    /// `FAILED_PRECONDITION` / `HISTORY_NOT_KEPT`: `type` stores no messages (AVChatRoom).
    static func historyNotKept(_ type: GroupType) -> GroupError {
        GroupError(code: .failedPrecondition, reason: .historyNotKept, message: "\(type) groups keep no message history")
    }

    static func notSupported(_ reason: GroupError.Reason, _ what: String, _ type: GroupType) -> GroupError {
        GroupError(
            code: .failedPrecondition, reason: reason, message: "\(type) groups do not support \(what)",
            metadata: ["group_type": type.name])
    }

    private static func targetIsOwner(_ what: String) -> GroupError {
        GroupError(code: .failedPrecondition, reason: .targetIsOwner, message: "the owner cannot be \(what)")
    }

    private static func outranked(_ target: MemberRole) -> PermissionDecision {
        .refused(GroupError(
            code: .permissionDenied, reason: .permissionDenied,
            message: "may not act on a member with role \(target)", metadata: ["target_role": target.rawValue]))
    }
}
