extension GroupRules {
    /// The longest mute, in seconds (the API's `uint32` duration).
    public static let maxMuteSeconds: Int64 = Int64(UInt32.max)

    /// Check a `MuteMembers` call and plan it: mute each user for `seconds` from `now` (0 unmutes).
    ///
    /// - The call as a whole: who mutes is fixed by the type (Work, AVChatRoom: owner; Public,
    ///   Meeting: owner and admins); 1…``AppLimits/maxUsersPerBatch`` users; `seconds` in
    ///   0…``maxMuteSeconds`` (`INVALID_ARGUMENT` naming `duration_seconds`).
    /// - Per user: malformed or repeated id → `invalid`; not a member → `notMember`; the owner →
    ///   `failed` `TARGET_IS_OWNER`; equal or higher rank → `failed` `PERMISSION_DENIED`;
    ///   otherwise `success` with `mutedUntil` = `now + seconds` (`nil` for 0).
    /// - Events: one `MEMBER_MUTED` tip for the users whose mute changed, with
    ///   `changes["muted_until"]` in milliseconds (`0` = unmuted); none if nothing changed.
    public static func planMemberMute(
        of userIDs: [String], for seconds: Int64, in group: Group, by op: GroupOperator,
        memberships: [String: Member], limits: AppLimits, now: Timestamp
    ) throws -> MemberBatchPlan {
        try authorize(.muteMember(target: .member), in: group, by: op).get()
        try checkBatch(userIDs, field: "user_ids", limits: limits)
        if seconds < 0 || seconds > maxMuteSeconds {
            throw GroupError.invalidArgument(
                field: "duration_seconds", "duration_seconds must be 0 (unmute) to \(maxMuteSeconds)",
                limit: Int(maxMuteSeconds))
        }
        let until: Timestamp? = seconds == 0 ? nil : now.adding(seconds: seconds)

        var change = GroupChange(group: group)
        var results: [MemberResult] = []
        var seen: Set<String> = []
        var changedUsers: [String] = []
        for (index, userID) in userIDs.enumerated() {
            if let error = batchEntryError(userID, index: index, field: "user_ids", seen: &seen, limits: limits) {
                results.append(MemberResult(userID: userID, outcome: .invalid(error)))
                continue
            }
            guard var target = memberships[userID] else {
                results.append(MemberResult(userID: userID, outcome: .notMember))
                continue
            }
            let decision = authorize(.muteMember(target: target.role), in: group, by: op)
            if let error = decision.error {
                results.append(MemberResult(userID: userID, outcome: .failed(error)))
                continue
            }
            let before = target.isMuted(at: now) ? target.mutedUntil : nil
            target.mutedUntil = until
            if before != until {
                change.updatedMembers.append(target)
                changedUsers.append(userID)
            }
            results.append(MemberResult(userID: userID, outcome: .success(target)))
        }
        if !changedUsers.isEmpty {
            change.events.append(GroupEvent.Draft(
                kind: .memberMuted, operatorID: op.userID, targets: changedUsers,
                changes: ["muted_until": millisText(until), "duration_seconds": String(seconds)]))
        }
        return MemberBatchPlan(results: results, change: change)
    }

    /// Check a `SetGroupMute` call and plan it (ZIM's three modes; Tencent's `allMuted`).
    ///
    /// - Who mutes is fixed by the type (as for members). `mode` `.none` lifts the mute; `.roles`
    ///   needs a non-empty set of roles the type has (`INVALID_ARGUMENT` naming `roles`).
    /// - `seconds` 0 mutes until lifted (Tencent: no time limit), else until `now + seconds` (ZIM).
    /// - The state records who set it (``GroupMuteState/operatorID``).
    /// - Events: `GROUP_MUTED` with changes `mode` (`none`, `all`, `ordinary_members`, `roles`),
    ///   `roles` (comma-separated) and `until` (ms, `0` = until lifted); none if the state is
    ///   unchanged.
    public static func planGroupMute(
        _ mode: GroupMuteMode, for seconds: Int64 = 0, of group: Group, by op: GroupOperator, now: Timestamp
    ) throws -> GroupChange {
        try authorize(.muteGroup, in: group, by: op).get()
        if seconds < 0 || seconds > maxMuteSeconds {
            throw GroupError.invalidArgument(
                field: "duration_seconds", "duration_seconds must be 0 (until lifted) to \(maxMuteSeconds)",
                limit: Int(maxMuteSeconds))
        }
        if case .roles(let roles) = mode {
            if roles.isEmpty {
                throw GroupError.invalidArgument(field: "roles", "name the roles to mute")
            }
            if let role = roles.subtracting(group.type.preset.behaviour.allowedRoles).first {
                throw GroupError.invalidArgument(field: "roles", "\(group.type) groups have no \(role) role")
            }
        }
        let state: GroupMuteState = mode == .none
            ? .unmuted
            : GroupMuteState(mode: mode, until: seconds == 0 ? nil : now.adding(seconds: seconds), operatorID: op.userID)
        let current = group.mute.effective(at: now)
        if state.mode == current.mode && state.until == current.until { return .unchanged(group) }

        var after = group
        after.mute = state
        return GroupChange(group: after, events: [
            GroupEvent.Draft(kind: .groupMuted, operatorID: op.userID, changes: muteChanges(state)),
        ])
    }

    /// A group mute state as event changes.
    static func muteChanges(_ state: GroupMuteState) -> [String: String] {
        let mode: String
        var roles: [MemberRole] = []
        switch state.mode {
        case .none: mode = "none"
        case .all: mode = "all"
        case .ordinaryMembers: mode = "ordinary_members"
        case .roles(let set):
            mode = "roles"
            roles = MemberRole.allCases.filter(set.contains)
        }
        return ["mode": mode, "roles": roles.map(\.rawValue).joined(separator: ","), "until": millisText(state.until)]
    }
}
