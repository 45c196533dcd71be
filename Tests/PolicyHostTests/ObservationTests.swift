import NIOConcurrencyHelpers
import PolicyHost
import Testing

@Suite("Observation: plugin call times and breaker states for metrics")
struct ObservationTests {
    private let request = HookRequest(fields: [HookField("name", "x")])

    @Test func everyPluginCallIsTimedWithItsPluginAndHook() async throws {
        let seen = NIOLockedValueBox<[(String, PolicyHook, Duration)]>([])
        try await withHost { host in
            host.observeCalls { plugin, hook, duration in seen.withLockedValue { $0.append((plugin, hook, duration)) } }
            try host.apply(["app": AppPolicyConfiguration(plugins: [
                fixture("mode=allow", hooks: [.beforeCreateGroup]),
                fixture("mode=reject;delay_ms=20", hooks: [.beforeCreateGroup, .beforeUpdateProfile]),
            ])])
            _ = await host.run(.beforeCreateGroup, app: "app", request: request)
            _ = await host.run(.beforeUpdateProfile, app: "app", request: request)
        }
        let calls = seen.withLockedValue { $0 }
        #expect(calls.map(\.0) == ["fixture-behaviors", "fixture-behaviors", "fixture-behaviors"])
        #expect(calls.map(\.1) == [.beforeCreateGroup, .beforeCreateGroup, .beforeUpdateProfile])
        #expect(calls[1].2 >= .milliseconds(20) && calls[2].2 >= .milliseconds(20))
    }

    @Test func breakerStatesFollowTheBreakers() async throws {
        try await withHost(breakerThreshold: 2, breakerCooldown: .seconds(60)) { host in
            try host.apply([
                "app": AppPolicyConfiguration(plugins: [fixture("mode=error", hooks: [.beforeCreateGroup])]),
                "other": AppPolicyConfiguration(plugins: [fixture("mode=allow", hooks: [.beforeCreateGroup])]),
            ])
            #expect(host.breakerStates().map(\.state) == [.closed, .closed])
            for _ in 0..<3 { _ = await host.run(.beforeCreateGroup, app: "app", request: request) }
            let states = host.breakerStates()
            #expect(states.map(\.app) == ["app", "other"])
            #expect(states.map(\.plugin) == ["fixture-behaviors", "fixture-behaviors"])
            #expect(states.map(\.state) == [.open, .closed])
            // A replaced chain reports its own breakers: fresh, closed.
            try host.apply(app: "app", AppPolicyConfiguration(plugins: [fixture("mode=allow", hooks: [.beforeCreateGroup])]))
            #expect(host.breakerStates().map(\.state) == [.closed, .closed])
        }
    }
}
