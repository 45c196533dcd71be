/// What a decision on an item (accept, refuse, withdraw) writes.
public struct ApplicationDecisionPlan: Sendable, Hashable {
    /// The item after the decision (still `pending` when another decision is needed).
    public var application: Application
    /// The group change: the new member, when the user joins now, and the events.
    public var change: GroupChange
    /// The member who joined now, or the existing membership when the user already was one.
    public var member: Member?

    /// Create a plan.
    public init(application: Application, change: GroupChange, member: Member?) {
        self.application = application
        self.change = change
        self.member = member
    }
}

/// Everything a decision on an item reads, loaded in the transaction that writes it.
public struct ApplicationContext: Sendable, Hashable {
    /// The item as stored.
    public var application: Application
    /// Its group.
    public var group: Group
    /// Who decides, with their membership of the group.
    public var op: GroupOperator
    /// The membership of the user who would join (applicant or invitee), if any.
    public var subjectMembership: Member?
    /// How many groups counting toward the app's limit that user is in.
    public var subjectJoinedGroupCount: Int
    /// A mute kept from that user's earlier membership, if any.
    public var subjectRetainedMute: Timestamp?
    /// That user's ban from the group, if any: while it runs the item is not accepted.
    public var subjectBan: GroupBan?

    /// Create a context.
    public init(
        application: Application, group: Group, op: GroupOperator, subjectMembership: Member? = nil,
        subjectJoinedGroupCount: Int = 0, subjectRetainedMute: Timestamp? = nil, subjectBan: GroupBan? = nil
    ) {
        self.subjectBan = subjectBan
        self.application = application
        self.group = group
        self.op = op
        self.subjectMembership = subjectMembership
        self.subjectJoinedGroupCount = subjectJoinedGroupCount
        self.subjectRetainedMute = subjectRetainedMute
    }
}

extension GroupRules {
    // MARK: Relations and views

    /// The caller's relations to an item: sender (applicant or inviter), invitee (once asked:
    /// consent needed and no approval outstanding or refused), approver (approval needed and the
    /// caller's role is among the group's ``GroupSettings/joinApprovers``; the backend approves
    /// every item that needs approval).
    public static func relations(of application: Application, in group: Group, for op: GroupOperator) -> Set<ApplicationRole> {
        var roles: Set<ApplicationRole> = []
        if let user = op.userID {
            if application.senderID == user { roles.insert(.sender) }
            if application.kind == .invitation, application.subjectID == user, application.inviteeAsked {
                roles.insert(.invitee)
            }
        }
        if application.needsApproval {
            if op.isBackend || (op.membership.map { group.settings.joinApprovers.includes($0.role) } ?? false) {
                roles.insert(.approver)
            }
        }
        return roles
    }

    /// Whether an item was handled from the point of view of a caller with `roles`: by the final
    /// decision's author once it ended (expired: nobody); while pending, an approver whose
    /// approval is already given sees who gave it.
    public static func handleStatus(
        of application: Application, roles: Set<ApplicationRole>, for userID: String?, now: Timestamp
    ) -> HandleStatus {
        func by(_ who: String?) -> HandleStatus { who != nil && who == userID ? .handledBySelf : .handledByOther }
        switch application.state(at: now) {
        case .expired: return .notHandled
        case .pending:
            if roles.contains(.approver), application.approval.state == .accepted { return by(application.approval.decidedBy) }
            return .notHandled
        case .accepted, .refused, .withdrawn: return by(application.handledBy)
        }
    }

    // MARK: Decisions

