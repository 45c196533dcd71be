import Foundation
import GroupService
import Testing

@Suite("Configuration: rate limits and connections")
struct ConfigurationRateLimitTests {
    @Test("absent: no rate limit and 10000 connections")
    func defaults() throws {
        let c = try GroupdConfiguration.parse(yaml: app)
        #expect(c.apps[0].rateLimits == .unlimited)
        #expect(c.apps[0].rateLimits.isUnlimited)
        #expect(c.maxConnections == 10_000)
    }

    @Test("every bucket parses; burst defaults to per_second rounded up")
    func parse() throws {
        let c = try GroupdConfiguration.parse(yaml: "max_connections: 64\n" + app + """

                rate_limits:
                  app: {per_second: 1000, burst: 2000}
                  operator: {per_second: 2.5}
                  operator_writes: {per_second: 0.5, burst: 1}
            """)
        #expect(c.maxConnections == 64)
        let limits = c.apps[0].rateLimits
        #expect(limits.perApp == .init(perSecond: 1000, burst: 2000))
        #expect(limits.perOperator == .init(perSecond: 2.5, burst: 3))
        #expect(limits.perOperatorWrites == .init(perSecond: 0.5, burst: 1))
    }

    /// A mistake: its text, the key path and a part of the message.
    struct Mistake: Sendable, CustomTestStringConvertible {
        var name: String
        var yaml: String
        var keyPath: String
        var expected: String
        var testDescription: String { name }
    }

    static let mistakes: [Mistake] = [
        Mistake(name: "unknown bucket", yaml: app + "\n    rate_limits: {user: {per_second: 1}}",
                keyPath: "apps[0].rate_limits.user", expected: "unknown key; expected one of: app, operator, operator_writes"),
        Mistake(name: "unknown key in a bucket", yaml: app + "\n    rate_limits: {app: {per_second: 1, brust: 2}}",
                keyPath: "apps[0].rate_limits.app.brust", expected: "unknown key"),
        Mistake(name: "per_second missing", yaml: app + "\n    rate_limits: {operator: {burst: 2}}",
                keyPath: "apps[0].rate_limits.operator.per_second", expected: "required key is missing"),
        Mistake(name: "per_second zero", yaml: app + "\n    rate_limits: {operator: {per_second: 0}}",
                keyPath: "apps[0].rate_limits.operator.per_second", expected: "above 0"),
        Mistake(name: "per_second not a number", yaml: app + "\n    rate_limits: {operator: {per_second: fast}}",
                keyPath: "apps[0].rate_limits.operator.per_second", expected: "a number"),
        Mistake(name: "burst out of range", yaml: app + "\n    rate_limits: {operator_writes: {per_second: 1, burst: 0}}",
                keyPath: "apps[0].rate_limits.operator_writes.burst", expected: "from 1 to 1000000"),
        Mistake(name: "burst not an integer", yaml: app + "\n    rate_limits: {app: {per_second: 1, burst: 1.5}}",
                keyPath: "apps[0].rate_limits.app.burst", expected: "an integer"),
        Mistake(name: "rate_limits not a mapping", yaml: app + "\n    rate_limits: 5",
                keyPath: "apps[0].rate_limits", expected: "mapping"),
        Mistake(name: "max_connections zero", yaml: "max_connections: 0\n" + app,
                keyPath: "max_connections", expected: "from 1 to 1000000"),
        Mistake(name: "max_connections not an integer", yaml: "max_connections: lots\n" + app,
                keyPath: "max_connections", expected: "an integer"),
    ]

    @Test("each mistake names the key path and what was expected", arguments: mistakes)
    func mistake(_ m: Mistake) throws {
        let error = try #require(configError(m.yaml))
        #expect(error.file == "groupd.yaml")
        #expect(error.keyPath == m.keyPath, "\(error)")
        #expect(error.message.contains(m.expected), "\(error)")
    }

    @Test("validate() checks rate limits built in code too")
    func validateInCode() throws {
        var c = try GroupdConfiguration.parse(yaml: app)
        c.apps[0].rateLimits.perApp = .init(perSecond: -1, burst: 1)
        #expect(throws: ConfigurationError.self) { try c.validate() }
        c.apps[0].rateLimits.perApp = .init(perSecond: 1, burst: 0)
        #expect(throws: ConfigurationError.self) { try c.validate() }
    }

    @Test("rate limits round trip through encoding")
    func roundTrip() throws {
        var c = try GroupdConfiguration.parse(yaml: app)
        c.apps[0].rateLimits = RateLimits(perApp: .init(perSecond: 3, burst: 4), perOperatorWrites: .init(perSecond: 0.5, burst: 1))
        c.maxConnections = 12
        let text = String(decoding: try JSONEncoder().encode(c), as: UTF8.self)
        #expect(try GroupdConfiguration.parse(yaml: text) == c)
    }
}
