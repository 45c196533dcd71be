import Foundation
import GroupService
import Testing

@Suite("Configuration: the operator console")
struct ConfigurationConsoleTests {
    @Test("absent: no console listener")
    func absent() throws {
        #expect(try GroupdConfiguration.parse(yaml: app).console == nil)
    }

    @Test("console parses; host defaults to loopback")
    func parse() throws {
        let c = try GroupdConfiguration.parse(yaml: "console: {port: 8080}\n" + app)
        #expect(c.console == ConsoleSettings(host: "127.0.0.1", port: 8080))
        let wide = try GroupdConfiguration.parse(yaml: "console: {host: 0.0.0.0, port: 0}\n" + app)
        #expect(wide.console == ConsoleSettings(host: "0.0.0.0", port: 0))
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
        Mistake(name: "console without port", yaml: "console: {host: 127.0.0.1}\n" + app,
                keyPath: "console.port", expected: "required key is missing"),
        Mistake(name: "console port out of range", yaml: "console: {port: 65536}\n" + app,
                keyPath: "console.port", expected: "from 0 to 65535"),
        Mistake(name: "console port of the gRPC listener", yaml: "listen: {port: 7000}\nconsole: {port: 7000}\n" + app,
                keyPath: "console.port", expected: "other than listen.port"),
        Mistake(name: "console on the wildcard at the listener's port", yaml: "listen: {port: 7000}\nconsole: {host: 0.0.0.0, port: 7000}\n" + app,
                keyPath: "console.port", expected: "other than listen.port"),
        Mistake(name: "console port of the metrics endpoint", yaml: "metrics: {port: 9100}\nconsole: {port: 9100}\n" + app,
                keyPath: "console.port", expected: "other than metrics.port"),
        Mistake(name: "console host empty", yaml: "console: {host: '', port: 8080}\n" + app,
                keyPath: "console.host", expected: "an address"),
        Mistake(name: "unknown console key", yaml: "console: {port: 8080, token: x}\n" + app,
                keyPath: "console.token", expected: "unknown key; expected one of: host, port"),
    ]

    @Test("each mistake names the key path and what was expected", arguments: mistakes)
    func mistake(_ m: Mistake) throws {
        let error = try #require(configError(m.yaml))
        #expect(error.file == "groupd.yaml")
        #expect(error.keyPath == m.keyPath, "\(error)")
        #expect(error.message.contains(m.expected), "\(error)")
    }

    @Test("the same port on addresses that do not overlap is allowed")
    func otherAddress() throws {
        let c = try GroupdConfiguration.parse(yaml: "listen: {host: 127.0.0.1, port: 7000}\nconsole: {host: 127.0.0.2, port: 7000}\n" + app)
        #expect(c.console?.port == 7000)
    }

    @Test("the key round trips through encoding")
    func roundTrip() throws {
        var c = try GroupdConfiguration.parse(yaml: app)
        c.console = ConsoleSettings(host: "::1", port: 8081)
        let text = String(decoding: try JSONEncoder().encode(c), as: UTF8.self)
        #expect(try GroupdConfiguration.parse(yaml: text) == c)
    }

    @Test("console needs a restart")
    func restartOnly() throws {
        let running = try GroupdConfiguration.parse(yaml: app)
        var next = running
        next.console = ConsoleSettings(port: 8080)
        let (kept, changes) = next.keepingRestartOnlyKeys(of: running)
        #expect(changes.map(\.key) == ["console"])
        #expect(kept.console == nil)
        #expect(GroupdConfiguration.restartOnlyKeys.contains("console"))
    }
}
