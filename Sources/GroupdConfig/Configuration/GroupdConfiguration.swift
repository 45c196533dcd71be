public import GroupModel
public import GroupStoreSettings

/// The server's configuration, decoded from a YAML file (`groupd serve --config groupd.yaml`).
///
/// Every key is optional except `apps`; a missing key takes the default documented on its
/// property. Unknown keys are refused, so a misspelt key fails loudly instead of being ignored.
/// ``load(path:)`` decodes and validates before anything starts; a mistake fails with the file, the
/// key path (`apps[1].secrets[0].secret`) and what was expected.
public struct GroupdConfiguration: Codable, Sendable, Hashable {
    /// Where the gRPC server listens.
    public struct Listen: Codable, Sendable, Hashable {
        /// `listen.host`: the address to bind. Default `127.0.0.1` (loopback only); `0.0.0.0` for
        /// every interface.
        public var host: String
        /// `listen.port`: the TCP port. Default `50051`; `0` picks a free port (tests).
        public var port: Int
        /// `listen.connect`: whether Connect calls (JSON or binary protobuf over HTTP/1.1 and
        /// HTTP/2, docs/HTTP.md) are served beside gRPC on the port. Default `true`.
        public var connect: Bool

        /// The defaults: `127.0.0.1:50051`, Connect served.
        public static var defaults: Listen { Listen(host: "127.0.0.1", port: 50051) }

        /// Create a listen address.
        /// - Parameters:
        ///   - host: The address to bind.
        ///   - port: The TCP port.
        ///   - connect: Whether Connect calls are served beside gRPC.
        public init(host: String, port: Int, connect: Bool = true) {
            self.host = host
            self.port = port
            self.connect = connect
        }
    }

    /// Token verification settings.
    public struct Auth: Codable, Sendable, Hashable {
        /// `auth.clock_skew_seconds`: leeway applied to `exp` and `nbf` for clocks that disagree.
        /// Default `0`.
        public var clockSkewSeconds: Int
        /// `auth.token_cache_entries`: how many verified tokens are remembered so that repeated
        /// calls skip the HMAC; `0` turns the cache off. Default `4096`.
        public var tokenCacheEntries: Int

        /// The defaults: no skew, 4096 cached tokens.
        public static var defaults: Auth { Auth(clockSkewSeconds: 0, tokenCacheEntries: 4096) }

        /// Create token settings.
        public init(clockSkewSeconds: Int, tokenCacheEntries: Int) {
            self.clockSkewSeconds = clockSkewSeconds
            self.tokenCacheEntries = tokenCacheEntries
        }
    }

    /// Group commit: how pending writes are grouped into transactions.
    public struct WriteBatch: Codable, Sendable, Hashable {
        /// `write_batch.max_writes`: the most writes one transaction (one fsync) commits, 1–10000.
        /// Default 256.
        public var maxWrites: Int
        /// `write_batch.max_wait_microseconds`: how long a write arriving at an idle store waits for
        /// others to share its transaction (a full batch starts at once), 0–100000. Default 0: no
        /// wait; under load the writes that arrive while one transaction commits form the next.
        public var maxWaitMicroseconds: Int

        /// The defaults: 256 writes, no wait.
        public static var defaults: WriteBatch { WriteBatch(maxWrites: 256, maxWaitMicroseconds: 0) }

        /// Create batch settings.
        public init(maxWrites: Int, maxWaitMicroseconds: Int) {
            self.maxWrites = maxWrites
            self.maxWaitMicroseconds = maxWaitMicroseconds
        }
    }

    /// `store`: which database holds the groups.
    public struct StoreSettings: Codable, Sendable, Hashable {
        /// `store.backend`.
        public enum Backend: String, Codable, Sendable, Hashable {
            /// The embedded SQLite file under `data_dir` (one node).
            case sqlite
            /// A PostgreSQL database (any number of nodes sharing it).
            case postgres
        }

