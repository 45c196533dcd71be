import Foundation
import GroupModel
import GroupService
import GroupStore
import GroupStoreSettings
import GroupTestSupport
import Testing
import Yams

private let minimal = app

@Suite("Configuration")
struct ConfigurationTests {
    @Test("missing keys take the documented defaults")
    func defaults() throws {
        let c = try GroupdConfiguration.parse(yaml: minimal)
        #expect(c.listen.host == "127.0.0.1")
        #expect(c.listen.port == 50051)
        #expect(c.listen.connect)
        #expect(c.dataDir == "./data")
        #expect(c.databasePath == "./data/groupd.sqlite")
        #expect(c.durability == .full)
        #expect(c.writeBatch == .init(maxWrites: 256, maxWaitMicroseconds: 0))
        #expect(c.writeBatching == WriteBatching(maxWrites: 256, maxWait: .zero))
        #expect(c.maxMessageBytes == 4 * 1024 * 1024)
        #expect(c.maxHeaderListBytes == 16 * 1024)
        #expect(c.maxConcurrentStreams == 256)
        #expect(c.drainTimeoutSeconds == 10)
        #expect(c.eventLoopThreads == 0)
        #expect(c.auth.clockSkewSeconds == 0)
        #expect(c.auth.tokenCacheEntries == 4096)
        #expect(c.apps.count == 1)
        #expect(c.apps[0].limits == AppLimits.defaults)
        #expect(c.app("demo")?.secrets == [.init(kid: "k1", secret: "0123456789abcdef0123456789abcdef")])
        #expect(c.app("other") == nil)
    }

    @Test("given values override defaults, limits included")
    func overrides() throws {
        let c = try GroupdConfiguration.parse(yaml: """
            listen: {host: 0.0.0.0, port: 0, connect: false}
            data_dir: /var/lib/groupd
            durability: normal
            write_batch: {max_writes: 64, max_wait_microseconds: 500}
            max_message_bytes: 1024
            drain_timeout_seconds: 2.5
            event_loop_threads: 2
            auth: {clock_skew_seconds: 30}
            \(minimal)
                limits:
                  group_name_bytes: 64
                  max_members: {work: 50, av_chat_room: 0}
            """)
        #expect(c.listen == .init(host: "0.0.0.0", port: 0, connect: false))
        #expect(c.dataDir == "/var/lib/groupd")
        #expect(c.durability == .normal)
        #expect(c.writeBatching == WriteBatching(maxWrites: 64, maxWait: .microseconds(500)))
        #expect(c.maxMessageBytes == 1024)
        #expect(c.drainTimeoutSeconds == 2.5)
        #expect(c.eventLoopThreads == 2)
        #expect(c.auth.clockSkewSeconds == 30)
        #expect(c.auth.tokenCacheEntries == 4096)
        #expect(c.store == .defaults)
        #expect(c.store.backend == .sqlite)
        let limits = c.apps[0].limits
        #expect(limits.groupNameBytes == 64)
        #expect(limits.introductionBytes == 120)
        #expect(limits.maxMembers(for: .work) == 50)
        #expect(limits.maxMembers(for: .public) == 2000)
        #expect(limits.maxMembers(for: .avChatRoom) == nil)
    }

    /// A mistake, the key path it must name, and a fragment of what was expected.
    struct Mistake: Sendable, CustomStringConvertible {
        var name: String
        var yaml: String
        var keyPath: String
        var expected: String
        var description: String { self.name }
    }

