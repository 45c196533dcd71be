import GroupModel
import GroupStore
import Logging

/// The online count of AVChatRooms: a viewer counts while they hold a `Subscribe` stream, on
/// any node, and for ``presenceGraceSeconds`` after.
///
/// A viewer's presence in a room is a lease in the store (`room_presence`), one per room and
/// viewer whatever the number of their streams: taken when they join (ending a grace period
/// later), extended to a grace period from now by the node serving a stream of theirs when the
/// stream starts, every ``presenceRenewalSeconds`` while it lasts, and when their last stream on
/// the node ends; dropped when they quit, and with the room. A lease that ended
/// stays ended (a later stream does not extend it): the viewer is gone, and joins again to count.
/// Every node reads the same leases, so a room's count is the same through every node, survives
/// a node's restart (the viewers it served reconnect within the grace period, or end) and counts
/// no one for ever (a node that stops renewing lets its viewers' leases end).
extension GroupdService {
    /// How long a viewer stays counted after their last stream ends (a reconnect within it
    /// neither drops nor counts them twice), in seconds of the service's clock.
    public static let presenceGraceSeconds: Int64 = 60
    /// How often a node extends the presences of the viewers whose streams it holds, in seconds
    /// of the service's clock (a third of the grace period: two renewals can be missed).
    public static let presenceRenewalSeconds: Int64 = 20

    /// When a presence extended at `now` ends.
    static func presenceEnd(from now: Timestamp) -> Timestamp {
        now.adding(seconds: presenceGraceSeconds)
    }

    /// Extends the presences of a user whose stream started, or whose last stream on this node
    /// ended, to a grace period from `at` (a failure is logged: the next pass renews them).
    func streamPresenceChanged(app: String, user: String, at: Timestamp) async {
        do {
            try await store.renewPresence(app: app, users: [user], now: at, until: Self.presenceEnd(from: at))
        } catch {
            logger.warning("cannot renew a viewer's presence", metadata: ["error": "\(error)"])
        }
    }

    /// One renewal pass: extends the presences of every user holding a stream on this node to a
    /// grace period from now, then deletes presences that ended a grace period ago or more (one
    /// node at a time).
    public func renewPresences() async throws {
        let now = clock.now()
        for (app, users) in events.streamingUsers() {
            for start in stride(from: 0, to: users.count, by: 1000) {
                let batch = Array(users[start..<min(users.count, start + 1000)])
                try await store.renewPresence(app: app, users: batch, now: now, until: Self.presenceEnd(from: now))
            }
        }
        _ = try await store.exclusively("presence-sweep") {
            try await self.store.sweepPresence(before: now.adding(seconds: -Self.presenceGraceSeconds))
        }
    }

    /// Runs ``renewPresences()`` now and then every ``presenceRenewalSeconds`` of the service's
    /// clock until the task is cancelled; failures are logged and retried at the next round.
    public func runPresenceRenewal() async {
        await clock.repeating(every: .seconds(Self.presenceRenewalSeconds)) { [self] in
            do {
                try await renewPresences()
            } catch is CancellationError {
                return
            } catch {
                logger.error("presence renewal failed", metadata: ["error": "\(error)"])
            }
        }
    }

    /// The online counts of AVChatRooms of an app: viewers whose presence has not ended.
    func onlineCounts(app: String, groupIDs: [String]) async throws -> [String: Int] {
        try await store.presence(app: app, groupIDs: groupIDs, now: clock.now())
    }

    /// A user's membership in a room's audience when they are in it and present (a viewer whose
    /// presence ended is gone).
    func presentAudienceMember(app: String, groupID: String, user: String) async throws -> Member? {
        guard let member = audience.member(app: app, group: groupID, user: user) else { return nil }
        let present = try await store.presentUsers(app: app, groupID: groupID, users: [user], now: clock.now())
        return present.contains(user) ? member : nil
    }
}

extension GroupdService {
    /// Forgets a dismissed or revoked group's audience on this node and its viewers' presences
    /// (other group types have none: the delete finds nothing).
    func forgetRoom(app: String, groupID: String) async throws {
        audience.removeRoom(app: app, group: groupID)
        try await store.dropPresence(app: app, groupID: groupID, users: nil)
    }
}
