import Foundation
import GroupModel
@testable import GroupStore
@testable import GroupStorePostgres
@testable import GroupStoreSQL
@testable import GroupStoreSQLite
import GroupTestSupport
import Logging
import NIOPosix
import Synchronization
import Testing

/// The wake-up between nodes: a doorbell sent after `COMMIT`, and a poll of the apps' heads as
/// its backstop. Run when `GROUPD_TEST_POSTGRES_URL` names a server (`make test-postgres`).
@Suite(
    "Doorbells: wake-ups between nodes after the commit, with a poll as the backstop",
    .enabled(if: PostgresTestServer.settings != nil), .timeLimit(.minutes(1)))
struct StoreDoorbellTests {
    typealias Feed = StoreSharedDatabaseTests.Feed

    /// A second node on `seed`'s database whose follower polls the heads every `pollMilliseconds`.
    static func node(on seed: TemporaryStore, pollMilliseconds: Int) async throws -> (Store, PostgresBackend) {
        var settings = try #require(seed.postgres)
        settings.eventPollMilliseconds = pollMilliseconds
        let backend = try await PostgresBackend.open(settings: settings)
        return (Store(backend: backend, cacheCapacity: 0), backend)
    }

    @Test("a node that dies between its commit and its doorbell loses no event on the other node: the poll delivers it")
    func lostDoorbell() async throws {
        let a = try await temporaryStore(.postgres)
        let writer = try #require(a.backend as? PostgresBackend)
        // The other node hears no doorbell at all; only its poll can find the events.
        writer.dropDoorbells(true)
        let (b, reader) = try await Self.node(on: a, pollMilliseconds: 20)
        defer { reader.closeNow() }
        let feed = Feed(b)
        try await Fixture.create(a.store, "g", members: ["bob"])
        for _ in 0..<5 { _ = try await Fixture.send(a.store, "g", from: "bob") }
        await feed.wait(for: 6)
        #expect(writer.doorbellsSent.load(ordering: .relaxed) == 0)
        let stored = try await Fixture.events(a.store, "g")
        #expect(feed.events.map(\.event.sequence) == stored.map(\.sequence))
        #expect(feed.events.map(\.event.sequence) == Array(1...6))
    }

    @Test("the doorbell alone wakes the other node (its poll an hour away), and a repeated range reads nothing")
    func doorbellAlone() async throws {
        let a = try await temporaryStore(.postgres)
        let writer = try #require(a.backend as? PostgresBackend)
        let (b, reader) = try await Self.node(on: a, pollMilliseconds: 3_600_000)
        defer { reader.closeNow() }
        let feed = Feed(b)
        try await Fixture.create(a.store, "g", members: ["bob"])
        _ = try await Fixture.send(a.store, "g", from: "bob")
        await feed.wait(for: 2)
        #expect(writer.doorbellsSent.load(ordering: .relaxed) >= 1)
        let delivered = try #require(feed.events.last?.eventID)
        let readsBefore = reader.follower.tableReadCount

        // A doorbell for a range the node delivered already (as a late or repeated one would be),
        // rung from a connection that is no node's: no read. Then a real commit's doorbell, which
        // the follower handles after the repeated one: one read.
        let bell = PostgresSession(
            settings: a.postgres!, eventLoop: reader.group.next(), logger: .init(label: "test"), id: 97)
        defer { bell.disconnectBlocking() }
        try await bell.command(
            "SELECT pg_notify(?, ?)",
            [.text(PostgresSchema.eventChannel), .text(PostgresBackend.doorbellPayload(app: Fixture.app, range: delivered...delivered))])
        _ = try await Fixture.send(a.store, "g", from: "bob")
        await feed.wait(for: 3)
        #expect(reader.follower.tableReadCount == readsBefore + 1)
        #expect(feed.events.map(\.event.sequence) == [1, 2, 3])
    }

    @Test("a doorbell's payload names the app and the range; an app id alone (an older node's) is read as such")
    func payloads() {
        let payload = PostgresBackend.doorbellPayload(app: "app one", range: 41...47)
        #expect(payload == "41 47 app one")
        #expect(PostgresEventFollower.parseDoorbell(payload) == ("app one", 47))
        #expect(PostgresEventFollower.parseDoorbell("demo") == ("demo", nil))
        #expect(PostgresEventFollower.parseDoorbell("1 x demo") == ("1 x demo", nil))
        #expect(PostgresEventFollower.parseDoorbell("1 2 ") == ("1 2 ", nil))
    }
}
