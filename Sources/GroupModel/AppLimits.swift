/// The limits of one app (tenant), from the config file's `apps[].limits`; defaults from Tencent's
/// TIMGroupManager guide. Byte limits count UTF-8 bytes.
public struct AppLimits: Sendable, Hashable {
    /// Maximum bytes of a group name (`name`). Default 30.
    public var groupNameBytes: Int
    /// Maximum bytes of a group introduction (`introduction`). Default 120.
    public var introductionBytes: Int
    /// Maximum bytes of a group notification, i.e. announcement (`notification`). Default 150.
    public var notificationBytes: Int
    /// Maximum bytes of a group avatar URL (`face_url`). Default 100.
    public var faceURLBytes: Int
    /// Maximum bytes of a member's name card (`name_card`). Default 50.
    public var nameCardBytes: Int
    /// Maximum bytes of a join application's or invitation's message. Default 100.
    public var applicationMessageBytes: Int
    /// Maximum bytes of a user id (token `sub`, member ids). Default 64.
    public var userIDBytes: Int
    /// Maximum members per group type (`nil`: unlimited). Defaults: Work 200, Public 2000,
    /// Meeting 6000, AVChatRoom unlimited. A group's own `max_members` may be lower, never higher.
    public var maxMembers: [GroupType: Int?]
    /// Maximum groups a user may be a member of (AVChatRoom rooms not counted). Default 1000.
    public var maxGroupsPerUser: Int
    /// Maximum users in one batch call (invite, kick, members info). Default 100.
    public var maxUsersPerBatch: Int
    /// Maximum group ids in one batch read (`GetGroupsInfo`). Default 50.
    public var maxGroupsPerRequest: Int
    /// Maximum page size of paged lists (member lists, joined groups, search). Default 50.
    public var maxPageSize: Int
    /// Seconds after which a pending application or invitation expires. Default 7 days.
    public var applicationExpirySeconds: Int
    /// Seconds the event log is kept for resuming streams. Default 7 days.
    public var eventRetentionSeconds: Int
    /// Messages per second an AVChatRoom accepts before shedding by priority. Default 40.
    public var avChatRoomMessagesPerSecond: Int
    /// Seconds a group message is kept in the history (and on the event log); older ones are
    /// purged by the retention job. Default 0: kept forever (Tencent's history time is a paid
    /// setting; deleting an existing deployment's history must be an operator's choice).
    public var messageRetentionSeconds: Int
    /// Maximum users on one group's ban list (bans still running). Default 1000.
    public var maxBansPerGroup: Int = 1000
    /// Maximum members on one group's mute bypass list. Default 100.
    public var maxMuteBypassPerGroup: Int = 100
    /// Maximum user ids one message mentions (`mentioned_user_ids`). Default 30.
    public var maxMentionsPerMessage: Int = 30
    /// Seconds after sending during which a sender may recall their own message (the owner,
    /// admins and the backend recall at any time). Default 120 (Tencent's 2 minutes).
    public var recallWindowSeconds: Int = 120
    /// Seconds after sending during which a sender may edit their own message (the owner, admins
    /// and the backend edit at any time). Default 86400 (a day).
    public var editWindowSeconds: Int = 86_400
    /// Maximum slow mode interval a group may set (`slow_mode_interval_seconds`). Default 21600
    /// (6 hours).
    public var maxSlowModeIntervalSeconds: Int = 21_600
    /// Maximum attribute keys a group holds (and keys in one attribute call). Default 32.
    public var maxGroupAttributeKeys: Int = 32
    /// Maximum bytes of an attribute or counter key. Default 64.
    public var groupAttributeKeyBytes: Int = 64
    /// Maximum bytes of a group's attributes together, keys and values. Default 16384.
    public var groupAttributeBytes: Int = 16384
    /// Maximum counters a group holds (and counters in one increment). Default 32.
    public var maxGroupCounters: Int = 32
    /// Maximum live (not revoked, expired or used up) invite links per group. Default 10.
    public var maxInviteLinksPerGroup: Int = 10
    /// Maximum pinned messages per group. Default 10.
    public var maxPinnedMessages: Int
    /// Maximum UTF-8 bytes of a reaction key (`reaction_key`). Default 32: an emoji ZWJ
    /// sequence of four people with skin tones takes 35 bytes and is refused; the family emoji
    /// (25) and every flag (8, or 28 for a subdivision) fit.
    public var reactionKeyBytes: Int = 32
    /// Maximum distinct reaction keys on one message. Default 20 (Discord's limit).
    public var maxReactionKeysPerMessage: Int = 20
    /// Maximum reactions on one message, all keys together. Default 100,000.
    public var maxReactionsPerMessage: Int = 100_000
    /// Maximum keys one user reacts with on one message. Default 20 (one of each key).
    public var maxReactionsPerUserPerMessage: Int = 20
    /// Maximum live topics per Community group. Default 100.
    public var maxTopicsPerCommunity: Int = 100
    /// Maximum permission groups per Community group (the built-in `everyone` group not
    /// counted). Default 20.
    public var maxPermissionGroupsPerCommunity: Int = 20
    /// Maximum permission groups of one community a member is in. Default 10.
    public var maxPermissionGroupsPerMember: Int = 10
    /// Maximum bytes of a permission group's custom data. Default 1,024.
    public var permissionGroupCustomDataBytes: Int = 1024
    /// The largest group (members) with per-message read receipts. Default 200.
    public var readReceiptMaxMembers: Int
    /// Milliseconds over which a sender's read receipts of a group are gathered into one
    /// `MESSAGE_READ_RECEIPT` event. Default 1000.
    public var readReceiptIntervalMilliseconds: Int

