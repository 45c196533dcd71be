import GroupModel
import GroupService
import Testing

/// `apps[].limits.message_retention_seconds`.
@Suite("Configuration: message retention")
struct MessageRetentionConfigurationTests {
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

    @Test("absent: 0 (kept forever); a value is read; the demo config states the default")
    func parsed() throws {
        #expect(try GroupdConfiguration.parse(yaml: Self.yaml("")).apps[0].limits.messageRetentionSeconds == 0)
        let set = try GroupdConfiguration.parse(yaml: Self.yaml("    limits: {message_retention_seconds: 86400}"))
        #expect(set.apps[0].limits.messageRetentionSeconds == 86400)
        let demo = try GroupdConfiguration.parse(yaml: GroupdConfiguration.demoYAML(port: 1))
        #expect(demo.apps[0].limits.messageRetentionSeconds == 0)
        #expect(GroupdConfiguration.demoYAML(port: 1).contains("message_retention_seconds: 0"))
    }

    @Test("negative: refused with the key path")
    func negative() throws {
        do {
            _ = try GroupdConfiguration.parse(yaml: Self.yaml("    limits: {message_retention_seconds: -5}"), file: "g.yaml")
            Issue.record("a negative retention was accepted")
        } catch let error as ConfigurationError {
            #expect(error.keyPath == "apps[0].limits.message_retention_seconds")
            #expect(error.message.contains("expected a value from 0 to 2147483647, found -5"))
        }
    }
}
