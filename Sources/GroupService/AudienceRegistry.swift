import GroupModel
import Synchronization

/// The audience of AVChatRoom groups, held in memory on this node ("membership in
/// memory, per node"). Only the room's owner is stored; everyone who joins is kept here, per app
/// and group, with the most recent joiners for a partial member list. Who is online, and so the
/// room's count, is the presence leases in the store (``LiveRooms``, which owns this registry):
/// a member here whose presence ended is out of the audience for the service.
///
/// Lost on restart, by design: an audience reconnects and joins again. On a database several
/// nodes share, each node's registry follows the rooms' events from every node (``replay(_:)``),
/// and a node catches up with them before it reads a room's audience
/// (``LiveRooms/sync(app:groupID:)``), so a room's audience is the same wherever its members
/// connect.
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

    /// Applies an AVChatRoom event another node committed (or this one: the change is the same),
    /// so that a room's audience is the room's wherever its members connect: joins add
    /// members, quits and kicks remove them, role, mute and name-card changes update members in
    /// the audience, dismissal forgets the room. Stored members (the owner) are not in the
    /// audience and are left alone; custom fields of audience members are not carried by events
    /// and stay on the node that set them.
    func replay(_ event: GroupEvent) {
        let app = event.appID
        let group = event.groupID
        switch event.kind {
        case .memberJoined, .memberInvited:
            let present = members(app: app, group: group, users: event.targets)
            let upserts = event.targets.filter { present[$0] == nil }.map {
                Member(userID: $0, role: .member, joinedAt: event.time, joinSequence: event.sequence)
            }
            apply(app: app, group: group, upserts: upserts, removals: [])
        case .memberQuit, .memberKicked:
            apply(app: app, group: group, upserts: [], removals: event.targets)
        case .adminSet, .adminCancelled, .memberMuted, .memberInfoChanged:
            var updated = Array(members(app: app, group: group, users: event.targets).values)
            for index in updated.indices {
                switch event.kind {
                case .adminSet: updated[index].role = .admin
                case .adminCancelled: updated[index].role = .member
                case .memberMuted:
                    let until = event.changes["muted_until"].flatMap(Int64.init) ?? 0
                    updated[index].mutedUntil = until > 0 ? Timestamp(millisecondsSince1970: until) : nil
                default:
                    if let card = event.changes["name_card"] { updated[index].nameCard = card }
                }
            }
            apply(app: app, group: group, upserts: updated, removals: [])
        case .groupDismissed:
            removeRoom(app: app, group: group)
        default:
            break
        }
    }

    /// Forgets a room (dismissed).
    func removeRoom(app: String, group: String) {
        _ = rooms.withLock { $0.removeValue(forKey: Key(app: app, group: group)) }
    }
}
