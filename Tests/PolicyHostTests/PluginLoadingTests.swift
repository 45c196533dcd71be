import PolicyHost
import Testing

@Suite("Loading plugins: broken libraries are refused, saying which")
struct PluginLoadingTests {
    /// The error applying a one-plugin chain throws, or `nil`.
    private func loadError(_ path: String, config: String = "") async throws -> PolicyLoadError? {
        try await withHost(threads: 1) { host -> PolicyLoadError? in
            do throws(PolicyLoadError) {
                try host.apply(["app": AppPolicyConfiguration(plugins: [PluginConfiguration(path: path, config: config, hooks: [.beforeCreateGroup])])])
                return nil
            } catch {
                return error
            }
        }
    }

    @Test func wrongMajorVersionIsRefused() async throws {
        let error = try await loadError(PluginLibraries.path("PolicyFixtureWrongMajor"))
        #expect(error != nil)
        #expect(error?.code == .majorVersionMismatch)
        #expect(error?.message.contains("major 2") == true)
        #expect(error?.description.contains("PolicyFixtureWrongMajor") == true)
    }

    @Test func missingEntrySymbolIsRefused() async throws {
        let error = try await loadError(PluginLibraries.path("PolicyFixtureNoEntry"))
        #expect(error != nil)
        #expect(error?.code == .missingEntrySymbol)
        #expect(error?.message.contains("groupd_policy_entry_v1") == true)
        #expect(error?.message.contains("groupd_policy_entry_v2") == true)
    }

    @Test func tooSmallTableIsRefused() async throws {
        let error = try await loadError(PluginLibraries.path("PolicyFixtureSmallTable"))
        #expect(error != nil)
        #expect(error?.code == .tableTooSmall)
        #expect(error?.message.contains("12 bytes") == true)
    }

    @Test func missingFileIsRefused() async throws {
        let error = try await loadError("/nonexistent/libNothing.so")
        #expect(error != nil)
        #expect(error?.code == .openFailed)
    }

    @Test func instanceNewFailureCarriesThePluginsMessage() async throws {
        let error = try await loadError(PluginLibraries.behaviors, config: "mode=init_fail")
        #expect(error != nil)
        #expect(error?.code == .instanceFailed)
        #expect(error?.app == "app")
        #expect(error?.message == "fixture: init_fail requested by config")
    }

    @Test func refusalIsLoggedSayingWhichAndWhy() async throws {
        let logs = CapturedLogs()
        _ = try await withHost(logs: logs) { host in
            #expect(throws: PolicyLoadError.self) {
                try host.apply(["app": AppPolicyConfiguration(plugins: [
                    PluginConfiguration(path: PluginLibraries.path("PolicyFixtureWrongMajor"), hooks: [.beforeCreateGroup]),
                ])])
            }
        }
        #expect(logs.lines.contains { $0.hasPrefix("error") && $0.contains("PolicyFixtureWrongMajor") && $0.contains("major_version_mismatch") })
    }

    @Test func failedReloadLeavesThePreviousChainInForce() async throws {
        try await withHost { host in
            try host.apply(["app": AppPolicyConfiguration(plugins: [fixture("mode=reject", hooks: [.beforeCreateGroup])])])
            #expect(throws: PolicyLoadError.self) {
                try host.apply(["app": AppPolicyConfiguration(plugins: [fixture("mode=init_fail", hooks: [.beforeCreateGroup])])])
            }
            #expect(throws: PolicyLoadError.self) {
                try host.apply(app: "app", AppPolicyConfiguration(plugins: [fixture("mode=init_fail", hooks: [.beforeCreateGroup])]))
            }
            let outcome = await host.run(.beforeCreateGroup, app: "app", request: HookRequest(fields: [HookField("name", "x")]))
            guard case .reject(let rejection) = outcome else {
                Issue.record("expected the old chain's reject, got \(outcome)")
                return
            }
            #expect(rejection.plugin == "fixture-behaviors")
            #expect(rejection.errorKeys == ["name"])
        }
    }

    @Test func anAppWithoutAChainAllowsEverything() async throws {
        try await withHost { host in
            #expect(await host.run(.beforeSendGroupMessage, app: "nobody", request: HookRequest()) == .allow)
        }
    }
}
