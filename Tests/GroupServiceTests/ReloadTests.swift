import Foundation
import GRPCProtocol
import GroupAPI
import GroupModel
import GroupService
import GroupTestSupport
import Logging
import PolicyHost
import Testing

private let secretC = "test-secret-for-app-c-0123456789abcdefgh"
private let request = Groupd_V1_GetGroupsInfoRequest.with { $0.groupIds = ["none"] }

/// An admin token of `app` signed with `secret` under `kid`, as raw headers.
private func admin(_ app: String, _ secret: String, kid: String) async throws -> TestIdentity {
    .headers(authorization: "Bearer " + (try await TokenMinter.mint(app: app, secret: secret, kid: kid, user: "backend", admin: true)), operatorID: nil)
}

@Suite("Reload")
struct ReloadTests {
    @Test("adding and removing an app by reload; the outcome names them")
    func addAndRemoveApps() async throws {
        let h = try await ServiceHarness()
        let kept = try await h.create(.public, owner: "owner-b", as: .admin(app: TestApps.appB))
        let appC = try await admin("app-c", secretC, kid: "c1")
        #expect(try await h.call(Methods.getGroupsInfo, request, as: appC).errorInfo?.reason == "UNKNOWN_APP")

        var next = h.configuration
        next.apps.append(GroupdConfiguration.App(id: "app-c", secrets: [.init(kid: "c1", secret: secretC)]))
        next.apps.removeAll { $0.id == TestApps.appB }
        let outcome = try await h.service.reload(to: next)
        #expect(outcome.appsAdded == ["app-c"])
        #expect(outcome.appsRemoved == [TestApps.appB])
        #expect(outcome.appsChanged.isEmpty)
        #expect(outcome.generation == 2)
        #expect(h.service.snapshot.generation == 2)

        #expect(try await h.call(Methods.getGroupsInfo, request, as: appC).code == .ok)
        let removed = try await h.call(Methods.getGroupsInfo, request, as: .admin(app: TestApps.appB))
        #expect(removed.code == .unauthenticated)
        #expect(removed.errorInfo?.reason == "UNKNOWN_APP")
        #expect(try await h.call(Methods.getGroupsInfo, request, as: .admin).code == .ok)

        // Added back, app-b finds its data again.
        _ = try await h.service.reload(to: h.configuration)
        #expect(try await h.read(kept.groupID, as: .admin(app: TestApps.appB))?.ownerUserID == "owner-b")
    }

    @Test("rotating a secret: the new kid works at once, the removed one fails even for a token verified before")
    func rotateSecret() async throws {
        let h = try await ServiceHarness()
        let old = try await admin(TestApps.appA, TestApps.secretA, kid: "k1")
        // Verified and cached under the first snapshot.
        #expect(try await h.call(Methods.getGroupsInfo, request, as: old).code == .ok)

        var next = h.configuration
        next.apps[0].secrets = [.init(kid: "k3", secret: "rotated-secret-for-app-a-0123456789abcdef")]
        let outcome = try await h.service.reload(to: next)
        #expect(outcome.appsChanged == [TestApps.appA])

        let refused = try await h.call(Methods.getGroupsInfo, request, as: old)
        #expect(refused.code == .unauthenticated)
        #expect(refused.errorInfo?.reason == "UNKNOWN_KID")
        let rotated = try await admin(TestApps.appA, "rotated-secret-for-app-a-0123456789abcdef", kid: "k3")
        #expect(try await h.call(Methods.getGroupsInfo, request, as: rotated).code == .ok)
    }

    @Test("a changed limit is in force for the next call; the context of a call already admitted keeps the old one")
    func changeLimit() async throws {
        let h = try await ServiceHarness()
        let name = String(repeating: "n", count: 20)
        let before = h.service.snapshot
        var next = h.configuration
        next.apps[0].limits.groupNameBytes = 10
        _ = try await h.service.reload(to: next)

        let refused = try await h.call(Methods.createGroup, createRequest(.public, name: name, owner: "owner-1"), as: .admin)
        #expect(refused.code == .invalidArgument)
        #expect(refused.errorInfo?.metadata["field"] == "profile.name")
        // The snapshot a call captured stays whole: the old limits, the old authenticator.
        #expect(before.limits(app: TestApps.appA)?.groupNameBytes == 30)
        #expect(h.service.snapshot.limits(app: TestApps.appA)?.groupNameBytes == 10)
        #expect(before.generation == 1)
        // App-b's limits did not change.
        #expect(try await h.call(Methods.createGroup, createRequest(.public, name: name, owner: "owner-1"), as: .admin(app: TestApps.appB)).code == .ok)
    }

    @Test("an invalid configuration is refused and the one in force stays")
    func invalidRefused() async throws {
        let h = try await ServiceHarness()
        var next = h.configuration
        next.apps.append(next.apps[0])  // duplicate app id
        await #expect(throws: ReloadError.self) { try await h.service.reload(to: next) }
        #expect(h.service.snapshot.generation == 1)
        #expect(h.service.configuration == h.configuration)
        #expect(try await h.call(Methods.getGroupsInfo, request, as: .admin).code == .ok)
    }

    @Test("reload(path:) refuses a bad file, names the problem, and keeps the configuration in force")
    func reloadFromFile() async throws {
        let h = try await ServiceHarness()
        let directory = try TemporaryDirectory()
        let path = directory.file("groupd.yaml")
        try "apps: [{id: a, secrets: [{kid: k1, secret: short}]}]".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(await h.service.reload(path: path) == nil)
        try "apps: [unclosed".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(await h.service.reload(path: path) == nil)
        #expect(await h.service.reload(path: directory.file("missing.yaml")) == nil)
        #expect(h.service.snapshot.generation == 1)

        var next = h.configuration
        next.apps[0].limits.maxPageSize = 7
        try String(decoding: try JSONEncoder().encode(next), as: UTF8.self).write(toFile: path, atomically: true, encoding: .utf8)
        let outcome = try #require(await h.service.reload(path: path))
        #expect(outcome.appsChanged == [TestApps.appA])
        #expect(h.service.snapshot.limits(app: TestApps.appA)?.maxPageSize == 7)
    }

