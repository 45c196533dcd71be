import GRPCProtocol
import GRPCServer
import GroupService
import NIOCore
import Testing

@Suite("Configuration: transport limits")
struct ConfigurationTransportLimitsTests {
    @Test("absent: defaults that protect")
    func defaults() throws {
        let c = try GroupdConfiguration.parse(yaml: app)
        #expect(c.transport == .defaults)
        #expect(c.transport.prefaceTimeoutSeconds == 10)
        #expect(c.transport.idleTimeoutSeconds == 60)
        #expect(c.transport.maxUnauthenticatedCalls == 256)
        let limits = c.transport.limits
        #expect(limits.prefaceTimeout == .seconds(10))
        #expect(limits.unusedConnectionTimeout == .seconds(60))
        #expect(limits.maxUnauthenticatedCalls == 256)
    }

    @Test("every key parses; idle 0 turns the unused-connection timeout off; the refusal names the limit")
    func parse() throws {
        let c = try GroupdConfiguration.parse(yaml: """
            transport:
              preface_timeout_seconds: 2.5
              idle_timeout_seconds: 0
              max_unauthenticated_calls: 12
            """ + "\n" + app)
        let limits = c.transport.limits
        #expect(limits.prefaceTimeout == .milliseconds(2500))
        #expect(limits.unusedConnectionTimeout == nil)
        #expect(limits.maxUnauthenticatedCalls == 12)
        #expect(limits.unauthenticatedCallsRefusal.code == .resourceExhausted)
        #expect(limits.unauthenticatedCallsRefusal.message.contains("12 calls without a verified token"))
        #expect(limits.unauthenticatedCallsRefusal.details != nil, "a google.rpc.Status with the reason")
    }

    struct Mistake: Sendable, CustomTestStringConvertible {
        var name: String
        var yaml: String
        var keyPath: String
        var expected: String
        var testDescription: String { name }
    }

    static let mistakes: [Mistake] = [
        .init(name: "preface 0", yaml: "transport: {preface_timeout_seconds: 0}", keyPath: "transport.preface_timeout_seconds",
              expected: "above 0 and at most 3600, found 0"),
        .init(name: "preface over an hour", yaml: "transport: {preface_timeout_seconds: 3601}",
              keyPath: "transport.preface_timeout_seconds", expected: "found 3601"),
        .init(name: "negative idle", yaml: "transport: {idle_timeout_seconds: -1}", keyPath: "transport.idle_timeout_seconds",
              expected: "from 0 (never) to 86400, found -1"),
        .init(name: "idle over a day", yaml: "transport: {idle_timeout_seconds: 86401}", keyPath: "transport.idle_timeout_seconds",
              expected: "found 86401"),
        .init(name: "no unauthenticated call", yaml: "transport: {max_unauthenticated_calls: 0}",
              keyPath: "transport.max_unauthenticated_calls", expected: "from 1 to 1000000, found 0"),
        .init(name: "unauthenticated calls not a number", yaml: "transport: {max_unauthenticated_calls: many}",
              keyPath: "transport.max_unauthenticated_calls", expected: "expected an integer"),
        .init(name: "unknown transport key", yaml: "transport: {preface_timeout: 5}", keyPath: "transport.preface_timeout",
              expected: "unknown key"),
    ]

    @Test("mistakes name their key path", arguments: mistakes)
    func mistake(_ mistake: Mistake) throws {
        let error = try #require(configError(mistake.yaml + "\n" + app))
        #expect(error.keyPath == mistake.keyPath, "\(error)")
        #expect(error.message.contains(mistake.expected), "\(error)")
    }

    @Test("a reload keeps the running transport limits")
    func restartOnly() throws {
        let running = try GroupdConfiguration.parse(yaml: app)
        var next = running
        next.transport.maxUnauthenticatedCalls = 5
        let (kept, changes) = next.keepingRestartOnlyKeys(of: running)
        #expect(changes.map(\.key) == ["transport"])
        #expect(kept.transport == running.transport)
        #expect(GroupdConfiguration.restartOnlyKeys.contains("transport"))
    }
}
