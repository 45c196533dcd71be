import Foundation
import GRPCProtocol
import GRPCServer
import GroupService
import Testing

@Suite("Configuration: transport reset limits")
struct ConfigurationResetLimitTests {
    @Test("absent: a burst of 200 resets, then 100 a second")
    func defaults() throws {
        let c = try GroupdConfiguration.parse(yaml: app)
        #expect(c.transport == .defaults)
        #expect(c.transport.resetBurst == 200)
        #expect(c.transport.maxResetsPerSecond == 100)
        #expect(c.transport.readsPerTurn == 4)
        #expect(c.transport.readBufferBytes == 65536)
        let limits = c.transport.limits
        #expect(limits.resetBurst == TransportLimits.defaults.resetBurst)
        #expect(limits.resetsPerSecond == TransportLimits.defaults.resetsPerSecond)
        #expect(limits.readsPerTurn == TransportLimits.defaults.readsPerTurn)
        #expect(limits.readBufferBytes == TransportLimits.defaults.readBufferBytes)
    }

    @Test("both keys parse and reach the transport's limits")
    func parse() throws {
        let c = try GroupdConfiguration.parse(yaml: """
            transport:
              reset_burst: 5
              max_resets_per_second: 1000000
              reads_per_turn: 1
              read_buffer_bytes: 16384
            """ + "\n" + app)
        #expect(c.transport.limits.resetBurst == 5)
        #expect(c.transport.limits.resetsPerSecond == 1_000_000)
        #expect(c.transport.limits.readsPerTurn == 1)
        #expect(c.transport.limits.readBufferBytes == 16384)
        let one = try GroupdConfiguration.parse(yaml: "transport: {max_resets_per_second: 1}\n" + app)
        #expect(one.transport.maxResetsPerSecond == 1)
        #expect(one.transport.resetBurst == 200, "an absent key keeps its default")
    }

    @Test("the configuration encodes and decodes to itself")
    func roundTrip() throws {
        var c = try GroupdConfiguration.parse(yaml: app)
        c.transport.resetBurst = 7
        c.transport.maxResetsPerSecond = 3
        let json = String(decoding: try JSONEncoder().encode(c), as: UTF8.self)
        #expect(try GroupdConfiguration.parse(yaml: json) == c)
    }

    @Test("mistakes name their key path", arguments: [
        ("transport: {reset_burst: 0}", "transport.reset_burst", "expected 1 to 1000000, found 0"),
        ("transport: {reset_burst: -3}", "transport.reset_burst", "found -3"),
        ("transport: {reset_burst: 1000001}", "transport.reset_burst", "found 1000001"),
        ("transport: {max_resets_per_second: 0}", "transport.max_resets_per_second", "expected 1 to 1000000, found 0"),
        ("transport: {max_resets_per_second: 2000000}", "transport.max_resets_per_second", "found 2000000"),
        ("transport: {max_resets_per_second: many}", "transport.max_resets_per_second", "expected an integer"),
        ("transport: {reads_per_turn: 0}", "transport.reads_per_turn", "expected 1 to 64, found 0"),
        ("transport: {reads_per_turn: 65}", "transport.reads_per_turn", "found 65"),
        ("transport: {read_buffer_bytes: 2048}", "transport.read_buffer_bytes", "expected 4096 to 1048576, found 2048"),
        ("transport: {read_buffer_bytes: 2097152}", "transport.read_buffer_bytes", "found 2097152"),
        ("transport: {read_buffer_bytes: 50000}", "transport.read_buffer_bytes", "expected a power of two from 4096 to 1048576, found 50000"),
        ("transport: {resets_per_second: 5}", "transport.resets_per_second", "unknown key"),
        ("transport: 5", "transport", "expected a mapping"),
    ])
    func mistake(_ yaml: String, _ keyPath: String, _ expected: String) throws {
        let error = try #require(configError(yaml + "\n" + app))
        #expect(error.keyPath == keyPath, "\(error)")
        #expect(error.message.contains(expected), "\(error)")
    }

    @Test("a reload keeps the running transport limits (each connection takes them when accepted)")
    func restartOnly() throws {
        let running = try GroupdConfiguration.parse(yaml: app)
        var next = running
        next.transport.resetBurst = 10
        let (kept, changes) = next.keepingRestartOnlyKeys(of: running)
        #expect(changes.map(\.key) == ["transport"])
        #expect(changes.first?.requested.contains("reset_burst: 10, max_resets_per_second: 100, reads_per_turn: 4, read_buffer_bytes: 65536") == true)
        #expect(kept.transport == running.transport)
        #expect(GroupdConfiguration.restartOnlyKeys.contains("transport"))
    }
}
