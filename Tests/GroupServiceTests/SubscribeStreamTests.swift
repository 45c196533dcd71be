import GRPCProtocol
import GroupAPI
import GroupModel
import GroupService
import GroupStore
import GroupTestSupport
import Testing

/// `(group, sequence)` of each event item, for comparing streams with the stored log.
private func positions(_ items: [Groupd_V1_SubscribeResponse]) -> [String] {
    items.compactMap { $0.hasEvent ? "\($0.event.groupID)#\($0.event.sequence)" : nil }
}

@Suite("Subscribe: backlog, handover, resume")
struct SubscribeStreamTests {
    @Test("Backlog, then caught_up, then live items, each with a cursor")
    func backlogThenLive() async throws {
        let harness = try await ServiceHarness()
        try await harness.create(.public, id: "g", members: [("bob", .member)], owner: "alice", as: .admin)
        let stream = try await TestStream(harness, subscribeRequest(fromOldest: true), as: .user("bob"))
        await stream.waitCaughtUp()
        try await harness.rename("g", to: "renamed", as: .user("alice"))
        await stream.wait { $0.count == 3 }
        let items = stream.items
        #expect(items[0].event.kind == .groupCreated)
        #expect(items[1].hasCaughtUp)
        #expect(items[1].cursor == items[0].cursor)
        #expect(items[2].event.kind == .groupInfoChanged)
        #expect(items[2].event.groupName == "renamed")
        #expect(items[2].event.groupType == .public)
        #expect(items.allSatisfy { !$0.cursor.isEmpty })
        await stream.cancel()
    }

    @Test("An empty cursor starts live from now; a cursor resumes right after its item")
    func emptyCursorAndResume() async throws {
        let harness = try await ServiceHarness()
        try await harness.create(.public, id: "g", members: [("bob", .member)], owner: "alice", as: .admin)
        let live = try await TestStream(harness, subscribeRequest(), as: .user("bob"))
        await live.waitCaughtUp()
        #expect(live.items.count == 1)
        try await harness.rename("g", to: "one", as: .user("alice"))
        try await harness.rename("g", to: "two", as: .user("alice"))
        await live.wait { $0.count == 3 }
        let first = live.items[1]
        await live.cancel()
        let resumed = try await TestStream(harness, subscribeRequest(cursor: first.cursor), as: .user("bob"))
        await resumed.waitCaughtUp()
        #expect(positions(resumed.items) == ["g#3"])
        await resumed.cancel()
    }

    @Test("Killing the stream mid-way and resuming with its last cursor loses and repeats nothing, under concurrent writes")
    func resumeUnderLoad() async throws {
        let harness = try await ServiceHarness()
        try await harness.create(.public, id: "g1", members: [("bob", .member)], owner: "alice", as: .admin)
        try await harness.create(.work, id: "g2", members: [("bob", .member)], owner: "alice", as: .admin)
        let writer = Task {
            for round in 0..<40 {
                try await harness.rename(round % 2 == 0 ? "g1" : "g2", to: "n\(round)", as: .user("alice"))
            }
        }
        var received: [Groupd_V1_SubscribeResponse] = []
        var cursor = ""
        // Several connections, each killed after a few items while the writer runs.
        for _ in 0..<6 {
            let stream = try await TestStream(
                harness, subscribeRequest(cursor: cursor, fromOldest: cursor.isEmpty), as: .user("bob"))
            await stream.wait { $0.filter(\.hasEvent).count >= 3 || $0.contains(where: \.hasCaughtUp) }
            await stream.cancel()
            let items = stream.items.filter(\.hasEvent)
            received += items
            if let last = stream.items.last { cursor = last.cursor }
        }
        try await writer.value
        let last = try await TestStream(
            harness, subscribeRequest(cursor: cursor, fromOldest: cursor.isEmpty), as: .user("bob"))
        await last.waitCaughtUp()
        received += last.items.filter(\.hasEvent)
        await last.cancel()

        let log = try await harness.fullLog().map { "\($0.event.groupID)#\($0.event.sequence)" }
        #expect(positions(received) == log)
        #expect(Set(positions(received)).count == received.count)
        #expect(log.count == 2 + 40)
    }

    @Test("A stream open while writes race its subscription gets every item once, in order per group")
    func handoverRace() async throws {
        let harness = try await ServiceHarness()
        try await harness.create(.public, id: "g", members: [("bob", .member)], owner: "alice", as: .admin)
        // The writer says when its writes have begun; the subscription then races the rest.
        let (begun, begunSignal) = AsyncStream<Void>.makeStream()
        let writer = Task {
            for round in 0..<60 {
                try await harness.rename("g", to: "n\(round)", as: .user("alice"))
                if round == 0 { begunSignal.yield() }
            }
        }
        for await _ in begun { break }
        let stream = try await TestStream(harness, subscribeRequest(fromOldest: true), as: .user("bob"))
        try await writer.value
        await stream.wait { $0.filter(\.hasEvent).count >= 61 }
        let sequences = stream.events.map(\.sequence)
        #expect(sequences == Array(1...61))
        #expect(stream.items.filter(\.hasCaughtUp).count == 1)
        await stream.cancel()
    }

    @Test("A second device of the same user gets the same items")
    func twoDevices() async throws {
        let harness = try await ServiceHarness()
        try await harness.create(.public, id: "g", members: [("bob", .member)], owner: "alice", as: .admin)
        let phone = try await TestStream(harness, subscribeRequest(fromOldest: true), as: .user("bob"))
        let laptop = try await TestStream(harness, subscribeRequest(fromOldest: true), as: .user("bob"))
        await phone.waitCaughtUp()
        await laptop.waitCaughtUp()
        for round in 0..<5 { try await harness.rename("g", to: "n\(round)", as: .user("alice")) }
        await phone.wait { $0.filter(\.hasEvent).count == 6 }
        await laptop.wait { $0.filter(\.hasEvent).count == 6 }
        #expect(positions(phone.items) == positions(laptop.items))
        #expect(phone.events.map(\.eventID) == laptop.events.map(\.eventID))
        await phone.cancel()
        await laptop.cancel()
    }

    @Test("A malformed cursor is INVALID_ARGUMENT naming cursor; a cursor ahead of the log too")
    func malformedCursor() async throws {
        let harness = try await ServiceHarness()
        for cursor in ["bogus", "1.", "1.x.5", "2.1.1", "1.-1.5", "1.1"] {
            let stream = try await TestStream(harness, subscribeRequest(cursor: cursor), as: .user("bob"))
            let status = await stream.waitEnd()
            #expect(status?.code == .invalidArgument, "\(cursor)")
            #expect(status?.errorInfo?.metadata["field"] == "cursor", "\(cursor)")
        }
        let ahead = try await TestStream(harness, subscribeRequest(cursor: "1.999.1700000000000"), as: .user("bob"))
        #expect(await ahead.waitEnd()?.code == .invalidArgument)
        let badKind = try await TestStream(
            harness, subscribeRequest(kinds: [.init(rawValue: 999) ?? .unspecified]), as: .admin)
        #expect(await badKind.waitEnd()?.code == .invalidArgument)
    }
}
