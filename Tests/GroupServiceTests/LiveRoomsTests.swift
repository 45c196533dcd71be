import GroupModel
@testable import GroupService
import GroupStore
import GroupTestSupport
import Testing

/// The AVChatRoom seam without a server: how a room's snapshot is completed before the plan and
/// how the audience's part (members, presences, online count) leaves the plan's change.
@Suite("LiveRooms: a room's part of a mutation")
struct LiveRoomsTests {
    private static let t0 = Timestamp(millisecondsSince1970: 1_700_000_000_000)
    private static let app = TestApps.appA

    private static func room(memberCount: Int) -> Group {
        Group(
            appID: app, id: "room", type: .avChatRoom, name: "room", settings: GroupType.avChatRoom.preset.defaultSettings,
            ownerID: "owner", maxMembers: nil, memberCount: memberCount, createdAt: t0, updatedAt: t0)
    }

    private static func member(_ user: String, role: MemberRole = .member) -> Member {
        Member(userID: user, role: role, joinedAt: t0, joinSequence: 1)
    }

    private static func stored() -> GroupSnapshot {
        GroupSnapshot(
            group: room(memberCount: 1), operatorMembership: nil, targets: [:], owner: member("owner", role: .owner),
            successor: nil, joinedGroupCounts: [:], retainedMutes: [:])
    }

    @Test("The snapshot gains the present audience and the live count; the audience's part leaves the change with its presences and the count after it")
    func completeAndSplit() async throws {
        try await withTemporaryStore { store in
            let rooms = LiveRooms(store: store, clock: SystemWallClock())
            // Ann and Bob are in this node's audience; only Ann's lease runs. Three leases run in
            // all (a viewer this node does not hold among them).
            rooms.apply(
                LiveRooms.RoomChange(
                    upserts: [Self.member("ann"), Self.member("bob")], removals: [],
                    presence: PresenceChange(hold: [], until: Self.t0, drop: []), online: 0),
                app: Self.app, groupID: "room")
            let presence = RoomPresence(present: ["ann"], online: 3)
            let entry = try #require(rooms.complete(
                Self.stored(), presence: presence, app: Self.app, operatorID: "ann", targets: ["bob"]))
            #expect(entry.snapshot.operatorMembership?.userID == "ann")
            #expect(entry.snapshot.targets["bob"] == nil)  // in the audience, but gone
            #expect(entry.snapshot.group.memberCount == 4)  // the owner and three viewers
            // A group whose members are stored has no entry.
            #expect(rooms.complete(Self.stored(), presence: nil, app: Self.app, operatorID: "ann", targets: []) == nil)

            // Ann quits and Cat joins (a plan of two users, to see both sides).
            var change = GroupChange(
                group: entry.snapshot.group, insertedMembers: [Self.member("cat")], removedMembers: ["ann"],
                events: [
                    .init(kind: .memberQuit, operatorID: "ann", targets: ["ann"]),
                    .init(kind: .memberJoined, operatorID: "cat", targets: ["cat"]),
                ])
            let until = Self.t0.adding(seconds: 60)
            let part = entry.split(&change, until: until)
            #expect(part.upserts.map(\.userID) == ["cat"])
            #expect(part.removals == ["ann"])
            #expect(part.presence == PresenceChange(hold: ["cat"], until: until, drop: ["ann"]))
            #expect(part.online == 3)  // Cat arrives, Ann leaves
            // What the store writes: no audience rows, the stored count.
            #expect(change.insertedMembers.isEmpty && change.removedMembers.isEmpty)
            #expect(change.group.memberCount == 1)
            #expect(change.events.count == 2)

            // A viewer whose lease still runs but whom this node forgot (a restart) joins again:
            // held again, not counted twice.
            let again = try #require(rooms.complete(
                Self.stored(), presence: RoomPresence(present: ["dan"], online: 3), app: Self.app, operatorID: "dan",
                targets: []))
            #expect(again.snapshot.operatorMembership == nil)
            var rejoin = GroupChange(
                group: again.snapshot.group, insertedMembers: [Self.member("dan")],
                events: [.init(kind: .memberJoined, operatorID: "dan", targets: ["dan"])])
            let counted = again.split(&rejoin, until: until)
            #expect(counted.presence.hold == ["dan"])
            #expect(counted.online == 3)
        }
    }
}
