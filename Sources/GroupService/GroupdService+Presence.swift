import GroupModel
import GroupStore
import Logging

/// The online count of AVChatRooms: a viewer counts while they hold a `Subscribe` stream, on
/// any node, and for ``presenceGraceSeconds`` after. The leases themselves are ``LiveRooms``'s;
/// here the streams this node serves keep them up.
extension GroupdService {
    /// How long a viewer stays counted after their last stream ends (a reconnect within it
    /// neither drops nor counts them twice), in seconds of the service's clock.
    public static let presenceGraceSeconds: Int64 = 60
    /// How often a node extends the presences of the viewers whose streams it holds, in seconds
    /// of the service's clock (a third of the grace period: two renewals can be missed).
    public static let presenceRenewalSeconds: Int64 = 20

    /// Extends the presences of a user whose stream started, or whose last stream on this node
    /// ended, to a grace period from `at` (a failure is logged: the next pass renews them).
    func streamPresenceChanged(app: String, user: String, at: Timestamp) async {
        do {
            try await rooms.renew(app: app, users: [user], at: at)
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
                try await rooms.renew(app: app, users: Array(users[start..<min(users.count, start + 1000)]), at: now)
            }
        }
        try await rooms.sweep(now: now)
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
}
