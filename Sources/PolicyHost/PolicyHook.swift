import PolicyABI

/// A point in an RPC where per-app policy plugins are asked for a decision.
///
/// The raw value is the name used in configuration; ``abiValue`` is the number plugins see.
public enum PolicyHook: String, Sendable, Hashable, CaseIterable, Codable {
    /// Validate (and normalise) `custom.group.<key>` fields on write.
    case validateGroupCustom = "validate_group_custom"
    /// Validate (and normalise) `custom.member.<key>` fields on write.
    case validateMemberCustom = "validate_member_custom"
    /// Filter custom fields on read by the reader's role (``HookRequest/readerRole``).
    case filterCustomOnRead = "filter_custom_on_read"
    /// Before a group is created.
    case beforeCreateGroup = "before_create_group"
    /// Before a group's profile is updated.
    case beforeUpdateProfile = "before_update_profile"
    /// Before a user applies to join a group.
    case beforeApplyToJoin = "before_apply_to_join"
    /// Before users are invited (``HookRequest/users`` are the invitees).
    case beforeInvite = "before_invite"
    /// Before a member's info (name card, custom member fields) is set.
    case beforeSetMemberInfo = "before_set_member_info"
    /// Before a group message is sent (`message.text`, `message.payload`).
    case beforeSendGroupMessage = "before_send_group_message"
    /// After an event committed; never blocks the call and its decision is ignored.
    case afterEvent = "after_event"

    /// The hook's number in the C ABI (`groupd_hook`).
    public var abiValue: Int32 {
        switch self {
        case .validateGroupCustom: Int32(GROUPD_HOOK_VALIDATE_GROUP_CUSTOM.rawValue)
        case .validateMemberCustom: Int32(GROUPD_HOOK_VALIDATE_MEMBER_CUSTOM.rawValue)
        case .filterCustomOnRead: Int32(GROUPD_HOOK_FILTER_CUSTOM_ON_READ.rawValue)
        case .beforeCreateGroup: Int32(GROUPD_HOOK_BEFORE_CREATE_GROUP.rawValue)
        case .beforeUpdateProfile: Int32(GROUPD_HOOK_BEFORE_UPDATE_PROFILE.rawValue)
        case .beforeApplyToJoin: Int32(GROUPD_HOOK_BEFORE_APPLY_TO_JOIN.rawValue)
        case .beforeInvite: Int32(GROUPD_HOOK_BEFORE_INVITE.rawValue)
        case .beforeSetMemberInfo: Int32(GROUPD_HOOK_BEFORE_SET_MEMBER_INFO.rawValue)
        case .beforeSendGroupMessage: Int32(GROUPD_HOOK_BEFORE_SEND_GROUP_MESSAGE.rawValue)
        case .afterEvent: Int32(GROUPD_HOOK_AFTER_EVENT.rawValue)
        }
    }

    /// What happens when a plugin on this hook fails or runs out of time, unless configured:
    /// custom-field validation fails closed, everything else (moderation) fails open.
    public var defaultFailureMode: FailureMode {
        switch self {
        case .validateGroupCustom, .validateMemberCustom: .failClosed
        default: .failOpen
        }
    }
}

/// What the host does when a plugin fails, times out, or is tripped off by its circuit breaker.
public enum FailureMode: String, Sendable, Hashable, Codable {
    /// Stop the chain and answer ``HookOutcome/error(_:)``: the operation does not happen.
    case failClosed = "fail_closed"
    /// Skip this plugin and go on with the rest of the chain.
    case failOpen = "fail_open"
}

/// One named field of a request: `name`, `introduction`, `notification`, `face_url`,
/// `name_card`, `apply_message`, `message.text`, `message.payload`,
/// `custom.group.<key>`, `custom.member.<key>`.
public struct HookField: Sendable, Hashable {
    /// The field's name.
    public var key: String
    /// The field's value (UTF-8 text; binary payloads are passed as they are encoded on the wire).
    public var value: String

    /// Make a field.
    public init(_ key: String, _ value: String) {
        self.key = key
        self.value = value
    }
}