    /// Check and plan accepting an item (`AcceptApplication`).
    ///
    /// - The caller must see the item (a relation, or membership of the group) else
    ///   `APPLICATION_NOT_FOUND`; expired → `APPLICATION_EXPIRED`; no longer pending →
    ///   `APPLICATION_ALREADY_HANDLED` (metadata `state`, `handled_by`); message over
    ///   ``AppLimits/applicationMessageBytes`` → `INVALID_ARGUMENT` naming `message`.
    /// - The invitee answers for consent; an approver (``GroupAction/handleApplication``) for
    ///   approval, which comes first. An approver whose approval was already given by another →
    ///   `APPLICATION_ALREADY_HANDLED` naming who. Anyone else → `PERMISSION_DENIED`.
    /// - Once every needed decision is yes the user joins, checked then: `GROUP_FULL`,
    ///   `TOO_MANY_GROUPS`; a user who meanwhile became a member is accepted without a second row.
    /// - While the user who would join is banned (``ApplicationContext/subjectBan``), no decision
    ///   accepts: `PERMISSION_DENIED` / `USER_BANNED`.
    /// - Events: join application → `JOIN_APPLICATION_APPROVED` to the applicant and
    ///   `MEMBER_JOINED` (operator: the approver); invitation → `INVITATION_ACCEPTED` to the
    ///   inviter (`decision`: `approval` or `consent`) and on joining `MEMBER_JOINED` (operator:
    ///   the inviter), plus `INVITED_TO_GROUP` to an invitee who was never asked; an approval
    ///   that leaves consent outstanding sends `INVITATION_RECEIVED` to the invitee.
    public static func planAcceptApplication(
        _ context: ApplicationContext, message: String, limits: AppLimits, now: Timestamp
    ) throws -> ApplicationDecisionPlan {
        let decision = try decidingPart(context, message: message, limits: limits, now: now)
        try checkNotBanned(context.subjectBan, now: now)
        var application = context.application
        var group = context.group
        let op = context.op
        let made = ApplicationDecision(state: .accepted, decidedBy: op.userID, message: message, decidedAt: now)
        if decision == .approval { application.approval = made } else { application.consent = made }
        application.updatedAt = now
        var changes = ["application_id": application.id]
        if !message.isEmpty { changes["message"] = message }

        var events: [GroupEvent.Draft] = []
        if application.kind == .invitation {
            var answer = changes
            answer["decision"] = decision == .approval ? "approval" : "consent"
            events.append(GroupEvent.Draft(
                kind: .invitationAccepted, operatorID: op.userID, targets: [application.subjectID], changes: answer,
                recipient: .user(application.senderID)))
        }
        let complete = application.approval.state != .pending && application.consent.state != .pending
        guard complete else {
            // Approval given, consent outstanding: now the invitee is asked.
            var asked = ["application_id": application.id]
            if !application.message.isEmpty { asked["message"] = application.message }
            events.append(GroupEvent.Draft(
                kind: .invitationReceived, operatorID: application.senderID, targets: [application.subjectID],
                changes: asked, recipient: .user(application.subjectID)))
            return ApplicationDecisionPlan(
                application: application, change: GroupChange(group: group, events: events), member: nil)
        }

        application.storedState = .accepted
        application.handledBy = op.userID
        application.handleMessage = message
        application.handledAt = now
        if let existing = context.subjectMembership {
            return ApplicationDecisionPlan(
                application: application, change: GroupChange(group: group, events: events), member: existing)
        }
        if let max = group.maxMembers, group.memberCount >= max { throw GroupError.groupFull(max) }
        if countsTowardGroupLimit(group.type), context.subjectJoinedGroupCount >= limits.maxGroupsPerUser {
            throw GroupError.tooManyGroups(application.subjectID, limit: limits.maxGroupsPerUser)
        }
        let letIn = application.kind == .join ? op.userID : application.senderID
        // A join application filed through an invite link: the member came in by the link, let in
        // by the approver.
        let source: JoinSource = application.kind == .invitation ? .invitation
            : application.inviteLinkID == nil ? .application : .inviteLink
        var member = newMember(
            application.subjectID, in: group, now: now, retainedMute: context.subjectRetainedMute,
            source: source, inviterID: letIn)
        member.inviteLinkID = application.kind == .join ? application.inviteLinkID : nil
        group.memberCount += 1
        var joined = joinChanges(source: member.joinSource, inviterID: letIn, inviteLinkID: member.inviteLinkID)
        joined["application_id"] = application.id
        joined["via"] = application.kind == .join ? "application" : "invitation"
        events.insert(GroupEvent.Draft(
            kind: .memberJoined, operatorID: letIn, targets: [application.subjectID], changes: joined), at: 0)
        switch application.kind {
        case .join:
            events.append(GroupEvent.Draft(
                kind: .joinApplicationApproved, operatorID: op.userID, targets: [application.subjectID],
                changes: changes, recipient: .user(application.subjectID)))
        case .invitation where !application.needsConsent:
            events.append(GroupEvent.Draft(
                kind: .invitedToGroup, operatorID: application.senderID, targets: [application.subjectID],
                changes: joined.filter { $0.key != "via" }, recipient: .user(application.subjectID)))
        case .invitation:
            break
        }
        return ApplicationDecisionPlan(
            application: application, change: GroupChange(group: group, insertedMembers: [member], events: events),
            member: member)
    }

