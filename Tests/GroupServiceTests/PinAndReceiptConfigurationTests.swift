import GroupModel
@testable import GroupService
import Testing

/// `apps[].limits.max_pinned_messages`, `read_receipt_max_members`, `read_receipt_interval_ms`,
/// and the batching of read receipts.
@Suite("Configuration and batching: pinned messages and read receipts")
struct PinAndReceiptConfigurationTests {
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

    @Test("absent: the defaults (10, 200, 1000 ms); values are read; the demo config states the defaults")
    func parsed() throws {
        let limits = try GroupdConfiguration.parse(yaml: Self.yaml("")).apps[0].limits
        #expect(limits.maxPinnedMessages == 10 && limits.readReceiptMaxMembers == 200)
        #expect(limits.readReceiptIntervalMilliseconds == 1000)
        let set = try GroupdConfiguration.parse(yaml: Self.yaml(
            "    limits: {max_pinned_messages: 3, read_receipt_max_members: 50, read_receipt_interval_ms: 250}")).apps[0].limits
        #expect(set.maxPinnedMessages == 3 && set.readReceiptMaxMembers == 50 && set.readReceiptIntervalMilliseconds == 250)
        let demo = GroupdConfiguration.demoYAML(port: 1)
        let parsedDemo = try GroupdConfiguration.parse(yaml: demo).apps[0].limits
        #expect(parsedDemo.maxPinnedMessages == 10 && parsedDemo.readReceiptMaxMembers == 200)
        #expect(parsedDemo.readReceiptIntervalMilliseconds == 1000)
        for key in ["max_pinned_messages: 10", "read_receipt_max_members: 200", "read_receipt_interval_ms: 1000"] {
            #expect(demo.contains(key))
        }
    }

    @Test("0 or negative: refused with the key path", arguments: ["max_pinned_messages", "read_receipt_max_members", "read_receipt_interval_ms"])
    func refused(key: String) throws {
        do {
            _ = try GroupdConfiguration.parse(yaml: Self.yaml("    limits: {\(key): 0}"), file: "g.yaml")
            Issue.record("\(key): 0 was accepted")
        } catch let error as ConfigurationError {
            #expect(error.keyPath == "apps[0].limits.\(key)")
            #expect(error.message.contains("expected a value from 1 to 2147483647, found 0"))
        }
    }

    @Test("a batch per group and sender: due an interval after its first read, later reads join it")
    func batching() {
        let batcher = ReadReceiptBatcher()
        let t0 = Timestamp(millisecondsSince1970: 1_700_000_000_000)
        batcher.note(app: "a", groupID: "g", sender: "s", sequences: [5], now: t0, intervalMilliseconds: 1000)
        batcher.note(app: "a", groupID: "g", sender: "s", sequences: [7, 5], now: t0.adding(milliseconds: 600), intervalMilliseconds: 1000)
        batcher.note(app: "a", groupID: "g", sender: "t", sequences: [6], now: t0.adding(milliseconds: 600), intervalMilliseconds: 1000)
        batcher.note(app: "a", groupID: "g", sender: "u", sequences: [], now: t0, intervalMilliseconds: 1000)
        #expect(batcher.pendingCount == 2)
        #expect(batcher.takeDue(now: t0.adding(milliseconds: 999)).isEmpty)
        let due = batcher.takeDue(now: t0.adding(milliseconds: 1000))
        #expect(due.map(\.key.sender) == ["s"] && due.first?.sequences == [5, 7])
        #expect(batcher.takeDue(now: t0.adding(milliseconds: 1600)).map(\.key.sender) == ["t"])
        #expect(batcher.pendingCount == 0)
    }
}
