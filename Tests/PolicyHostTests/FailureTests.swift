import PolicyHost
import Testing

@Suite("Failures: budgets, failure modes, unknown decisions, the circuit breaker")
struct FailureTests {
    private let request = HookRequest(fields: [HookField("name", "x")])

    @Test(arguments: [FailureMode.failOpen, .failClosed])
    func tooSlowAppliesTheFailureMode(mode: FailureMode) async throws {
        try await withHost { host in
            try host.apply(["app": AppPolicyConfiguration(
                plugins: [fixture("mode=reject;delay_ms=400", hooks: [.beforeCreateGroup], failureMode: mode)],
                budget: .milliseconds(50))])
            let outcome = await host.run(.beforeCreateGroup, app: "app", request: request)
            switch (mode, outcome) {
            case (.failOpen, .allow):
                break
            case (.failClosed, .error(let failure)):
                #expect(failure.kind == .timeout)
                #expect(failure.plugin == "fixture-behaviors")
            default:
                Issue.record("\(mode): got \(outcome)")
            }
            #expect(host.statistics(app: "app").first?.timeouts == 1)
            #expect(host.statistics(app: "app").first?.failures == 1)
        }
    }

    @Test func defaultFailureModesFollowTheHook() async throws {
        try await withHost { host in
            try host.apply(["app": AppPolicyConfiguration(
                plugins: [fixture("mode=allow;delay_ms=400", hooks: [.validateGroupCustom, .beforeSendGroupMessage])],
                budget: .milliseconds(50))])
            if case .error(let failure) = await host.run(.validateGroupCustom, app: "app", request: request) {
                #expect(failure.kind == .timeout)
            } else {
                Issue.record("custom-field validation should fail closed by default")
            }
            #expect(await host.run(.beforeSendGroupMessage, app: "app", request: request) == .allow)
        }
        #expect(PolicyHook.validateMemberCustom.defaultFailureMode == .failClosed)
        #expect(PolicyHook.beforeInvite.defaultFailureMode == .failOpen)
    }

    @Test func perHookBudgetOverridesTheAppBudget() async throws {
        try await withHost { host in
            try host.apply(["app": AppPolicyConfiguration(
                plugins: [fixture("mode=tag;tag=-slow;delay_ms=100", hooks: [.beforeCreateGroup], failureMode: .failClosed)],
                budget: .milliseconds(10), hookBudgets: [.beforeCreateGroup: .seconds(5)])])
            #expect(await host.run(.beforeCreateGroup, app: "app", request: request) == .rewrite(["name": "x-slow"]))
        }
    }

    @Test(arguments: [FailureMode.failOpen, .failClosed])
    func unknownDecisionIsAFailure(mode: FailureMode) async throws {
        try await withHost { host in
            try host.apply(["app": AppPolicyConfiguration(plugins: [fixture("mode=unknown", hooks: [.beforeCreateGroup], failureMode: mode)])])
            let outcome = await host.run(.beforeCreateGroup, app: "app", request: request)
            switch (mode, outcome) {
            case (.failOpen, .allow):
                break
            case (.failClosed, .error(let failure)):
                #expect(failure.kind == .unknownDecision)
                #expect(failure.code == 42)
            default:
                Issue.record("\(mode): got \(outcome)")
            }
        }
    }

    @Test func pluginErrorCarriesItsCodeAndMessage() async throws {
        try await withHost { host in
            try host.apply(["app": AppPolicyConfiguration(plugins: [fixture("mode=error", hooks: [.beforeCreateGroup], failureMode: .failClosed)])])
            let outcome = await host.run(.beforeCreateGroup, app: "app", request: request)
            let expected = PolicyFailure(plugin: "fixture-behaviors", kind: .pluginError, code: 7, message: "fixture: error requested")
            #expect(outcome == .error(expected))
        }
    }

    @Test func failingPluginTripsTheBreaker() async throws {
        let tag = uniqueTag("breaker")
        let logs = CapturedLogs()
        try await withHost(breakerThreshold: 3, breakerCooldown: .seconds(60), logs: logs) { host in
            try host.apply(["app": AppPolicyConfiguration(plugins: [
                fixture("mode=error;tag=\(tag)", hooks: [.beforeCreateGroup], failureMode: .failClosed),
            ])])
            var kinds: [PolicyFailure.Kind] = []
            for _ in 0..<5 {
                if case .error(let failure) = await host.run(.beforeCreateGroup, app: "app", request: request) { kinds.append(failure.kind) }
            }
            #expect(kinds == [.pluginError, .pluginError, .pluginError, .circuitOpen, .circuitOpen])
            let statistics = try #require(host.statistics(app: "app").first)
            #expect(statistics.calls == 3)
            #expect(statistics.breakerTrips == 1)
            #expect(statistics.skippedByBreaker == 2)
            #expect(PluginLibraries.fixtureStat(tag, 3) == 3)  // the plugin itself saw only 3 calls
        }
        #expect(logs.lines.filter { $0.contains("tripped its circuit breaker") }.count == 1)
    }

    @Test func trippedPluginGetsOneTrialCallAfterTheCooldown() async throws {
        let clock = BreakerTestClock()
        try await withHost(breakerThreshold: 2, breakerCooldown: .seconds(60), breakerClock: clock) { host in
            try host.apply(["app": AppPolicyConfiguration(plugins: [fixture("mode=error", hooks: [.beforeCreateGroup])])])
            for _ in 0..<3 { _ = await host.run(.beforeCreateGroup, app: "app", request: request) }
            #expect(host.statistics(app: "app").first?.calls == 2)
            clock.advance(by: .seconds(59))
            _ = await host.run(.beforeCreateGroup, app: "app", request: request)  // still open: skipped
            #expect(host.statistics(app: "app").first?.calls == 2)
            #expect(host.breakerStates().map(\.state) == [.open])
            clock.advance(by: .seconds(1))
            #expect(host.breakerStates().map(\.state) == [.halfOpen])
            _ = await host.run(.beforeCreateGroup, app: "app", request: request)  // half-open: let through, fails, re-trips
            _ = await host.run(.beforeCreateGroup, app: "app", request: request)  // open again: skipped
            let statistics = try #require(host.statistics(app: "app").first)
            #expect(statistics.calls == 3)
            #expect(statistics.breakerTrips == 2)
        }
    }

    @Test func rejectingIsAVerdictNotAFailure() async throws {
        // A plugin that rejects every call is doing its job: the breaker counts only failures.
        try await withHost(breakerThreshold: 2) { host in
            try host.apply(["app": AppPolicyConfiguration(plugins: [fixture("mode=reject", hooks: [.beforeCreateGroup])])])
            for _ in 0..<5 {
                if case .reject = await host.run(.beforeCreateGroup, app: "app", request: request) {} else {
                    Issue.record("expected every call to be rejected")
                }
            }
            let statistics = try #require(host.statistics(app: "app").first)
            #expect(statistics.rejects == 5)
            #expect(statistics.breakerTrips == 0)
        }
    }
}
