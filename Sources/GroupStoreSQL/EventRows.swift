import Foundation
import GroupModel
import GroupStore

/// The SQL of `group_events` rows as the event stream reads them (each backend's statements
/// extend it).
package enum EventRows {
    /// The columns each backend's `loggedEvents` decodes: the ``Rows/eventColumns`` (same order,
    /// so ``Rows/event(_:)`` decodes them), then the row's id, the group's type, key, name and
    /// member count, then the ``MessageRows/messageColumns`` of the message body (NULL for other
    /// kinds).
    package static let loggedEventColumns = loggedEventColumns(messageColumns: MessageRows.messageColumns)

    /// ``loggedEventColumns`` with the message body's columns `messageColumns` (PostgreSQL's
    /// take the body's event id from the event row).
    package static func loggedEventColumns(messageColumns: String) -> String {
        """
        e.app_id, e.group_id, e.seq, e.kind, e.time, e.operator_id, e.targets, e.changes, e.recipient_kind,
        e.recipient_user, e.event_id, g.type, e.group_key, g.name, g.member_count, \(messageColumns)
        """
    }
    /// Where the message columns start in ``loggedEventColumns``.
    package static let messageColumnOffset = 15

    /// The topic whose privacy decides who receives a stored item: a topic's own item (its
    /// group is the topic), or a community's `TOPIC_*` event (the topic it names); `nil` for
    /// every other item.
    package static func audienceTopic(of event: GroupEvent) -> String? {
        switch event.kind {
        case .topicCreated, .topicUpdated, .topicDeleted: event.changes[GroupEvent.Draft.topicIDKey]
        default: GroupID.isTopic(event.groupID) ? event.groupID : nil
        }
    }

    /// The topics of `events` (``audienceTopic(of:)``), or none.
    package static func audienceTopics(of events: [LoggedEvent]) -> [String] {
        Array(Set(events.compactMap { audienceTopic(of: $0.event) })).sorted()
    }

    /// Sets the audience of `events` whose topic (``audienceTopic(of:)``) is among
    /// `privateTopics` (a private topic's id → its community's permission groups, as read now).
    package static func setAudiences(_ events: inout [LoggedEvent], privateTopics: [String: [PermissionGroup]]) {
        if privateTopics.isEmpty { return }
        for index in events.indices {
            guard let topic = audienceTopic(of: events[index].event), let groups = privateTopics[topic] else { continue }
            events[index].audience = Group.audience(ofPrivateTopic: topic, permissionGroups: groups)
        }
    }
}

/// The group rows a user's stream carries (each backend's `userScope` reads it).
package struct UserScope {
    /// A membership: the group's sequences after `after`, through `through` (`nil`: still a member).
    package struct Interval {
        /// The sequence before the membership's first item.
        package var after: Int64
        /// The membership's last item (`nil`: open).
        package var through: Int64?

        package init(after: Int64, through: Int64?) {
            self.after = after
            self.through = through
        }

        /// Whether `sequence` falls in the membership.
        package func contains(_ sequence: Int64) -> Bool {
            sequence > after && (through.map { sequence <= $0 } ?? true)
        }
    }

    /// Memberships by group id.
    package var intervals: [String: [Interval]] = [:]
    /// Groups where the user approves now.
    package var approverOf: Set<String> = []
    /// Groups whose messages the user does not receive (the receive option now).
    package var notReceiving: Set<String> = []
    /// The user's memberships of communities by community id, as `event_id` intervals (after
    /// the event before the join, through the leave): a topic's rows carry the topic's own
    /// sequence, so they are placed in the community's membership by `event_id`.
    package var topicIntervals: [String: [Interval]] = [:]
    /// The topics (deleted ones too) of the communities in ``topicIntervals``: read as candidates
    /// beside the groups of ``intervals``.
    package var topics: [String] = []

    package init() {}

    /// Records the user's ended memberships of group `key`: each leave (its sequence and event
    /// id) closes the interval opened by the latest join before it and after the previous leave
    /// (the join's sequence and event id; none: the previous leave, or the start). A community's
    /// intervals are also kept by event id (``topicIntervals``), for its topics' rows.
    package mutating func recordEnded(
        _ key: String, leaves: [(sequence: Int64, eventID: Int64)], joins: [(sequence: Int64, eventID: Int64)],
        isCommunity: Bool
    ) {
        var previous: (sequence: Int64, eventID: Int64) = (0, 0)
        for leave in leaves.sorted(by: { $0.sequence < $1.sequence }) {
            let join = joins.filter { $0.sequence > previous.sequence && $0.sequence < leave.sequence }
                .max { $0.sequence < $1.sequence }
            intervals[key, default: []].append(
                Interval(after: join.map { $0.sequence - 1 } ?? previous.sequence, through: leave.sequence))
            if isCommunity {
                topicIntervals[key, default: []].append(
                    Interval(after: join?.eventID ?? previous.eventID, through: leave.eventID))
            }
            previous = leave
        }
    }

    /// The group ids whose rows a user's page reads as candidates: the groups of
    /// ``intervals``, then ``topics``.
    package var candidateGroups: [String] { Array(intervals.keys) + topics }

    /// Whether the user's stream carries `logged`. A topic's row is the community's: its receive
    /// option, approvers and membership, the membership tested by the row's `event_id`.
    package func includes(_ logged: LoggedEvent, userID: String) -> Bool {
        switch logged.event.recipient {
        case .user(let user):
            return user == userID
        case .group, .approvers:
            guard logged.reachesMemberStreams else { return false }
            var key = logged.event.groupID
            var found = intervals[key]
            var position = logged.event.sequence
            if let community = GroupID.communityID(ofTopic: key) {
                key = community
                found = topicIntervals[community]
                position = logged.eventID
            }
            if logged.event.kind == .groupMessage, notReceiving.contains(key) { return false }
            guard let found, found.contains(where: { $0.contains(position) }) else { return false }
            if case .approvers = logged.event.recipient {
                return approverOf.contains(key) && found.contains(where: { $0.through == nil })
            }
            return true
        }
    }
}