        /// `store.backend`: `sqlite` (default) or `postgres`.
        public var backend: Backend
        /// `store.url`: `postgres://user[:password]@host[:port]/database` (postgres only, required there).
        public var url: String
        /// `store.pool_size`: read connections per node, 1–1000. Default 8.
        public var poolSize: Int
        /// `store.max_waiting`: calls that may wait for a busy pool; the next gets
        /// `RESOURCE_EXHAUSTED` (`STORE_BUSY`), 0–1000000. Default 1024.
        public var maxWaiting: Int
        /// `store.statement_timeout_ms`: PostgreSQL's `statement_timeout`, 1–3600000. Default 5000.
        public var statementTimeoutMilliseconds: Int
        /// `store.connect_timeout_ms`: how long a connection attempt may take, 1–60000. Default 2000.
        public var connectTimeoutMilliseconds: Int
        /// `store.tls`: `disable` (default), `prefer` or `require`.
        public var tls: PostgresStoreSettings.TLSMode

        /// SQLite under `data_dir`.
        public static var defaults: StoreSettings {
            StoreSettings(backend: .sqlite, url: "", poolSize: 8, maxWaiting: 1024, statementTimeoutMilliseconds: 5000,
                          connectTimeoutMilliseconds: 2000, tls: .disable)
        }

        /// Create store settings.
        public init(
            backend: Backend, url: String, poolSize: Int, maxWaiting: Int, statementTimeoutMilliseconds: Int,
            connectTimeoutMilliseconds: Int, tls: PostgresStoreSettings.TLSMode
        ) {
            self.backend = backend
            self.url = url
            self.poolSize = poolSize
            self.maxWaiting = maxWaiting
            self.statementTimeoutMilliseconds = statementTimeoutMilliseconds
            self.connectTimeoutMilliseconds = connectTimeoutMilliseconds
            self.tls = tls
        }

        /// The PostgreSQL backend's settings.
        public var postgres: PostgresStoreSettings {
            PostgresStoreSettings(
                url: url, poolSize: poolSize, maxWaiting: maxWaiting, statementTimeoutMilliseconds: statementTimeoutMilliseconds,
                connectTimeoutMilliseconds: connectTimeoutMilliseconds, tls: tls)
        }
    }

    /// One token secret of an app.
    public struct Secret: Codable, Sendable, Hashable {
        /// `apps[].secrets[].kid`: the key id a token names in its `kid` header to pick this
        /// secret. Required, unique within the app; rotate by adding a new kid, then removing the old.
        public var kid: String
        /// `apps[].secrets[].secret`: the HS256 secret, as text; at least 32 bytes (RFC 7518 §3.2:
        /// an HS256 key must be at least as long as the hash).
        public var secret: String

        /// Create a secret.
        public init(kid: String, secret: String) {
            self.kid = kid
            self.secret = secret
        }
    }

