/// A change in a group, stored in the same transaction as the change and numbered by the group's
/// sequence (1, 2, 3… per group, no gaps). Subscribers resume from a sequence.
public struct GroupEvent: Sendable, Hashable {
    /// What happened. Tips go to the group; system notifications to a user or the approvers
    /// (Tencent's group tips and group system messages).
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        // MARK: Tips (recipient: the group)
        /// The group was created; `targets` are the initial members, owner first (an imported
        /// group: its owner); `changes` hold its profile, settings, `max_members` and
        /// `member_count` as created.
        case groupCreated = "GROUP_CREATED"
        /// The group was dismissed.
        case groupDismissed = "GROUP_DISMISSED"
        /// The group was revoked by the app's backend.
        case groupRevoked = "GROUP_REVOKED"
        /// `targets` joined (by themselves, or let in by an approver or an invitee's consent);
        /// `changes["join_source"]` names how (``JoinSource/name``) and `changes["inviter"]`
        /// who let them in, if anyone.
        case memberJoined = "MEMBER_JOINED"
        /// `targets` were added by `operator`'s invitation (`join_source` `invitation`,
        /// `inviter`).
        case memberInvited = "MEMBER_INVITED"
        /// `targets` quit.
        case memberQuit = "MEMBER_QUIT"
        /// `targets` were removed by `operator`.
        case memberKicked = "MEMBER_KICKED"
        /// `targets` became admins.
        case adminSet = "ADMIN_SET"
        /// `targets` are admins no more.
        case adminCancelled = "ADMIN_CANCELLED"
        /// Ownership passed to `targets[0]`; `changes["previous_owner"]` names the old owner.
        case ownerChanged = "OWNER_CHANGED"
        /// The profile or group custom fields changed; `changes` maps each changed field (`name`,
        /// `introduction`, `notification`, `face_url`, `custom.<key>` in Base64) to its new value.
        case groupInfoChanged = "GROUP_INFO_CHANGED"
        /// Settings changed; `changes` maps each changed setting (``GroupSettingKey`` name, and
        /// `max_members`) to its new value.
        case groupSettingsChanged = "GROUP_SETTINGS_CHANGED"
        /// A member's name card or custom fields changed; `changes` lists them.
        case memberInfoChanged = "MEMBER_INFO_CHANGED"
        /// `targets` were muted until `changes["muted_until"]` (ms; `0` = unmuted).
        case memberMuted = "MEMBER_MUTED"
        /// The whole group was muted or unmuted; `changes` has `mode`, `roles`, `until`.
        case groupMuted = "GROUP_MUTED"
        /// The group's mute bypass list changed (changes `added`, `removed`, `user_ids`:
        /// newline-separated user ids; `user_ids` is the whole list after the change).
        case muteBypassChanged = "MUTE_BYPASS_CHANGED"
        /// Group attributes were set or deleted; `changes` map `set:<key>` to the key's new
        /// version and `deleted:<key>` to "" (``GroupRules/planSetAttributes(_:by:current:writes:limits:now:)``).
        case groupAttributesChanged = "GROUP_ATTRIBUTES_CHANGED"
        /// A message was pinned; `changes` is the pin (``PinnedMessage/changes``).
        case messagePinned = "MESSAGE_PINNED"
        /// A message was unpinned; `changes` is the removed pin (``PinnedMessage/changes``).
        case messageUnpinned = "MESSAGE_UNPINNED"
        /// A topic was created in a Community group: an event of the community (its id and
        /// sequence); `changes` are ``Draft/topicCreated(_:operatorID:)``'s.
        case topicCreated = "TOPIC_CREATED"
        /// A topic's profile, custom fields or own mute changed: an event of the community;
        /// `changes` are ``Draft/topicUpdated(topicID:name:introduction:notification:faceURL:mute:customKeys:isPrivate:operatorID:)``'s.
        case topicUpdated = "TOPIC_UPDATED"
        /// A topic was deleted: an event of the community; `changes[topic_id]` names it.
        case topicDeleted = "TOPIC_DELETED"
        /// A permission group was created in a Community group; `changes` hold
        /// `permission_group_id`, `name`, `permissions` and `topic_permissions`
        /// (``GroupRules/planPermissionGroupCreation(_:id:in:by:liveTopics:limits:now:)``).
        case permissionGroupCreated = "PERMISSION_GROUP_CREATED"
        /// A permission group's name, data or permissions changed; `changes` hold
        /// `permission_group_id` and the changed fields.
        case permissionGroupUpdated = "PERMISSION_GROUP_UPDATED"
        /// A permission group was deleted (or `everyone` reset); `changes[permission_group_id]`.
        case permissionGroupDeleted = "PERMISSION_GROUP_DELETED"
        /// `targets` were added to or removed from a permission group: `changes`
        /// `permission_group_id`, `change` (`added` or `removed`).
        case memberPermissionsChanged = "MEMBER_PERMISSIONS_CHANGED"

