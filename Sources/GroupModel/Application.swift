/// Whether an item is a join application or an invitation (the API's `ApplicationKind`).
public enum ApplicationKind: String, Sendable, Hashable, CaseIterable {
    /// A user applied to join (JoinGroup on an approval group).
    case join
    /// A member invited a user, and the invitee's consent and/or an approver's decision is needed.
    case invitation
}

/// The state of an application or invitation (the API's `ApplicationState`).
public enum ApplicationState: String, Sendable, Hashable, CaseIterable {
    /// Waiting for a decision.
    case pending
    /// Every needed decision was yes (the user joined, or already was a member).
    case accepted
    /// An approver or the invitee said no.
    case refused
    /// Passed its expiry while pending.
    case expired
    /// Withdrawn by its sender while pending.
    case withdrawn
}

/// The state of one decision an item needs: an approver's, or the invitee's consent.
public enum DecisionState: String, Sendable, Hashable, CaseIterable {
    /// The decision is not needed.
    case notNeeded = "none"
    /// Needed and not made yet.
    case pending
    /// Made: yes.
    case accepted
    /// Made: no.
    case refused
}

/// A caller's relation to an item (the API's `ApplicationRole`).
public enum ApplicationRole: String, Sendable, Hashable, CaseIterable {
    /// The caller approves or refuses it (owner, or owner and admins; the backend).
    case approver
    /// The caller is the invitee whose consent is asked.
    case invitee
    /// The caller sent it (applicant or inviter).
    case sender
}

/// Whether an item was handled, from a caller's point of view (Tencent `handleStatus`).
public enum HandleStatus: String, Sendable, Hashable, CaseIterable {
    /// Nobody handled it (pending, or expired).
    case notHandled = "not_handled"
    /// The caller made the decision that counts for them (or withdrew it).
    case handledBySelf = "handled_by_self"
    /// Someone else did: another approver, or the other party.
    case handledByOther = "handled_by_other"
}

/// One decision of an item: an approver's or the invitee's.
public struct ApplicationDecision: Sendable, Hashable {
    /// Needed, made, or not needed.
    public var state: DecisionState
    /// Who decided (`nil` while pending, or when the backend decided).
    public var decidedBy: String?
    /// The message left with the decision (≤ ``AppLimits/applicationMessageBytes``).
    public var message: String
    /// When it was decided.
    public var decidedAt: Timestamp?

    /// Create a decision.
    public init(state: DecisionState, decidedBy: String? = nil, message: String = "", decidedAt: Timestamp? = nil) {
        self.state = state
        self.decidedBy = decidedBy
        self.message = message
        self.decidedAt = decidedAt
    }

    /// A decision that is not needed.
    public static let notNeeded = ApplicationDecision(state: .notNeeded)
    /// A needed decision not made yet.
    public static let pending = ApplicationDecision(state: .pending)

    /// `.pending` when `needed`, else `.notNeeded`.
    public static func needed(_ needed: Bool) -> ApplicationDecision { needed ? .pending : .notNeeded }
}

/// A join application or an invitation (Tencent pendency item, ZIM `ZIMGroupApplicationInfo`).
///
/// A join application needs an approver's decision; an invitation needs the invitee's consent,
/// an approver's decision, or both (approval first). The item is accepted, and the user joins,
/// once every needed decision is yes; one no refuses it.
public struct Application: Sendable, Hashable, Identifiable {
    /// Server-generated id, unique within the app.
    public var id: String
    /// The app.
    public var appID: String
    /// The group applied to or invited into.
    public var groupID: String
    /// Join application or invitation.
    public var kind: ApplicationKind
    /// The state as stored; see ``state(at:)`` for the state a reader sees.
    public var storedState: ApplicationState
    /// The applicant (join) or the inviter (invitation).
    public var senderID: String
    /// The user who joins when it is accepted: the applicant (join) or the invitee (invitation).
    public var subjectID: String
    /// The applicant's or inviter's message (≤ ``AppLimits/applicationMessageBytes``).
    public var message: String
    /// When it was first sent; a repeated request keeps it (the listing's order).
    public var createdAt: Timestamp
    /// When it last changed (refreshed, decided).
    public var updatedAt: Timestamp
    /// When it expires if still pending.
    public var expiresAt: Timestamp
    /// The approver's decision (not needed for invitations that need only consent).
    public var approval: ApplicationDecision
    /// The invitee's consent (never needed for join applications).
    public var consent: ApplicationDecision
    /// Who made the decision that ended it, or withdrew it (`nil`: pending, expired, or the backend).
    public var handledBy: String?
    /// The message of that final decision.
    public var handleMessage: String
    /// When it left the pending state.
    public var handledAt: Timestamp?
    /// The invite link a join application was filed through (`JoinByInviteLink`), if any: the
    /// applicant, once accepted, joins with ``JoinSource/inviteLink`` and this link.
    public var inviteLinkID: String?

