import GroupModel
import GroupStore
import GroupTestSupport
import Synchronization
import Testing

/// The batch observer behind `groupd_store_commit_*`: every transaction of group commit, its
/// mutation count and its time.
@Suite("Store conformance: batch observation")
struct StoreBatchObservationTests {
    @Test("held writes released together are one observed batch of their count", arguments: StoreKind.allCases)
    func batchSizes(kind: StoreKind) async throws {
        try await withTemporaryStore(kind) { store in
            let seen = Mutex<[(Int, Duration)]>([])
            store.observeCommitBatches { mutations, duration in seen.withLock { $0.append((mutations, duration)) } }
            try await Fixture.create(store, "first")
            #expect(seen.withLock { $0.map(\.0) } == [1])

            store.holdCommits()
            async let created: Void = withThrowingTaskGroup(of: Void.self) { tasks in
                for n in 0..<5 { tasks.addTask { try await Fixture.create(store, "g\(n)") } }
                try await tasks.waitForAll()
            }
            await store.waitUntilQueued(5)
            store.releaseCommits()
            try await created
            let batches = seen.withLock { $0 }
            #expect(batches.map(\.0) == [1, 5])
            #expect(batches.allSatisfy { $0.1 > .zero })
        }
    }
}
