import GroupModel
@testable import GroupStore
import GroupTestSupport
import Testing

@Suite("Store conformance: AVChatRoom presences")
struct StorePresenceTests {
    private static let t0 = Timestamp(millisecondsSince1970: 1_700_000_000_000)

    private static func at(_ seconds: Int64) -> Timestamp { t0.adding(seconds: seconds) }

    @Test("A presence counts until it ends; renewal extends live ones only; drops and sweeps remove them", arguments: StoreKind.allCases)
    func leases(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            let app = TestApps.appA
            try await store.holdPresence(app: app, groupID: "room", users: ["ann", "bob", "ann"], until: Self.at(60))
            try await store.holdPresence(app: app, groupID: "other", users: ["ann"], until: Self.at(60))
            // A shorter hold keeps the longer end.
            try await store.holdPresence(app: app, groupID: "room", users: ["bob"], until: Self.at(10))
            #expect(try await store.presence(app: app, groupIDs: ["room", "other", "empty"], now: Self.at(0))
                == ["room": 2, "other": 1, "empty": 0])
            #expect(try await store.presentUsers(app: app, groupID: "room", users: ["ann", "bob", "cat"], now: Self.at(59))
                == ["ann", "bob"])
            // Ann's stream renews her presences in every room; Bob's ends at 60.
            try await store.renewPresence(app: app, users: ["ann"], now: Self.at(40), until: Self.at(100))
            #expect(try await store.presence(app: app, groupIDs: ["room", "other"], now: Self.at(60)) == ["room": 1, "other": 1])
            // An ended presence is not renewed: Bob is gone until he is held again.
            try await store.renewPresence(app: app, users: ["bob"], now: Self.at(61), until: Self.at(121))
            #expect(try await store.presentUsers(app: app, groupID: "room", users: ["bob"], now: Self.at(61)).isEmpty)
            // The same user in another app is another presence.
            #expect(try await store.presence(app: TestApps.appB, groupIDs: ["room"], now: Self.at(0)) == ["room": 0])
            // Dropped: one user, then the whole room.
            try await store.dropPresence(app: app, groupID: "other", users: ["ann"])
            #expect(try await store.presence(app: app, groupIDs: ["other"], now: Self.at(0)) == ["other": 0])
            try await store.holdPresence(app: app, groupID: "room", users: ["cat"], until: Self.at(100))
            try await store.dropPresence(app: app, groupID: "room", users: nil)
            #expect(try await store.presence(app: app, groupIDs: ["room"], now: Self.at(0)) == ["room": 0])
            // The sweep deletes what ended before its cutoff only.
            try await store.holdPresence(app: app, groupID: "room", users: ["old"], until: Self.at(10))
            try await store.holdPresence(app: app, groupID: "room", users: ["new"], until: Self.at(100))
            #expect(try await store.sweepPresence(before: Self.at(50)) == 1)
            #expect(try await store.presence(app: app, groupIDs: ["room"], now: Self.at(0)) == ["room": 1])
        }
    }

    private static func create(_ store: Store, _ id: String, type: GroupType) async throws {
        let request = GroupCreationRequest(type: type, groupID: id, name: id)
        _ = try await store.createGroup(
            try GroupRules.planCreation(request, appID: TestApps.appA, creatorID: "owner", limits: .defaults, now: t0))
    }

    /// `user` joins `room` in one mutation: the plan sees the presences `seen` receives and holds
    /// `user`'s, dropping `leaving`'s.
    private static func join(
        _ store: Store, _ room: String, _ user: String, leaving: [String] = [], targets: [String] = [],
        seen: @escaping @Sendable (RoomPresence?) throws -> Void = { _ in }
    ) async throws -> Committed<RoomPresence?> {
        try await store.mutateGroup(
            app: TestApps.appA, groupID: room, operatorID: user, targets: targets, at: at(0), parts: [.presence]
        ) { snapshot, presence in
            try seen(presence)
            let change = GroupChange(
                group: snapshot.group, events: [.init(kind: .memberJoined, operatorID: user, targets: [user])])
            return (change, PresenceChange(hold: [user], until: at(60), drop: leaving), presence)
        }
    }

    @Test("A room's mutation reads its presences and writes its holds and drops in its own transaction; a refused plan or an aborted batch writes none", arguments: StoreKind.allCases)
    func inTheTransaction(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            let app = TestApps.appA
            try await Self.create(store, "room", type: .avChatRoom)
            try await Self.create(store, "work", type: .work)
            try await store.holdPresence(app: app, groupID: "room", users: ["ann", "old"], until: Self.at(60))
            try await store.holdPresence(app: app, groupID: "room", users: ["gone"], until: Self.at(-1))
            // The snapshot: the online count, and which of the operator and targets are present
            // (an ended lease is not).
            let first = try await Self.join(store, "room", "cat", leaving: ["old"], targets: ["ann", "gone", "nobody"])
            #expect(first.value == RoomPresence(present: ["ann"], online: 2))
            #expect(first.events.map(\.kind) == [.memberJoined])
            #expect(try await store.presence(app: app, groupIDs: ["room"], now: Self.at(0)) == ["room": 2])
            #expect(try await store.presentUsers(app: app, groupID: "room", users: ["ann", "cat", "old"], now: Self.at(0))
                == ["ann", "cat"])
            // A group whose members are stored reads none.
            let work = try await Self.join(store, "work", "dan")
            #expect(work.value == nil)
            // A refused plan, and a batch aborted after the plan: nothing held, nothing dropped.
            let refused = await Fixture.groupError {
                _ = try await Self.join(store, "room", "eve", leaving: ["ann"]) { _ in
                    throw GroupError(code: .permissionDenied, reason: .permissionDenied, message: "refused")
                }
            }
            #expect(refused?.code == .permissionDenied)
            store.injectFault { method in
                if method == "mutateGroup" { throw GroupError.internal("injected") }
            }
            let aborted = await Fixture.groupError { _ = try await Self.join(store, "room", "eve", leaving: ["ann"]) }
            #expect(aborted?.code == .internal)
            store.injectFault(nil)
            #expect(try await store.presentUsers(app: app, groupID: "room", users: ["ann", "cat", "eve"], now: Self.at(0))
                == ["ann", "cat"])
            // The next mutation sees what the first one wrote.
            let second = try await Self.join(store, "room", "eve", targets: ["cat"])
            #expect(second.value == RoomPresence(present: ["cat"], online: 2))
            #expect(try await store.presence(app: app, groupIDs: ["room"], now: Self.at(0)) == ["room": 3])
        }
    }
}
