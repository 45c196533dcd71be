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

    package init() {}

    /// Whether the user's stream carries `logged`.
    package func includes(_ logged: LoggedEvent, userID: String) -> Bool {
        switch logged.event.recipient {
        case .user(let user):
            return user == userID
        case .group, .approvers:
            guard logged.reachesMemberStreams else { return false }
            let key = logged.event.groupID
            if logged.event.kind == .groupMessage, notReceiving.contains(key) { return false }
            guard let intervals = intervals[key],
                intervals.contains(where: { $0.contains(logged.event.sequence) })
            else { return false }
            if case .approvers = logged.event.recipient {
                return approverOf.contains(key) && intervals.contains(where: { $0.through == nil })
            }
            return true
        }
    }
}