    /// One app (tenant).
    public struct App: Codable, Sendable, Hashable {
        /// `apps[].id`: the app id, the `app` claim of its tokens. Required; 1–64 of
        /// `A-Z a-z 0-9 _ - .`.
        public var id: String
        /// `apps[].secrets`: the app's token secrets. At least one.
        public var secrets: [Secret]
        /// `apps[].limits`: the app's limits; every key optional (see `AppLimits`):
        /// `group_name_bytes` (30), `introduction_bytes` (120), `notification_bytes` (150),
        /// `face_url_bytes` (100), `name_card_bytes` (50), `application_message_bytes` (100),
        /// `user_id_bytes` (64), `max_members` (`work` 200, `public` 2000, `meeting` 6000,
        /// `av_chat_room` 0; 0 = unlimited), `max_groups_per_user` (1000), `max_users_per_batch`
        /// (100), `max_groups_per_request` (50), `max_page_size` (50),
        /// `application_expiry_seconds` (604800), `event_retention_seconds` (604800),
        /// `av_chat_room_messages_per_second` (40), `message_retention_seconds` (0 = forever),
        /// `max_bans_per_group` (1000), `max_mute_bypass_per_group` (100).
        /// `max_mentions_per_message` (30), `recall_window_seconds` (120), `edit_window_seconds` (86400),
        /// `max_slow_mode_interval_seconds` (21600; 0 = groups cannot turn slow mode on).
        /// `max_group_attribute_keys` (32), `group_attribute_key_bytes` (64),
        /// `group_attribute_bytes` (16384), `max_group_counters` (32),
        /// `max_invite_links_per_group` (10).
        /// `max_pinned_messages` (10), `read_receipt_max_members` (200),
        /// `read_receipt_interval_ms` (1000). `reaction_key_bytes` (32),
        /// `max_reaction_keys_per_message` (20), `max_reactions_per_message` (100000),
        /// `max_reactions_per_user_per_message` (20), `max_topics_per_community` (100).
        public var limits: AppLimits
        /// `apps[].custom_fields`: the app's custom-field keys for groups and members (key,
        /// `max_bytes`, `read_roles`, `write_roles`; see docs/CONFIGURATION.md). `nil` (the key
        /// absent): any non-empty key is accepted and every member reads every value.
        public var customFields: CustomFieldSchema?
        /// `apps[].policy`: the app's chain of policy plugins (see ``AppPolicySettings``,
        /// docs/PLUGINS.md). `nil` (the key absent): no plugins, every hook allows.
        public var policy: AppPolicySettings? = nil
        /// `apps[].rate_limits`: token buckets per app, per operator and per operator's writes
        /// (see ``RateLimits``); absent = unlimited.
        public var rateLimits: RateLimits = .unlimited

        /// Create an app.
        public init(id: String, secrets: [Secret], limits: AppLimits = .defaults, customFields: CustomFieldSchema? = nil) {
            self.id = id
            self.secrets = secrets
            self.limits = limits
            self.customFields = customFields
        }
    }

    /// `listen`: the address and port to serve on.
    public var listen: Listen
    /// `data_dir`: the directory of the SQLite file (`groupd.sqlite`), relative to the working
    /// directory unless absolute. Default `./data`.
    public var dataDir: String
    /// `durability`: `full` (default) or `normal`; SQLite's `synchronous` (see `Durability`).
    public var durability: Durability
    /// `write_batch`: group commit (see ``WriteBatch``).
    public var writeBatch: WriteBatch = .defaults
    /// `store`: the database (see ``StoreSettings``); SQLite under `data_dir` when absent.
    public var store: StoreSettings = .defaults
    /// `max_message_bytes`: the largest gRPC message accepted; larger ones get
    /// `RESOURCE_EXHAUSTED` from their length prefix. Default 4 MiB (4194304).
    public var maxMessageBytes: Int
    /// `max_header_list_bytes`: HTTP/2 `SETTINGS_MAX_HEADER_LIST_SIZE`. Default 16 KiB (16384).
    public var maxHeaderListBytes: Int
    /// `max_concurrent_streams`: HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS` per connection.
    /// Default 256.
    public var maxConcurrentStreams: Int
    /// `max_connections`: open client connections at most; a connection accepted while this many
    /// are open takes the place of one without an open stream, which is evicted (GOAWAY
    /// `NO_ERROR`); when every connection has a call in flight, the new one is closed at once
    /// (the client sees `UNAVAILABLE` and may retry elsewhere). Default 10000.
    public var maxConnections: Int
    /// `drain_timeout_seconds`: on SIGTERM, how long in-flight calls may finish before the
    /// connections close. Default 10.
    public var drainTimeoutSeconds: Double
    /// `event_loop_threads`: SwiftNIO event loop threads; `0` = one per core. Default 0.
    public var eventLoopThreads: Int
    /// `auth`: token verification settings.
    public var auth: Auth
    /// `tls`: TLS (ALPN `h2`, optionally client certificates; see ``TLS``); absent = plaintext h2c.
    public var tls: TLS? = nil
    /// `keepalive`: PINGs, idle and age limits, client PING policing (see ``Keepalive``).
    public var keepalive: Keepalive = .defaults
    /// `transport`: defences against hostile or broken clients (see ``Transport``).
    public var transport: Transport = .defaults
    /// `compression`: response compression (see ``Compression``).
    public var compression: Compression = .defaults
    /// `reflection`: serve gRPC server reflection (v1 and v1alpha, no token needed) for grpcurl
    /// and other discovery clients. Default true; false answers it UNIMPLEMENTED.
    public var reflection: Bool = true
    /// `apps`: the apps served. Required, at least one, unique ids.
    public var apps: [App]
    /// `metrics`: the Prometheus endpoint (see ``MetricsSettings``); absent = no metrics.
    public var metrics: MetricsSettings? = nil
    /// `console`: the operator console's listener (see ``ConsoleSettings``); absent = none.
    public var console: ConsoleSettings? = nil
    /// `tracing`: OpenTelemetry spans exported over OTLP/gRPC (see ``TracingSettings``); absent = none.
    public var tracing: TracingSettings? = nil
    /// `access_log`: one line per call (see ``AccessLogSettings``); off by default.
    public var accessLog: AccessLogSettings = .defaults
    /// `log`: level and format of the log (see ``LogSettings``); `info`, `text` by default.
    public var log: LogSettings = .defaults
    /// `testing`: settings for groupd's own tests (see ``TestingSettings``): the system clock by
    /// default; `clock: manual` only with `GROUPD_TEST_CLOCK=1` in the environment.
    public var testing: TestingSettings = .defaults

