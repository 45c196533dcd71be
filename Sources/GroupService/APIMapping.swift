import GroupAPI
import GroupModel

/// Conversions between the API's message types and the domain's values, in both directions.
enum APIMapping {
    // MARK: Into the domain

    static func groupType(_ type: Groupd_V1_GroupType, field: String = "type") throws -> GroupType {
        switch type {
        case .work: return .work
        case .public: return .public
        case .meeting: return .meeting
        case .avChatRoom: return .avChatRoom
        case .community: return .community
        default:
            throw GroupError.invalidArgument(
                field: field, "type must be WORK, PUBLIC, MEETING, AV_CHAT_ROOM or COMMUNITY (or legacy PRIVATE, CHAT_ROOM)")
        }
    }

    static func role(_ role: Groupd_V1_MemberRole, field: String) throws -> MemberRole? {
        switch role {
        case .unspecified: return nil
        case .owner: return .owner
        case .admin: return .admin
        case .member: return .member
        case .UNRECOGNIZED(let value): throw GroupError.invalidArgument(field: field, "unknown role \(value)")
        }
    }

    /// The settings a request names; UNSPECIFIED keeps the type's default.
    static func settingsChanges(_ settings: Groupd_V1_GroupSettings?, type: GroupType, field: String) throws -> GroupSettings.Changes {
        var changes = GroupSettings.Changes()
        guard let settings else { return changes }
        func unknown(_ name: String, _ value: Int32) -> GroupError {
            GroupError.invalidArgument(field: "\(field).\(name)", "unknown value \(value)")
        }
        switch settings.joinOption {
        case .unspecified: break
        case .any: changes.joinOption = .any
        case .approval: changes.joinOption = .approval
        case .forbidden: changes.joinOption = .forbidden
        case .UNRECOGNIZED(let v): throw unknown("join_option", v)
        }
        switch settings.approverScope {
        case .unspecified: break
        case .owner: changes.joinApprovers = .owner
        case .ownerAndAdmins: changes.joinApprovers = .ownerAndAdmins
        case .UNRECOGNIZED(let v): throw unknown("approver_scope", v)
        }
        changes.invitePermission = try permission(settings.inviteScope, field: "\(field).invite_scope")
        changes.inviteeMustAccept = try requirement(settings.inviteeConsent, field: "\(field).invitee_consent")
        changes.invitationNeedsApproval = try requirement(settings.inviteApproval, field: "\(field).invite_approval")
        changes.removeMembersPermission = try permission(settings.removeScope, field: "\(field).remove_scope")
        changes.editProfilePermission = try permission(settings.profileEditScope, field: "\(field).profile_edit_scope")
        switch settings.memberEditScope {
        case .unspecified: break
        case .selfOnly: changes.editMemberInfoPermission = .selfOnly
        case .ownerAndSelf: changes.editMemberInfoPermission = .ownerAndSelf
        case .ownerAdminsAndSelf: changes.editMemberInfoPermission = .ownerAdminsAndSelf
        case .UNRECOGNIZED(let v): throw unknown("member_edit_scope", v)
        }
        changes.editSettingsPermission = try permission(settings.settingsEditScope, field: "\(field).settings_edit_scope")
        switch settings.ownerQuit {
        case .unspecified: break
        case .refused: changes.ownerQuit = .refused
        case .toLongestStandingMember: changes.ownerQuit = .longestStandingMember
        case .toLongestStandingAdmin: changes.ownerQuit = .longestStandingAdminElseMember
        case .UNRECOGNIZED(let v): throw unknown("owner_quit", v)
        }
        changes.mentionAllPermission = try permission(settings.mentionAllScope, field: "\(field).mention_all_scope")
        if settings.slowModeIntervalSeconds != 0 { changes.slowModeIntervalSeconds = Int(settings.slowModeIntervalSeconds) }
        changes.inviteLinkPermission = try permission(settings.inviteLinkScope, field: "\(field).invite_link_scope")
        changes.pinPermission = try permission(settings.pinScope, field: "\(field).pin_scope")
        // Who mutes is fixed by the type; naming anything else is refused.
        if let mute = try permission(settings.muteScope, field: "\(field).mute_scope"), mute != type.preset.behaviour.mutePermission {
            throw GroupError(
                code: .failedPrecondition, reason: .settingFixedByType,
                message: "who mutes is fixed to \(type.preset.behaviour.mutePermission.rawValue) for \(type) groups",
                metadata: ["field": "\(field).mute_scope", "setting": "mute_scope"])
        }
        return changes
    }

