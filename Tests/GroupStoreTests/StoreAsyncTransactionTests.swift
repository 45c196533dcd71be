import Foundation
import GroupModel
@testable import GroupStore
@testable import GroupStorePostgres
@testable import GroupStoreSQLite
import GroupTestSupport
import NIOCore
import Synchronization
import Testing

/// The transaction seam is async: a piece of work may suspend inside its batch, and each backend
/// runs it where its connection lives (SQLite: on the thread of GRDB's writer access; PostgreSQL:
/// on the writer connection's event loop, as its reads run on theirs).
@Suite("Async transactions: where a batch's pieces of work and a read run")
struct StoreAsyncTransactionTests {
    /// An actor elsewhere: awaiting it suspends the piece of work and resumes it later.
    actor Elsewhere {
        private(set) var visits = 0
        func visit() -> Int {
            visits += 1
            return visits
        }
    }

    /// Runs `work` as a batch of its own on `backend` and returns how the batch ended.
    static func commit(_ backend: any StoreBackend, scope: WriteScope, _ work: @escaping TransactionWork) async -> BatchOutcome {
        await withCheckedContinuation { continuation in
            backend.commit([work], scopes: [scope]) { continuation.resume(returning: $0) }
        }
    }

    @Test("a piece of work that suspends between two loads still runs both inside its batch, which commits", arguments: StoreKind.allCases)
    func suspendingPieceOfWork(kind: StoreKind) async throws {
        let temporary = try await temporaryStore(kind)
        try await Fixture.create(temporary.store, "g", members: ["bob"])
        let elsewhere = Elsewhere()
        let loads = Mutex<[Int]>([])
        let time = Timestamp(millisecondsSince1970: 1_900_000_000_000)
        let outcome = await Self.commit(temporary.backend, scope: .groups(["g"], app: Fixture.app)) { transaction in
            let before = try await transaction.load(SnapshotRequest(app: Fixture.app, group: "g", time: time))
            // A real suspension: the hop to the actor and back. SQLite's GRDB would trap if the
            // second load ran off its writer access's thread.
            _ = await elsewhere.visit()
            let after = try await transaction.load(SnapshotRequest(app: Fixture.app, group: "g", time: time))
            loads.withLock { $0 = [before.group?.memberCount ?? -1, after.group?.memberCount ?? -1] }
        }
        guard case .committed = outcome.ending else {
            Issue.record("the batch did not commit: \(outcome.ending)")
            return
        }
        #expect(outcome.failures.isEmpty)
        #expect(loads.withLock { $0 } == [2, 2])
        #expect(await elsewhere.visits == 1)
        // The store goes on writing after it.
        #expect(try await Fixture.send(temporary.store, "g", from: "bob").stored.message.sequence == 2)
    }

    @Test(
        "PostgreSQL: a batch's pieces of work run on the writer connection's event loop, before and after a suspension; a read on its connection's",
        .enabled(if: PostgresTestServer.settings != nil))
    func postgresRunsOnTheEventLoops() async throws {
        let temporary = try await temporaryStore(.postgres)
        let backend = try #require(temporary.backend as? PostgresBackend)
        try await Fixture.create(temporary.store, "g", members: ["bob"])
        let elsewhere = Elsewhere()
        let onLoop = Mutex<[Bool]>([])
        let loop = backend.writer.executor.eventLoop
        let outcome = await Self.commit(backend, scope: .groups(["g"], app: Fixture.app)) { transaction in
            onLoop.withLock { $0.append(loop.inEventLoop) }
            _ = await elsewhere.visit()
            onLoop.withLock { $0.append(loop.inEventLoop) }
            _ = try await transaction.load(
                SnapshotRequest(app: Fixture.app, group: "g", time: Timestamp(millisecondsSince1970: 1_900_000_000_000)))
            onLoop.withLock { $0.append(loop.inEventLoop) }
        }
        guard case .committed = outcome.ending else {
            Issue.record("the batch did not commit: \(outcome.ending)")
            return
        }
        #expect(onLoop.withLock { $0 } == [true, true, true])
        let readOnLoop = try await backend.readers.run { session in
            _ = try await session.first("SELECT 1") { try $0.int(0) }
            return session.executor.eventLoop.inEventLoop
        }
        #expect(readOnLoop)
        // The caller's own task is not moved: only the body ran there.
        #expect(!loop.inEventLoop)
    }
}
