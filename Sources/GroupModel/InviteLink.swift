/// An invite link of a group: a secret token (kept only as its hash) that lets whoever holds it
/// join, or apply to join, until it expires, is used up or is revoked.
public struct InviteLink: Sendable, Hashable {
    /// The link's id: not secret (listings, events, ``Member/inviteLinkID``).
    public var id: String
    /// The app.
    public var appID: String
    /// The group.
    public var groupID: String
    /// The SHA-256 of the token, in lowercase hex (the token itself is never stored).
    public var tokenHash: String
    /// Who created it (`nil`: the app's backend).
    public var createdBy: String?
    /// When it was created.
    public var createdAt: Timestamp
    /// When it stops working (`nil`: never).
    public var expiresAt: Timestamp?
    /// How many uses it allows (0: unlimited). A join and a join application each use it once.
    public var maxUses: Int
    /// How many times it was used.
    public var useCount: Int
    /// Whether a join through it files an application for the approvers instead of joining.
    public var requiresApproval: Bool
    /// When it was revoked (`nil`: not revoked).
    public var revokedAt: Timestamp?
    /// Who revoked it (`nil`: the app's backend, or not revoked).
    public var revokedBy: String?

    /// Create a link.
    public init(
        id: String, appID: String, groupID: String, tokenHash: String, createdBy: String?, createdAt: Timestamp,
        expiresAt: Timestamp?, maxUses: Int, useCount: Int = 0, requiresApproval: Bool, revokedAt: Timestamp? = nil,
        revokedBy: String? = nil
    ) {
        self.id = id
        self.appID = appID
        self.groupID = groupID
        self.tokenHash = tokenHash
        self.createdBy = createdBy
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.maxUses = maxUses
        self.useCount = useCount
        self.requiresApproval = requiresApproval
        self.revokedAt = revokedAt
        self.revokedBy = revokedBy
    }

    /// A link's state at a time.
    public enum State: String, Sendable, Hashable {
        /// It works.
        case live
        /// Revoked.
        case revoked
        /// Past its expiry.
        case expired
        /// Used as many times as it allows.
        case usedUp = "used_up"
    }

    /// The state at `now` (revoked before expired before used up).
    public func state(at now: Timestamp) -> State {
        if revokedAt != nil { return .revoked }
        if let expiresAt, expiresAt <= now { return .expired }
        if maxUses > 0, useCount >= maxUses { return .usedUp }
        return .live
    }
}

/// What `CreateInviteLink` asks for.
public struct InviteLinkRequest: Sendable, Hashable {
    /// Seconds until the link expires (0: never).
    public var expirySeconds: Int64
    /// Uses allowed (0: unlimited).
    public var maxUses: Int
    /// Whether joining through it needs an approver.
    public var requiresApproval: Bool

    /// Create a request.
    public init(expirySeconds: Int64 = 0, maxUses: Int = 0, requiresApproval: Bool = false) {
        self.expirySeconds = expirySeconds
        self.maxUses = maxUses
        self.requiresApproval = requiresApproval
    }
}

extension GroupError.Reason {
    /// No invite link with this token (or id) in the app (or the group).
    public static let inviteLinkNotFound: Self = "INVITE_LINK_NOT_FOUND"
    /// The invite link was revoked.
    public static let inviteLinkRevoked: Self = "INVITE_LINK_REVOKED"
    /// The invite link is past its expiry.
    public static let inviteLinkExpired: Self = "INVITE_LINK_EXPIRED"
    /// The invite link was used as many times as it allows.
    public static let inviteLinkUsedUp: Self = "INVITE_LINK_USED_UP"
    /// The group already has as many live invite links as the app allows.
    public static let inviteLinksFull: Self = "INVITE_LINKS_FULL"
    /// The group's type has no invite links (AVChatRoom: anyone joins freely).
    public static let inviteLinkNotSupported: Self = "INVITE_LINK_NOT_SUPPORTED"
}

