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
        try authorize(.kick(target: .member), in: group, by: op).get()
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
            let decision = authorize(.kick(target: target.role), in: group, by: op)
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
            remove(target, in: &change, count: &after, options: options, now: now)
            results.append(MemberResult(userID: userID, outcome: .success(target)))
        }
        change.events += kickEvents(of: removed, by: op, changes: reason.isEmpty ? [:] : ["reason": reason])
        change.group = after
        return MemberBatchPlan(results: results, change: change)
    }

    /// Takes `target` out as a kick (or a ban) does: a removed member of `change`, one fewer in
    /// `group`'s count, and its running mute kept for a rejoin when `options.keepMuteStatus`.
    static func remove(
        _ target: Member, in change: inout GroupChange, count group: inout Group, options: QuitOptions, now: Timestamp
    ) {
        change.removedMembers.append(target.userID)
        group.memberCount = max(0, group.memberCount - 1)
        if options.keepMuteStatus, target.isMuted(at: now), let until = target.mutedUntil {
            change.retainedMutes[target.userID] = until
        }
    }

    /// The events of members removed by a kick (or a ban): one `MEMBER_KICKED` tip (targets: the
    /// removed) and `KICKED_FROM_GROUP` to each removed user, all with `changes`; none if nobody was.
    static func kickEvents(of removed: [String], by op: GroupOperator, changes: [String: String]) -> [GroupEvent.Draft] {
        guard !removed.isEmpty else { return [] }
        return [GroupEvent.Draft(kind: .memberKicked, operatorID: op.userID, targets: removed, changes: changes)]
            + removed.map { userID in
                GroupEvent.Draft(kind: .kickedFromGroup, operatorID: op.userID, targets: [userID], changes: changes,
                                 recipient: .user(userID))
            }
    }
}
