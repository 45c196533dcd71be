/// An error of the group domain: a broad ``Code``, a stable ``Reason``, a human-readable message
/// and machine-readable metadata (for example the offending `field` and its `limit`).
///
/// The service layer maps ``Code`` to a gRPC status and ``reason`` / ``metadata`` to a
/// `google.rpc.ErrorInfo`; nothing in this module knows about gRPC.
public struct GroupError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The broad class of the error, mirroring the canonical gRPC codes without depending on gRPC.
    ///
    /// A struct over a private enum so that cases can be added without breaking callers that
    /// `switch` on it (they compare with `==` instead).
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Wrapped: String, Sendable, Hashable {
            case cancelled, unknown, invalidArgument, deadlineExceeded, notFound, alreadyExists
            case permissionDenied, resourceExhausted, failedPrecondition, aborted, outOfRange
            case unimplemented, `internal`, unavailable, dataLoss, unauthenticated
        }

        private let wrapped: Wrapped
        private init(_ wrapped: Wrapped) { self.wrapped = wrapped }

        /// The name of the code in lowerCamelCase, e.g. `invalidArgument`.
        public var description: String { self.wrapped.rawValue }

        /// The operation was cancelled by its caller.
        public static let cancelled = Self(.cancelled)
        /// An error with no better class.
        public static let unknown = Self(.unknown)
        /// The request is wrong in itself (a field too long, a malformed id); nothing was changed.
        public static let invalidArgument = Self(.invalidArgument)
        /// The deadline passed before the operation finished.
        public static let deadlineExceeded = Self(.deadlineExceeded)
        /// The group (or member, event…) does not exist, or the caller may not know it exists.
        public static let notFound = Self(.notFound)
        /// The thing to create exists already (a group id, a membership).
        public static let alreadyExists = Self(.alreadyExists)
        /// The caller is known but its role does not allow the operation.
        public static let permissionDenied = Self(.permissionDenied)
        /// A quota or limit is exhausted (rate limits, joined-group limits).
        public static let resourceExhausted = Self(.resourceExhausted)
        /// The group is not in a state, or not of a type, that allows the operation.
        public static let failedPrecondition = Self(.failedPrecondition)
        /// A concurrent change made the operation fail; retrying may succeed.
        public static let aborted = Self(.aborted)
        /// A cursor or sequence is outside the range that is kept.
        public static let outOfRange = Self(.outOfRange)
        /// The operation is not implemented.
        public static let unimplemented = Self(.unimplemented)
        /// An invariant of groupd itself broke; a bug or a storage failure.
        public static let `internal` = Self(.internal)
        /// The service cannot serve now (shutting down, storage unavailable).
        public static let unavailable = Self(.unavailable)
        /// Data was lost or corrupted.
        public static let dataLoss = Self(.dataLoss)
        /// The caller could not be authenticated (missing or bad token).
        public static let unauthenticated = Self(.unauthenticated)
    }

    /// A stable, UPPER_SNAKE reason that clients may switch on (`GROUP_ID_TAKEN`, `GROUP_FULL`…).
    ///
    /// Other modules add their own with `GroupError.Reason("MY_REASON")` or a `static let`.
    public struct Reason: RawRepresentable, Sendable, Hashable, CustomStringConvertible,
        ExpressibleByStringLiteral
    {
        /// The UPPER_SNAKE text of the reason.
        public let rawValue: String

        /// Create a reason from its UPPER_SNAKE text.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// Create a reason from its UPPER_SNAKE text.
        public init(_ rawValue: String) { self.rawValue = rawValue }
        /// Create a reason from a string literal.
        public init(stringLiteral value: String) { self.rawValue = value }

        /// The UPPER_SNAKE text of the reason.
        public var description: String { self.rawValue }

        /// Input violates a documented rule; `metadata["field"]` names the field.
        public static let invalidArgument: Self = "INVALID_ARGUMENT"
        /// The group id is already used in this app (including by a dismissed group not yet purged).
        public static let groupIDTaken: Self = "GROUP_ID_TAKEN"
        /// No such group in this app, or the caller may not see it.
        public static let groupNotFound: Self = "GROUP_NOT_FOUND"
        /// The caller's role does not allow the operation.
        public static let permissionDenied: Self = "PERMISSION_DENIED"
        /// Only the app's backend (an admin token without `x-operator-id`) may do this.
        public static let adminTokenRequired: Self = "ADMIN_TOKEN_REQUIRED"
        /// The caller is not a member of the group.
        public static let notAMember: Self = "NOT_A_MEMBER"
        /// The user is already a member of the group.
        public static let alreadyMember: Self = "ALREADY_MEMBER"
        /// The group's join option forbids joining.
        public static let joinForbidden: Self = "JOIN_FORBIDDEN"
        /// The setting is fixed by the group's type; `metadata["setting"]` names it.
        public static let settingFixedByType: Self = "SETTING_FIXED_BY_TYPE"
        /// The group has reached its maximum member count.
        public static let groupFull: Self = "GROUP_FULL"
        /// The group's type does not support removing members (AVChatRoom: mute instead).
        public static let kickNotSupported: Self = "KICK_NOT_SUPPORTED"
        /// The group's type does not support invitations.
        public static let inviteNotSupported: Self = "INVITE_NOT_SUPPORTED"
        /// The group's type does not support ownership transfer.
        public static let transferNotSupported: Self = "TRANSFER_NOT_SUPPORTED"
        /// The group's type does not have this role (admins in Work and AVChatRoom).
        public static let roleNotSupported: Self = "ROLE_NOT_SUPPORTED"
        /// The owner of this type of group may not quit (dismiss or transfer first).
        public static let ownerCannotQuit: Self = "OWNER_CANNOT_QUIT"
        /// The operation would act on the owner in a way no one may (kick, mute, demote).
        public static let targetIsOwner: Self = "TARGET_IS_OWNER"
        /// The operation needs a user: an admin token must name one with `x-operator-id`.
        public static let operatorRequired: Self = "OPERATOR_REQUIRED"
        /// The group is muted for the caller.
        public static let groupMuted: Self = "GROUP_MUTED"
        /// The caller is muted in the group.
        public static let memberMuted: Self = "MEMBER_MUTED"
        /// The group's type keeps no message history (AVChatRoom).
        public static let historyNotKept: Self = "HISTORY_NOT_KEPT"
        /// The group's type has no topics (every type but Community).
        public static let topicsNotSupported: Self = "TOPICS_NOT_SUPPORTED"
        /// The operation acts on members, roles, settings or the group as a whole, and names a
        /// topic: it names the topic's community (`metadata["community_id"]`).
        public static let notAllowedOnTopic: Self = "NOT_ALLOWED_ON_TOPIC"
        /// The community has the app's maximum of topics (`metadata["limit"]`).
        public static let tooManyTopics: Self = "TOO_MANY_TOPICS"
        /// The group's type has no permission groups (every type but Community).
        public static let permissionGroupsNotSupported: Self = "PERMISSION_GROUPS_NOT_SUPPORTED"
        /// The community has no permission group with this id (`metadata["field"]`).
        public static let permissionGroupNotFound: Self = "PERMISSION_GROUP_NOT_FOUND"
        /// The community has the app's maximum of permission groups (`metadata["limit"]`).
        public static let tooManyPermissionGroups: Self = "TOO_MANY_PERMISSION_GROUPS"
        /// A member is in the app's maximum of permission groups of one community
        /// (`metadata["limit"]`, `metadata["user_id"]`).
        public static let tooManyPermissionGroupsPerMember: Self = "TOO_MANY_PERMISSION_GROUPS_PER_MEMBER"
        /// No stored message with this sequence that the caller may read.
        public static let messageNotFound: Self = "MESSAGE_NOT_FOUND"
        /// A reaction to a recalled message (a tombstone has no reactions).
        public static let messageRecalled: Self = "MESSAGE_RECALLED"
        /// A reaction key that is empty, too long or holds a character keys may not hold.
        public static let invalidReactionKey: Self = "INVALID_REACTION_KEY"
        /// The message has the app's limit of distinct reaction keys.
        public static let tooManyReactionKeys: Self = "TOO_MANY_REACTION_KEYS"
        /// The message, or the caller on it, has the app's limit of reactions.
        public static let tooManyReactions: Self = "TOO_MANY_REACTIONS"
        /// The message is pinned already.
        public static let messageAlreadyPinned: Self = "MESSAGE_ALREADY_PINNED"
        /// The message is not pinned.
        public static let messageNotPinned: Self = "MESSAGE_NOT_PINNED"
        /// The group holds the app's maximum of pinned messages.
        public static let tooManyPinnedMessages: Self = "TOO_MANY_PINNED_MESSAGES"
        /// The group has no per-message read receipts (its type, or its size).
        public static let readReceiptsNotSupported: Self = "READ_RECEIPTS_NOT_SUPPORTED"
        /// The group's type keeps no member list to sync or search (AVChatRoom: the audience is
        /// not stored).
        public static let membersNotStored: Self = "MEMBERS_NOT_STORED"
        /// A join application or invitation was handled already.
        public static let applicationAlreadyHandled: Self = "APPLICATION_ALREADY_HANDLED"
        /// The user has joined as many groups as the app allows.
        public static let tooManyGroups: Self = "TOO_MANY_GROUPS"
        /// The bearer token is absent.
        public static let tokenMissing: Self = "TOKEN_MISSING"
        /// The bearer token is not a well-formed HS256 JWT.
        public static let tokenMalformed: Self = "TOKEN_MALFORMED"
        /// The token's signature does not match any of the app's secrets.
        public static let tokenBadSignature: Self = "TOKEN_BAD_SIGNATURE"
        /// The token's `kid` names no secret of the app (for example a removed one).
        public static let unknownKeyID: Self = "UNKNOWN_KID"
        /// The token's `exp` has passed.
        public static let tokenExpired: Self = "TOKEN_EXPIRED"
        /// The token's `nbf` is in the future.
        public static let tokenNotYetValid: Self = "TOKEN_NOT_YET_VALID"
        /// The token's `app` names no configured app.
        public static let unknownApp: Self = "UNKNOWN_APP"
        /// A required claim is absent; `metadata["claim"]` names it.
        public static let claimMissing: Self = "CLAIM_MISSING"
        /// The token's `role` is neither `user` nor `admin`.
        public static let badRole: Self = "BAD_ROLE"
        /// `x-operator-id` was sent with a user token (only admin tokens may act for someone).
        public static let operatorOverrideForbidden: Self = "OPERATOR_OVERRIDE_FORBIDDEN"
        /// The message was recalled already.
        public static let messageAlreadyRecalled: Self = "MESSAGE_ALREADY_RECALLED"
        /// A sender's own recall came after the app's recall window.
        public static let recallWindowPassed: Self = "RECALL_WINDOW_PASSED"
        /// A sender's own edit came after the app's edit window.
        public static let editWindowPassed: Self = "EDIT_WINDOW_PASSED"
        /// The group's slow mode interval has not passed since the sender's previous message;
        /// `metadata["retry_delay_ms"]` says how long to wait.
        public static let slowMode: Self = "SLOW_MODE"
        /// A storage or invariant failure inside groupd.
        public static let `internal`: Self = "INTERNAL"
    }

    /// The broad class of the error.
    public var code: Code
    /// The stable reason clients switch on.
    public var reason: Reason
    /// A human-readable explanation, in English, for logs and developers.
    public var message: String
    /// Machine-readable details, e.g. `["field": "name", "limit": "30"]`.
    public var metadata: [String: String]
    /// The underlying error, for logs (a storage error, say); not part of equality and never sent
    /// to clients.
    public var cause: (any Error)?

    /// Create an error.
    /// - Parameters:
    ///   - code: The broad class of the error.
    ///   - reason: The stable UPPER_SNAKE reason.
    ///   - message: A human-readable explanation.
    ///   - metadata: Machine-readable details.
    ///   - cause: The underlying error, if any.
    public init(
        code: Code, reason: Reason, message: String, metadata: [String: String] = [:], cause: (any Error)? = nil
    ) {
        self.code = code
        self.reason = reason
        self.message = message
        self.metadata = metadata
        self.cause = cause
    }

    /// Equal when code, reason, message and metadata are equal (the cause is ignored).
    public static func == (lhs: GroupError, rhs: GroupError) -> Bool {
        lhs.code == rhs.code && lhs.reason == rhs.reason && lhs.message == rhs.message
            && lhs.metadata == rhs.metadata
    }

    /// Hashes code, reason, message and metadata.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.code)
        hasher.combine(self.reason)
        hasher.combine(self.message)
        hasher.combine(self.metadata)
    }

    /// `code/REASON: message [key=value, …]`, for logs.
    public var description: String {
        var text = "\(self.code)/\(self.reason): \(self.message)"
        if !self.metadata.isEmpty {
            let pairs = self.metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            text += " [" + pairs.joined(separator: ", ") + "]"
        }
        return text
    }
}

