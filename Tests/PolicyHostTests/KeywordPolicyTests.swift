import Foundation
import PolicyHost
import Testing

@Suite("Keyword moderation (Swift): Unicode folding, field selection, large word lists")
struct KeywordPolicyTests {
    private func run(config: String, _ fields: [HookField], hook: PolicyHook = .beforeSendGroupMessage) async throws -> HookOutcome {
        try await withHost { host in
            try host.apply(["app": AppPolicyConfiguration(plugins: [
                PluginConfiguration(path: KeywordPlugin.swift.path, config: config, hooks: [hook]),
            ], budget: .seconds(10))])
            return await host.run(hook, app: "app", request: HookRequest(fields: fields))
        }
    }

    @Test func fullwidthAndCaseAreFolded() async throws {
        let outcome = try await run(config: #"{"words": ["spam"], "mode": "mask"}"#, [HookField("message.text", "buy ＳＰａｍ now")])
        #expect(outcome == .rewrite(["message.text": "buy *** now"]))
    }

    @Test func nonASCIICaseIsFolded() async throws {
        let outcome = try await run(config: #"{"words": ["übel", "ΛΟΓΟΣ"]}"#, [HookField("name", "ganz ÜBEL"), HookField("introduction", "λογος")])
        guard case .reject(let rejection) = outcome else {
            Issue.record("expected reject, got \(outcome)")
            return
        }
        #expect(rejection.errorKeys == ["name", "introduction"])
    }

    @Test func fieldsSelectWhatIsChecked() async throws {
        let config = #"{"words": ["spam"], "fields": ["name", "custom.group."]}"#
        let outcome = try await run(config: config, [
            HookField("introduction", "spam"), HookField("custom.group.x", "spam"), HookField("custom.member.y", "spam"),
        ], hook: .beforeCreateGroup)
        guard case .reject(let rejection) = outcome else {
            Issue.record("expected reject, got \(outcome)")
            return
        }
        #expect(rejection.errorKeys == ["custom.group.x"])
    }

    @Test func tenThousandWords() async throws {
        var words = (0..<10_000).map { "w\($0)x" }
        words.append("needle")
        let config = #"{"mode": "mask", "words": ["# + words.map { "\"\($0)\"" }.joined(separator: ",") + "]}"
        let text = String(repeating: "hay ", count: 250) + "Needle w9999x w12"
        let outcome = try await run(config: config, [HookField("message.text", text)])
        #expect(outcome == .rewrite(["message.text": String(repeating: "hay ", count: 250) + "*** *** w12"]))
    }

    @Test func wordsComeFromAFileToo() async throws {
        let path = "/tmp/groupd-keywords-\(UInt32.random(in: 0...UInt32.max)).txt"
        try #require(FileManager.default.createFile(atPath: path, contents: Data("# banned\nscam\n\n  fraud  \n".utf8)))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let outcome = try await run(config: #"{"words": ["spam"], "mode": "mask", "words_file": "\#(path)"}"#,
                                    [HookField("message.text", "spam scam fraud # banned")])
        #expect(outcome == .rewrite(["message.text": "*** *** *** # banned"]))
    }

    @Test func unreadableWordsFileFailsInstanceNew() async throws {
        try await withHost { host in
            let error = #expect(throws: PolicyLoadError.self) {
                try host.apply(["app": AppPolicyConfiguration(plugins: [
                    PluginConfiguration(path: KeywordPlugin.swift.path, config: #"{"words_file": "/nonexistent/words.txt"}"#, hooks: [.beforeCreateGroup]),
                ])])
            }
            #expect(error?.code == .instanceFailed)
            #expect(error?.message.hasPrefix("keyword-moderation: bad config") == true)
        }
    }

    @Test func overlappingWordsTakeTheLeftmostLongest() async throws {
        let outcome = try await run(config: #"{"words": ["spam", "mam", "am"], "mode": "mask"}"#, [HookField("message.text", "spamam")])
        #expect(outcome == .rewrite(["message.text": "***am"]))
    }
}

@Suite("Example C plugin: max length")
struct ExampleCPolicyTests {
    @Test func longFieldIsRejected() async throws {
        try await withHost { host in
            try host.apply(["app": AppPolicyConfiguration(plugins: [
                PluginConfiguration(path: KeywordPlugin.c.path, config: #"{"max_length": 5}"#, hooks: [.beforeSetMemberInfo]),
            ])])
            let outcome = await host.run(.beforeSetMemberInfo, app: "app", request: HookRequest(
                fields: [HookField("name_card", "ünïcø"), HookField("custom.member.bio", "too long")], users: ["u1"]))
            guard case .reject(let rejection) = outcome else {
                Issue.record("expected reject, got \(outcome)")
                return
            }
            #expect(rejection.errorKeys == ["custom.member.bio"])  // 5 code points is not too long
        }
    }
}
