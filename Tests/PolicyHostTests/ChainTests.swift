import Foundation
import PolicyHost
import Testing

@Suite("Chains: order, composition, decisions")
struct ChainTests {
    @Test func rewritesComposeInChainOrder() async throws {
        try await withHost { host in
            try host.apply(["app": AppPolicyConfiguration(plugins: [
                fixture("mode=tag;tag=-A", hooks: [.beforeCreateGroup]),
                fixture("mode=tag;tag=-B", hooks: [.beforeCreateGroup]),
            ])])
            let outcome = await host.run(.beforeCreateGroup, app: "app", request: HookRequest(fields: [HookField("name", "x")]))
            #expect(outcome == .rewrite(["name": "x-A-B"]))
        }
    }

    @Test func firstRejectStopsTheChain() async throws {
        try await withHost { host in
            try host.apply(["app": AppPolicyConfiguration(plugins: [
                fixture("mode=reject", hooks: [.beforeCreateGroup]),
                fixture("mode=tag;tag=-never", hooks: [.beforeCreateGroup]),
            ])])
            let outcome = await host.run(.beforeCreateGroup, app: "app", request: HookRequest(fields: [HookField("name", "x")]))
            guard case .reject(let rejection) = outcome else {
                Issue.record("expected reject, got \(outcome)")
                return
            }
            #expect(rejection.errorKeys == ["name"])
            #expect(rejection.reasons["name"] == "fixture rejects everything")
            #expect(host.statistics(app: "app").map(\.calls) == [1, 0])
        }
    }

    @Test func discardStopsTheChain() async throws {
        try await withHost { host in
            try host.apply(["app": AppPolicyConfiguration(plugins: [
                fixture("mode=tag;tag=-A", hooks: [.beforeSendGroupMessage]),
                fixture("mode=discard", hooks: [.beforeSendGroupMessage]),
                fixture("mode=reject", hooks: [.beforeSendGroupMessage]),
            ])])
            let outcome = await host.run(.beforeSendGroupMessage, app: "app", request: HookRequest(fields: [HookField("message.text", "hi")]))
            #expect(outcome == .discard)
            #expect(host.statistics(app: "app").map(\.calls) == [1, 1, 0])
        }
    }

    @Test func filterOnReadRemovesAField() async throws {
        try await withHost { host in
            try host.apply(["app": AppPolicyConfiguration(plugins: [
                fixture("mode=remove;key=custom.group.secret", hooks: [.filterCustomOnRead]),
            ])])
            let request = HookRequest(readerRole: "member", fields: [HookField("custom.group.secret", "s"), HookField("custom.group.open", "o")])
            let outcome = await host.run(.filterCustomOnRead, app: "app", request: request)
            #expect(outcome == .rewrite(["custom.group.secret": String?.none]))
        }
    }

    @Test func inviteRefusesSomeInvitees() async throws {
        try await withHost { host in
            try host.apply(["app": AppPolicyConfiguration(plugins: [fixture("mode=invite", hooks: [.beforeInvite])])])
            let outcome = await host.run(.beforeInvite, app: "app", request: HookRequest(users: ["ann", "bad1", "bob", "bad2"]))
            guard case .reject(let rejection) = outcome else {
                Issue.record("expected reject, got \(outcome)")
                return
            }
            #expect(rejection.rejectedMembers == ["bad1", "bad2"])
            #expect(rejection.errorKeys.isEmpty)
        }
    }

    @Test func chainsArePerApp() async throws {
        try await withHost { host in
            try host.apply([
                "strict": AppPolicyConfiguration(plugins: [fixture("mode=reject", hooks: [.beforeCreateGroup])]),
                "lax": AppPolicyConfiguration(plugins: []),
            ])
            let request = HookRequest(fields: [HookField("name", "x")])
            #expect(await host.run(.beforeCreateGroup, app: "lax", request: request) == .allow)
            if case .reject = await host.run(.beforeCreateGroup, app: "strict", request: request) {} else {
                Issue.record("the strict app's chain did not reject")
            }
        }
    }
}

@Suite("Configuration values")
struct PolicyConfigurationTests {
    @Test func pluginEntryDecodesFromConfigurationNames() throws {
        let json = #"{"path": "/p/libK.so", "config": "{}", "hooks": ["before_invite", "validate_group_custom"], "failure_mode": "fail_closed"}"#
        let entry = try JSONDecoder().decode(PluginConfiguration.self, from: Data(json.utf8))
        #expect(entry == PluginConfiguration(path: "/p/libK.so", config: "{}", hooks: [.beforeInvite, .validateGroupCustom], failureMode: .failClosed))
    }

    @Test func hookNumbersMatchTheHeader() {
        #expect(PolicyHook.allCases.map(\.abiValue) == Array(1...10))
    }

    @Test func budgetDefaultsTo200Milliseconds() {
        let app = AppPolicyConfiguration(plugins: [], hookBudgets: [.afterEvent: .seconds(1)])
        #expect(app.budget(for: .beforeInvite) == .milliseconds(200))
        #expect(app.budget(for: .afterEvent) == .seconds(1))
    }
}