/// What a hook is shown. Everything is copied into the plugin call and borrowed by the plugin.
public struct HookRequest: Sendable, Hashable {
    /// The user on whose behalf the call is made (empty for an admin or system call).
    public var operatorID: String
    /// The group (empty when it does not exist yet).
    public var groupID: String
    /// The group's type (`work`, `public`, `meeting`, `community`, ...).
    public var groupType: String
    /// For ``PolicyHook/filterCustomOnRead``: `owner`, `admin`, `member` or `none`.
    public var readerRole: String
    /// For ``PolicyHook/afterEvent``: the event's type.
    public var eventType: String
    /// The named fields, in order.
    public var fields: [HookField]
    /// Invitees (before invite) or the target member (before set member info).
    public var users: [String]
    /// For ``PolicyHook/afterEvent``: the event's id in the event log (increasing in commit
    /// order); 0 when unknown.
    public var eventID: Int64
    /// For ``PolicyHook/afterEvent``: the event's number in its group's sequence.
    public var groupSequence: Int64
    /// For ``PolicyHook/afterEvent``: when the event was committed, milliseconds since the Unix epoch.
    public var eventTimeMilliseconds: Int64

    /// Make a request; every part defaults to empty.
    public init(
        operatorID: String = "", groupID: String = "", groupType: String = "",
        readerRole: String = "", eventType: String = "",
        fields: [HookField] = [], users: [String] = [],
        eventID: Int64 = 0, groupSequence: Int64 = 0, eventTimeMilliseconds: Int64 = 0
    ) {
        self.operatorID = operatorID
        self.groupID = groupID
        self.groupType = groupType
        self.readerRole = readerRole
        self.eventType = eventType
        self.fields = fields
        self.users = users
        self.eventID = eventID
        self.groupSequence = groupSequence
        self.eventTimeMilliseconds = eventTimeMilliseconds
    }

    /// The value of the field `key`, if present.
    public subscript(field key: String) -> String? {
        fields.first { $0.key == key }?.value
    }

    /// Apply a plugin's changes: `nil` removes the field, a value replaces or appends it.
    mutating func apply(_ changes: [(key: String, value: String?)]) {
        for change in changes {
            if let value = change.value {
                if let index = fields.firstIndex(where: { $0.key == change.key }) {
                    fields[index].value = value
                } else {
                    fields.append(HookField(change.key, value))
                }
            } else {
                fields.removeAll { $0.key == change.key }
            }
        }
    }
}

/// A plugin's refusal: which fields and which users, and why.
public struct PolicyRejection: Sendable, Hashable {
    /// The plugin that refused.
    public var plugin: String
    /// The rejected field keys (RongCloud's `errorKeys`), in the order the plugin gave them.
    public var errorKeys: [String]
    /// A reason per rejected field key.
    public var reasons: [String: String]
    /// Users refused (before invite: each becomes that invitee's failed result).
    public var rejectedMembers: [String]
    /// A human-readable message for the caller.
    public var message: String

    /// Make a rejection.
    public init(plugin: String, errorKeys: [String], reasons: [String: String] = [:], rejectedMembers: [String] = [], message: String) {
        self.plugin = plugin
        self.errorKeys = errorKeys
        self.reasons = reasons
        self.rejectedMembers = rejectedMembers
        self.message = message
    }
}

/// Why a plugin gave no decision; the hook's ``FailureMode`` decides what that means.
public struct PolicyFailure: Sendable, Hashable, Error {
    /// The kinds of failure.
    public enum Kind: String, Sendable, Hashable {
        /// The plugin returned `GROUPD_DECISION_ERROR`.
        case pluginError = "plugin_error"
        /// The plugin did not answer within the hook's time budget.
        case timeout
        /// The plugin returned a number that is not a `groupd_decision`.
        case unknownDecision = "unknown_decision"
        /// The plugin's circuit breaker is open: it was not called.
        case circuitOpen = "circuit_open"
        /// The host is shutting down.
        case hostShutdown = "host_shutdown"
    }

    /// The plugin that failed.
    public var plugin: String
    /// What went wrong.
    public var kind: Kind
    /// The plugin's code from `set_error` (0 when none).
    public var code: Int32
    /// The plugin's message from `set_error`, or the host's description.
    public var message: String

    /// Make a failure.
    public init(plugin: String, kind: Kind, code: Int32, message: String) {
        self.plugin = plugin
        self.kind = kind
        self.code = code
        self.message = message
    }
}

/// The result of running a hook's chain for one request.
public enum HookOutcome: Sendable, Hashable {
    /// Go on unchanged.
    case allow
    /// Refuse the operation (or, before invite, the ``PolicyRejection/rejectedMembers``).
    /// Map to `FAILED_PRECONDITION` (`INVALID_ARGUMENT` for custom-field validation), reason `POLICY_REJECTED`.
    case reject(PolicyRejection)
    /// Go on with these fields changed, composed over the whole chain: a `nil` value removes the field.
    case rewrite([String: String?])
    /// Answer success and do nothing (a message is delivered to nobody).
    case discard
    /// A fail-closed plugin failed: the operation must not happen (map to `UNAVAILABLE`).
    case error(PolicyFailure)
}
