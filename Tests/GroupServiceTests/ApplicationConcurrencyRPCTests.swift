import GRPCProtocol
import GroupAPI
import GroupModel
import GroupService
import GroupTestSupport
import Testing

/// Decisions and listings racing each other through the router, against the real SQLite store.
@Suite("Applications under concurrency, in process")
struct ApplicationConcurrencyRPCTests {
    @Test("Owner and admin accept every item at the same moment: one wins each, the other gets APPLICATION_ALREADY_HANDLED")
    func concurrentAccepts() async throws {
        let h = try await ServiceHarness()
        try await h.applicationGroup("pub")
        var ids: [String] = []
        for index in 0..<15 { ids.append(try await h.pendingApplication("pub", as: "user\(index)").applicationID) }
        let reasons = try await withThrowingTaskGroup(of: String.self) { group in
            for id in ids {
                for approver in ["owner", "adam"] {
                    group.addTask {
                        let outcome = try await h.accept(id, as: .user(approver))
                        return outcome.errorInfo?.reason ?? (outcome.code == .ok ? "OK" : "\(outcome.code)")
                    }
                }
            }
            var all: [String] = []
            for try await reason in group { all.append(reason) }
            return all
        }
        #expect(reasons.filter { $0 == "OK" }.count == 15)
        #expect(reasons.filter { $0 == "APPLICATION_ALREADY_HANDLED" }.count == 15)
        let group = try #require(try await h.read("pub", as: .user("owner")))
        #expect(group.memberCount == 18)
        let listing = try await h.applications(as: .user("owner"), states: [.accepted], pageSize: 100)
        #expect(listing.applications.count == 15)
        #expect(Set(listing.applications.map(\.handledByUserID)).isSubset(of: ["owner", "adam"]))
        let joined = try await h.events("pub").filter { $0.kind == .memberJoined }.flatMap(\.targets)
        #expect(joined.count == 15 && Set(joined).count == 15)
    }
}
