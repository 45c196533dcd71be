import Foundation
import GRPCProtocol
import GroupService
import Testing
import Yams

@Suite("Configuration: compression and reflection")
struct ConfigurationCompressionTests {
    @Test("absent: responses compressed from 1024 bytes, reflection served")
    func defaults() throws {
        let c = try GroupdConfiguration.parse(yaml: app)
        #expect(c.compression == .defaults)
        #expect(c.compression.responses && c.compression.minBytes == 1024)
        #expect(c.reflection)
        let transport = c.compression.responseCompression
        #expect(transport.enabled && transport.minBytes == 1024)
    }

    @Test("given values are read and survive an encode-decode round trip")
    func given() throws {
        let c = try GroupdConfiguration.parse(yaml: "compression: {responses: false, min_bytes: 0}\nreflection: false\n" + app)
        #expect(!c.compression.responses && c.compression.minBytes == 0)
        #expect(!c.reflection)
        #expect(!c.compression.responseCompression.enabled)
        let yaml = try YAMLEncoder().encode(c)
        #expect(try GroupdConfiguration.parse(yaml: yaml) == c)
    }

    /// A mistake and the key path and message fragment it must give.
    struct Mistake: Sendable, CustomStringConvertible {
        var yaml: String
        var keyPath: String
        var expected: String
        var description: String { keyPath + ": " + yaml }
    }

    static let mistakes: [Mistake] = [
        Mistake(yaml: "compression: {min_bytes: -1}", keyPath: "compression.min_bytes", expected: "from 0 to 2147483647, found -1"),
        Mistake(yaml: "compression: {min_bytes: lots}", keyPath: "compression.min_bytes", expected: "an integer"),
        Mistake(yaml: "compression: {responses: sometimes}", keyPath: "compression.responses", expected: "true or false"),
        Mistake(yaml: "compression: {level: 9}", keyPath: "compression.level", expected: "responses, min_bytes"),
        Mistake(yaml: "compression: gzip", keyPath: "compression", expected: "mapping"),
        Mistake(yaml: "reflection: maybe", keyPath: "reflection", expected: "true or false"),
    ]

    @Test("each mistake names its key path and what was expected", arguments: mistakes)
    func mistake(_ m: Mistake) throws {
        let error = try #require(configError(m.yaml + "\n" + app))
        #expect(error.keyPath == m.keyPath)
        #expect(error.message.contains(m.expected), "\(error)")
    }

    @Test("a reload keeps the running compression and reflection: they need a restart")
    func restartOnly() throws {
        let running = try GroupdConfiguration.parse(yaml: app)
        let file = try GroupdConfiguration.parse(yaml: "compression: {responses: false}\nreflection: false\n" + app)
        let (kept, changes) = file.keepingRestartOnlyKeys(of: running)
        #expect(kept.compression == running.compression && kept.reflection)
        #expect(Set(changes.map(\.key)) == ["compression", "reflection"])
    }
}
