import PolicyHost
import Testing

@Suite("Concurrency: one instance, many callers, reloads while calls run")
struct ConcurrencyTests {
    @Test func manyTasksCallOneInstance() async throws {
        let tag = uniqueTag("concurrent")
        try await withHost(threads: 4) { host in
            try host.apply(["app": AppPolicyConfiguration(plugins: [
                fixture("mode=echo;delay_ms=2;tag=\(tag)", hooks: [.beforeSendGroupMessage]),
            ], budget: .seconds(10))])
            let outcomes = await withTaskGroup(of: (Int, HookOutcome).self) { group in
                for index in 0..<200 {
                    group.addTask {
                        let request = HookRequest(operatorID: "user\(index)", fields: [HookField("message.text", "text \(index)")])
                        return (index, await host.run(.beforeSendGroupMessage, app: "app", request: request))
                    }
                }
                var outcomes: [Int: HookOutcome] = [:]
                for await (index, outcome) in group { outcomes[index] = outcome }
                return outcomes
            }
            #expect(outcomes.count == 200)
            for (index, outcome) in outcomes {
                #expect(outcome == .rewrite(["echo": "user\(index):text \(index)"]))
            }
            #expect(PluginLibraries.fixtureStat(tag, 2) > 1)  // calls really overlapped on the instance
            #expect(PluginLibraries.fixtureStat(tag, 3) == 200)
        }
    }

    @Test func reloadSwapsChainsAndOldInstancesAreDestroyedAfterTheyDrain() async throws {
        let old = uniqueTag("old"), new = uniqueTag("new")
        try await withHost(threads: 4) { host in
            try host.apply(["app": AppPolicyConfiguration(plugins: [
                fixture("mode=echo;delay_ms=50;tag=\(old)", hooks: [.beforeSendGroupMessage]),
            ], budget: .seconds(10))])
            #expect(PluginLibraries.fixtureStat(old, 0) == 1)
            let outcomes = await withTaskGroup(of: HookOutcome.self) { group in
                for index in 0..<40 {
                    group.addTask {
                        await host.run(.beforeSendGroupMessage, app: "app",
                                       request: HookRequest(operatorID: "u\(index)", fields: [HookField("message.text", "m")]))
                    }
                }
                // Swap while the old instance's calls are queued and running: once one has started.
                _ = await PluginLibraries.fixtureStat(old, 2, reaching: 1)
                try? host.apply(["app": AppPolicyConfiguration(plugins: [
                    fixture("mode=echo;tag=\(new)", hooks: [.beforeSendGroupMessage]),
                ], budget: .seconds(10))])
                var outcomes: [HookOutcome] = []
                for await outcome in group { outcomes.append(outcome) }
                return outcomes
            }
            #expect(outcomes.count == 40)
            #expect(outcomes.allSatisfy { if case .rewrite = $0 { true } else { false } })
            // Every old call ran to completion on the old instance before it was destroyed.
            #expect(await PluginLibraries.fixtureStat(old, 1, reaching: 1) == 1)
            #expect(PluginLibraries.fixtureStat(old, 0) == 0)
            #expect(PluginLibraries.fixtureStat(old, 3) + PluginLibraries.fixtureStat(new, 3) == 40)
            #expect(PluginLibraries.fixtureStat(new, 0) == 1)
            try host.apply([:])
            #expect(await PluginLibraries.fixtureStat(new, 1, reaching: 1) == 1)
            #expect(PluginLibraries.fixtureStat(new, 0) == 0)
        }
    }

    @Test func afterEventDoesNotWaitForThePlugin() async throws {
        let tag = uniqueTag("after")
        try await withHost { host in
            try host.apply(["app": AppPolicyConfiguration(plugins: [
                fixture("mode=reject;delay_ms=300;tag=\(tag)", hooks: [.afterEvent]),
            ], budget: .seconds(5))])
            host.notify(app: "app", event: HookRequest(groupID: "g1", eventType: "group_created"))
            #expect(PluginLibraries.fixtureStat(tag, 3) == 0)  // returned before the plugin finished
            #expect(await PluginLibraries.fixtureStat(tag, 3, reaching: 1) == 1)
        }
    }
}
