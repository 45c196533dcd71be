import GroupModel
import GroupService
import Testing

/// `apps[].limits` of group attributes, counters and invite links.
@Suite("Configuration: attribute, counter and invite link limits")
struct AttributeLimitConfigurationTests {
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

    @Test("absent: the defaults; values are read; the demo config states the defaults")
    func parsed() throws {
        let defaults = try GroupdConfiguration.parse(yaml: Self.yaml("")).apps[0].limits
        #expect(defaults.maxGroupAttributeKeys == 32 && defaults.groupAttributeKeyBytes == 64)
        #expect(defaults.groupAttributeBytes == 16384 && defaults.maxGroupCounters == 32 && defaults.maxInviteLinksPerGroup == 10)
        let set = try GroupdConfiguration.parse(yaml: Self.yaml(
            "    limits: {max_group_attribute_keys: 4, group_attribute_key_bytes: 8, group_attribute_bytes: 100, "
                + "max_group_counters: 3, max_invite_links_per_group: 2}")).apps[0].limits
        #expect(set.maxGroupAttributeKeys == 4 && set.groupAttributeKeyBytes == 8 && set.groupAttributeBytes == 100)
        #expect(set.maxGroupCounters == 3 && set.maxInviteLinksPerGroup == 2)
        let demo = try GroupdConfiguration.parse(yaml: GroupdConfiguration.demoYAML(port: 1)).apps[0].limits
        #expect(demo.maxGroupAttributeKeys == 32 && demo.groupAttributeKeyBytes == 64 && demo.groupAttributeBytes == 16384)
        #expect(demo.maxGroupCounters == 32 && demo.maxInviteLinksPerGroup == 10)
    }

    @Test("0: refused with the key path", arguments: [
        "max_group_attribute_keys", "group_attribute_key_bytes", "group_attribute_bytes", "max_group_counters",
        "max_invite_links_per_group",
    ])
    func zero(key: String) throws {
        do {
            _ = try GroupdConfiguration.parse(yaml: Self.yaml("    limits: {\(key): 0}"), file: "g.yaml")
            Issue.record("0 was accepted for \(key)")
        } catch let error as ConfigurationError {
            #expect(error.keyPath == "apps[0].limits.\(key)")
        }
    }
}
