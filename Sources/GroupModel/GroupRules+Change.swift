/// Who performs an operation on a group: a user (with their membership, if any) or the app's
/// backend.
///
/// An admin token without `x-operator-id` is ``backend``; an admin token with `x-operator-id`, or a
/// user token, is ``user(_:membership:)`` and that user's role applies.
public struct GroupOperator: Sendable, Hashable, CustomStringConvertible {
    /// The acting user, or `nil` for the app's backend.
    public var userID: String?
    /// The acting user's membership in the group (`nil`: not a member, or the backend).
    public var membership: Member?

    /// Create an operator. Prefer ``backend`` and ``user(_:membership:)``.
    public init(userID: String?, membership: Member?) {
        self.userID = userID
        self.membership = userID == nil ? nil : membership
    }

    /// The app's backend (admin token without `x-operator-id`).
    public static let backend = GroupOperator(userID: nil, membership: nil)

    /// A user, with their membership in the group (`nil`: not a member).
    public static func user(_ userID: String, membership: Member?) -> GroupOperator {
        GroupOperator(userID: userID, membership: membership)
    }

    /// The role the operator acts with (the permission function's input).
    public var role: ActingRole {
        ActingRole(isBackend: self.userID == nil, role: self.membership?.role)
    }

    /// Whether this is the app's backend.
    public var isBackend: Bool { self.userID == nil }

    /// `backend` or `user:role`.
    public var description: String {
        guard let userID else { return "backend" }
        return "\(userID):\(self.role)"
    }
}

/// Options for leaving a group, by quitting or being removed (RongCloud `RCQuitGroupConfig`).
public struct QuitOptions: Sendable, Hashable {
    /// Keep the member's mute: it applies again if the user rejoins before it ends. Default
    /// `false`: leaving clears it (RongCloud's default `removeMuteStatus = YES`).
    public var keepMuteStatus: Bool

    /// Create options; by default leaving clears the mute.
    public init(keepMuteStatus: Bool = false) {
        self.keepMuteStatus = keepMuteStatus
    }
}

/// Everything a store writes, in one transaction, for one operation on an existing group: the
/// group row after the change, member rows inserted, updated and deleted, and the events.
///
/// A plan whose ``isEmpty`` is true changed nothing: the store writes nothing and appends no event
/// (for example a profile update that sets every field to the value it already had).
///
/// For a type whose membership is not stored (AVChatRoom, ``GroupTypeBehaviour/membershipStored``),
/// the member rows and the member count describe the audience the node keeps in memory; only the
/// owner's row and the group row are durable. Member-change tips (`MEMBER_JOINED`…) are always
/// planned; delivery suppresses or rate-limits them per ``GroupTypeBehaviour/memberChangeEvents``.
public struct GroupChange: Sendable, Hashable {
    /// The group after the change: profile, settings, owner, mute, `memberCount` (stored members
    /// after the change) and `updatedAt` (moved only when the profile or settings changed).
    public var group: Group
    /// Members to insert. `joinOrder` is 0: the store assigns it from its per-group counter, in
    /// this order. `joinSequence` is the group's latest sequence before the change.
    public var insertedMembers: [Member]
    /// Existing members whose row changes (role, name card, custom fields, mute, receive option),
    /// as they are after the change.
    public var updatedMembers: [Member]
    /// Users whose member rows (and member custom fields) are deleted.
    public var removedMembers: [String]
    /// Mutes that outlive a membership (``QuitOptions/keepMuteStatus``): user → mute end. The store
    /// keeps them and passes them back when the user rejoins.
    public var retainedMutes: [String: Timestamp]
    /// Whether the group is dismissed by this change (its last member left).
    public var dismissesGroup: Bool
    /// The events to append, in order.
    public var events: [GroupEvent.Draft]
    /// Bans to store (a running ban of the same user is replaced).
    public var bans: [GroupBan] = []
    /// Users whose bans are lifted.
    public var liftedBans: [String] = []

    /// Create a change; everything but the group defaults to "nothing".
    public init(
        group: Group, insertedMembers: [Member] = [], updatedMembers: [Member] = [], removedMembers: [String] = [],
        retainedMutes: [String: Timestamp] = [:], dismissesGroup: Bool = false, events: [GroupEvent.Draft] = []
    ) {
        self.group = group
        self.insertedMembers = insertedMembers
        self.updatedMembers = updatedMembers
        self.removedMembers = removedMembers
        self.retainedMutes = retainedMutes
        self.dismissesGroup = dismissesGroup
        self.events = events
    }