    static let mistakes: [Mistake] = [
        Mistake(name: "no apps", yaml: "listen: {port: 1}", keyPath: "apps", expected: "at least one app"),
        Mistake(name: "empty file", yaml: "", keyPath: "apps", expected: "at least one app"),
        Mistake(name: "empty apps", yaml: "apps: []", keyPath: "apps", expected: "at least one app"),
        Mistake(name: "duplicate app id", yaml: minimal + """

              - id: demo
                secrets: [{kid: k1, secret: "0123456789abcdef0123456789abcdef"}]
            """, keyPath: "apps[1].id", expected: "duplicate app id 'demo'"),
        Mistake(name: "short secret", yaml: """
            apps:
              - id: a
                secrets: [{kid: k1, secret: "0123456789abcdef0123456789abcdef"}]
              - id: b
                secrets: [{kid: k1, secret: "0123456789abcdef0123456789abcdef"}, {kid: k2, secret: "sixteen-bytes-ok"}]
            """, keyPath: "apps[1].secrets[1].secret", expected: "at least 32 bytes"),
        Mistake(name: "no secrets", yaml: "apps: [{id: a, secrets: []}]", keyPath: "apps[0].secrets",
                expected: "at least one secret"),
        Mistake(name: "missing secret", yaml: "apps: [{id: a, secrets: [{kid: k1}]}]",
                keyPath: "apps[0].secrets[0].secret", expected: "required"),
        Mistake(name: "missing app id", yaml: "apps: [{secrets: [{kid: k1, secret: x}]}]",
                keyPath: "apps[0].id", expected: "required"),
        Mistake(name: "duplicate kid", yaml: """
            apps: [{id: a, secrets: [{kid: k1, secret: "0123456789abcdef0123456789abcdef"}, {kid: k1, secret: "0123456789abcdef0123456789abcdeX"}]}]
            """, keyPath: "apps[0].secrets[1].kid", expected: "duplicate kid"),
        Mistake(name: "bad app id", yaml: "apps: [{id: 'a b', secrets: [{kid: k1, secret: x}]}]",
                keyPath: "apps[0].id", expected: "A-Z a-z 0-9"),
        Mistake(name: "port is not a number", yaml: "listen: {port: fifty}\n" + minimal, keyPath: "listen.port",
                expected: "an integer"),
        Mistake(name: "connect is not a boolean", yaml: "listen: {connect: maybe}\n" + minimal, keyPath: "listen.connect",
                expected: "true or false"),
        Mistake(name: "port out of range", yaml: "listen: {port: 70000}\n" + minimal, keyPath: "listen.port",
                expected: "0 to 65535"),
        Mistake(name: "apps is not a list", yaml: "apps: 5", keyPath: "apps", expected: "a list"),
        Mistake(name: "listen is not a mapping", yaml: "listen: 8080\n" + minimal, keyPath: "listen",
                expected: "mapping"),
        Mistake(name: "unknown durability", yaml: "durability: fast\n" + minimal, keyPath: "durability",
                expected: "full or normal"),
        Mistake(name: "zero batch", yaml: "write_batch: {max_writes: 0}\n" + minimal, keyPath: "write_batch.max_writes",
                expected: "from 1 to 10000"),
        Mistake(name: "long batch wait", yaml: "write_batch: {max_wait_microseconds: 200000}\n" + minimal,
                keyPath: "write_batch.max_wait_microseconds", expected: "from 0 to 100000"),
        Mistake(name: "unknown batch key", yaml: "write_batch: {max: 1}\n" + minimal, keyPath: "write_batch.max",
                expected: "unknown key"),
        Mistake(name: "unknown key", yaml: "listen: {prot: 1}\n" + minimal, keyPath: "listen.prot",
                expected: "unknown key"),
        Mistake(name: "unknown top-level key", yaml: "max_mesage_bytes: 1\n" + minimal, keyPath: "max_mesage_bytes",
                expected: "unknown key"),
        Mistake(name: "zero streams", yaml: "max_concurrent_streams: 0\n" + minimal, keyPath: "max_concurrent_streams",
                expected: "from 1"),
        Mistake(name: "negative drain", yaml: "drain_timeout_seconds: -1\n" + minimal, keyPath: "drain_timeout_seconds",
                expected: "from 0"),
        Mistake(name: "bad limit", yaml: minimal + "\n    limits: {name_card_bytes: 0}",
                keyPath: "apps[0].limits.name_card_bytes", expected: "from 1"),
        Mistake(name: "bad limit type", yaml: minimal + "\n    limits: {max_members: {work: many}}",
                keyPath: "apps[0].limits.max_members.work", expected: "an integer"),
        Mistake(name: "unknown group type in max_members", yaml: minimal + "\n    limits: {max_members: {private: 5}}",
                keyPath: "apps[0].limits.max_members.private", expected: "unknown key"),
        Mistake(name: "not YAML", yaml: "apps: [unclosed", keyPath: "", expected: "not valid YAML"),
        Mistake(name: "unknown store backend", yaml: "store: {backend: mysql}\n" + minimal, keyPath: "store.backend",
                expected: "sqlite or postgres"),
        Mistake(name: "postgres without a URL", yaml: "store: {backend: postgres}\n" + minimal, keyPath: "store.url",
                expected: "not a postgres:// URL"),
        Mistake(name: "postgres URL without a database", yaml: "store: {backend: postgres, url: 'postgres://u@h:5432/'}\n" + minimal,
                keyPath: "store.url", expected: "no database"),
        Mistake(name: "postgres URL without a user", yaml: "store: {backend: postgres, url: 'postgres://h/db'}\n" + minimal,
                keyPath: "store.url", expected: "no user"),
        Mistake(name: "unknown TLS mode", yaml: "store: {tls: always}\n" + minimal, keyPath: "store.tls",
                expected: "disable, prefer or require"),
        Mistake(name: "empty pool", yaml: "store: {pool_size: 0}\n" + minimal, keyPath: "store.pool_size",
                expected: "from 1 to 1000"),
        Mistake(name: "zero statement timeout", yaml: "store: {statement_timeout_ms: 0}\n" + minimal,
                keyPath: "store.statement_timeout_ms", expected: "from 1 to 3600000"),
        Mistake(name: "unknown store key", yaml: "store: {host: db}\n" + minimal, keyPath: "store.host",
                expected: "unknown key"),
    ]

