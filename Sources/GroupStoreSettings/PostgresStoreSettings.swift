import Foundation
import GroupModel

/// How groupd reaches its PostgreSQL database (`store:` in the configuration).
public struct PostgresStoreSettings: Sendable, Hashable {
    /// How the connection uses TLS.
    public enum TLSMode: String, Sendable, Hashable, CaseIterable {
        /// Plain TCP.
        case disable
        /// TLS when the server offers it, plain otherwise.
        case prefer
        /// TLS or no connection (the server's certificate is verified against the system's roots).
        case require
    }

    /// `postgres://user[:password]@host[:port]/database`.
    public var url: String
    /// Connections for reads (the writer and the event listener have one each besides).
    public var poolSize: Int
    /// Calls that may wait for a busy pool before the next one is refused with `RESOURCE_EXHAUSTED`.
    public var maxWaiting: Int
    /// `statement_timeout` of every connection, in milliseconds.
    public var statementTimeoutMilliseconds: Int
    /// How long a connection attempt may take, in milliseconds.
    public var connectTimeoutMilliseconds: Int
    /// TLS.
    public var tls: TLSMode
    /// How often each node reads the apps' heads to catch up with commits whose wake-up it did
    /// not hear (the backstop of the doorbell `PostgresBackend` sends after each commit), in
    /// milliseconds.
    public var eventPollMilliseconds: Int
    /// Tests only (`GROUPD_TEST_DIE_BEFORE_DOORBELL`, read by `groupd serve`): a file whose
    /// existence, checked after each commit, makes the process kill itself with `SIGKILL` before
    /// it rings the doorbell of that commit: a node that dies between its commit and its
    /// wake-up. `nil` (always, outside groupd's tests): no check.
    public var dieBeforeDoorbellFile: String?

    /// The environment variable `groupd serve` reads ``dieBeforeDoorbellFile`` from.
    public static let dieBeforeDoorbellVariable = "GROUPD_TEST_DIE_BEFORE_DOORBELL"

    /// Creates settings.
    public init(
        url: String, poolSize: Int = 8, maxWaiting: Int = 1024, statementTimeoutMilliseconds: Int = 5000,
        connectTimeoutMilliseconds: Int = 2000, tls: TLSMode = .disable, eventPollMilliseconds: Int = 250
    ) {
        self.url = url
        self.poolSize = max(1, poolSize)
        self.maxWaiting = max(0, maxWaiting)
        self.statementTimeoutMilliseconds = max(1, statementTimeoutMilliseconds)
        self.connectTimeoutMilliseconds = max(1, connectTimeoutMilliseconds)
        self.tls = tls
        self.eventPollMilliseconds = max(1, eventPollMilliseconds)
    }

    /// The parts of ``url``.
    public struct Endpoint: Sendable, Hashable {
        public var host: String
        public var port: Int
        public var user: String
        public var password: String?
        public var database: String
    }

    /// Parses ``url``.
    /// - Throws: `INVALID_ARGUMENT` naming `store.url` when it is not a `postgres://` URL with a
    ///   user, a host and a database.
    public func endpoint() throws -> Endpoint {
        let invalid = { (why: String) in
            GroupError.invalidArgument(field: "store.url", "\(why) (expected postgres://user[:password]@host[:port]/database)")
        }
        guard let components = URLComponents(string: url),
            let scheme = components.scheme, scheme == "postgres" || scheme == "postgresql"
        else { throw invalid("not a postgres:// URL") }
        guard let host = components.host, !host.isEmpty else { throw invalid("no host") }
        guard let user = components.user, !user.isEmpty else { throw invalid("no user") }
        let database = String(components.path.drop { $0 == "/" })
        guard !database.isEmpty else { throw invalid("no database") }
        let port = components.port ?? 5432
        guard (1...65535).contains(port) else { throw invalid("port out of range") }
        return Endpoint(
            host: host, port: port, user: user.removingPercentEncoding ?? user,
            password: components.password.map { $0.removingPercentEncoding ?? $0 }, database: database)
    }
}