    /// Every default, and no app (a configuration needs at least one to be valid).
    public static var defaults: GroupdConfiguration {
        GroupdConfiguration(
            listen: .defaults, dataDir: "./data", durability: .full, maxMessageBytes: 4 * 1024 * 1024,
            maxHeaderListBytes: 16 * 1024, maxConcurrentStreams: 256, drainTimeoutSeconds: 10,
            eventLoopThreads: 0, auth: .defaults, apps: [], maxConnections: 10_000)
    }

    /// Create a configuration with every value given; see ``defaults``.
    public init(
        listen: Listen, dataDir: String, durability: Durability, maxMessageBytes: Int,
        maxHeaderListBytes: Int, maxConcurrentStreams: Int, drainTimeoutSeconds: Double,
        eventLoopThreads: Int, auth: Auth, apps: [App], maxConnections: Int = 10_000
    ) {
        self.maxConnections = maxConnections
        self.listen = listen
        self.dataDir = dataDir
        self.durability = durability
        self.maxMessageBytes = maxMessageBytes
        self.maxHeaderListBytes = maxHeaderListBytes
        self.maxConcurrentStreams = maxConcurrentStreams
        self.drainTimeoutSeconds = drainTimeoutSeconds
        self.eventLoopThreads = eventLoopThreads
        self.auth = auth
        self.apps = apps
    }

    /// The app with id `id`, if configured.
    public func app(_ id: String) -> App? {
        self.apps.first { $0.id == id }
    }

    /// The path of the SQLite file: `data_dir/groupd.sqlite`.
    public var databasePath: String {
        (self.dataDir.hasSuffix("/") ? self.dataDir : self.dataDir + "/") + "groupd.sqlite"
    }
}

/// A configuration mistake: the file, the key path and what was expected.
public struct ConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The file (or `<string>` when parsed from text).
    public var file: String
    /// The key path, e.g. `apps[1].secrets[0].secret`; empty for the whole document.
    public var keyPath: String
    /// What is wrong and what was expected.
    public var message: String
    /// The further problems validation found in the same file, in the order checked (this error
    /// is the first; ``all`` lists them together).
    public var more: [ConfigurationError] = []

    /// Create an error.
    public init(file: String, keyPath: String, message: String) {
        self.file = file
        self.keyPath = keyPath
        self.message = message
    }

    /// This problem, then every further one.
    public var all: [ConfigurationError] {
        var first = self
        first.more = []
        return [first] + more
    }

    /// `file: key.path: message`.
    public var description: String {
        self.keyPath.isEmpty ? "\(self.file): \(self.message)" : "\(self.file): \(self.keyPath): \(self.message)"
    }
}
