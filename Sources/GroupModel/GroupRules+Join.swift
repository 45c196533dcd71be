/// The outcome of a `JoinGroup` call.
public enum JoinOutcome: Sendable, Hashable {
    /// The user is a member now (join option `any`).
    case joined(Member)
    /// An application awaits an approver (join option `approval`);
    /// ``GroupRules/planJoinApplication(_:by:joinedGroupCount:message:limits:now:retainedMute:pending:newID:ban:link:)``
    /// makes the record to store.
    case pendingApproval
}

/// The plan of a `JoinGroup` call.
public struct JoinPlan: Sendable, Hashable {
    /// Joined, or pending approval.
    public var outcome: JoinOutcome
    /// What to write: the new member and `MEMBER_JOINED`, or the `JOIN_APPLICATION_RECEIVED`
    /// notification to the approvers.
    public var change: GroupChange
    /// The application message.
    public var message: String

    /// Create a join plan.
    public init(outcome: JoinOutcome, change: GroupChange, message: String) {
        self.outcome = outcome
        self.change = change
        self.message = message
    }
}

extension GroupRules {
    /// Check a `JoinGroup` call and plan it.
    ///
    /// - Only a user joins (the backend gets `OPERATOR_REQUIRED`); a member gets `ALREADY_MEMBER`;
    ///   a Work group is invisible to non-members (`GROUP_NOT_FOUND`); join option `forbidden` →
    ///   `PERMISSION_DENIED` / `JOIN_FORBIDDEN`.
    /// - A full group → `FAILED_PRECONDITION` / `GROUP_FULL`; a user at the app's joined-group limit
    ///   → `TOO_MANY_GROUPS` (AVChatRoom rooms do not count). Both are checked for applications
    ///   too, and again when an application is accepted.
    /// - Join option `any`: the user becomes an ordinary member now (a mute kept from an earlier
    ///   membership, `retainedMute`, applies again if it has not ended); events `MEMBER_JOINED`.
    ///   Option `approval`: nothing is written but `JOIN_APPLICATION_RECEIVED` to the approvers
    ///   (the application itself comes from ``planJoinApplication(_:by:joinedGroupCount:message:limits:now:retainedMute:pending:newID:ban:link:)``).
    /// - Parameters:
    ///   - group: The group as stored (for AVChatRoom, `memberCount` should be the live count).
    ///   - op: The joining user and their membership (`nil` if not a member).
    ///   - joinedGroupCount: How many groups that count toward the limit the user is in now.
    ///   - message: The application message (≤ ``AppLimits/applicationMessageBytes``).
    ///   - limits: The app's limits.
    ///   - now: The time of the join: the member's join time, and what the ban and the retained mute
    ///     are compared with.
    ///   - retainedMute: The end of a mute kept when the user last left, if any.
    ///   - ban: The user's ban from the group, if any: while it runs the join (or application)
    ///     is refused with `PERMISSION_DENIED` / `USER_BANNED`.
    ///   - link: The invite link the user joins through (`JoinByInviteLink`, checked live by
    ///     ``checkInviteLink(_:now:)``): it stands in for the join option (the link's approval
    ///     requirement decides, and a Work group is found through it); the member's source is
    ///     ``JoinSource/inviteLink`` with the link's id.
    public static func planJoin(
        _ group: Group, by op: GroupOperator, joinedGroupCount: Int, message: String = "", limits: AppLimits,
        now: Timestamp, retainedMute: Timestamp? = nil, ban: GroupBan? = nil, link: InviteLink? = nil
    ) throws -> JoinPlan {
        try authorize(link == nil ? .join : .joinByInviteLink, in: group, by: op).get()
        guard let userID = op.userID else { throw GroupError.operatorRequired("join") }
        try checkNotBanned(ban, now: now)
        try FieldValidation.checkBytes(message, field: "message", limit: limits.applicationMessageBytes)
        if let max = group.maxMembers, group.memberCount >= max { throw GroupError.groupFull(max) }
        if countsTowardGroupLimit(group.type), joinedGroupCount >= limits.maxGroupsPerUser {
            throw GroupError.tooManyGroups(userID, limit: limits.maxGroupsPerUser)
        }

        let option: JoinOption = link.map { $0.requiresApproval ? .approval : .any } ?? group.settings.joinOption
        switch option {
        case .forbidden:
            // authorize refused already; kept for exhaustiveness.
            throw GroupError(code: .permissionDenied, reason: .joinForbidden, message: "the group does not accept join requests")
        case .approval:
            var changes: [String: String] = [:]
            if !message.isEmpty { changes["message"] = message }
            if let link { changes["invite_link"] = link.id }
            let received = GroupEvent.Draft(
                kind: .joinApplicationReceived, operatorID: userID, targets: [userID], changes: changes,
                recipient: .approvers)
            return JoinPlan(outcome: .pendingApproval, change: GroupChange(group: group, events: [received]),
                            message: message)
        case .any:
            var member = newMember(
                userID, in: group, now: now, retainedMute: retainedMute, source: link == nil ? .freeJoin : .inviteLink)
            member.inviteLinkID = link?.id
            var after = group
            after.memberCount += 1
            let joined = GroupEvent.Draft(
                kind: .memberJoined, operatorID: userID, targets: [userID],
                changes: joinChanges(source: member.joinSource, inviterID: nil, inviteLinkID: link?.id))
            return JoinPlan(outcome: .joined(member),
                            change: GroupChange(group: after, insertedMembers: [member], events: [joined]),
                            message: message)
        }
    }

    /// A new ordinary member of `group` (join order assigned by the store), who came in by
    /// `source`, let in by `inviterID`.
    static func newMember(
        _ userID: String, in group: Group, now: Timestamp, retainedMute: Timestamp?, source: JoinSource,
        inviterID: String? = nil
    ) -> Member {
        let mute = retainedMute.flatMap { $0 > now ? $0 : nil }
        return Member(userID: userID, role: .member, joinedAt: now, joinOrder: 0,
                      joinSequence: group.latestSequence, mutedUntil: mute, joinSource: source, inviterID: inviterID)
    }
}
