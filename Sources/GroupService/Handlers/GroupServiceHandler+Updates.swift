import GroupAPI
import GroupModel
import GroupStore

/// GroupService methods that change an existing group: UpdateGroupProfile, UpdateGroupSettings,
/// TransferOwnership, SetGroupMute, UpdateMuteBypassList.
extension GroupServiceHandler {
    /// The profile update a field mask names (`name`, `introduction`, `notification`, `face_url`,
    /// `custom.<key>`; a masked key absent from `custom` is removed).
    static func profileUpdate(_ request: Groupd_V1_UpdateGroupProfileRequest) throws -> ProfileUpdate {
        let paths = request.updateMask?.paths ?? []
        if paths.isEmpty {
            throw GroupError.invalidArgument(field: "update_mask", "update_mask must name at least one field")
        }
        let profile = request.profile ?? Groupd_V1_GroupProfile()
        var update = ProfileUpdate()
        for path in paths {
            switch path {
            case "name", "profile.name": update.name = profile.name
            case "introduction", "profile.introduction": update.introduction = profile.introduction
            case "notification", "profile.notification": update.notification = profile.notification
            case "face_url", "profile.face_url": update.faceURL = profile.faceURL
            default:
                guard path.hasPrefix("custom."), path.count > "custom.".count else {
                    throw GroupError.invalidArgument(
                        field: "update_mask",
                        "unknown path '\(path)'; expected name, introduction, notification, face_url or custom.<key>")
                }
                let key = String(path.dropFirst("custom.".count))
                update.custom[key] = request.custom[key] ?? []
            }
        }
        return update
    }

    func updateGroupProfile(_ request: Groupd_V1_UpdateGroupProfileRequest, _ call: CallContext) async throws -> Groupd_V1_UpdateGroupProfileResponse {
        var requested = try Self.profileUpdate(request)
        try await checkProfilePolicy(&requested, groupID: request.groupID, call)
        let update = requested
        let limits = call.limits
        let schema = call.customFields
        let now = clock.now()
        let result = try await Self.profileFields {
            try await service.mutate(call, groupID: request.groupID) { snapshot, op in
                (try GroupRules.planProfileUpdate(update, of: snapshot.group, by: op, limits: limits, customFields: schema, now: now), ())
            }
        }
        return .with { $0.group = GroupdService.groupView(result.group, membership: result.membership, call: call) }
    }

    /// The settings a field mask names, copied from `settings`; a masked UNSPECIFIED value is
    /// `INVALID_ARGUMENT`. Returns whether `max_member_count` is masked.
    static func maskedSettings(_ request: Groupd_V1_UpdateGroupSettingsRequest) throws -> (Groupd_V1_GroupSettings, Bool) {
        let paths = request.updateMask?.paths ?? []
        if paths.isEmpty {
            throw GroupError.invalidArgument(field: "update_mask", "update_mask must name at least one setting")
        }
        let given = request.settings ?? Groupd_V1_GroupSettings()
        var masked = Groupd_V1_GroupSettings()
        var maxMembers = false
        for path in paths {
            let name = path.hasPrefix("settings.") ? String(path.dropFirst("settings.".count)) : path
            var unspecified = false
            switch name {
            case "join_option": masked.joinOption = given.joinOption; unspecified = given.joinOption == .unspecified
            case "approver_scope": masked.approverScope = given.approverScope; unspecified = given.approverScope == .unspecified
            case "invite_scope": masked.inviteScope = given.inviteScope; unspecified = given.inviteScope == .unspecified
            case "invitee_consent": masked.inviteeConsent = given.inviteeConsent; unspecified = given.inviteeConsent == .unspecified
            case "invite_approval": masked.inviteApproval = given.inviteApproval; unspecified = given.inviteApproval == .unspecified
            case "remove_scope": masked.removeScope = given.removeScope; unspecified = given.removeScope == .unspecified
            case "profile_edit_scope": masked.profileEditScope = given.profileEditScope; unspecified = given.profileEditScope == .unspecified
            case "member_edit_scope": masked.memberEditScope = given.memberEditScope; unspecified = given.memberEditScope == .unspecified
            case "mute_scope": masked.muteScope = given.muteScope; unspecified = given.muteScope == .unspecified
            case "settings_edit_scope":
                masked.settingsEditScope = given.settingsEditScope; unspecified = given.settingsEditScope == .unspecified
            case "owner_quit": masked.ownerQuit = given.ownerQuit; unspecified = given.ownerQuit == .unspecified
            case "mention_all_scope":
                masked.mentionAllScope = given.mentionAllScope; unspecified = given.mentionAllScope == .unspecified
            case "slow_mode_interval_seconds": masked.slowModeIntervalSeconds = given.slowModeIntervalSeconds
            case "invite_link_scope":
                masked.inviteLinkScope = given.inviteLinkScope; unspecified = given.inviteLinkScope == .unspecified
            case "pin_scope": masked.pinScope = given.pinScope; unspecified = given.pinScope == .unspecified
            case "max_member_count": maxMembers = true
            default:
                throw GroupError.invalidArgument(field: "update_mask", "unknown settings path '\(path)'")
            }
            if unspecified {
                throw GroupError.invalidArgument(field: "settings.\(name)", "settings.\(name) is masked but UNSPECIFIED")
            }
        }
        return (masked, maxMembers)
    }

