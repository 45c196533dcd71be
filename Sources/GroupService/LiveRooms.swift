import GroupModel
import GroupStore
import Logging

/// AVChatRoom membership behind one seam: the audience this node holds in memory
/// (``AudienceRegistry``), the viewers' presence leases in the store and the rooms' online counts.
///
/// A mutation of a room goes the way every group's does (plan → one transaction → mapping):
/// the store's snapshot carries the room's presences (`SnapshotRequest.Parts.presence`),
/// ``complete(_:presence:app:operatorID:targets:)`` adds the present audience to it before the
/// plan, ``Entry/split(_:until:)`` takes the audience's part out of the plan's change (joins,
/// leaves, updates of users not stored) with the presences to hold and drop, which the store
/// writes in the same transaction, and ``apply(_:app:groupID:)`` hands the committed part to the
/// in-memory audience. Reads ask ``onlineCounts(app:groupIDs:)`` and the `present…` methods.
///
/// A viewer's presence in a room is a lease in the store (`room_presence`), one per room and
/// viewer whatever the number of their streams: taken when they join (ending a grace period
/// later), extended to a grace period from now by the node serving a stream of theirs when the
/// stream starts, every ``GroupdService/presenceRenewalSeconds`` while it lasts, and when their
/// last stream on the node ends; dropped when they quit, and with the room. A lease that ended
/// stays ended (a later stream does not extend it): the viewer is gone, and joins again to count.
/// Every node reads the same leases, so a room's count is the same through every node, survives
/// a node's restart (the viewers it served reconnect within the grace period, or end) and counts
/// no one for ever (a node that stops renewing lets its viewers' leases end).
final class LiveRooms: Sendable {
    /// The audiences this node holds in memory.
    private let audience = AudienceRegistry()
    private let store: Store
    private let clock: any WallClock

    init(store: Store, clock: any WallClock) {
        self.store = store
        self.clock = clock
    }

    /// When a presence extended at `now` ends.
    static func presenceEnd(from now: Timestamp) -> Timestamp {
        now.adding(seconds: GroupdService.presenceGraceSeconds)
    }

    // MARK: Reads

    /// On a database other nodes write: when the group is an AVChatRoom, waits until this node's
    /// audiences hold every event of the app committed so far, by any node (a join answered on
    /// another node is seen here). Otherwise returns at once.
    func sync(app: String, groupID: String) async throws {
        guard store.isShared, try await store.groupType(app: app, id: groupID) == .avChatRoom else { return }
        try await store.catchUp(app: app)
    }

    /// The online counts of rooms of an app: viewers whose presence has not ended.
    func onlineCounts(app: String, groupIDs: [String]) async throws -> [String: Int] {
        try await store.presence(app: app, groupIDs: groupIDs, now: clock.now())
    }

    /// A user's membership in a room's audience when they are in it and present (a viewer whose
    /// presence ended is gone).
    func presentMember(app: String, groupID: String, user: String) async throws -> Member? {
        try await presentMembers(app: app, groupID: groupID, users: [user])[user]
    }

    /// The memberships of those of `users` in a room's audience who are present.
    func presentMembers(app: String, groupID: String, users: [String]) async throws -> [String: Member] {
        let listeners = audience.members(app: app, group: groupID, users: users)
        if listeners.isEmpty { return [:] }
        let present = try await store.presentUsers(app: app, groupID: groupID, users: Array(listeners.keys), now: clock.now())
        return listeners.filter { present.contains($0.key) }
    }

    /// The most recent joiners still present, newest first, at most `limit`.
    func recentMembers(app: String, groupID: String, limit: Int) async throws -> [Member] {
        let recent = audience.recent(app: app, group: groupID, limit: limit)
        if recent.isEmpty { return [] }
        let present = try await store.presentUsers(app: app, groupID: groupID, users: recent.map(\.userID), now: clock.now())
        return recent.filter { present.contains($0.userID) }
    }

    // MARK: A mutation's part

    /// The room as a mutation's plan sees it, and what its change leaves to the seam.
    struct Entry: Sendable {
        /// The snapshot completed with the present audience and the live member count.
        var snapshot: GroupSnapshot
        /// The stored count before the change (the owner's membership).
        fileprivate var storedCount: Int
        /// The users whose memberships are stored (the owner, whoever the store found).
        fileprivate var stored: Set<String>
        /// The room's presences as the transaction read them.
        fileprivate var presence: RoomPresence

