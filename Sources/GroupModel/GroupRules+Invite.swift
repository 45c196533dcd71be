extension GroupRules {
    /// Check an `InviteMembers` call and plan it: one result per requested user.
    ///
    /// - The call as a whole: who may invite is ``GroupSettings/invitePermission`` (Work: any
    ///   member; Public: owner and admins; Meeting: nobody but the backend), AVChatRoom takes no
    ///   invitations (`INVITE_NOT_SUPPORTED`); 1…``AppLimits/maxUsersPerBatch`` users
    ///   (`INVALID_ARGUMENT` naming `user_ids`); message ≤ ``AppLimits/applicationMessageBytes``.
    /// - Per user, in order: a malformed or repeated id → `invalid`; a member → `alreadyMember`;
    ///   the group full (counting users added earlier in the same call) → `failed` `GROUP_FULL`;
    ///   the user at the app's joined-group limit → `failed` `TOO_MANY_GROUPS`; then
    ///   - `pending` when the invitee must accept (``GroupSettings/inviteeMustAccept``) or when an
    ///     ordinary inviter needs an approver (``GroupSettings/invitationNeedsApproval`` and the
    ///     inviter is not among ``GroupSettings/joinApprovers``); pending invitations take no seat
    ///     until accepted (their records come from
    ///     ``planInvitationApplications(of:to:by:memberships:joinedGroupCounts:message:limits:now:retainedMutes:pending:newID:bans:)``);
    ///   - otherwise `success`: the user is an ordinary member now.
    ///   The backend adds directly (no consent, no approval), like Tencent's server API.
    /// - Events: one `MEMBER_INVITED` tip (targets: the added users), `INVITED_TO_GROUP` to each;
    ///   per pending invitation `INVITATION_APPROVAL_REQUESTED` to the approvers (when approval is
    ///   needed, it comes first) or `INVITATION_RECEIVED` to the invitee.
    /// - Parameters:
    ///   - userIDs: The users to invite, in request order.
    ///   - group: The group as stored.
    ///   - op: The inviting user and their membership, or the app's backend.
    ///   - memberships: The requested users' current memberships (absent: not a member).
    ///   - joinedGroupCounts: Per requested user, how many counted groups they are in now.
    ///   - message: The inviter's message (≤ ``AppLimits/applicationMessageBytes``), carried by the
    ///     pending invitations and their events.
    ///   - limits: The app's limits.
    ///   - now: The time of the invitation: the join time of the users added, and what bans and
    ///     retained mutes are compared with.
    ///   - retainedMutes: Mutes kept from earlier memberships (see ``QuitOptions``).
    ///   - bans: The requested users' bans from the group: a user whose ban runs gets `failed`
    ///     `USER_BANNED` (after `alreadyMember`).
    public static func planInvitation(
        of userIDs: [String], to group: Group, by op: GroupOperator, memberships: [String: Member],
        joinedGroupCounts: [String: Int], message: String = "", limits: AppLimits, now: Timestamp,
        retainedMutes: [String: Timestamp] = [:], bans: [String: GroupBan] = [:]
    ) throws -> MemberBatchPlan {
        try authorize(.invite, in: group, by: op).get()
        try checkBatch(userIDs, field: "user_ids", limits: limits)
        try FieldValidation.checkBytes(message, field: "message", limit: limits.applicationMessageBytes)

        let settings = group.settings
        let inviterRole = op.membership?.role
        let needsApproval = !op.isBackend && settings.invitationNeedsApproval
            && !(inviterRole.map(settings.joinApprovers.includes) ?? false)
        let needsConsent = !op.isBackend && settings.inviteeMustAccept

        var after = group
        var change = GroupChange(group: group)
        var results: [MemberResult] = []
        var seen: Set<String> = []
        var added: [String] = []
        for (index, userID) in userIDs.enumerated() {
            if let error = batchEntryError(userID, index: index, field: "user_ids", seen: &seen, limits: limits) {
                results.append(MemberResult(userID: userID, outcome: .invalid(error)))
                continue
            }
            if memberships[userID] != nil {
                results.append(MemberResult(userID: userID, outcome: .alreadyMember))
                continue
            }
            if let ban = bans[userID], ban.isActive(at: now) {
                results.append(MemberResult(userID: userID, outcome: .failed(.userBanned(ban))))
                continue
            }
            if let max = group.maxMembers, after.memberCount >= max {
                results.append(MemberResult(userID: userID, outcome: .failed(.groupFull(max))))
                continue
            }
            if countsTowardGroupLimit(group.type), (joinedGroupCounts[userID] ?? 0) >= limits.maxGroupsPerUser {
                results.append(MemberResult(
                    userID: userID, outcome: .failed(.tooManyGroups(userID, limit: limits.maxGroupsPerUser))))
                continue
            }
            if needsApproval || needsConsent {
                let pending = PendingInvitation(
                    inviteeID: userID, inviterID: op.userID, needsApproval: needsApproval, needsConsent: needsConsent,
                    message: message)
                var changes: [String: String] = ["needs_approval": String(needsApproval),
                                                 "needs_consent": String(needsConsent)]
                if !message.isEmpty { changes["message"] = message }
                change.events.append(GroupEvent.Draft(
                    kind: needsApproval ? .invitationApprovalRequested : .invitationReceived,
                    operatorID: op.userID, targets: [userID], changes: changes,
                    recipient: needsApproval ? .approvers : .user(userID)))
                results.append(MemberResult(userID: userID, outcome: .pending(pending)))
                continue
            }
            let member = newMember(
                userID, in: group, now: now, retainedMute: retainedMutes[userID], source: .invitation, inviterID: op.userID)
            change.insertedMembers.append(member)
            after.memberCount += 1
            added.append(userID)
            results.append(MemberResult(userID: userID, outcome: .success(member)))
        }
        if !added.isEmpty {
            let joined = joinChanges(source: .invitation, inviterID: op.userID)
            change.events.insert(
                GroupEvent.Draft(kind: .memberInvited, operatorID: op.userID, targets: added, changes: joined), at: 0)
            for (offset, userID) in added.enumerated() {
                change.events.insert(GroupEvent.Draft(
                    kind: .invitedToGroup, operatorID: op.userID, targets: [userID], changes: joined,
                    recipient: .user(userID)),
                    at: 1 + offset)
            }
        }
        change.group = after
        return MemberBatchPlan(results: results, change: change)
    }
}
