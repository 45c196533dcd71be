import Foundation
import GRPCProtocol
import GRPCServer
import GroupService
import NIOCore
import Testing

@Suite("Configuration: tls and keepalive")
struct ConfigurationTransportTests {
    @Test("absent: plaintext h2c and grpc-go's keepalive defaults")
    func defaults() throws {
        let c = try GroupdConfiguration.parse(yaml: app)
        #expect(c.tls == nil)
        #expect(c.tlsFiles(relativeTo: "/etc/groupd") == nil)
        #expect(c.keepalive == .defaults)
        #expect(c.keepalive.timeSeconds == 7200)
        #expect(c.keepalive.timeoutSeconds == 20)
        #expect(c.keepalive.maxConnectionIdleSeconds == 0)
        #expect(c.keepalive.maxConnectionAgeSeconds == 0)
        #expect(c.keepalive.maxConnectionAgeGraceSeconds == 0)
        #expect(c.keepalive.minPingIntervalSeconds == 300)
        #expect(c.keepalive.permitWithoutStream == false)
        #expect(c.keepalive.settings == KeepaliveSettings.defaults)
    }

    @Test("every key parses; 0 turns a limit off; relative paths are relative to the file's directory")
    func parse() throws {
        let c = try GroupdConfiguration.parse(yaml: """
            tls:
              cert_file: certs/server.pem
              key_file: /secrets/server.key
              client_ca_file: clients.pem
              handshake_timeout_seconds: 5
            keepalive:
              time_seconds: 60
              timeout_seconds: 2.5
              max_connection_idle_seconds: 300
              max_connection_age_seconds: 3600
              max_connection_age_grace_seconds: 30
              min_ping_interval_seconds: 10
              permit_without_stream: true
            """ + "\n" + app)
        let tls = try #require(c.tls)
        #expect(tls == .init(certFile: "certs/server.pem", keyFile: "/secrets/server.key", clientCAFile: "clients.pem", handshakeTimeoutSeconds: 5))
        #expect(tls.files(relativeTo: "/etc/groupd")
            == TLSFiles(certificateChain: "/etc/groupd/certs/server.pem", privateKey: "/secrets/server.key", clientCA: "/etc/groupd/clients.pem"))
        #expect(tls.files(relativeTo: nil).certificateChain == "certs/server.pem", "no directory: the working directory's")
        let settings = c.keepalive.settings
        #expect(settings.time == .seconds(60))
        #expect(settings.timeout == .milliseconds(2500))
        #expect(settings.maxConnectionIdle == .seconds(300))
        #expect(settings.maxConnectionAge == .hours(1))
        #expect(settings.maxConnectionAgeGrace == .seconds(30))
        #expect(settings.minPingInterval == .seconds(10))
        #expect(settings.permitWithoutStream)

