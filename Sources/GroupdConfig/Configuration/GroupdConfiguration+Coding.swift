import GroupModel
import GroupStoreSettings

/// A key of a configuration mapping, by name (or index, inside lists).
struct ConfigKey: CodingKey, Hashable {
    var stringValue: String
    var intValue: Int?

    init(_ name: String) {
        self.stringValue = name
        self.intValue = nil
    }

    init?(stringValue: String) { self.init(stringValue) }

    init?(intValue: Int) {
        self.stringValue = String(intValue)
        self.intValue = intValue
    }
}

/// A mistake found while decoding, at a coding path; the loader adds the file name.
struct ConfigurationFault: Error {
    var path: [any CodingKey]
    var message: String
}

/// The mistakes found while a file is decoded that do not stop decoding (an unknown key, a value
/// outside its set or range): ``GroupdConfiguration/parse(yaml:file:environment:)`` hands one to
/// the decoder, which goes on with a stand-in value, so that every such mistake is reported with
/// the range checks that follow, one line each.
final class ConfigurationFaultLog {
    var faults: [ConfigurationFault] = []

    /// The decoder's `userInfo` key of the log.
    static let key = CodingUserInfoKey(rawValue: "groupd.configurationFaults")!
}

extension Decoder {
    /// Records a mistake after which decoding goes on (the caller continues with a stand-in
    /// value). Without a ``ConfigurationFaultLog`` (a decoder not started by `parse`), throws it.
    func record(_ fault: ConfigurationFault) throws {
        guard let log = userInfo[ConfigurationFaultLog.key] as? ConfigurationFaultLog else { throw fault }
        log.faults.append(fault)
    }

    /// Records a mistake at `path` below this position (see ``record(_:)``).
    func record(_ path: [String], _ message: String) throws {
        try record(keys: path.map { ConfigKey($0) }, message)
    }

    /// Records a mistake at `keys` below this position (see ``record(_:)``).
    func record(keys: [any CodingKey], _ message: String) throws {
        try record(ConfigurationFault(path: codingPath + keys, message: message))
    }

    /// The value of a key whose values form a set: `parse(text)`, or (recorded, see
    /// ``record(_:)``) `fallback` when it is not one of them.
    func member<T>(_ key: String, _ text: String, expected: String, fallback: T, _ parse: (String) -> T?) throws -> T {
        if let value = parse(text) { return value }
        try record([key], "expected \(expected), found '\(text)'")
        return fallback
    }

    /// The mapping at this position; a key not in `allowed` is recorded (see ``record(_:)``) and ignored.
    func configMapping(allowing allowed: [String]) throws -> KeyedDecodingContainer<ConfigKey> {
        let container = try self.container(keyedBy: ConfigKey.self)
        for key in container.allKeys where !allowed.contains(key.stringValue) {
            try record(ConfigurationFault(
                path: self.codingPath + [key],
                message: "unknown key; expected one of: \(allowed.joined(separator: ", "))"))
        }
        return container
    }
}

extension KeyedDecodingContainer where Key == ConfigKey {
    /// The value at `key`, or `fallback` when the key is absent or null.
    func value<T: Decodable>(_ key: String, or fallback: T) throws -> T {
        try self.decodeIfPresent(T.self, forKey: ConfigKey(key)) ?? fallback
    }

    /// The value at `key`; absent or null is a mistake.
    func required<T: Decodable>(_ key: String) throws -> T {
        guard let value = try self.decodeIfPresent(T.self, forKey: ConfigKey(key)) else {
            throw ConfigurationFault(path: self.codingPath + [ConfigKey(key)], message: "required key is missing")
        }
        return value
    }
}

// MARK: Decoding and encoding

extension GroupdConfiguration {
    private static let keys = [
        "listen", "data_dir", "durability", "write_batch", "store", "max_message_bytes", "max_header_list_bytes",
        "max_concurrent_streams", "max_connections", "drain_timeout_seconds", "event_loop_threads", "auth", "apps",
        "tls", "keepalive", "compression", "reflection", "transport", "testing", "console",
    ] + observabilityKeys