extension GroupError {
    /// `INVALID_ARGUMENT` naming the offending field and, where there is one, the limit.
    /// - Parameters:
    ///   - field: The request field, in snake_case as in the API (`name`, `members[2].user_id`).
    ///   - message: What is wrong and what was expected.
    ///   - limit: The limit that was exceeded, if any (bytes, count).
    public static func invalidArgument(field: String, _ message: String, limit: Int? = nil) -> Self {
        var metadata = ["field": field]
        if let limit { metadata["limit"] = String(limit) }
        return Self(code: .invalidArgument, reason: .invalidArgument, message: message, metadata: metadata)
    }

    /// `NOT_FOUND` / `GROUP_NOT_FOUND` for a group id.
    public static func groupNotFound(_ groupID: String) -> Self {
        Self(code: .notFound, reason: .groupNotFound, message: "group \(groupID) not found",
             metadata: ["group_id": groupID])
    }

    /// `ALREADY_EXISTS` / `GROUP_ID_TAKEN` for a group id.
    public static func groupIDTaken(_ groupID: String) -> Self {
        Self(code: .alreadyExists, reason: .groupIDTaken, message: "group id \(groupID) is already in use",
             metadata: ["group_id": groupID])
    }

    /// `INTERNAL` with a message, for broken invariants and storage failures.
    public static func `internal`(_ message: String, cause: (any Error)? = nil) -> Self {
        Self(code: .internal, reason: .internal, message: message, cause: cause)
    }
}