    private static func permission(_ scope: Groupd_V1_OperatorScope, field: String) throws -> OperationPermission? {
        switch scope {
        case .unspecified: nil
        case .nobody: .nobody
        case .owner: .owner
        case .ownerAndAdmins: .ownerAndAdmins
        case .allMembers: .everyone
        case .UNRECOGNIZED(let v): throw GroupError.invalidArgument(field: field, "unknown value \(v)")
        }
    }

    private static func requirement(_ requirement: Groupd_V1_Requirement, field: String) throws -> Bool? {
        switch requirement {
        case .unspecified: nil
        case .notRequired: false
        case .required: true
        case .UNRECOGNIZED(let v): throw GroupError.invalidArgument(field: field, "unknown value \(v)")
        }
    }

    // MARK: Out of the domain

    static func timestamp(_ time: Timestamp) -> Google_Protobuf_Timestamp {
        let millis = time.millisecondsSince1970
        let seconds = millis >= 0 ? millis / 1000 : (millis - 999) / 1000
        return .with {
            $0.seconds = seconds
            $0.nanos = Int32((millis - seconds * 1000) * 1_000_000)
        }
    }

    static func groupType(_ type: GroupType) -> Groupd_V1_GroupType {
        switch type {
        case .work: .work
        case .public: .public
        case .meeting: .meeting
        case .avChatRoom: .avChatRoom
        case .community: .community
        }
    }

    static func role(_ role: MemberRole) -> Groupd_V1_MemberRole {
        switch role {
        case .owner: .owner
        case .admin: .admin
        case .member: .member
        }
    }

    static func scope(_ permission: OperationPermission) -> Groupd_V1_OperatorScope {
        switch permission {
        case .nobody: .nobody
        case .owner: .owner
        case .ownerAndAdmins: .ownerAndAdmins
        case .everyone: .allMembers
        }
    }

    static func settings(_ settings: GroupSettings, type: GroupType) -> Groupd_V1_GroupSettings {
        .with {
            $0.joinOption = switch settings.joinOption {
            case .any: .any
            case .approval: .approval
            case .forbidden: .forbidden
            }
            $0.approverScope = settings.joinApprovers == .owner ? .owner : .ownerAndAdmins
            $0.inviteScope = scope(settings.invitePermission)
            $0.inviteeConsent = settings.inviteeMustAccept ? .required : .notRequired
            $0.inviteApproval = settings.invitationNeedsApproval ? .required : .notRequired
            $0.removeScope = scope(settings.removeMembersPermission)
            $0.profileEditScope = scope(settings.editProfilePermission)
            $0.memberEditScope = switch settings.editMemberInfoPermission {
            case .selfOnly: .selfOnly
            case .ownerAndSelf: .ownerAndSelf
            case .ownerAdminsAndSelf: .ownerAdminsAndSelf
            }
            $0.muteScope = scope(type.preset.behaviour.mutePermission)
            $0.settingsEditScope = scope(settings.editSettingsPermission)
            $0.ownerQuit = switch settings.ownerQuit {
            case .refused: .refused
            case .longestStandingMember: .toLongestStandingMember
            case .longestStandingAdminElseMember: .toLongestStandingAdmin
            }
            $0.mentionAllScope = scope(settings.mentionAllPermission)
            $0.slowModeIntervalSeconds = UInt32(clamping: settings.slowModeIntervalSeconds)
            $0.inviteLinkScope = scope(settings.inviteLinkPermission)
            $0.pinScope = scope(settings.pinPermission)
        }
    }

    /// A pin as the API shows it.
    static func pin(_ pin: PinnedMessage) -> Groupd_V1_PinnedMessage {
        .with {
            $0.sequence = UInt64(max(pin.sequence, 0))
            $0.pinnedByUserID = pin.pinnedBy ?? ""
            $0.pinTime = timestamp(pin.pinnedAt)
        }
    }