    @Test("keys that need a restart are reported and keep their running values")
    func restartOnlyKeys() async throws {
        let h = try await ServiceHarness()
        var next = h.configuration
        next.listen.port = 4242
        next.dataDir = "/elsewhere"
        next.maxConnections = 5
        next.eventLoopThreads = 3
        next.writeBatch.maxWrites = 9
        next.auth.clockSkewSeconds = 30  // reloads
        let outcome = try await h.service.reload(to: next)
        #expect(Set(outcome.restartOnly.map(\.key))
            == ["listen.port", "data_dir", "max_connections", "event_loop_threads", "write_batch.max_writes"])
        #expect(h.service.configuration.writeBatch == h.configuration.writeBatch)
        let running = h.service.configuration
        #expect(running.listen.port == h.configuration.listen.port)
        #expect(running.dataDir == h.configuration.dataDir)
        #expect(running.maxConnections == h.configuration.maxConnections)
        #expect(running.eventLoopThreads == h.configuration.eventLoopThreads)
        #expect(running.auth.clockSkewSeconds == 30)
        #expect(outcome.restartOnly.first { $0.key == "listen.port" }?.requested == "4242")
        #expect(Set(GroupdConfiguration.restartOnlyKeys).isSuperset(of: outcome.restartOnly.map(\.key)))
    }

    @Test("rate-limit buckets carry over a reload that keeps the app's limits, and restart when they change")
    func rateLimitsAcrossReload() async throws {
        var configuration = TestApps.configuration()
        configuration.apps[0].rateLimits = RateLimits(perOperator: .init(perSecond: 0.01, burst: 1))
        let h = try await ServiceHarness(configuration: configuration)
        #expect(try await h.call(Methods.getGroupsInfo, request, as: .user("alice")).code == .ok)
        #expect(try await h.call(Methods.getGroupsInfo, request, as: .user("alice")).code == .resourceExhausted)

        var next = configuration
        next.apps[0].limits.maxPageSize = 10  // another change of the same app
        _ = try await h.service.reload(to: next)
        #expect(try await h.call(Methods.getGroupsInfo, request, as: .user("alice")).code == .resourceExhausted)

        next.apps[0].rateLimits.perOperator = .init(perSecond: 0.01, burst: 3)
        _ = try await h.service.reload(to: next)
        for _ in 0..<3 { #expect(try await h.call(Methods.getGroupsInfo, request, as: .user("alice")).code == .ok) }
        #expect(try await h.call(Methods.getGroupsInfo, request, as: .user("alice")).code == .resourceExhausted)

        next.apps[0].rateLimits = .unlimited
        _ = try await h.service.reload(to: next)
        for _ in 0..<5 { #expect(try await h.call(Methods.getGroupsInfo, request, as: .user("alice")).code == .ok) }
    }

    @Test("a policy plugin that fails to load refuses the reload; the snapshot in force stays")
    func policyLoadFailure() async throws {
        let temporary = try await temporaryStore()
        let host = PolicyHost()
        let configuration = TestApps.configuration()
        let service = GroupdService(
            configuration: configuration, store: temporary.store, authenticator: await Authenticator(apps: configuration.apps),
            logger: Logger(label: "groupd-test"), policy: ServicePolicy(host: host))
        var next = configuration
        next.apps[0].limits.maxPageSize = 5
        next.apps[0].policy = AppPolicySettings(plugins: [
            PluginConfiguration(path: "/nonexistent/libNoSuchPolicy.so", hooks: [.beforeCreateGroup]),
        ])
        do {
            _ = try await service.reload(to: next)
            Issue.record("the reload was accepted")
        } catch {
            guard case .policy(let message) = error else { Issue.record("\(error)"); return }
            #expect(message.contains("libNoSuchPolicy"), "\(message)")
        }
        #expect(service.snapshot.generation == 1)
        #expect(service.snapshot.limits(app: TestApps.appA)?.maxPageSize == configuration.apps[0].limits.maxPageSize)
        // Without the broken plugin the same change goes through.
        next.apps[0].policy = nil
        #expect(try await service.reload(to: next).generation == 2)
        try await host.shutdown()
    }

    @Test("calls racing reloads all succeed, each under one whole snapshot")
    func concurrentCallsAndReloads() async throws {
        let h = try await ServiceHarness()
        let base = h.configuration
        try await withThrowingTaskGroup(of: Int.self) { group in
            for caller in 0..<4 {
                group.addTask {
                    var failures = 0
                    for _ in 0..<50 {
                        let outcome = try await h.call(Methods.getGroupsInfo, request, as: .user("u\(caller)"))
                        if outcome.code != .ok { failures += 1 }
                    }
                    return failures
                }
            }
            group.addTask {
                for i in 0..<20 {
                    var next = base
                    next.apps[0].limits.maxPageSize = 10 + i
                    next.apps[0].secrets.append(.init(kid: "extra\(i)", secret: "extra-secret-\(i)-0123456789abcdefghijklmn"))
                    _ = try await h.service.reload(to: next)
                }
                return 0
            }
            var failures = 0
            for try await count in group { failures += count }
            #expect(failures == 0)
        }
        #expect(h.service.snapshot.generation == 21)
    }
}
