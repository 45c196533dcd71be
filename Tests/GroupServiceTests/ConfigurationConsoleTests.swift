import Foundation
import GroupService
import Testing

@Suite("Configuration: the operator console")
struct ConfigurationConsoleTests {
    @Test("absent: no console listener")
    func absent() throws {
        #expect(try GroupdConfiguration.parse(yaml: app).console == nil)
    }

    @Test("console parses; host defaults to loopback", arguments: [
        ("console: {port: 8080}", ConsoleSettings(host: "127.0.0.1", port: 8080)),
        ("console: {host: 0.0.0.0, port: 0}", ConsoleSettings(host: "0.0.0.0", port: 0)),
    ])
    func parse(_ yaml: String, _ expected: ConsoleSettings) throws {
        #expect(try GroupdConfiguration.parse(yaml: yaml + "\n" + app).console == expected)
    }

    static let mistakes: [ConfigurationMistake] = [
        ConfigurationMistake(name: "console without port", yaml: "console: {host: 127.0.0.1}\n" + app,
                keyPath: "console.port", expected: "required key is missing"),
        ConfigurationMistake(name: "console port out of range", yaml: "console: {port: 65536}\n" + app,
                keyPath: "console.port", expected: "from 0 to 65535"),
        ConfigurationMistake(name: "console port of the gRPC listener", yaml: "listen: {port: 7000}\nconsole: {port: 7000}\n" + app,
                keyPath: "console.port", expected: "other than listen.port"),
        ConfigurationMistake(name: "console on the wildcard at the listener's port", yaml: "listen: {port: 7000}\nconsole: {host: 0.0.0.0, port: 7000}\n" + app,
                keyPath: "console.port", expected: "other than listen.port"),
        ConfigurationMistake(name: "console port of the metrics endpoint", yaml: "metrics: {port: 9100}\nconsole: {port: 9100}\n" + app,
                keyPath: "console.port", expected: "other than metrics.port"),
        ConfigurationMistake(name: "console host empty", yaml: "console: {host: '', port: 8080}\n" + app,
                keyPath: "console.host", expected: "an address"),
        ConfigurationMistake(name: "unknown console key", yaml: "console: {port: 8080, token: x}\n" + app,
                keyPath: "console.token", expected: "unknown key; expected one of: host, port"),
    ]

    @Test("each mistake names the key path and what was expected", arguments: mistakes)
    func mistake(_ m: ConfigurationMistake) throws {
        try m.check()
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