    /// Decode, taking the default for every absent key and refusing unknown keys.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.configMapping(allowing: Self.keys)
        let d = GroupdConfiguration.defaults
        self.listen = try c.value("listen", or: d.listen)
        self.dataDir = try c.value("data_dir", or: d.dataDir)
        self.durability = try decoder.member(
            "durability", c.value("durability", or: d.durability.rawValue), expected: "full or normal",
            fallback: d.durability, Durability.init(rawValue:))
        self.writeBatch = try c.value("write_batch", or: d.writeBatch)
        self.store = try c.value("store", or: d.store)
        self.maxMessageBytes = try c.value("max_message_bytes", or: d.maxMessageBytes)
        self.maxHeaderListBytes = try c.value("max_header_list_bytes", or: d.maxHeaderListBytes)
        self.maxConcurrentStreams = try c.value("max_concurrent_streams", or: d.maxConcurrentStreams)
        self.maxConnections = try c.value("max_connections", or: d.maxConnections)
        self.drainTimeoutSeconds = try c.value("drain_timeout_seconds", or: d.drainTimeoutSeconds)
        self.eventLoopThreads = try c.value("event_loop_threads", or: d.eventLoopThreads)
        self.auth = try c.value("auth", or: d.auth)
        self.apps = try c.value("apps", or: d.apps)
        self.tls = try c.decodeIfPresent(TLS.self, forKey: ConfigKey("tls"))
        self.keepalive = try c.value("keepalive", or: d.keepalive)
        self.transport = try c.value("transport", or: d.transport)
        try decodeObservability(c)
        self.compression = try c.value("compression", or: d.compression)
        self.reflection = try c.value("reflection", or: d.reflection)
        self.testing = try c.value("testing", or: d.testing)
        self.console = try c.decodeIfPresent(ConsoleSettings.self, forKey: ConfigKey("console"))
    }

    /// Encode every key, defaults included.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: ConfigKey.self)
        try c.encode(self.listen, forKey: ConfigKey("listen"))
        try c.encode(self.dataDir, forKey: ConfigKey("data_dir"))
        try c.encode(self.durability.rawValue, forKey: ConfigKey("durability"))
        try c.encode(self.writeBatch, forKey: ConfigKey("write_batch"))
        try c.encode(self.store, forKey: ConfigKey("store"))
        try c.encode(self.maxMessageBytes, forKey: ConfigKey("max_message_bytes"))
        try c.encode(self.maxHeaderListBytes, forKey: ConfigKey("max_header_list_bytes"))
        try c.encode(self.maxConcurrentStreams, forKey: ConfigKey("max_concurrent_streams"))
        try c.encode(self.maxConnections, forKey: ConfigKey("max_connections"))
        try c.encode(self.drainTimeoutSeconds, forKey: ConfigKey("drain_timeout_seconds"))
        try c.encode(self.eventLoopThreads, forKey: ConfigKey("event_loop_threads"))
        try c.encode(self.auth, forKey: ConfigKey("auth"))
        try c.encode(self.apps, forKey: ConfigKey("apps"))
        try c.encodeIfPresent(self.tls, forKey: ConfigKey("tls"))
        try c.encode(self.keepalive, forKey: ConfigKey("keepalive"))
        try c.encode(self.transport, forKey: ConfigKey("transport"))
        try encodeObservability(&c)
        try c.encode(self.compression, forKey: ConfigKey("compression"))
        try c.encode(self.reflection, forKey: ConfigKey("reflection"))
        try c.encode(self.testing, forKey: ConfigKey("testing"))
        try c.encodeIfPresent(self.console, forKey: ConfigKey("console"))
    }
}

extension GroupdConfiguration.Listen {
    /// Decode, taking the default for every absent key and refusing unknown keys.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.configMapping(allowing: ["host", "port", "connect"])
        self.host = try c.value("host", or: Self.defaults.host)
        self.port = try c.value("port", or: Self.defaults.port)
        self.connect = try c.value("connect", or: Self.defaults.connect)
    }

    /// Encode every key.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: ConfigKey.self)
        try c.encode(self.host, forKey: ConfigKey("host"))
        try c.encode(self.port, forKey: ConfigKey("port"))
        try c.encode(self.connect, forKey: ConfigKey("connect"))
    }
}

extension GroupdConfiguration.WriteBatch {
    /// Decode, taking the default for every absent key and refusing unknown keys.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.configMapping(allowing: ["max_writes", "max_wait_microseconds"])
        self.maxWrites = try c.value("max_writes", or: Self.defaults.maxWrites)
        self.maxWaitMicroseconds = try c.value("max_wait_microseconds", or: Self.defaults.maxWaitMicroseconds)
    }

    /// Encode every key.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: ConfigKey.self)
        try c.encode(self.maxWrites, forKey: ConfigKey("max_writes"))
        try c.encode(self.maxWaitMicroseconds, forKey: ConfigKey("max_wait_microseconds"))
    }
}

extension GroupdConfiguration.StoreSettings {
    private static let keys = [
        "backend", "url", "pool_size", "max_waiting", "statement_timeout_ms", "connect_timeout_ms", "tls",
    ]

