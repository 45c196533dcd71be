import GroupModel
@testable import GroupService
import Testing

/// `apps[].limits.reaction_key_bytes`, `max_reaction_keys_per_message`, `max_reactions_per_message`
/// and `max_reactions_per_user_per_message`.
@Suite("Configuration: message reaction limits")
struct ReactionConfigurationTests {
    private static func yaml(_ limits: String) -> String {
        """
        apps:
          - id: demo
            secrets:
              - kid: k1
                secret: "0123456789abcdef0123456789abcdef"
        \(limits)
        """
    }

    static let keys = [
        "reaction_key_bytes", "max_reaction_keys_per_message", "max_reactions_per_message", "max_reactions_per_user_per_message",
    ]

    @Test("absent: the defaults (32, 20, 100000, 20); values are read; the demo config states the defaults")
    func parsed() throws {
        let limits = try GroupdConfiguration.parse(yaml: Self.yaml("")).apps[0].limits
        #expect(limits.reactionKeyBytes == 32 && limits.maxReactionKeysPerMessage == 20)
        #expect(limits.maxReactionsPerMessage == 100_000 && limits.maxReactionsPerUserPerMessage == 20)
        let set = try GroupdConfiguration.parse(yaml: Self.yaml("""
                limits: {reaction_key_bytes: 8, max_reaction_keys_per_message: 3, max_reactions_per_message: 50,
                         max_reactions_per_user_per_message: 2}
            """)).apps[0].limits
        #expect(set.reactionKeyBytes == 8 && set.maxReactionKeysPerMessage == 3)
        #expect(set.maxReactionsPerMessage == 50 && set.maxReactionsPerUserPerMessage == 2)
        let demo = GroupdConfiguration.demoYAML(port: 1)
        let parsedDemo = try GroupdConfiguration.parse(yaml: demo).apps[0].limits
        #expect(parsedDemo.reactionKeyBytes == 32 && parsedDemo.maxReactionKeysPerMessage == 20)
        #expect(parsedDemo.maxReactionsPerMessage == 100_000 && parsedDemo.maxReactionsPerUserPerMessage == 20)
        for key in ["reaction_key_bytes: 32", "max_reaction_keys_per_message: 20", "max_reactions_per_message: 100000",
                    "max_reactions_per_user_per_message: 20"] {
            #expect(demo.contains(key))
        }
    }

    @Test("0: refused with the key path", arguments: keys)
    func refused(key: String) throws {
        do {
            _ = try GroupdConfiguration.parse(yaml: Self.yaml("    limits: {\(key): 0}"), file: "g.yaml")
            Issue.record("\(key): 0 was accepted")
        } catch let error as ConfigurationError {
            #expect(error.keyPath == "apps[0].limits.\(key)")
            #expect(error.message.contains("expected a value from 1 to 2147483647, found 0"))
        }
    }
}