    /// Nothing to write for `group`.
    public static func unchanged(_ group: Group) -> GroupChange { GroupChange(group: group) }

    /// Whether the change inserts, updates or removes member rows (then the group's
    /// ``Group/memberVersion`` moves by one).
    public var changesMembers: Bool {
        !self.insertedMembers.isEmpty || !self.updatedMembers.isEmpty || !self.removedMembers.isEmpty
    }

    /// Whether the group's record as a joined-group list shows it changed from `before`: anything
    /// but the counters (member count, latest sequence, member version), or a dismissal.
    public func changesListedGroup(from before: Group) -> Bool {
        if self.dismissesGroup { return true }
        var after = self.group
        after.memberCount = before.memberCount
        after.latestSequence = before.latestSequence
        after.memberVersion = before.memberVersion
        return after != before
    }

    /// Whether the operation changed nothing (no rows, no events).
    public var isEmpty: Bool {
        self.events.isEmpty && self.insertedMembers.isEmpty && self.updatedMembers.isEmpty
            && self.removedMembers.isEmpty && self.retainedMutes.isEmpty && !self.dismissesGroup
            && self.bans.isEmpty && self.liftedBans.isEmpty
    }

    /// The change with the members it removes taken off the group's mute bypass list (only
    /// members are on it).
    public func droppingLeaversFromMuteBypass() -> GroupChange {
        guard !removedMembers.isEmpty, !group.muteBypass.isEmpty else { return self }
        var change = self
        let gone = Set(removedMembers)
        change.group.muteBypass.removeAll { gone.contains($0) }
        return change
    }

    /// `user`'s membership after the change, given the one before it (`nil`: not a member, or
    /// no user).
    public func membership(of user: String?, before: Member?) -> Member? {
        guard let user, !removedMembers.contains(user) else { return nil }
        return insertedMembers.first { $0.userID == user } ?? updatedMembers.first { $0.userID == user } ?? before
    }
}

/// A pending invitation created by ``GroupRules/planInvitation(of:to:by:memberships:joinedGroupCounts:message:limits:now:retainedMutes:bans:)``:
/// the invitee's consent and/or an approver's decision is awaited (the application itself is
/// stored by the applications machinery).
public struct PendingInvitation: Sendable, Hashable {
    /// The invited user.
    public var inviteeID: String
    /// The inviter (`nil`: the app's backend).
    public var inviterID: String?
    /// An approver (per ``GroupSettings/joinApprovers``) must approve first (Tencent Public).
    public var needsApproval: Bool
    /// The invitee must accept (ZIM `beInviteMode` AUTH, RongCloud invitee verify).
    public var needsConsent: Bool
    /// The invitation message.
    public var message: String

    /// Create a pending invitation.
    public init(inviteeID: String, inviterID: String?, needsApproval: Bool, needsConsent: Bool, message: String) {
        self.inviteeID = inviteeID
        self.inviterID = inviterID
        self.needsApproval = needsApproval
        self.needsConsent = needsConsent
        self.message = message
    }
}

/// The outcome for one user of a batch operation (Tencent `TIMGroupMemberResult`; the API's
/// `MemberResultCode`).
public enum MemberOutcome: Sendable, Hashable {
    /// Done; the member record after the change.
    case success(Member)
    /// Invite: the user already is a member.
    case alreadyMember
    /// Kick, mute: the user is not a member.
    case notMember
    /// Refused for this user (`GROUP_FULL`, `TOO_MANY_GROUPS`, `PERMISSION_DENIED`,
    /// `TARGET_IS_OWNER`…).
    case failed(GroupError)
    /// The user id itself is invalid (empty, too long, listed twice, the operator themselves).
    case invalid(GroupError)
    /// An invitation awaits consent and/or approval.
    case pending(PendingInvitation)

    /// The reason, for `failed` and `invalid`.
    public var error: GroupError? {
        switch self {
        case .failed(let error), .invalid(let error): error
        default: nil
        }
    }

    /// Whether the outcome is `success`.
    public var isSuccess: Bool {
        if case .success = self { return true }
        return false
    }
}

