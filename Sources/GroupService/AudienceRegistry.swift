import GroupModel
import Synchronization

/// The audience of AVChatRoom groups, held in memory on this node (DESIGN.md §4: "membership in
/// memory, per node"). Only the room's owner is stored; everyone who joins is kept here, per app
/// and group, with a live count and the most recent joiners for a partial member list.
///
/// Lost on restart and not shared between nodes, by design: an audience reconnects and joins
/// again.
final class AudienceRegistry: Sendable {
    /// How many recent joiners each room keeps for its partial member list.
    static let recentLimit = 100

    private struct Key: Hashable {
        var app: String
        var group: String
    }

    private struct Room {
        var members: [String: Member] = [:]
        /// The most recent joiners, oldest first, at most ``AudienceRegistry/recentLimit``.
        var recent: [String] = []
        /// The next join order given to a joiner.
        var nextOrder: Int64 = 1
    }

    private let rooms = Mutex<[Key: Room]>([:])

    /// A user's membership in a room's audience, if any.
    func member(app: String, group: String, user: String) -> Member? {
        rooms.withLock { $0[Key(app: app, group: group)]?.members[user] }
    }

    /// Memberships of several users (absent: not in the audience).
    func members(app: String, group: String, users: [String]) -> [String: Member] {
        rooms.withLock { rooms in
            guard let room = rooms[Key(app: app, group: group)] else { return [:] }
            var found: [String: Member] = [:]
            for user in users { if let member = room.members[user] { found[user] = member } }
            return found
        }
    }

    /// How many users are in a room's audience.
    func count(app: String, group: String) -> Int {
        rooms.withLock { $0[Key(app: app, group: group)]?.members.count ?? 0 }
    }

    /// The most recent joiners still present, newest first.
    func recent(app: String, group: String, limit: Int) -> [Member] {
        rooms.withLock { rooms in
            guard let room = rooms[Key(app: app, group: group)] else { return [] }
            return room.recent.reversed().prefix(limit).compactMap { room.members[$0] }
        }
    }

    /// Applies a committed change: `upserts` join or change, `removals` leave.
    func apply(app: String, group: String, upserts: [Member], removals: [String]) {
        guard !upserts.isEmpty || !removals.isEmpty else { return }
        rooms.withLock { rooms in
            let key = Key(app: app, group: group)
            var room = rooms[key] ?? Room()
            for var member in upserts {
                if let existing = room.members[member.userID] {
                    member.joinOrder = existing.joinOrder
                } else {
                    member.joinOrder = room.nextOrder
                    room.nextOrder += 1
                    room.recent.append(member.userID)
                    if room.recent.count > Self.recentLimit { room.recent.removeFirst(room.recent.count - Self.recentLimit) }
                }
                room.members[member.userID] = member
            }
            for user in removals where room.members.removeValue(forKey: user) != nil {
                room.recent.removeAll { $0 == user }
            }
            rooms[key] = room.members.isEmpty ? nil : room
        }
    }

    /// Forgets a room (dismissed).
    func removeRoom(app: String, group: String) {
        _ = rooms.withLock { $0.removeValue(forKey: Key(app: app, group: group)) }
    }
}
