import GroupService
import PolicyHost
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `apps[].policy` in YAML: decoding, defaults, and a key-path error per kind of mistake.
@Suite("apps[].policy configuration")
struct PolicyConfigurationTests {
    /// A one-app configuration whose app has `policy` (indented under the app).
    static func yaml(_ policy: String) -> String {
        """
        apps:
          - id: app1
            secrets:
              - kid: k1
                secret: "0123456789abcdef0123456789abcdef"
            policy:
        \(policy.split(separator: "\n", omittingEmptySubsequences: false).map { "      " + $0 }.joined(separator: "\n"))
        """
    }

    static func expectError(_ policy: String, keyPath: String, containing text: String) {
        #expect {
            _ = try GroupdConfiguration.parse(yaml: yaml(policy), file: "g.yaml")
        } throws: { error in
            guard let error = error as? ConfigurationError else { return false }
            return error.keyPath == keyPath && error.message.contains(text)
        }
    }

    @Test("a full policy block decodes: chain order, hooks, failure modes, budgets, config as string or mapping")
    func decodes() throws {
        let configuration = try GroupdConfiguration.parse(yaml: Self.yaml("""
            budget_ms: 150
            hook_budgets_ms: {before_send_group_message: 40}
            failure_modes: {before_invite: fail_closed}
            plugins:
              - path: libCustomFieldSchemaPolicy.so
                config: {group: {level: {type: integer, min: 1}}, unknown: allow}
                hooks: [validate_group_custom, filter_custom_on_read]
              - path: /opt/plugins/libKeywordPolicy.so
                config: '{"words": ["spam"]}'
                hooks: [before_send_group_message]
                failure_mode: fail_closed
            """))
        let policy = try #require(configuration.apps[0].policy)
        #expect(policy.budgetMilliseconds == 150)
        #expect(policy.hookBudgetMilliseconds == [.beforeSendGroupMessage: 40])
        #expect(policy.failureModes == [.beforeInvite: .failClosed])
        #expect(policy.plugins.map(\.path) == ["libCustomFieldSchemaPolicy.so", "/opt/plugins/libKeywordPolicy.so"])
        #expect(policy.plugins[0].config == #"{"group":{"level":{"min":1,"type":"integer"}},"unknown":"allow"}"#)
        #expect(policy.plugins[0].hooks == [.validateGroupCustom, .filterCustomOnRead])
        #expect(policy.plugins[0].failureMode == nil)
        #expect(policy.plugins[1].config == #"{"words": ["spam"]}"#)
        #expect(policy.plugins[1].failureMode == .failClosed)

        let host = policy.hostConfiguration()
        #expect(host.budget(for: .beforeSendGroupMessage) == .milliseconds(40))
        #expect(host.budget(for: .beforeInvite) == .milliseconds(150))
        #expect(host.failureMode(of: host.plugins[0], for: .beforeInvite) == .failClosed)
        #expect(host.failureMode(of: host.plugins[0], for: .validateGroupCustom) == .failClosed)
        #expect(host.failureMode(of: host.plugins[0], for: .beforeCreateGroup) == .failOpen)
    }

    @Test("no policy key: no chain; an empty block: no plugins, a 200 ms budget")
    func defaults() throws {
        let none = try GroupdConfiguration.parse(yaml: """
            apps:
              - id: app1
                secrets: [{kid: k1, secret: "0123456789abcdef0123456789abcdef"}]
            """)
        #expect(none.apps[0].policy == nil)
        let empty = try GroupdConfiguration.parse(yaml: Self.yaml("plugins: []"))
        #expect(empty.apps[0].policy == AppPolicySettings(plugins: []))
        #expect(ServicePolicy.chains(for: empty, baseDirectory: nil).isEmpty)
    }

    @Test("an unknown hook names its index")
    func unknownHook() {
        Self.expectError("plugins: [{path: a.so, hooks: [before_create_group, before_lunch]}]",
                         keyPath: "apps[0].policy.plugins[0].hooks[1]", containing: "unknown hook 'before_lunch'")
    }

    @Test("a bad failure mode, per plugin and per hook")
    func badFailureMode() {
        Self.expectError("plugins: [{path: a.so, hooks: [before_invite], failure_mode: maybe}]",
                         keyPath: "apps[0].policy.plugins[0].failure_mode", containing: "fail_closed or fail_open")
        Self.expectError("failure_modes: {before_invite: sometimes}",
                         keyPath: "apps[0].policy.failure_modes.before_invite", containing: "fail_closed or fail_open")
        Self.expectError("failure_modes: {after_lunch: fail_open}",
                         keyPath: "apps[0].policy.failure_modes.after_lunch", containing: "unknown hook")
    }

    @Test("budgets out of range")
    func budgets() {
        Self.expectError("budget_ms: 0", keyPath: "apps[0].policy.budget_ms", containing: "from 1 to 60000")
        Self.expectError("hook_budgets_ms: {before_invite: 100000}",
                         keyPath: "apps[0].policy.hook_budgets_ms.before_invite", containing: "from 1 to 60000")
    }

    @Test("unknown keys, missing path, empty path, missing or empty hooks, wrong types")
    func shapeMistakes() {
        Self.expectError("plugin: []", keyPath: "apps[0].policy.plugin", containing: "unknown key")
        Self.expectError("plugins: [{path: a.so, hooks: [after_event], mode: x}]",
                         keyPath: "apps[0].policy.plugins[0].mode", containing: "unknown key")
        Self.expectError("plugins: [{hooks: [after_event]}]", keyPath: "apps[0].policy.plugins[0].path", containing: "required")
        Self.expectError("plugins: [{path: '', hooks: [after_event]}]", keyPath: "apps[0].policy.plugins[0].path", containing: "empty")
        Self.expectError("plugins: [{path: a.so}]", keyPath: "apps[0].policy.plugins[0].hooks", containing: "required")
        Self.expectError("plugins: [{path: a.so, hooks: []}]", keyPath: "apps[0].policy.plugins[0].hooks", containing: "at least one")
        Self.expectError("budget_ms: soon", keyPath: "apps[0].policy.budget_ms", containing: "integer")
    }

    @Test("relative plugin paths: the config file's directory first, then the executable's")
    func pathResolution() throws {
        #expect(ServicePolicy.resolvePluginPath("/abs/lib.so", baseDirectory: "/etc/groupd") == "/abs/lib.so")
        // Not beside the config: found beside the running executable (the build directory,
        // where swift build puts the shipped plugins).
        let beside = ServicePolicy.resolvePluginPath("libKeywordPolicy.so", baseDirectory: "/nonexistent")
        #expect(beside.hasSuffix("/libKeywordPolicy.so") && !beside.hasPrefix("/nonexistent"))
        #expect(access(beside, F_OK) == 0)
        // Beside the config: the config's directory wins.
        let directory = String(beside.dropLast("/libKeywordPolicy.so".count))
        #expect(ServicePolicy.resolvePluginPath("libKeywordPolicy.so", baseDirectory: directory) == directory + "/libKeywordPolicy.so")
        // Nowhere: the config's directory (so the load error names what the operator wrote).
        #expect(ServicePolicy.resolvePluginPath("libMissing.so", baseDirectory: "/etc/groupd") == "/etc/groupd/libMissing.so")
        #expect(ServicePolicy.directory(of: "/etc/groupd/groupd.yaml") == "/etc/groupd")
        #expect(ServicePolicy.directory(of: "groupd.yaml") == nil)
    }
}