        /// Takes the audience's part out of `change` (inserted members, updates and removals of
        /// users not stored) and returns it with the presences to hold (joined, invited) and drop
        /// (quit, kicked); what stays in `change` is what the store writes to its rows.
        func split(_ change: inout GroupChange, until: Timestamp) -> RoomChange {
            let upserts = change.insertedMembers + change.updatedMembers.filter { !stored.contains($0.userID) }
            let removals = change.removedMembers.filter { !stored.contains($0) }
            change.insertedMembers = []
            change.updatedMembers.removeAll { !stored.contains($0.userID) }
            change.removedMembers.removeAll { !stored.contains($0) }
            change.group.memberCount = storedCount - change.removedMembers.count
            let joined = change.events.filter { $0.kind == .memberJoined || $0.kind == .memberInvited }.flatMap(\.targets)
            let left = change.events.filter { $0.kind == .memberQuit || $0.kind == .memberKicked }.flatMap(\.targets)
            // Every user a plan can add or remove is the operator or a target, whose presence the
            // snapshot read: the count after the change follows from it.
            let arriving = Set(joined).subtracting(presence.present).subtracting(left)
            let leaving = Set(left).intersection(presence.present)
            return RoomChange(
                upserts: upserts, removals: removals, presence: PresenceChange(hold: joined, until: until, drop: left),
                online: presence.online + arriving.count - leaving.count)
        }
    }

    /// The audience's part of a committed change of a room.
    struct RoomChange: Sendable {
        /// Members who joined or changed.
        var upserts: [Member]
        /// Members who left.
        var removals: [String]
        /// The presences the transaction held and dropped.
        var presence: PresenceChange
        /// The room's online count after the change.
        var online: Int
    }

    /// The room's entry for a mutation: the stored snapshot with the present audience members
    /// among the operator and the targets, and the live member count; `nil` without a `presence`
    /// (a group that keeps its members in the store).
    func complete(
        _ stored: GroupSnapshot, presence: RoomPresence?, app: String, operatorID: String?, targets: [String]
    ) -> Entry? {
        guard let presence else { return nil }
        var snapshot = stored
        var storedUsers = Set(stored.targets.keys)
        if let owner = stored.owner { storedUsers.insert(owner.userID) }
        if let own = stored.operatorMembership { storedUsers.insert(own.userID) }
        let listeners = audience.members(app: app, group: stored.group.id, users: targets + [operatorID].compactMap { $0 })
            .filter { presence.present.contains($0.key) }
        for (user, member) in listeners where snapshot.targets[user] == nil { snapshot.targets[user] = member }
        if snapshot.operatorMembership == nil, let user = operatorID { snapshot.operatorMembership = listeners[user] }
        snapshot.group.memberCount = stored.group.memberCount + presence.online
        return Entry(snapshot: snapshot, storedCount: stored.group.memberCount, stored: storedUsers, presence: presence)
    }

    /// Hands a committed change's audience part to this node's audience.
    func apply(_ change: RoomChange, app: String, groupID: String) {
        audience.apply(app: app, group: groupID, upserts: change.upserts, removals: change.removals)
    }

    // MARK: Other nodes, dismissal, streams

    /// Follows a room's event committed by any node (``AudienceRegistry/replay(_:)``).
    func replay(_ event: GroupEvent) {
        audience.replay(event)
    }

    /// Forgets a dismissed or revoked room's audience on this node and its viewers' presences
    /// (other group types have none: the delete finds nothing).
    func forget(app: String, groupID: String) async throws {
        audience.removeRoom(app: app, group: groupID)
        try await store.dropPresence(app: app, groupID: groupID, users: nil)
    }

    /// Extends the presences of `users` of `app`, in every room, to a grace period from `at`.
    func renew(app: String, users: [String], at: Timestamp) async throws {
        try await store.renewPresence(app: app, users: users, now: at, until: Self.presenceEnd(from: at))
    }

    /// Deletes presences that ended a grace period before `now` or earlier (one node at a time).
    func sweep(now: Timestamp) async throws {
        _ = try await store.exclusively("presence-sweep") {
            try await self.store.sweepPresence(before: now.adding(seconds: -GroupdService.presenceGraceSeconds))
        }
    }
}
