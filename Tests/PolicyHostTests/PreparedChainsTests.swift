import PolicyHost
import Testing

/// `prepare` / `install`: a reload builds every chain before anything changes, and an app's
/// `failureModes` decide what a failing plugin means on each hook.
@Suite("Prepared chains and per-app failure modes")
struct PreparedChainsTests {
    @Test func prepareChangesNothingUntilInstalled() async throws {
        let old = uniqueTag("prep-old"), new = uniqueTag("prep-new"), dropped = uniqueTag("prep-dropped")
        try await withHost { host in
            try host.apply(["app": AppPolicyConfiguration(plugins: [fixture("mode=reject;tag=\(old)", hooks: [.beforeCreateGroup])])])
            let prepared = try host.prepare(["app": AppPolicyConfiguration(plugins: [fixture("mode=allow;tag=\(new)", hooks: [.beforeCreateGroup])])])
            #expect(prepared.apps == ["app"])
            #expect(PluginLibraries.fixtureStat(new, 0) == 1)  // instantiated
            // Not in force yet: the old chain still rejects.
            if case .reject = await host.run(.beforeCreateGroup, app: "app", request: HookRequest()) {} else {
                Issue.record("the prepared chain was in force before install")
            }
            host.install(prepared)
            #expect(await host.run(.beforeCreateGroup, app: "app", request: HookRequest()) == .allow)
            #expect(await PluginLibraries.fixtureStat(old, 1, reaching: 1) == 1)

            // Prepared and never installed: its instances are destroyed when it is dropped.
            do {
                let unused = try host.prepare(["app": AppPolicyConfiguration(plugins: [fixture("mode=allow;tag=\(dropped)", hooks: [.afterEvent])])])
                #expect(unused.apps == ["app"])
                #expect(PluginLibraries.fixtureStat(dropped, 0) == 1)
            }
            #expect(await PluginLibraries.fixtureStat(dropped, 1, reaching: 1) == 1)
            #expect(await host.run(.beforeCreateGroup, app: "app", request: HookRequest()) == .allow)
        }
    }

    @Test func prepareFailsWithoutTouchingTheChains() async throws {
        let tag = uniqueTag("prep-keep")
        try await withHost { host in
            try host.apply(["app": AppPolicyConfiguration(plugins: [fixture("mode=reject;tag=\(tag)", hooks: [.beforeInvite])])])
            #expect(throws: PolicyLoadError.self) {
                _ = try host.prepare(["app": AppPolicyConfiguration(plugins: [fixture("mode=init_fail;tag=x", hooks: [.beforeInvite])])])
            }
            if case .reject = await host.run(.beforeInvite, app: "app", request: HookRequest(users: ["u"])) {} else {
                Issue.record("a failed prepare changed the chain in force")
            }
        }
    }

    @Test func appFailureModesApplyPerHookAndThePluginsOwnWins() async throws {
        let tag = uniqueTag("modes")
        try await withHost { host in
            try host.apply(["app": AppPolicyConfiguration(
                plugins: [fixture("mode=error;tag=\(tag)", hooks: [.beforeInvite, .beforeApplyToJoin, .validateGroupCustom])],
                failureModes: [.beforeInvite: .failClosed, .validateGroupCustom: .failOpen])])
            if case .error = await host.run(.beforeInvite, app: "app", request: HookRequest()) {} else {
                Issue.record("before_invite should fail closed by the app's failure_modes")
            }
            #expect(await host.run(.validateGroupCustom, app: "app", request: HookRequest()) == .allow)
            #expect(await host.run(.beforeApplyToJoin, app: "app", request: HookRequest()) == .allow)
            try host.apply(["app": AppPolicyConfiguration(
                plugins: [fixture("mode=error;tag=\(tag)", hooks: [.beforeInvite], failureMode: .failOpen)],
                failureModes: [.beforeInvite: .failClosed])])
            #expect(await host.run(.beforeInvite, app: "app", request: HookRequest()) == .allow)
        }
    }
}
