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
}
