/// A `JoinGroup` plan with its application, when the join needs an approver.
public struct JoinApplicationPlan: Sendable, Hashable {
    /// The join plan (its change carries the events, with `application_id` added).
    public var join: JoinPlan
    /// The new or refreshed application (`nil` when the user joined at once).
    public var application: Application?
    /// Whether `application` refreshes one that was already pending.
    public var refreshed: Bool

    /// Create a plan.
    public init(join: JoinPlan, application: Application?, refreshed: Bool) {
        self.join = join
        self.application = application
        self.refreshed = refreshed
    }
}

/// An `InviteMembers` plan with the invitations it creates or refreshes.
public struct InvitationApplicationsPlan: Sendable, Hashable {
    /// The batch plan (its change carries the events, with `application_id` added).
    public var batch: MemberBatchPlan
    /// Per invitee whose result is `pending`, the new or refreshed invitation.
    public var invitations: [String: Application]

    /// Create a plan.
    public init(batch: MemberBatchPlan, invitations: [String: Application]) {
        self.batch = batch
        self.invitations = invitations
    }
}

extension GroupRules {
    /// Plan a `JoinGroup` call as ``planJoin(_:by:joinedGroupCount:message:limits:now:retainedMute:ban:link:)``
    /// does, and, when the join needs an approver, the application to store.
    ///
    /// A user with a pending application to the group (`pending`, not expired) refreshes it: same
    /// id and creation time (its place in listings), new message, update time and expiry; the
    /// approvers get `JOIN_APPLICATION_RECEIVED` again. Otherwise a new application `newID` is made,
    /// expiring after ``AppLimits/applicationExpirySeconds``. The event's `changes` carry
    /// `application_id` (and `refreshed` = `true` for a refresh).
    /// - Throws: What `planJoin` throws (`ALREADY_MEMBER`, `JOIN_FORBIDDEN`, `GROUP_FULL`, the message's limit…).
    public static func planJoinApplication(
        _ group: Group, by op: GroupOperator, joinedGroupCount: Int, message: String, limits: AppLimits,
        now: Timestamp, retainedMute: Timestamp?, pending: Application?, newID: String, ban: GroupBan? = nil,
        link: InviteLink? = nil
    ) throws -> JoinApplicationPlan {
        var join = try planJoin(
            group, by: op, joinedGroupCount: joinedGroupCount, message: message, limits: limits, now: now,
            retainedMute: retainedMute, ban: ban, link: link)
        guard case .pendingApproval = join.outcome, let userID = op.userID else {
            return JoinApplicationPlan(join: join, application: nil, refreshed: false)
        }
        let expiry = now.adding(seconds: Int64(limits.applicationExpirySeconds))
        var application: Application
        let refreshed: Bool
        if let pending, pending.kind == .join, pending.state(at: now) == .pending {
            application = pending
            application.message = message
            application.updatedAt = now
            application.expiresAt = expiry
            refreshed = true
        } else {
            application = Application(
                id: newID, appID: group.appID, groupID: group.id, kind: .join, senderID: userID, subjectID: userID,
                message: message, createdAt: now, updatedAt: now, expiresAt: expiry, approval: .pending,
                consent: .notNeeded)
            refreshed = false
        }
        application.inviteLinkID = link?.id
        for index in join.change.events.indices where join.change.events[index].kind == .joinApplicationReceived {
            join.change.events[index].changes["application_id"] = application.id
            if refreshed { join.change.events[index].changes["refreshed"] = "true" }
        }
        return JoinApplicationPlan(join: join, application: application, refreshed: refreshed)
    }

    /// Plan an `InviteMembers` call as ``planInvitation(of:to:by:memberships:joinedGroupCounts:message:limits:now:retainedMutes:bans:)``
    /// does, and the invitation to store for each `pending` result.
    ///
    /// An invitee with a pending invitation to the group (in `pending`, keyed by invitee, not
    /// expired) has it replaced in place: same id and creation time; the new inviter, message,
    /// needed decisions and expiry. Otherwise a new invitation is made with an id from `newID`.
    /// The `INVITATION_RECEIVED` / `INVITATION_APPROVAL_REQUESTED` event of each carries its
    /// `application_id`.
    public static func planInvitationApplications(
        of userIDs: [String], to group: Group, by op: GroupOperator, memberships: [String: Member],
        joinedGroupCounts: [String: Int], message: String, limits: AppLimits, now: Timestamp,
        retainedMutes: [String: Timestamp], pending: [String: Application], newID: () -> String,
        bans: [String: GroupBan] = [:]
    ) throws -> InvitationApplicationsPlan {
        var batch = try planInvitation(
            of: userIDs, to: group, by: op, memberships: memberships, joinedGroupCounts: joinedGroupCounts,
            message: message, limits: limits, now: now, retainedMutes: retainedMutes, bans: bans)
        let expiry = now.adding(seconds: Int64(limits.applicationExpirySeconds))
        var invitations: [String: Application] = [:]
        for result in batch.results {
            guard case .pending(let invitation) = result.outcome, let inviter = invitation.inviterID else { continue }
            var application: Application
            if let existing = pending[invitation.inviteeID], existing.kind == .invitation,
               existing.state(at: now) == .pending {
                application = existing
                application.senderID = inviter
                application.createdAt = existing.createdAt
            } else {
                application = Application(
                    id: newID(), appID: group.appID, groupID: group.id, kind: .invitation, senderID: inviter,
                    subjectID: invitation.inviteeID, message: message, createdAt: now, updatedAt: now,
                    expiresAt: expiry, approval: .pending, consent: .pending)
            }
            application.message = invitation.message
            application.updatedAt = now
            application.expiresAt = expiry
            application.approval = .needed(invitation.needsApproval)
            application.consent = .needed(invitation.needsConsent)
            invitations[invitation.inviteeID] = application
        }
        for index in batch.change.events.indices {
            let event = batch.change.events[index]
            guard event.kind == .invitationReceived || event.kind == .invitationApprovalRequested,
                  let invitee = event.targets.first, let application = invitations[invitee] else { continue }
            batch.change.events[index].changes["application_id"] = application.id
        }
        return InvitationApplicationsPlan(batch: batch, invitations: invitations)
    }
}