/// One user's result in a batch operation.
public struct MemberResult: Sendable, Hashable {
    /// The user the result is about.
    public var userID: String
    /// The outcome.
    public var outcome: MemberOutcome

    /// Create a result.
    public init(userID: String, outcome: MemberOutcome) {
        self.userID = userID
        self.outcome = outcome
    }
}

/// A batch operation's plan: one result per requested user (in request order) and the change to
/// write for those that succeeded or are pending.
public struct MemberBatchPlan: Sendable, Hashable {
    /// One result per requested user, in request order.
    public var results: [MemberResult]
    /// What to write.
    public var change: GroupChange

    /// Create a batch plan.
    public init(results: [MemberResult], change: GroupChange) {
        self.results = results
        self.change = change
    }
}

extension GroupError.Reason {
    /// The user an operation targets is not a member of the group (transfer, set role, member info).
    public static let memberNotFound: Self = "MEMBER_NOT_FOUND"
}

extension GroupError {
    /// `NOT_FOUND` / `MEMBER_NOT_FOUND` for a target user who is not a member.
    public static func memberNotFound(_ userID: String, field: String) -> Self {
        Self(code: .notFound, reason: .memberNotFound, message: "\(userID) is not a member of the group",
             metadata: ["user_id": userID, "field": field])
    }

    /// `FAILED_PRECONDITION` / `GROUP_FULL`.
    static func groupFull(_ maxMembers: Int) -> Self {
        Self(code: .failedPrecondition, reason: .groupFull,
             message: "the group has reached its maximum of \(maxMembers) members",
             metadata: ["limit": String(maxMembers)])
    }

    /// `FAILED_PRECONDITION` / `TOO_MANY_GROUPS` (the API's documented code for this reason).
    static func tooManyGroups(_ userID: String, limit: Int) -> Self {
        Self(code: .failedPrecondition, reason: .tooManyGroups,
             message: "\(userID) is a member of \(limit) groups, the most this app allows",
             metadata: ["user_id": userID, "limit": String(limit)])
    }

    /// `INVALID_ARGUMENT` / `OPERATOR_REQUIRED`: "`what` needs a user", naming `x-operator-id`.
    public static func operatorRequired(_ what: String) -> Self {
        Self(code: .invalidArgument, reason: .operatorRequired,
             message: "\(what) needs a user: send x-operator-id with the admin token",
             metadata: ["field": "x-operator-id"])
    }
}

extension GroupRules {
    /// Whether membership of a group of `type` counts toward ``AppLimits/maxGroupsPerUser``
    /// (AVChatRoom rooms do not: they are not listed among joined groups).
    public static func countsTowardGroupLimit(_ type: GroupType) -> Bool {
        type.preset.behaviour.listedInJoinedGroups
    }

    /// Check a batch of user ids: size within `1...limits.maxUsersPerBatch`.
    static func checkBatch(_ userIDs: [String], field: String, limits: AppLimits) throws {
        if userIDs.isEmpty {
            throw GroupError.invalidArgument(field: field, "\(field) must name at least one user",
                                             limit: limits.maxUsersPerBatch)
        }
        if userIDs.count > limits.maxUsersPerBatch {
            throw GroupError.invalidArgument(
                field: field, "\(userIDs.count) users exceed the limit of \(limits.maxUsersPerBatch) per call",
                limit: limits.maxUsersPerBatch)
        }
    }

    /// The error for one user id of a batch that is malformed or repeated, or `nil` if it is fine.
    static func batchEntryError(
        _ userID: String, index: Int, field: String, seen: inout Set<String>, limits: AppLimits
    ) -> GroupError? {
        let entry = "\(field)[\(index)]"
        do {
            try FieldValidation.checkUserID(userID, field: entry, limit: limits.userIDBytes)
        } catch let error as GroupError {
            return error
        } catch {
            return GroupError.invalidArgument(field: entry, "invalid user id")
        }
        if !seen.insert(userID).inserted {
            return GroupError.invalidArgument(field: entry, "\(userID) is listed twice")
        }
        return nil
    }

    /// Text of a timestamp in event changes: milliseconds since the epoch, `0` for none.
    static func millisText(_ time: Timestamp?) -> String {
        String(time?.millisecondsSince1970 ?? 0)
    }
}