extension GroupRules {
    /// Check a `CreateInviteLink` call and plan it: the link to store and `INVITE_LINK_CREATED` to
    /// the approvers (`changes`: `link_id`, `max_uses`, `requires_approval`, `expires_at` in ms
    /// when it expires).
    ///
    /// - Who: ``GroupSettings/inviteLinkPermission`` (`PERMISSION_DENIED` naming
    ///   `invite_link_scope`), the backend; not in an AVChatRoom (`INVITE_LINK_NOT_SUPPORTED`).
    /// - `liveLinks` at or above ``AppLimits/maxInviteLinksPerGroup``: `FAILED_PRECONDITION` /
    ///   `INVITE_LINKS_FULL`.
    /// - `INVALID_ARGUMENT` naming `expire_seconds` or `max_uses` when negative.
    public static func planCreateInviteLink(
        _ request: InviteLinkRequest, in group: Group, by op: GroupOperator, liveLinks: Int, limits: AppLimits,
        now: Timestamp, id: String, tokenHash: String
    ) throws -> (link: InviteLink, events: [GroupEvent.Draft]) {
        try authorize(.manageInviteLinks, in: group, by: op).get()
        if request.expirySeconds < 0 {
            throw GroupError.invalidArgument(field: "expire_seconds", "expire_seconds must not be negative")
        }
        if request.maxUses < 0 { throw GroupError.invalidArgument(field: "max_uses", "max_uses must not be negative") }
        if liveLinks >= limits.maxInviteLinksPerGroup {
            throw GroupError(
                code: .failedPrecondition, reason: .inviteLinksFull,
                message: "the group has \(liveLinks) live invite links; at most \(limits.maxInviteLinksPerGroup)",
                metadata: ["limit_name": "max_invite_links_per_group", "limit": String(limits.maxInviteLinksPerGroup)])
        }
        let link = InviteLink(
            id: id, appID: group.appID, groupID: group.id, tokenHash: tokenHash, createdBy: op.userID, createdAt: now,
            expiresAt: request.expirySeconds > 0 ? now.adding(seconds: request.expirySeconds) : nil,
            maxUses: request.maxUses, requiresApproval: request.requiresApproval)
        return (link, [GroupEvent.Draft(
            kind: .inviteLinkCreated, operatorID: op.userID, changes: linkChanges(link), recipient: .approvers)])
    }

    /// Check a `RevokeInviteLink` call and plan it: the link marked revoked and
    /// `INVITE_LINK_REVOKED` to the approvers. Who: as creation. `link` is the group's link with
    /// the requested id (`nil`: `NOT_FOUND` / `INVITE_LINK_NOT_FOUND` naming `link_id`); one
    /// revoked already: `FAILED_PRECONDITION` / `INVITE_LINK_REVOKED`. An expired or used-up
    /// link may be revoked.
    public static func planRevokeInviteLink(
        _ link: InviteLink?, linkID: String, in group: Group, by op: GroupOperator, now: Timestamp
    ) throws -> (link: InviteLink, events: [GroupEvent.Draft]) {
        try authorize(.manageInviteLinks, in: group, by: op).get()
        guard var link, link.groupID == group.id else { throw inviteLinkNotFound(field: "link_id") }
        if link.revokedAt != nil { throw inviteLinkUnusable(.revoked) }
        link.revokedAt = now
        link.revokedBy = op.userID
        return (link, [GroupEvent.Draft(
            kind: .inviteLinkRevoked, operatorID: op.userID, changes: linkChanges(link), recipient: .approvers)])
    }

    /// The link a `JoinByInviteLink` token found, if it works at `now`.
    /// - Throws: `NOT_FOUND` / `INVITE_LINK_NOT_FOUND` naming `token` (`nil`);
    ///   `FAILED_PRECONDITION` with `INVITE_LINK_REVOKED`, `INVITE_LINK_EXPIRED` or
    ///   `INVITE_LINK_USED_UP`.
    public static func checkInviteLink(_ link: InviteLink?, now: Timestamp) throws -> InviteLink {
        guard let link else { throw inviteLinkNotFound(field: "token") }
        let state = link.state(at: now)
        if state != .live { throw inviteLinkUnusable(state) }
        return link
    }

    static func linkChanges(_ link: InviteLink) -> [String: String] {
        var changes = [
            "link_id": link.id, "max_uses": String(link.maxUses), "requires_approval": String(link.requiresApproval),
            "use_count": String(link.useCount),
        ]
        if let expiresAt = link.expiresAt { changes["expires_at"] = String(expiresAt.millisecondsSince1970) }
        return changes
    }

    static func inviteLinkNotFound(field: String) -> GroupError {
        GroupError(code: .notFound, reason: .inviteLinkNotFound, message: "no such invite link", metadata: ["field": field])
    }

    static func inviteLinkUnusable(_ state: InviteLink.State) -> GroupError {
        switch state {
        case .revoked:
            GroupError(code: .failedPrecondition, reason: .inviteLinkRevoked, message: "the invite link was revoked")
        case .expired:
            GroupError(code: .failedPrecondition, reason: .inviteLinkExpired, message: "the invite link has expired")
        case .usedUp, .live:
            GroupError(code: .failedPrecondition, reason: .inviteLinkUsedUp,
                       message: "the invite link was used as many times as it allows")
        }
    }
}