    /// Decode, taking the default for every absent key and refusing unknown keys and values.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.configMapping(allowing: Self.keys)
        let d = Self.defaults
        self.backend = try decoder.member(
            "backend", c.value("backend", or: d.backend.rawValue), expected: "sqlite or postgres",
            fallback: d.backend, Backend.init(rawValue:))
        self.url = try c.value("url", or: d.url)
        self.poolSize = try c.value("pool_size", or: d.poolSize)
        self.maxWaiting = try c.value("max_waiting", or: d.maxWaiting)
        self.statementTimeoutMilliseconds = try c.value("statement_timeout_ms", or: d.statementTimeoutMilliseconds)
        self.connectTimeoutMilliseconds = try c.value("connect_timeout_ms", or: d.connectTimeoutMilliseconds)
        self.tls = try decoder.member(
            "tls", c.value("tls", or: d.tls.rawValue), expected: "disable, prefer or require",
            fallback: d.tls, PostgresStoreSettings.TLSMode.init(rawValue:))
    }

    /// Encode every key.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: ConfigKey.self)
        try c.encode(self.backend.rawValue, forKey: ConfigKey("backend"))
        try c.encode(self.url, forKey: ConfigKey("url"))
        try c.encode(self.poolSize, forKey: ConfigKey("pool_size"))
        try c.encode(self.maxWaiting, forKey: ConfigKey("max_waiting"))
        try c.encode(self.statementTimeoutMilliseconds, forKey: ConfigKey("statement_timeout_ms"))
        try c.encode(self.connectTimeoutMilliseconds, forKey: ConfigKey("connect_timeout_ms"))
        try c.encode(self.tls.rawValue, forKey: ConfigKey("tls"))
    }
}

extension GroupdConfiguration.Auth {
    /// Decode, taking the default for every absent key and refusing unknown keys.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.configMapping(allowing: ["clock_skew_seconds", "token_cache_entries"])
        self.clockSkewSeconds = try c.value("clock_skew_seconds", or: Self.defaults.clockSkewSeconds)
        self.tokenCacheEntries = try c.value("token_cache_entries", or: Self.defaults.tokenCacheEntries)
    }

    /// Encode every key.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: ConfigKey.self)
        try c.encode(self.clockSkewSeconds, forKey: ConfigKey("clock_skew_seconds"))
        try c.encode(self.tokenCacheEntries, forKey: ConfigKey("token_cache_entries"))
    }
}

extension GroupdConfiguration.Secret {
    /// Decode; both keys are required.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.configMapping(allowing: ["kid", "secret"])
        self.kid = try c.required("kid")
        self.secret = try c.required("secret")
    }

    /// Encode both keys.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: ConfigKey.self)
        try c.encode(self.kid, forKey: ConfigKey("kid"))
        try c.encode(self.secret, forKey: ConfigKey("secret"))
    }
}

extension GroupdConfiguration.App {
    /// Decode; `id` and `secrets` are required, `limits` keys optional.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.configMapping(allowing: ["id", "secrets", "limits", "custom_fields", "policy", "rate_limits"])
        self.id = try c.required("id")
        self.secrets = try c.required("secrets")
        self.limits = try c.value("limits", or: LimitsCoding(.defaults)).limits
        self.customFields = try c.decodeIfPresent(CustomFieldsCoding.self, forKey: ConfigKey("custom_fields"))?.schema
        self.policy = try Self.decodePolicy(c)
        self.rateLimits = try c.value("rate_limits", or: .unlimited)
    }

    /// Encode every key, limits included.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: ConfigKey.self)
        try c.encode(self.id, forKey: ConfigKey("id"))
        try c.encode(self.secrets, forKey: ConfigKey("secrets"))
        try c.encode(LimitsCoding(self.limits), forKey: ConfigKey("limits"))
        if let customFields { try c.encode(CustomFieldsCoding(customFields), forKey: ConfigKey("custom_fields")) }
        if let policy { try c.encode(PolicyCoding(policy), forKey: ConfigKey("policy")) }
        if !rateLimits.isUnlimited { try c.encode(rateLimits, forKey: ConfigKey("rate_limits")) }
    }
}

/// The YAML form of `AppLimits` (snake_case keys, `max_members` per type, 0 = unlimited).
struct LimitsCoding: Codable {
    var limits: AppLimits

    init(_ limits: AppLimits) { self.limits = limits }