    @Test("store: postgres with every key; absent keys take their defaults")
    func store() throws {
        let c = try GroupdConfiguration.parse(yaml: """
            store:
              backend: postgres
              url: "postgres://groupd:s3cret@db.internal:6432/groups"
              pool_size: 16
              max_waiting: 10
              statement_timeout_ms: 250
              connect_timeout_ms: 900
              tls: require
            \(minimal)
            """)
        #expect(c.store.backend == .postgres)
        let settings = c.store.postgres
        #expect(settings.poolSize == 16 && settings.maxWaiting == 10)
        #expect(settings.statementTimeoutMilliseconds == 250 && settings.connectTimeoutMilliseconds == 900)
        #expect(settings.tls == .require)
        let endpoint = try settings.endpoint()
        #expect(endpoint.host == "db.internal" && endpoint.port == 6432 && endpoint.user == "groupd")
        #expect(endpoint.password == "s3cret" && endpoint.database == "groups")
        let short = try GroupdConfiguration.parse(yaml: "store: {backend: postgres, url: 'postgres://u@h/d'}\n" + minimal)
        #expect(short.store.poolSize == 8 && short.store.tls == .disable)
        #expect(try short.store.postgres.endpoint().port == 5432)
    }

    @Test("each mistake names the file, the key path and what was expected", arguments: mistakes)
    func mistake(_ m: Mistake) throws {
        let error = try #require(configError(m.yaml, file: "conf/groupd.yaml"))
        #expect(error.file == "conf/groupd.yaml")
        #expect(error.keyPath == m.keyPath)
        #expect(error.message.contains(m.expected), "\(error)")
        #expect(error.description.hasPrefix("conf/groupd.yaml: " + (m.keyPath.isEmpty ? "" : m.keyPath + ": ")))
    }

    @Test("load(path:) reads a file and names it in errors")
    func load() throws {
        let directory = try TemporaryDirectory()
        let good = directory.file("good.yaml")
        try minimal.write(toFile: good, atomically: true, encoding: .utf8)
        #expect(try GroupdConfiguration.load(path: good).apps.map(\.id) == ["demo"])

        let bad = directory.file("bad.yaml")
        try "apps: []".write(toFile: bad, atomically: true, encoding: .utf8)
        do {
            _ = try GroupdConfiguration.load(path: bad)
            Issue.record("expected an error")
        } catch let error as ConfigurationError {
            #expect(error.file == bad)
            #expect(error.keyPath == "apps")
        }

        let missing = directory.file("missing.yaml")
        do {
            _ = try GroupdConfiguration.load(path: missing)
            Issue.record("expected an error")
        } catch let error as ConfigurationError {
            #expect(error.file == missing)
            #expect(error.message.contains("cannot read"))
        }
    }

    @Test("the demo config parses back with its app, kid and secret")
    func demo() throws {
        let secret = GroupdConfiguration.randomSecret()
        #expect(secret.utf8.count == 64)
        #expect(secret != GroupdConfiguration.randomSecret())
        let yaml = GroupdConfiguration.demoYAML(appID: "demo-app", kid: "key-1", secret: secret, port: 6000)
        let c = try GroupdConfiguration.parse(yaml: yaml, file: "demo.yaml")
        #expect(c.apps.map(\.id) == ["demo-app"])
        #expect(c.apps[0].secrets == [.init(kid: "key-1", secret: secret)])
        #expect(c.apps[0].limits == AppLimits.defaults)
        #expect(c.listen.port == 6000)
        var expected = GroupdConfiguration.defaults
        expected.listen.port = 6000
        expected.apps = c.apps
        #expect(c == expected)
        // A default random secret is fresh each time.
        let other = try GroupdConfiguration.parse(yaml: GroupdConfiguration.demoYAML())
        #expect(other.apps[0].secrets[0].secret != secret)
    }

    @Test("encoding and decoding round trip")
    func encodeRoundTrip() throws {
        var c = try GroupdConfiguration.parse(yaml: minimal)
        c.apps[0].limits.maxMembers[.work] = .some(77)
        c.durability = .normal
        let yaml = try YAMLEncoder().encode(c)
        #expect(try GroupdConfiguration.parse(yaml: yaml) == c)
    }
}