        // MARK: System notifications (recipient: a user or the approvers)
        /// A join application arrived (to the approvers).
        case joinApplicationReceived = "JOIN_APPLICATION_RECEIVED"
        /// A join application was approved (to the applicant).
        case joinApplicationApproved = "JOIN_APPLICATION_APPROVED"
        /// A join application was refused (to the applicant).
        case joinApplicationRefused = "JOIN_APPLICATION_REFUSED"
        /// An invitation awaits the invitee's answer (to the invitee).
        case invitationReceived = "INVITATION_RECEIVED"
        /// An ordinary member's invitation awaits approval (to the approvers).
        case invitationApprovalRequested = "INVITATION_APPROVAL_REQUESTED"
        /// The invitee accepted (to the inviter).
        case invitationAccepted = "INVITATION_ACCEPTED"
        /// The invitee or an approver refused (to the inviter).
        case invitationRefused = "INVITATION_REFUSED"
        /// A pending application or invitation was withdrawn by its sender.
        case applicationWithdrawn = "APPLICATION_WITHDRAWN"
        /// A pending application or invitation expired.
        case applicationExpired = "APPLICATION_EXPIRED"
        /// The user was added to the group by invitation (to the invitee); changes as
        /// `MEMBER_INVITED`.
        case invitedToGroup = "INVITED_TO_GROUP"
        /// The user was removed from the group (to the removed user).
        case kickedFromGroup = "KICKED_FROM_GROUP"
        /// Users were banned from the group (to the owner, each admin and each banned user;
        /// changes `until` in ms, `0` = until lifted, `duration_seconds`, `reason`).
        case memberBanned = "MEMBER_BANNED"
        /// Users' bans were lifted (to the owner, each admin and each user whose ban was lifted).
        case memberUnbanned = "MEMBER_UNBANNED"
        /// The user quit the group (to the user's other devices).
        case quitGroup = "QUIT_GROUP"
        /// The user was made admin (to the user).
        case adminGranted = "ADMIN_GRANTED"
        /// The user's admin role was taken back (to the user).
        case adminRevoked = "ADMIN_REVOKED"
        /// The user's private remark of the group changed (to the user's devices).
        case remarkChanged = "REMARK_CHANGED"
        /// The user's receive option for the group changed (to the user's devices).
        case receiveOptionChanged = "RECEIVE_OPTION_CHANGED"
        /// A custom system notification from the app's backend (to the group, or to one listed
        /// member); its body is ``CustomNotification/init(changes:)`` of `changes`.
        case customNotification = "CUSTOM_NOTIFICATION"
        /// The user marked the group read (to the user's devices); `changes["read_sequence"]`.
        case groupRead = "GROUP_READ"
        /// An invite link was created (to the approvers); `changes`: `link_id`, `max_uses`,
        /// `use_count`, `requires_approval`, `expires_at` (ms) when it expires.
        case inviteLinkCreated = "INVITE_LINK_CREATED"
        /// An invite link was revoked (to the approvers); `changes` as `INVITE_LINK_CREATED`.
        case inviteLinkRevoked = "INVITE_LINK_REVOKED"
        /// Members read the recipient's messages (to the sender only, batched);
        /// `changes["receipts"]` lists ``ReadReceiptCount`` entries (``ReadReceiptCount/encode(_:)``).
        case messageReadReceipt = "MESSAGE_READ_RECEIPT"

