import Foundation
import GRPCProtocol
import GRPCServer
import NIOCore
import Testing

@testable import GroupService

@Suite("Configuration: transport limits against clients that do not read")
struct ConfigurationTransportBacklogTests {
    @Test("absent: 4 MiB per connection, 128 MiB in all, a 30-second stall timeout")
    func defaults() throws {
        let c = try GroupdConfiguration.parse(yaml: app)
        #expect(c.transport == .defaults)
        #expect(c.transport.limits.stalledWriteTimeout == TransportLimits.defaults.stalledWriteTimeout)
        #expect(c.transport.limits.maxQueuedBytesPerConnection == 4 << 20)
        #expect(c.transport.limits.maxQueuedBytes == 128 << 20)
        #expect(c.transport.limits.stalledWriteTimeout == .seconds(30))
    }

    @Test("every key parses into the transport's limits")
    func parse() throws {
        let c = try GroupdConfiguration.parse(yaml: """
            transport:
              max_queued_bytes_per_connection: 65536
              max_queued_bytes: 65536
              stalled_write_timeout_seconds: 0.5
            """ + "\n" + app)
        #expect(c.transport.limits.maxQueuedBytesPerConnection == 65536)
        #expect(c.transport.limits.maxQueuedBytes == 65536)
        #expect(c.transport.limits.stalledWriteTimeout == .milliseconds(500))
        let json = String(decoding: try JSONEncoder().encode(c), as: UTF8.self)
        #expect(try GroupdConfiguration.parse(yaml: json) == c)
    }

    static let mistakes: [(yaml: String, keyPath: String, expected: String)] = [
        ("transport: {max_queued_bytes_per_connection: 1024}", "transport.max_queued_bytes_per_connection",
         "expected bytes from 65536 to 1073741824, found 1024"),
        ("transport: {max_queued_bytes: 1048576}", "transport.max_queued_bytes",
         "expected bytes from max_queued_bytes_per_connection (4194304) to 68719476736, found 1048576"),
        ("transport: {stalled_write_timeout_seconds: 0}", "transport.stalled_write_timeout_seconds", "above 0 and at most 3600, found 0"),
        ("transport: {stalled_write_timeout_seconds: 7200}", "transport.stalled_write_timeout_seconds", "found 7200"),
        ("transport: {max_queued_bytes: lots}", "transport.max_queued_bytes", "expected an integer"),
        ("transport: {queued_bytes: 5}", "transport.queued_bytes", "unknown key"),
    ]

    @Test("mistakes name their key path", arguments: mistakes)
    func mistake(_ mistake: (yaml: String, keyPath: String, expected: String)) throws {
        let error = try #require(configError(mistake.yaml + "\n" + app))
        #expect(error.keyPath == mistake.keyPath, "\(error)")
        #expect(error.message.contains(mistake.expected), "\(error)")
    }
}
