import PolicyHost
import Testing

/// The shipped plugins that implement the same keyword policy.
enum KeywordPlugin: String, Sendable, CaseIterable, CustomTestStringConvertible {
    case c = "ExampleCPolicy"
    case swift = "KeywordPolicy"

    var path: String { PluginLibraries.path(rawValue) }
    var testDescription: String { rawValue }
}

/// One row of the table both plugins must agree on.
struct KeywordCase: Sendable, CustomTestStringConvertible {
    var name: String
    var config: String
    var hook: PolicyHook
    var fields: [HookField]
    var expected: Expected

    enum Expected: Sendable, Equatable {
        case allow
        case reject([String])
        case rewrite([String: String?])
    }

    var testDescription: String { name }

    static let all: [KeywordCase] = [
        KeywordCase(name: "clean name is allowed", config: #"{"words": ["spam", "scam"]}"#, hook: .beforeCreateGroup,
                    fields: [HookField("name", "friends of the park")], expected: .allow),
        KeywordCase(name: "banned word rejects its field", config: #"{"words": ["spam", "scam"]}"#, hook: .beforeCreateGroup,
                    fields: [HookField("name", "buy spam now"), HookField("introduction", "hello")], expected: .reject(["name"])),
        KeywordCase(name: "matching ignores ASCII case", config: #"{"words": ["spam"], "mode": "reject"}"#, hook: .beforeSendGroupMessage,
                    fields: [HookField("message.text", "SPAM!")], expected: .reject(["message.text"])),
        KeywordCase(name: "every dirty field is an error key, in order", config: #"{"words": ["spam", "scam"]}"#, hook: .beforeUpdateProfile,
                    fields: [HookField("name", "a scam"), HookField("notification", "fine"), HookField("introduction", "spam spam")],
                    expected: .reject(["name", "introduction"])),
        KeywordCase(name: "mask replaces each word with ***", config: #"{"words": ["spam", "scam"], "mode": "mask"}"#, hook: .beforeSendGroupMessage,
                    fields: [HookField("message.text", "spam and Scam")], expected: .rewrite(["message.text": "*** and ***"])),
        KeywordCase(name: "mask takes the longest word at a position", config: #"{"words": ["spam", "spammer"], "mode": "mask"}"#, hook: .beforeSetMemberInfo,
                    fields: [HookField("name_card", "a spammer here")], expected: .rewrite(["name_card": "a *** here"])),
        KeywordCase(name: "mask leaves clean text alone", config: #"{"words": ["spam"], "mode": "mask"}"#, hook: .beforeSendGroupMessage,
                    fields: [HookField("message.text", "hello")], expected: .allow),
        KeywordCase(name: "custom fields are checked too", config: #"{"words": ["scam"], "mode": "mask"}"#, hook: .validateGroupCustom,
                    fields: [HookField("custom.group.motto", "no SCAM here")], expected: .rewrite(["custom.group.motto": "no *** here"])),
        KeywordCase(name: "adjacent words are both masked", config: #"{"words": ["spam", "scam"], "mode": "mask"}"#, hook: .beforeApplyToJoin,
                    fields: [HookField("apply_message", "scamspam")], expected: .rewrite(["apply_message": "******"])),
        KeywordCase(name: "no words allows everything", config: #"{"words": []}"#, hook: .beforeCreateGroup,
                    fields: [HookField("name", "spam")], expected: .allow),
    ]
}

@Suite("The same keyword cases against the C and the Swift plugin")
struct SharedPolicyCaseTests {
    @Test(arguments: KeywordPlugin.allCases, KeywordCase.all)
    func keywordCase(plugin: KeywordPlugin, row: KeywordCase) async throws {
        try await withHost { host in
            try host.apply(["app": AppPolicyConfiguration(plugins: [
                PluginConfiguration(path: plugin.path, config: row.config, hooks: [row.hook]),
            ])])
            let outcome = await host.run(row.hook, app: "app", request: HookRequest(operatorID: "u1", fields: row.fields))
            switch (row.expected, outcome) {
            case (.allow, .allow):
                break
            case (.reject(let keys), .reject(let rejection)):
                #expect(rejection.errorKeys == keys)
            case (.rewrite(let fields), .rewrite(let changes)):
                #expect(changes == fields)
            default:
                Issue.record("expected \(row.expected), got \(outcome)")
            }
        }
    }

    @Test(arguments: KeywordPlugin.allCases)
    func badConfigFailsWithThePluginsMessage(plugin: KeywordPlugin) async throws {
        try await withHost { host in
            let error = #expect(throws: PolicyLoadError.self) {
                try host.apply(["app": AppPolicyConfiguration(plugins: [
                    PluginConfiguration(path: plugin.path, config: "not json", hooks: [.beforeCreateGroup]),
                ])])
            }
            #expect(error?.code == .instanceFailed)
            #expect(error?.app == "app")
            #expect(error?.message.isEmpty == false)
        }
    }

    @Test(arguments: KeywordPlugin.allCases)
    func pluginIsNotCalledOnHooksItDidNotAskFor(plugin: KeywordPlugin) async throws {
        try await withHost { host in
            try host.apply(["app": AppPolicyConfiguration(plugins: [
                PluginConfiguration(path: plugin.path, config: #"{"words": ["spam"]}"#, hooks: [.beforeSendGroupMessage]),
            ])])
            let outcome = await host.run(.beforeCreateGroup, app: "app", request: HookRequest(fields: [HookField("name", "spam")]))
            #expect(outcome == .allow)
            #expect(host.statistics(app: "app").first?.calls == 0)
            #expect(host.hasPlugins(for: .beforeSendGroupMessage, app: "app"))
            #expect(!host.hasPlugins(for: .beforeCreateGroup, app: "app"))
        }
    }
}