        let off = try GroupdConfiguration.parse(yaml: "keepalive: {time_seconds: 0}\n" + app).keepalive.settings
        #expect(off.time == nil)
        let mutualOff = try GroupdConfiguration.parse(yaml: "tls: {cert_file: a.pem, key_file: a.key}\n" + app)
        #expect(mutualOff.tls?.clientCAFile == nil)
        #expect(mutualOff.tls?.handshakeTimeoutSeconds == 120)
    }

    @Test("the configuration encodes and decodes to itself")
    func roundTrip() throws {
        var c = try GroupdConfiguration.parse(yaml: app)
        c.tls = .init(certFile: "s.pem", keyFile: "s.key", clientCAFile: "ca.pem")
        c.keepalive.maxConnectionAgeSeconds = 60
        let json = String(decoding: try JSONEncoder().encode(c), as: UTF8.self)
        #expect(try GroupdConfiguration.parse(yaml: json) == c)
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
        .init(name: "tls without key_file", yaml: "tls: {cert_file: s.pem}", keyPath: "tls.key_file", expected: "required key is missing"),
        .init(name: "tls without cert_file", yaml: "tls: {key_file: s.key}", keyPath: "tls.cert_file", expected: "required key is missing"),
        .init(name: "empty cert_file", yaml: "tls: {cert_file: '', key_file: s.key}", keyPath: "tls.cert_file", expected: "expected a file path"),
        .init(name: "empty client_ca_file", yaml: "tls: {cert_file: s.pem, key_file: s.key, client_ca_file: ''}",
              keyPath: "tls.client_ca_file", expected: "expected a file path"),
        .init(name: "unknown tls key", yaml: "tls: {cert_file: s.pem, key_file: s.key, ca_file: x}", keyPath: "tls.ca_file", expected: "unknown key"),
        .init(name: "tls not a mapping", yaml: "tls: true", keyPath: "tls", expected: "expected a mapping"),
        .init(name: "handshake timeout 0", yaml: "tls: {cert_file: s.pem, key_file: s.key, handshake_timeout_seconds: 0}",
              keyPath: "tls.handshake_timeout_seconds", expected: "above 0 and at most 3600, found 0"),
        .init(name: "negative time", yaml: "keepalive: {time_seconds: -1}", keyPath: "keepalive.time_seconds",
              expected: "expected seconds from 0 to 31536000, found -1"),
        .init(name: "timeout 0", yaml: "keepalive: {timeout_seconds: 0}", keyPath: "keepalive.timeout_seconds", expected: "above 0"),
        .init(name: "negative idle", yaml: "keepalive: {max_connection_idle_seconds: -5}", keyPath: "keepalive.max_connection_idle_seconds",
              expected: "found -5"),
        .init(name: "age over a year", yaml: "keepalive: {max_connection_age_seconds: 40000000}", keyPath: "keepalive.max_connection_age_seconds",
              expected: "from 0 to 31536000"),
        .init(name: "negative grace", yaml: "keepalive: {max_connection_age_grace_seconds: -1}",
              keyPath: "keepalive.max_connection_age_grace_seconds", expected: "found -1"),
        .init(name: "NaN ping interval", yaml: "keepalive: {min_ping_interval_seconds: .nan}", keyPath: "keepalive.min_ping_interval_seconds",
              expected: "expected seconds"),
        .init(name: "permit_without_stream not a bool", yaml: "keepalive: {permit_without_stream: sometimes}",
              keyPath: "keepalive.permit_without_stream", expected: "true or false"),
        .init(name: "unknown keepalive key", yaml: "keepalive: {time: 5}", keyPath: "keepalive.time", expected: "unknown key"),
    ]

    @Test("mistakes name their key path", arguments: mistakes)
    func mistake(_ mistake: Mistake) throws {
        let error = try #require(configError(mistake.yaml + "\n" + app))
        #expect(error.keyPath == mistake.keyPath, "\(error)")
        #expect(error.message.contains(mistake.expected), "\(error)")
        #expect(error.file == "groupd.yaml")
    }

    @Test("a reload keeps TLS on or off, the handshake timeout and keepalive; the TLS files reload")
    func restartOnly() throws {
        let running = try GroupdConfiguration.parse(yaml: "tls: {cert_file: a.pem, key_file: a.key}\n" + app)
        var next = running
        next.tls = .init(certFile: "b.pem", keyFile: "b.key", clientCAFile: "ca.pem", handshakeTimeoutSeconds: 9)
        next.keepalive.timeSeconds = 10
        let (kept, changes) = next.keepingRestartOnlyKeys(of: running)
        #expect(Set(changes.map(\.key)) == ["tls.handshake_timeout_seconds", "keepalive"])
        #expect(kept.tls == .init(certFile: "b.pem", keyFile: "b.key", clientCAFile: "ca.pem", handshakeTimeoutSeconds: 120))
        #expect(kept.keepalive == running.keepalive)
        #expect(Set(GroupdConfiguration.restartOnlyKeys).isSuperset(of: changes.map(\.key)))

        var off = running
        off.tls = nil
        let (keptOn, offChanges) = off.keepingRestartOnlyKeys(of: running)
        #expect(offChanges.map(\.key) == ["tls"])
        #expect(offChanges.first?.requested == "off (h2c)")
        #expect(keptOn.tls == running.tls)

        let plain = try GroupdConfiguration.parse(yaml: app)
        let (keptOff, onChanges) = running.keepingRestartOnlyKeys(of: plain)
        #expect(onChanges.map(\.key) == ["tls"])
        #expect(keptOff.tls == nil)
    }
}