    /// Check and plan refusing an item (`RefuseApplication`): the same checks as
    /// ``planAcceptApplication(_:message:limits:now:)``; the item becomes `refused` with the
    /// message. Events: `JOIN_APPLICATION_REFUSED` to the applicant, or `INVITATION_REFUSED` to
    /// the inviter (`decision`: `approval` or `consent`).
    public static func planRefuseApplication(
        _ context: ApplicationContext, message: String, limits: AppLimits, now: Timestamp
    ) throws -> ApplicationDecisionPlan {
        let decision = try decidingPart(context, message: message, limits: limits, now: now)
        var application = context.application
        let op = context.op
        let made = ApplicationDecision(state: .refused, decidedBy: op.userID, message: message, decidedAt: now)
        if decision == .approval { application.approval = made } else { application.consent = made }
        application.storedState = .refused
        application.updatedAt = now
        application.handledBy = op.userID
        application.handleMessage = message
        application.handledAt = now
        var changes = ["application_id": application.id]
        if !message.isEmpty { changes["message"] = message }
        let event: GroupEvent.Draft
        switch application.kind {
        case .join:
            event = GroupEvent.Draft(
                kind: .joinApplicationRefused, operatorID: op.userID, targets: [application.subjectID],
                changes: changes, recipient: .user(application.subjectID))
        case .invitation:
            changes["decision"] = decision == .approval ? "approval" : "consent"
            event = GroupEvent.Draft(
                kind: .invitationRefused, operatorID: op.userID, targets: [application.subjectID],
                changes: changes, recipient: .user(application.senderID))
        }
        return ApplicationDecisionPlan(
            application: application, change: GroupChange(group: context.group, events: [event]), member: nil)
    }

    /// Check and plan withdrawing an item (`WithdrawApplication`): only its sender (or the
    /// backend); others who see it → `PERMISSION_DENIED`, others → `APPLICATION_NOT_FOUND`;
    /// expired → `APPLICATION_EXPIRED`; no longer pending → `APPLICATION_ALREADY_HANDLED`.
    /// Events: `APPLICATION_WITHDRAWN` to the approvers while approval is outstanding, and to an
    /// invitee who was asked.
    public static func planWithdrawApplication(_ context: ApplicationContext, now: Timestamp) throws -> ApplicationDecisionPlan {
        var application = context.application
        let roles = relations(of: application, in: context.group, for: context.op)
        try checkVisible(context, roles: roles)
        try checkPending(application, now: now)
        guard roles.contains(.sender) || context.op.isBackend else {
            throw GroupError(code: .permissionDenied, reason: .permissionDenied,
                             message: "only the applicant or the inviter may withdraw it")
        }
        let approvalOutstanding = application.approval.state == .pending
        let inviteeAsked = application.kind == .invitation && application.inviteeAsked
        application.storedState = .withdrawn
        application.updatedAt = now
        application.handledBy = context.op.userID
        application.handleMessage = ""
        application.handledAt = now
        var events: [GroupEvent.Draft] = []
        let changes = ["application_id": application.id, "kind": application.kind.rawValue]
        if approvalOutstanding {
            events.append(GroupEvent.Draft(
                kind: .applicationWithdrawn, operatorID: context.op.userID, targets: [application.subjectID],
                changes: changes, recipient: .approvers))
        }
        if inviteeAsked {
            events.append(GroupEvent.Draft(
                kind: .applicationWithdrawn, operatorID: context.op.userID, targets: [application.subjectID],
                changes: changes, recipient: .user(application.subjectID)))
        }
        return ApplicationDecisionPlan(
            application: application, change: GroupChange(group: context.group, events: events), member: nil)
    }

