import PolicyHost
import Testing

@Suite("Custom-field schema (Swift): typed definitions on write, role filtering on read")
struct CustomFieldSchemaPolicyTests {
    static let config = #"""
    {"group": {"level": {"type": "integer", "min": 1, "max": 10},
               "motto": {"type": "string", "max_length": 10, "pattern": "[a-z ]+"},
               "vip": {"type": "boolean", "read": "admin"},
               "tier": {"type": "enum", "values": ["gold", "silver"]},
               "meta": {"type": "object", "read": "owner"}},
     "member": {"title": {"type": "string", "max_length": 4}}}
    """#

    struct Row: Sendable, CustomTestStringConvertible {
        var key: String
        var value: String
        var expected: Expected
        enum Expected: Sendable, Equatable {
            case valid, normalized(String), invalid
        }
        var testDescription: String { "\(key)=\(value)" }
    }

    static let rows: [Row] = [
        Row(key: "custom.group.level", value: "7", expected: .valid),
        Row(key: "custom.group.level", value: "007", expected: .normalized("7")),
        Row(key: "custom.group.level", value: "11", expected: .invalid),
        Row(key: "custom.group.level", value: "seven", expected: .invalid),
        Row(key: "custom.group.motto", value: "hello", expected: .valid),
        Row(key: "custom.group.motto", value: "Hello", expected: .invalid),
        Row(key: "custom.group.motto", value: "far too long", expected: .invalid),
        Row(key: "custom.group.vip", value: "1", expected: .normalized("true")),
        Row(key: "custom.group.vip", value: "false", expected: .valid),
        Row(key: "custom.group.vip", value: "maybe", expected: .invalid),
        Row(key: "custom.group.tier", value: "gold", expected: .valid),
        Row(key: "custom.group.tier", value: "bronze", expected: .invalid),
        Row(key: "custom.group.meta", value: #"{"a": 1}"#, expected: .valid),
        Row(key: "custom.group.meta", value: "[1, 2]", expected: .invalid),
        Row(key: "custom.group.nope", value: "x", expected: .invalid),
        Row(key: "custom.member.title", value: "boss", expected: .valid),
        Row(key: "custom.member.title", value: "bosses", expected: .invalid),
    ]

    private static var path: String { PluginLibraries.path("CustomFieldSchemaPolicy") }

    @Test(arguments: rows)
    func validateOnWrite(row: Row) async throws {
        try await withHost { host in
            try host.apply(["app": AppPolicyConfiguration(plugins: [
                PluginConfiguration(path: Self.path, config: Self.config, hooks: [.validateGroupCustom, .validateMemberCustom]),
            ])])
            let hook: PolicyHook = row.key.hasPrefix("custom.member.") ? .validateMemberCustom : .validateGroupCustom
            let outcome = await host.run(hook, app: "app", request: HookRequest(fields: [HookField(row.key, row.value)]))
            switch (row.expected, outcome) {
            case (.valid, .allow):
                break
            case (.normalized(let value), .rewrite(let changes)):
                #expect(changes == [row.key: value])
            case (.invalid, .reject(let rejection)):
                #expect(rejection.errorKeys == [row.key])
            default:
                Issue.record("expected \(row.expected), got \(outcome)")
            }
        }
    }

    @Test(arguments: [("member", [String]()), ("admin", ["custom.group.meta"]), ("owner", [])])
    func filterOnReadByRole(role: String, hidden: [String]) async throws {
        try await withHost { host in
            try host.apply(["app": AppPolicyConfiguration(plugins: [
                PluginConfiguration(path: Self.path, config: Self.config, hooks: [.filterCustomOnRead]),
            ])])
            let fields = [HookField("custom.group.level", "3"), HookField("custom.group.vip", "true"), HookField("custom.group.meta", "{}")]
            let outcome = await host.run(.filterCustomOnRead, app: "app", request: HookRequest(readerRole: role, fields: fields))
            let expectedHidden = role == "member" ? ["custom.group.vip", "custom.group.meta"] : hidden
            if expectedHidden.isEmpty {
                #expect(outcome == .allow)
            } else {
                #expect(outcome == .rewrite(Dictionary(uniqueKeysWithValues: expectedHidden.map { ($0, String?.none) })))
            }
        }
    }

    @Test func badPatternFailsInstanceNew() async throws {
        try await withHost(threads: 1) { host in
            let error = #expect(throws: PolicyLoadError.self) {
                try host.apply(["app": AppPolicyConfiguration(plugins: [
                    PluginConfiguration(path: Self.path, config: #"{"group": {"x": {"type": "string", "pattern": "("}}}"#, hooks: [.validateGroupCustom]),
                ])])
            }
            #expect(error?.code == .instanceFailed)
            #expect(error?.message.contains("custom.group.x") == true)
        }
    }

    @Test func schemaAndKeywordPluginsCompose() async throws {
        // Normalise first, then moderate the normalised value; the keyword plugin sees the rewrite.
        try await withHost { host in
            try host.apply(["app": AppPolicyConfiguration(plugins: [
                PluginConfiguration(path: Self.path, config: #"{"group": {"motto": {"type": "string"}}}"#, hooks: [.beforeCreateGroup]),
                PluginConfiguration(path: KeywordPlugin.swift.path, config: #"{"words": ["spam"], "mode": "mask"}"#, hooks: [.beforeCreateGroup]),
            ])])
            let outcome = await host.run(.beforeCreateGroup, app: "app", request: HookRequest(fields: [
                HookField("name", "spam club"), HookField("custom.group.motto", "no spam"),
            ]))
            #expect(outcome == .rewrite(["name": "*** club", "custom.group.motto": "no ***"]))
        }
    }
}
