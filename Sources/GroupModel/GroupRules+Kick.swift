extension GroupRules {
    /// Check a `KickMembers` call and plan it: one result per requested user.
    ///
    /// - The call as a whole: AVChatRoom removes nobody (`FAILED_PRECONDITION` /
    ///   `KICK_NOT_SUPPORTED`, mute instead); the operator must hold
    ///   ``GroupSettings/removeMembersPermission`` (Work: owner; Public, Meeting: owner and admins);
    ///   1…``AppLimits/maxUsersPerBatch`` users; reason ≤ ``AppLimits/applicationMessageBytes``.
    /// - Per user, in order: malformed or repeated id → `invalid`; not a member → `notMember`;
    ///   the owner → `failed` `TARGET_IS_OWNER` (nobody removes the owner); a target of equal or
    ///   higher rank → `failed` `PERMISSION_DENIED` (admins do not remove admins; only the owner
    ///   does); oneself → `invalid` (quit instead); otherwise `success` (the member as they were).
    /// - Events: one `MEMBER_KICKED` tip (targets: the removed; changes `reason`), and
    ///   `KICKED_FROM_GROUP` to each removed user.
    /// - `options.keepMuteStatus` keeps running mutes for a later rejoin.
    public static func planKick(
        of userIDs: [String], from group: Group, by op: GroupOperator, memberships: [String: Member],
        reason: String = "", options: QuitOptions = QuitOptions(), limits: AppLimits, now: Timestamp
    ) throws -> MemberBatchPlan {
        try authorize(.kick(target: .member), type: group.type, settings: group.settings, actor: op.role).get()
        try checkBatch(userIDs, field: "user_ids", limits: limits)
        try FieldValidation.checkBytes(reason, field: "reason", limit: limits.applicationMessageBytes)

        var after = group
        var change = GroupChange(group: group)
        var results: [MemberResult] = []
        var seen: Set<String> = []
        var removed: [String] = []
        for (index, userID) in userIDs.enumerated() {
            if let error = batchEntryError(userID, index: index, field: "user_ids", seen: &seen, limits: limits) {
                results.append(MemberResult(userID: userID, outcome: .invalid(error)))
                continue
            }
            guard let target = memberships[userID] else {
                results.append(MemberResult(userID: userID, outcome: .notMember))
                continue
            }
            let decision = authorize(.kick(target: target.role), type: group.type, settings: group.settings, actor: op.role)
            if let error = decision.error {
                results.append(MemberResult(userID: userID, outcome: .failed(error)))
                continue
            }
            if userID == op.userID {
                results.append(MemberResult(userID: userID, outcome: .invalid(GroupError.invalidArgument(
                    field: "user_ids[\(index)]", "remove yourself by quitting the group"))))
                continue
            }
            removed.append(userID)
            change.removedMembers.append(userID)
            after.memberCount = max(0, after.memberCount - 1)
            if options.keepMuteStatus, target.isMuted(at: now), let until = target.mutedUntil {
                change.retainedMutes[userID] = until
            }
            results.append(MemberResult(userID: userID, outcome: .success(target)))
        }
        if !removed.isEmpty {
            var changes: [String: String] = [:]
            if !reason.isEmpty { changes["reason"] = reason }
            change.events.append(GroupEvent.Draft(kind: .memberKicked, operatorID: op.userID, targets: removed,
                                                  changes: changes))
            for userID in removed {
                change.events.append(GroupEvent.Draft(
                    kind: .kickedFromGroup, operatorID: op.userID, targets: [userID], changes: changes,
                    recipient: .user(userID)))
            }
        }
        change.group = after
        return MemberBatchPlan(results: results, change: change)
    }
}
