import Dispatch
import GRPCProtocol
import GroupAPI
import GroupModel
@testable import GroupService
import GroupStore
import GroupTestSupport
import Foundation
import Synchronization
import Testing

@Suite("Subscribe: hub hooks, AVChatRoom messages, approvers, interruption")
struct SubscribeHubTests {
    @Test("AVChatRoom messages reach the room's current audience on this node, in order with stored items")
    func roomMessages() async throws {
        let harness = try await ServiceHarness()
        try await harness.create(.avChatRoom, id: "room", owner: "alice", as: .admin)
        let viewer = try await TestStream(harness, subscribeRequest(), as: .user("viewer"))
        let muted = try await TestStream(harness, subscribeRequest(excludeMessages: true), as: .user("viewer"))
        let outsider = try await TestStream(harness, subscribeRequest(), as: .user("outsider"))
        let owner = try await TestStream(harness, subscribeRequest(), as: .user("alice"))
        for stream in [viewer, muted, outsider, owner] { await stream.waitCaughtUp() }
        _ = try await harness.ok(StreamMemberMethods.joinGroup, .with { $0.groupID = "room" }, as: .user("viewer"))
        await viewer.wait { $0.filter(\.hasEvent).count == 1 }
        let message = Groupd_V1_GroupMessage.with {
            $0.groupID = "room"
            $0.messageID = "m1"
            $0.senderUserID = "alice"
            $0.text = "live"
        }
        harness.service.events.publishRoomMessage(app: TestApps.appA, groupID: "room", message: message)
        await harness.service.events.drain()
        await viewer.wait { $0.contains(where: \.hasMessage) }
        await owner.wait { $0.contains(where: \.hasMessage) }
        #expect(viewer.items.filter(\.hasMessage).map(\.message.text) == ["live"])
        // Its cursor is the last stored position: resuming from it repeats no stored item.
        let join = try #require(viewer.items.first { $0.hasEvent })
        #expect(viewer.items.last?.cursor == join.cursor)
        #expect(muted.items.filter(\.hasMessage).isEmpty)
        #expect(outsider.items.filter(\.hasMessage).isEmpty)
        for stream in [viewer, muted, outsider, owner] { await stream.cancel() }
    }

    @Test("Approver notifications reach the owner's and admins' streams, not the members'")
    func approversLive() async throws {
        let harness = try await ServiceHarness()
        try await harness.create(.public, id: "p", members: [("bob", .admin), ("dan", .member)], owner: "alice", as: .admin)
        let streams = try await [("alice", true), ("bob", true), ("dan", false)].asyncMap { user, _ in
            try await TestStream(harness, subscribeRequest(), as: .user(user))
        }
        for stream in streams { await stream.waitCaughtUp() }
        _ = try await harness.ok(StreamMemberMethods.joinGroup, .with { $0.groupID = "p" }, as: .user("carol"))
        try await harness.rename("p", to: "marker", as: .user("alice"))
        for stream in streams { await stream.wait { $0.filter(\.hasEvent).contains { $0.event.kind == .groupInfoChanged } } }
        #expect(streams[0].events.map(\.kind) == [.applicationReceived, .groupInfoChanged])
        #expect(streams[1].events.map(\.kind) == [.applicationReceived, .groupInfoChanged])
        #expect(Set(streams[0].events[0].recipientUserIds) == ["alice", "bob"])
        #expect(streams[2].events.map(\.kind) == [.groupInfoChanged])
        for stream in streams { await stream.cancel() }
    }

    @Test("observeCommitted gets every committed batch in order, whoever wrote it, and a slow handler delays no stream")
    func observeCommitted() async throws {
        let harness = try await ServiceHarness()
        let batches = Mutex<[[Int64]]>([])
        // A latch: closed, the observer blocks on it; once opened it stays open (each pass re-opens it).
        let gate = DispatchSemaphore(value: 0)
        let (observed, observedSignal) = AsyncStream<Void>.makeStream()
        harness.service.events.observeCommitted { events in
            gate.wait()
            gate.signal()
            batches.withLock { $0.append(events.map(\.eventID)) }
            observedSignal.yield()
        }
        try await harness.create(.work, id: "g", members: [("bob", .member)], owner: "alice", as: .admin)
        let bob = try await TestStream(harness, subscribeRequest(), as: .user("bob"))
        await bob.waitCaughtUp()
        for round in 0..<3 { try await harness.rename("g", to: "n\(round)", as: .user("alice")) }
        // The stream is served while the observer is still blocked.
        await bob.wait { $0.filter(\.hasEvent).count == 3 }
        #expect(batches.withLock { $0.isEmpty })
        gate.signal()
        let log = try await harness.fullLog().map(\.eventID)
        // Each batch the observer takes is an event: wait for the ones that make up the log.
        for await _ in observed {
            let seen = batches.withLock { batches in batches.reduce(0) { $0 + $1.count } }
            if seen >= log.count { break }
        }
        #expect(batches.withLock { $0.flatMap { $0 } } == log)
        #expect(batches.withLock { $0.count } == 4)
        await bob.cancel()
    }

    @Test("When committed rows cannot be read, every stream ends with UNAVAILABLE / STREAM_INTERRUPTED and its cursor")
    func interrupted() async throws {
        let harness = try await ServiceHarness()
        try await harness.create(.work, id: "g", members: [("bob", .member)], owner: "alice", as: .admin)
        let bob = try await TestStream(harness, subscribeRequest(fromOldest: true), as: .user("bob"))
        await bob.waitCaughtUp()
        harness.service.events.publish(.failure(GroupError.internal("unreadable")))
        let status = await bob.waitEnd()
        #expect(status?.code == .unavailable)
        #expect(status?.errorInfo?.reason == "STREAM_INTERRUPTED")
        #expect(status?.resumeInfo?.cursor == bob.items.last?.cursor)
        #expect(harness.service.events.streamCount == 0)
    }
}

extension Sequence {
    /// `map` with an async transform, in order.
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var result: [T] = []
        for element in self { result.append(try await transform(element)) }
        return result
    }
}