    /// Mark the items of one group whose expiry passed by `now` as `expired`, with one
    /// `APPLICATION_EXPIRED` each to the sender, and to the approvers while approval was
    /// outstanding, and to an invitee who was asked. Items not pending or not yet due are left out.
    /// - Returns: The expired items and the events, in the items' order.
    public static func planExpiry(of applications: [Application], now: Timestamp) -> (expired: [Application], events: [GroupEvent.Draft]) {
        var expired: [Application] = []
        var events: [GroupEvent.Draft] = []
        for var application in applications where application.storedState == .pending && application.expiresAt <= now {
            let approvalOutstanding = application.approval.state == .pending
            let inviteeAsked = application.kind == .invitation && application.consent.state == .pending
                && application.inviteeAsked
            application.storedState = .expired
            application.updatedAt = application.expiresAt
            application.handledAt = application.expiresAt
            application.handledBy = nil
            let changes = ["application_id": application.id, "kind": application.kind.rawValue]
            events.append(GroupEvent.Draft(
                kind: .applicationExpired, operatorID: nil, targets: [application.subjectID], changes: changes,
                recipient: .user(application.senderID)))
            if approvalOutstanding {
                events.append(GroupEvent.Draft(
                    kind: .applicationExpired, operatorID: nil, targets: [application.subjectID], changes: changes,
                    recipient: .approvers))
            }
            if inviteeAsked {
                events.append(GroupEvent.Draft(
                    kind: .applicationExpired, operatorID: nil, targets: [application.subjectID], changes: changes,
                    recipient: .user(application.subjectID)))
            }
            expired.append(application)
        }
        return (expired, events)
    }

    // MARK: Checks

    /// The decision the caller makes on an item: approval or consent.
    enum DecidingPart { case approval, consent }

    /// The shared checks of accept and refuse; returns which decision the caller makes.
    static func decidingPart(
        _ context: ApplicationContext, message: String, limits: AppLimits, now: Timestamp
    ) throws -> DecidingPart {
        let application = context.application
        let roles = relations(of: application, in: context.group, for: context.op)
        try checkVisible(context, roles: roles)
        try checkPending(application, now: now)
        try FieldValidation.checkBytes(message, field: "message", limit: limits.applicationMessageBytes)
        if roles.contains(.invitee), application.consent.state == .pending { return .consent }
        if application.needsApproval {
            let allowed = authorize(.handleApplication, in: context.group, by: context.op)
            if allowed.isAllowed {
                if application.approval.state == .pending { return .approval }
                throw GroupError.applicationAlreadyHandled(
                    application, state: .accepted, by: application.approval.decidedBy)
            }
            if !roles.contains(.invitee), let error = allowed.error, context.op.membership != nil { throw error }
        }
        // The backend answers for an invitee whose consent is the only decision left.
        if context.op.isBackend, application.consent.state == .pending, application.inviteeAsked { return .consent }
        throw GroupError(code: .permissionDenied, reason: .permissionDenied,
                         message: "only an approver or the invitee may decide on application \(application.id)")
    }

    /// `APPLICATION_NOT_FOUND` unless the caller has a relation to the item, is a member of its
    /// group, or is the backend.
    static func checkVisible(_ context: ApplicationContext, roles: Set<ApplicationRole>) throws {
        if roles.isEmpty, !context.op.isBackend, context.op.membership == nil {
            throw GroupError.applicationNotFound(context.application.id)
        }
    }

    /// `APPLICATION_EXPIRED` or `APPLICATION_ALREADY_HANDLED` unless the item is pending at `now`.
    static func checkPending(_ application: Application, now: Timestamp) throws {
        switch application.state(at: now) {
        case .pending: return
        case .expired: throw GroupError.applicationExpired(application)
        case let state: throw GroupError.applicationAlreadyHandled(application, state: state, by: application.handledBy)
        }
    }
}