    func updateGroupSettings(_ request: Groupd_V1_UpdateGroupSettingsRequest, _ call: CallContext) async throws -> Groupd_V1_UpdateGroupSettingsResponse {
        let (masked, maskedMax) = try Self.maskedSettings(request)
        // 0 is a value here (slow mode off), not "unset": a masked interval is always applied.
        let slowMode = request.updateMask?.paths.contains { $0 == "slow_mode_interval_seconds" || $0 == "settings.slow_mode_interval_seconds" } == true
            ? Int(masked.slowModeIntervalSeconds) : nil
        let maxMembers: Int? = maskedMax ? Int(request.maxMemberCount) : nil
        let limits = call.limits
        let now = clock.now()
        let result = try await service.mutate(call, groupID: request.groupID) { snapshot, op in
            let group = snapshot.group
            // Type- and role-level refusals come before the values are read.
            var changes = try APIMapping.settingsChanges(masked, type: group.type, field: "settings")
            if let slowMode { changes.slowModeIntervalSeconds = slowMode }
            return (try GroupRules.planSettingsUpdate(changes, maxMembers: maxMembers, of: group, by: op, limits: limits, now: now), ())
        }
        return .with { $0.group = GroupdService.groupView(result.group, membership: result.membership, call: call) }
    }

    func transferOwnership(_ request: Groupd_V1_TransferOwnershipRequest, _ call: CallContext) async throws -> Groupd_V1_TransferOwnershipResponse {
        let newOwner = request.newOwnerUserID
        let quit = request.quitAfterTransfer
        let options = GroupdService.quitOptions(request.quitOptions)
        let limits = call.limits
        let now = clock.now()
        let result = try await service.mutate(call, groupID: request.groupID, targets: newOwner.isEmpty ? [] : [newOwner]) { snapshot, op in
            let change = try GroupRules.planOwnershipTransfer(
                of: snapshot.group, to: newOwner, by: op, newOwner: snapshot.targets[newOwner], currentOwner: snapshot.owner,
                quit: quit, options: options, limits: limits, now: now)
            return (change, ())
        }
        return .with { $0.group = GroupdService.groupView(result.group, membership: result.membership, call: call) }
    }

    func setGroupMute(_ request: Groupd_V1_SetGroupMuteRequest, _ call: CallContext) async throws -> Groupd_V1_SetGroupMuteResponse {
        let mode: GroupMuteMode
        if !request.muted {
            mode = .none
        } else {
            switch request.mode {
            case .all: mode = .all
            case .ordinaryMembers: mode = .ordinaryMembers
            case .roles:
                var roles: Set<MemberRole> = []
                for (index, role) in request.roles.enumerated() {
                    guard let role = try APIMapping.role(role, field: "roles[\(index)]") else {
                        throw GroupError.invalidArgument(field: "roles[\(index)]", "roles must not hold UNSPECIFIED")
                    }
                    roles.insert(role)
                }
                mode = .roles(roles)
            case .unspecified, .UNRECOGNIZED:
                throw GroupError.invalidArgument(field: "mode", "mode must be ALL, ORDINARY_MEMBERS or ROLES when muting")
            }
            if request.mode != .roles, !request.roles.isEmpty {
                throw GroupError.invalidArgument(field: "roles", "roles are only given with mode ROLES")
            }
        }
        let seconds = Int64(request.durationSeconds)
        let now = clock.now()
        let result = try await service.mutate(call, groupID: request.groupID) { snapshot, op in
            (try GroupRules.planGroupMute(mode, for: seconds, of: snapshot.group, by: op, now: now), ())
        }
        return .with {
            if let mute = APIMapping.muteState(result.group.mute, now: now) { $0.mute = mute }
        }
    }

    func updateMuteBypassList(
        _ request: Groupd_V1_UpdateMuteBypassListRequest, _ call: CallContext
    ) async throws -> Groupd_V1_UpdateMuteBypassListResponse {
        let add = request.addUserIds
        let remove = request.removeUserIds
        let limits = call.limits
        let result = try await service.mutate(
            call, groupID: request.groupID, targets: GroupdService.distinctTargets(add, limits: limits)
        ) { snapshot, op in
            (try GroupRules.planMuteBypassUpdate(
                add: add, remove: remove, in: snapshot.group, by: op, memberships: snapshot.targets, limits: limits), ())
        }
        return .with { $0.muteBypassUserIds = result.group.muteBypass }
    }
}
