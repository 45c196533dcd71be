public import GroupModel

/// One committed `group_events` row as the event stream delivers it: the event, its app-wide
/// position, what the stream needs to route it, and the message body for `GROUP_MESSAGE` rows.
public struct LoggedEvent: Sendable, Hashable {
    /// `group_events.event_id`: the app-wide order (one writer, so commit order) and the
    /// stream's resume position.
    public var eventID: Int64
    /// The event.
    public var event: GroupEvent
    /// The group's type (routing: Meeting member-change events, AVChatRoom audiences).
    public var groupType: GroupType
    /// For a recipient of `GroupEvent.Recipient.approvers`: the approvers when it was written
    /// (live delivery) or read (backlog): the owner, and the admins when the group's
    /// `join_approvers` includes them; empty otherwise.
    public var approvers: [String]
    /// For a `GROUP_MESSAGE` row: its body (`nil` if the body is missing).
    public var message: StoredMessage?
    /// The group's name after the write that appended it (live delivery) or when the row was
    /// read (backlog).
    public var groupName: String
    /// The group's stored member count after the write (live delivery) or when the row was read
    /// (backlog).
    public var memberCount: Int
    /// For an application or invitation event (``applicationKinds``): the item named by its
    /// `changes["application_id"]` as the same write left it (live delivery) or as it was when the
    /// row was read (backlog); `nil` for other kinds, or when the item is gone.
    public var application: Application?
    /// For an item of a private topic (its messages and events, and the community's `TOPIC_*`
    /// events naming it): the permission groups whose members receive it besides the
    /// community's owner and admins (`Group.audience`); `nil`: every member. Live delivery: as
    /// the write left the topic (a `TOPIC_UPDATED` that changes the topic's privacy: those who
    /// saw it before or see it after); backlog: as the topic is when the row is read.
    public var audience: Set<String>?

    /// The kinds whose rows name an application or invitation and carry it as their detail.
    public static let applicationKinds: Set<GroupEvent.Kind> = [
        .joinApplicationReceived, .invitationApprovalRequested, .joinApplicationApproved, .joinApplicationRefused,
        .applicationWithdrawn, .applicationExpired, .invitationReceived, .invitationAccepted, .invitationRefused,
    ]

    /// Create a logged event.
    public init(
        eventID: Int64, event: GroupEvent, groupType: GroupType, approvers: [String] = [], message: StoredMessage? = nil,
        groupName: String = "", memberCount: Int = 0, application: Application? = nil, audience: Set<String>? = nil
    ) {
        self.audience = audience
        self.eventID = eventID
        self.event = event
        self.groupType = groupType
        self.approvers = approvers
        self.message = message
        self.groupName = groupName
        self.memberCount = memberCount
        self.application = application
    }

    /// Whether a user's stream may carry it: member-change tips of a type without member-change
    /// events (Meeting) never reach member streams (the backend firehose still gets them).
    public var reachesMemberStreams: Bool {
        !(event.kind.isMemberChange && GroupTypePreset.of(groupType).behaviour.memberChangeEvents == .none)
    }
}

/// A user's stored membership of one group, as the event stream routes with it.
public struct StreamMembership: Sendable, Hashable {
    /// The group.
    public var groupID: String
    /// Its type.
    public var groupType: GroupType
    /// The group's sequence before the user's join event (`members.join_seq` is that event's
    /// sequence, 0 for initial members): the user receives group items after it.
    public var joinSequence: Int64
    /// Whether the user receives the group's messages.
    public var receiveOption: ReceiveOption
    /// The user's role (private topics' items reach a community's owner and admins).
    public var role: MemberRole
    /// The user's permission groups in a community (a private topic's ``LoggedEvent/audience``).
    public var permissionGroups: [String]

    /// Create a membership.
    public init(
        groupID: String, groupType: GroupType, joinSequence: Int64, receiveOption: ReceiveOption,
        role: MemberRole = .member, permissionGroups: [String] = []
    ) {
        self.role = role
        self.permissionGroups = permissionGroups
        self.groupID = groupID
        self.groupType = groupType
        self.joinSequence = joinSequence
        self.receiveOption = receiveOption
    }
}

/// A user's stored memberships read in one snapshot, with the last `event_id` that snapshot
/// includes: membership changes after `watermark` are not reflected in it.
public struct MembershipSnapshot: Sendable, Hashable {
    /// The memberships (AVChatRoom audiences are not stored: only a room's owner appears).
    public var memberships: [StreamMembership]
    /// The highest `event_id` committed when the snapshot was read (0: none).
    public var watermark: Int64

    /// Create a snapshot.
    public init(memberships: [StreamMembership], watermark: Int64) {
        self.memberships = memberships
        self.watermark = watermark
    }
}

/// One page of a backlog read.
public struct EventLogPage: Sendable {
    /// The events the reader receives, in `event_id` order.
    public var events: [LoggedEvent]
    /// The last `event_id` examined; the next page reads after it.
    public var scannedThrough: Int64
    /// True when the page reached the end of the log (nothing more after `scannedThrough` when
    /// it was read).
    public var isLast: Bool

    /// Create a page.
    public init(events: [LoggedEvent], scannedThrough: Int64, isLast: Bool) {
        self.events = events
        self.scannedThrough = scannedThrough
        self.isLast = isLast
    }
}

/// The oldest position of an app's log that retention still keeps.
public struct RetainedStart: Sendable, Hashable {
    /// Resume after this `event_id` to receive everything retained.
    public var afterEventID: Int64
    /// The time of the oldest retained event (or the cutoff when none is retained).
    public var time: Timestamp

    /// Create a position.
    public init(afterEventID: Int64, time: Timestamp) {
        self.afterEventID = afterEventID
        self.time = time
    }
}