    /// The defaults listed on each property.
    public static var defaults: AppLimits {
        AppLimits(
            groupNameBytes: 30,
            introductionBytes: 120,
            notificationBytes: 150,
            faceURLBytes: 100,
            nameCardBytes: 50,
            applicationMessageBytes: 100,
            userIDBytes: 64,
            maxMembers: Dictionary(
                uniqueKeysWithValues: GroupType.allCases.map { ($0, $0.preset.behaviour.defaultMaxMembers) }
            ),
            maxGroupsPerUser: 1000,
            maxUsersPerBatch: 100,
            maxGroupsPerRequest: 50,
            maxPageSize: 50,
            applicationExpirySeconds: 7 * 24 * 3600,
            eventRetentionSeconds: 7 * 24 * 3600,
            avChatRoomMessagesPerSecond: 40,
            messageRetentionSeconds: 0,
            maxPinnedMessages: 10,
            readReceiptMaxMembers: 200,
            readReceiptIntervalMilliseconds: 1000
        )
    }

    /// Create limits with every value given; see ``defaults``.
    public init(
        groupNameBytes: Int, introductionBytes: Int, notificationBytes: Int, faceURLBytes: Int,
        nameCardBytes: Int, applicationMessageBytes: Int, userIDBytes: Int,
        maxMembers: [GroupType: Int?], maxGroupsPerUser: Int, maxUsersPerBatch: Int,
        maxGroupsPerRequest: Int, maxPageSize: Int, applicationExpirySeconds: Int,
        eventRetentionSeconds: Int, avChatRoomMessagesPerSecond: Int, messageRetentionSeconds: Int = 0,
        maxPinnedMessages: Int = 10, readReceiptMaxMembers: Int = 200, readReceiptIntervalMilliseconds: Int = 1000
    ) {
        self.groupNameBytes = groupNameBytes
        self.introductionBytes = introductionBytes
        self.notificationBytes = notificationBytes
        self.faceURLBytes = faceURLBytes
        self.nameCardBytes = nameCardBytes
        self.applicationMessageBytes = applicationMessageBytes
        self.userIDBytes = userIDBytes
        self.maxMembers = maxMembers
        self.maxGroupsPerUser = maxGroupsPerUser
        self.maxUsersPerBatch = maxUsersPerBatch
        self.maxGroupsPerRequest = maxGroupsPerRequest
        self.maxPageSize = maxPageSize
        self.applicationExpirySeconds = applicationExpirySeconds
        self.eventRetentionSeconds = eventRetentionSeconds
        self.avChatRoomMessagesPerSecond = avChatRoomMessagesPerSecond
        self.messageRetentionSeconds = messageRetentionSeconds
        self.maxPinnedMessages = maxPinnedMessages
        self.readReceiptMaxMembers = readReceiptMaxMembers
        self.readReceiptIntervalMilliseconds = readReceiptIntervalMilliseconds
    }

    /// The maximum member count for groups of `type` in this app (`nil`: unlimited).
    public func maxMembers(for type: GroupType) -> Int? {
        if let entry = self.maxMembers[type] { return entry }
        return type.preset.behaviour.defaultMaxMembers
    }
}