        // MARK: Messages (recipient: the group)
        /// A group message from `operator`; its body is stored beside the event, keyed by the
        /// event's row (`group_messages`), and shares the group's sequence.
        case groupMessage = "GROUP_MESSAGE"
        /// A stored message was recalled by `operator` (`nil`: the backend); `targets` is its
        /// sender; `changes["sequence"]` and `changes["message_id"]` name it.
        case messageRecalled = "MESSAGE_RECALLED"
        /// A stored message was edited by `operator` (`nil`: the backend); `targets` is its
        /// sender; `changes`: `sequence`, `message_id`, `edit_count` and the new body (`text`,
        /// `payload_hex`, as ``CustomNotification/changes``).
        case messageEdited = "MESSAGE_EDITED"
        /// `operator` reacted to a stored message; `changes` is the ``ReactionChange``
        /// (``ReactionChange/changes``: `sequence`, `reaction_key`, `count` after the change).
        case messageReactionAdded = "MESSAGE_REACTION_ADDED"
        /// `operator` took a reaction back; `changes` as ``messageReactionAdded``.
        case messageReactionRemoved = "MESSAGE_REACTION_REMOVED"

        /// Whether this kind is a tip to the whole group (else a system notification).
        public var isTip: Bool {
            switch self {
            case .groupCreated, .groupDismissed, .groupRevoked, .memberJoined, .memberInvited,
                .memberQuit, .memberKicked, .adminSet, .adminCancelled, .ownerChanged,
                .groupInfoChanged, .groupSettingsChanged, .memberInfoChanged, .memberMuted, .groupMuted,
                .muteBypassChanged, .groupAttributesChanged, .messagePinned, .messageUnpinned,
                .topicCreated, .topicUpdated, .topicDeleted, .permissionGroupCreated, .permissionGroupUpdated,
                .permissionGroupDeleted, .memberPermissionsChanged:
                true
            default:
                false
            }
        }

        /// Whether this kind reports a membership change (suppressed where the type has no
        /// member-change events).
        public var isMemberChange: Bool {
            switch self {
            case .memberJoined, .memberInvited, .memberQuit, .memberKicked: true
            default: false
            }
        }
    }

    /// Who an event is for.
    public enum Recipient: Sendable, Hashable {
        /// Every member of the group.
        case group
        /// One user (a system notification).
        case user(String)
        /// The group's approvers (owner, or owner and admins, per the group's settings).
        case approvers
    }

    /// An event before the store numbers it: everything but the group, sequence and time.
    public struct Draft: Sendable, Hashable {
        /// What happened.
        public var kind: Kind
        /// Who did it (`nil`: the app's backend).
        public var operatorID: String?
        /// The users it happened to.
        public var targets: [String]
        /// Changed fields and their new values (field name → text).
        public var changes: [String: String]
        /// Who receives it.
        public var recipient: Recipient

        /// Create a draft.
        public init(
            kind: Kind, operatorID: String?, targets: [String] = [], changes: [String: String] = [:],
            recipient: Recipient = .group
        ) {
            self.kind = kind
            self.operatorID = operatorID
            self.targets = targets
            self.changes = changes
            self.recipient = recipient
        }
    }

    /// The app the group belongs to.
    public var appID: String
    /// The group.
    public var groupID: String
    /// The event's number in the group's sequence (1, 2, 3…).
    public var sequence: Int64
    /// What happened.
    public var kind: Kind
    /// When it was committed (the mutation's time).
    public var time: Timestamp
    /// Who did it (`nil`: the app's backend).
    public var operatorID: String?
    /// The users it happened to.
    public var targets: [String]
    /// Changed fields and their new values.
    public var changes: [String: String]
    /// Who receives it.
    public var recipient: Recipient

    /// Create an event.
    public init(
        appID: String, groupID: String, sequence: Int64, kind: Kind, time: Timestamp,
        operatorID: String?, targets: [String] = [], changes: [String: String] = [:],
        recipient: Recipient = .group
    ) {
        self.appID = appID
        self.groupID = groupID
        self.sequence = sequence
        self.kind = kind
        self.time = time
        self.operatorID = operatorID
        self.targets = targets
        self.changes = changes
        self.recipient = recipient
    }

    /// Number a draft as the event `sequence` of `groupID` at `time`.
    public init(draft: Draft, appID: String, groupID: String, sequence: Int64, time: Timestamp) {
        self.init(
            appID: appID, groupID: groupID, sequence: sequence, kind: draft.kind, time: time,
            operatorID: draft.operatorID, targets: draft.targets, changes: draft.changes,
            recipient: draft.recipient)
    }
}