    /// The YAML keys of `GroupType`s under `max_members`.
    static let typeKeys: [(key: String, type: GroupType)] = [
        ("work", .work), ("public", .public), ("meeting", .meeting), ("av_chat_room", .avChatRoom),
        ("community", .community),
    ]

    /// The integer keys where 0 is a value (`message_retention_seconds`: keep forever); the
    /// others must be at least 1.
    static let zeroAllowedKeys: Set<String> = ["message_retention_seconds", "max_slow_mode_interval_seconds"]

    /// Every integer key and the property it sets (computed: key paths are not `Sendable`).
    static var integerKeys: [(key: String, path: WritableKeyPath<AppLimits, Int>)] {
        [
        ("group_name_bytes", \.groupNameBytes),
        ("introduction_bytes", \.introductionBytes),
        ("notification_bytes", \.notificationBytes),
        ("face_url_bytes", \.faceURLBytes),
        ("name_card_bytes", \.nameCardBytes),
        ("application_message_bytes", \.applicationMessageBytes),
        ("user_id_bytes", \.userIDBytes),
        ("max_groups_per_user", \.maxGroupsPerUser),
        ("max_users_per_batch", \.maxUsersPerBatch),
        ("max_groups_per_request", \.maxGroupsPerRequest),
        ("max_page_size", \.maxPageSize),
        ("application_expiry_seconds", \.applicationExpirySeconds),
        ("event_retention_seconds", \.eventRetentionSeconds),
        ("av_chat_room_messages_per_second", \.avChatRoomMessagesPerSecond),
        ("message_retention_seconds", \.messageRetentionSeconds),
        ("max_bans_per_group", \.maxBansPerGroup),
        ("max_mute_bypass_per_group", \.maxMuteBypassPerGroup),
        ("max_mentions_per_message", \.maxMentionsPerMessage),
        ("recall_window_seconds", \.recallWindowSeconds),
        ("edit_window_seconds", \.editWindowSeconds),
        ("max_slow_mode_interval_seconds", \.maxSlowModeIntervalSeconds),
        ("max_group_attribute_keys", \.maxGroupAttributeKeys),
        ("group_attribute_key_bytes", \.groupAttributeKeyBytes),
        ("group_attribute_bytes", \.groupAttributeBytes),
        ("max_group_counters", \.maxGroupCounters),
        ("max_invite_links_per_group", \.maxInviteLinksPerGroup),
        ("max_pinned_messages", \.maxPinnedMessages),
        ("read_receipt_max_members", \.readReceiptMaxMembers),
        ("read_receipt_interval_ms", \.readReceiptIntervalMilliseconds),
        ("reaction_key_bytes", \.reactionKeyBytes),
        ("max_reaction_keys_per_message", \.maxReactionKeysPerMessage),
        ("max_reactions_per_message", \.maxReactionsPerMessage),
        ("max_reactions_per_user_per_message", \.maxReactionsPerUserPerMessage),
        ("max_topics_per_community", \.maxTopicsPerCommunity),
        ("max_permission_groups_per_community", \.maxPermissionGroupsPerCommunity),
        ("max_permission_groups_per_member", \.maxPermissionGroupsPerMember),
        ("permission_group_custom_data_bytes", \.permissionGroupCustomDataBytes),
        ]
    }

    init(from decoder: any Decoder) throws {
        let c = try decoder.configMapping(allowing: Self.integerKeys.map(\.key) + ["max_members"])
        var limits = AppLimits.defaults
        for (key, path) in Self.integerKeys {
            limits[keyPath: path] = try c.value(key, or: limits[keyPath: path])
        }
        if c.contains(ConfigKey("max_members")) {
            let nested = try c.superDecoder(forKey: ConfigKey("max_members"))
            let m = try nested.configMapping(allowing: Self.typeKeys.map(\.key))
            for (key, type) in Self.typeKeys {
                if let value = try m.decodeIfPresent(Int.self, forKey: ConfigKey(key)) {
                    if value < 0 {
                        try nested.record([key], "expected 0 (unlimited) or a positive member count, found \(value)")
                        continue
                    }
                    limits.maxMembers[type] = .some(value == 0 ? nil : value)
                }
            }
        }
        self.limits = limits
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: ConfigKey.self)
        for (key, path) in Self.integerKeys {
            try c.encode(self.limits[keyPath: path], forKey: ConfigKey(key))
        }
        var m = c.nestedContainer(keyedBy: ConfigKey.self, forKey: ConfigKey("max_members"))
        for (key, type) in Self.typeKeys {
            try m.encode(self.limits.maxMembers(for: type) ?? 0, forKey: ConfigKey(key))
        }
    }
}