    /// A member as the API shows it at `now`: a mute that has ended is not shown.
    static func member(_ member: Member, now: Timestamp) -> Groupd_V1_Member {
        .with {
            $0.userID = member.userID
            $0.role = role(member.role)
            $0.joinTime = timestamp(member.joinedAt)
            $0.nameCard = member.nameCard
            if let until = member.mutedUntil, until > now { $0.muteUntil = timestamp(until) }
            $0.custom = member.custom
            $0.receiveMessageOption = switch member.receiveOption {
            case .receive: .receive
            case .notReceive: .notReceive
            case .receiveWithoutPush: .receiveWithoutPush
            }
            $0.joinSequence = UInt64(max(member.joinSequence, 0))
            $0.joinSource = switch member.joinSource {
            case .unknown: .unspecified
            case .creator: .creator
            case .initialMember: .initialMember
            case .freeJoin: .freeJoin
            case .application: .application
            case .invitation: .invitation
            case .imported: .imported
            case .inviteLink: .inviteLink
            }
            $0.inviterUserID = member.inviterID ?? ""
            $0.inviteLinkID = member.inviteLinkID ?? ""
        }
    }

    /// A group mute state as the API shows it at `now` (`nil`: as recorded, ended or not):
    /// `nil` when the group is not muted, or its mute has ended.
    static func muteState(_ mute: GroupMuteState, now: Timestamp?) -> Groupd_V1_GroupMuteState? {
        let mode: Groupd_V1_GroupMuteMode
        var roles: [Groupd_V1_MemberRole] = []
        if let now, mute.hasEnded(at: now) { return nil }
        switch mute.mode {
        case .none: return nil
        case .all: mode = .all
        case .ordinaryMembers: mode = .ordinaryMembers
        case .roles(let set):
            mode = .roles
            roles = set.sorted { $0.rawValue < $1.rawValue }.map(role)
        }
        return .with {
            $0.mode = mode
            $0.roles = roles
            if let until = mute.until { $0.muteUntil = timestamp(until) }
            $0.operatorUserID = mute.operatorID ?? ""
        }
    }

    /// A group as `visibility` lets the caller see it (the model decides which fields are
    /// public), with the caller's own membership, at `now` (ended mutes are not shown).
    static func group(_ group: Group, visibility: GroupVisibility, selfInfo: Member?, now: Timestamp) -> Groupd_V1_Group {
        let shows = visibility.includes
        var out = Groupd_V1_Group()
        out.groupID = group.id
        if shows(.type) { out.type = groupType(group.type) }
        if shows(.memberCount) { out.memberCount = UInt32(clamping: group.memberCount) }
        if shows(.maxMembers) { out.maxMemberCount = UInt32(clamping: group.maxMembers ?? 0) }
        if shows(.ownerID) { out.ownerUserID = group.ownerID ?? "" }
        if shows(.createdAt) { out.createTime = timestamp(group.createdAt) }
        if shows(.updatedAt) { out.lastInfoTime = timestamp(group.updatedAt) }
        if shows(.latestSequence) { out.latestSequence = UInt64(max(group.latestSequence, 0)) }
        if shows(.mute), let mute = muteState(group.mute, now: now) { out.mute = mute }
        if shows(.mute) { out.muteBypassUserIds = group.muteBypass }
        if shows(.pins) { out.pinnedMessages = group.pins.map(pin) }
        if shows(.custom) { out.custom = group.custom }
        out.profile = .with {
            if shows(.name) { $0.name = group.name }
            if shows(.introduction) { $0.introduction = group.introduction }
            if shows(.notification) { $0.notification = group.notification }
            if shows(.faceURL) { $0.faceURL = group.faceURL }
        }
        if shows(.settings) {
            out.settings = settings(group.settings, type: group.type)
        } else if shows(.joinOption) {
            out.settings = .with { $0.joinOption = settings(group.settings, type: group.type).joinOption }
        }
        out.publicViewOnly = visibility != .full
        if visibility == .full, group.type.preset.behaviour.membershipStored {
            out.memberVersion = UInt64(max(group.memberVersion, 0))
        }
        out.selfInfo = selfInfo.map { member($0, now: now) }
        return out
    }
}