    /// Create an item.
    public init(
        id: String, appID: String, groupID: String, kind: ApplicationKind, storedState: ApplicationState = .pending,
        senderID: String, subjectID: String, message: String, createdAt: Timestamp, updatedAt: Timestamp,
        expiresAt: Timestamp, approval: ApplicationDecision, consent: ApplicationDecision,
        handledBy: String? = nil, handleMessage: String = "", handledAt: Timestamp? = nil
    ) {
        self.id = id
        self.appID = appID
        self.groupID = groupID
        self.kind = kind
        self.storedState = storedState
        self.senderID = senderID
        self.subjectID = subjectID
        self.message = message
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.expiresAt = expiresAt
        self.approval = approval
        self.consent = consent
        self.handledBy = handledBy
        self.handleMessage = handleMessage
        self.handledAt = handledAt
    }

    /// The state a reader sees at `now`: a pending item whose expiry passed is `expired`, whether
    /// or not the store has marked it yet.
    public func state(at now: Timestamp) -> ApplicationState {
        if self.storedState == .pending, self.expiresAt <= now { return .expired }
        return self.storedState
    }

    /// Whether an approver's decision is needed.
    public var needsApproval: Bool { self.approval.state != .notNeeded }
    /// Whether the invitee's consent is needed.
    public var needsConsent: Bool { self.consent.state != .notNeeded }
    /// The applicant of a join application.
    public var applicantID: String? { self.kind == .join ? self.senderID : nil }
    /// The inviter of an invitation.
    public var inviterID: String? { self.kind == .invitation ? self.senderID : nil }
    /// The invitee of an invitation.
    public var inviteeID: String? { self.kind == .invitation ? self.subjectID : nil }
    /// Whether the invitee has been asked: consent is needed and no approval is outstanding or
    /// refused (with approval and consent, the invitee is asked once an approver said yes).
    public var inviteeAsked: Bool {
        self.needsConsent && (self.approval.state == .notNeeded || self.approval.state == .accepted)
    }
}

/// Application ids: `ap` and 20 base-36 characters from the system's random source (about 103
/// bits), so ids do not reveal how many items an app has.
public enum ApplicationID {
    /// A fresh id: `ap` and 20 characters of `[0-9a-z]`, uniformly random. Each 64-bit draw
    /// gives 12 base-36 digits (draws at or above the largest multiple of 36^12 are drawn again,
    /// so no digit is favoured).
    public static func make() -> String {
        var generator = SystemRandomNumberGenerator()
        let block: UInt64 = 4_738_381_338_321_616_896  // 36^12
        var text = "ap"
        var left = 20
        while left > 0 {
            var draw = generator.next() as UInt64
            guard draw < block * 3 else { continue }
            draw %= block
            for _ in 0..<min(12, left) {
                text.unicodeScalars.append(Unicode.Scalar(alphabet[Int(draw % 36)]))
                draw /= 36
                left -= 1
            }
        }
        return text
    }

    private static let alphabet = Array("0123456789abcdefghijklmnopqrstuvwxyz".utf8)
}

extension GroupError.Reason {
    /// No such application visible to the caller.
    public static let applicationNotFound: Self = "APPLICATION_NOT_FOUND"
    /// The item passed its expiry.
    public static let applicationExpired: Self = "APPLICATION_EXPIRED"
}

extension GroupError {
    /// `NOT_FOUND` / `APPLICATION_NOT_FOUND`.
    public static func applicationNotFound(_ id: String) -> Self {
        Self(code: .notFound, reason: .applicationNotFound, message: "application \(id) not found",
             metadata: ["application_id": id])
    }

    /// `FAILED_PRECONDITION` / `APPLICATION_EXPIRED`.
    public static func applicationExpired(_ application: Application) -> Self {
        Self(code: .failedPrecondition, reason: .applicationExpired,
             message: "application \(application.id) expired",
             metadata: ["application_id": application.id,
                        "expire_time": String(application.expiresAt.millisecondsSince1970)])
    }

    /// `FAILED_PRECONDITION` / `APPLICATION_ALREADY_HANDLED`, with the state and who handled it.
    public static func applicationAlreadyHandled(_ application: Application, state: ApplicationState, by: String?) -> Self {
        let who = by ?? ""
        return Self(code: .failedPrecondition, reason: .applicationAlreadyHandled,
                    message: "application \(application.id) was already handled (\(state.rawValue)"
                        + (who.isEmpty ? ")" : " by \(who))"),
                    metadata: ["application_id": application.id, "state": state.rawValue, "handled_by": who])
    }
}
