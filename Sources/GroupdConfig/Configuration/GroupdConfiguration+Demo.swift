extension GroupdConfiguration {
    /// A random secret for a demo app: 32 random bytes as 64 hex digits.
    public static func randomSecret() -> String {
        var generator = SystemRandomNumberGenerator()
        let digits = Array("0123456789abcdef")
        return String((0..<64).map { _ in digits[Int(generator.next(upperBound: UInt8(16)))] })
    }

    /// A complete, commented configuration file with one app, for `make run`.
    /// - Parameters:
    ///   - appID: The demo app's id.
    ///   - kid: The key id of its secret.
    ///   - secret: Its secret (default: a fresh random one).
    ///   - port: The port to listen on.
    ///   - dataDir: The data directory.
    /// - Returns: YAML text that ``parse(yaml:file:environment:)`` accepts.
    public static func demoYAML(
        appID: String = "demo", kid: String = "k1", secret: String = randomSecret(), port: Int = 50051,
        dataDir: String = "./data"
    ) -> String {
        let d = GroupdConfiguration.defaults
        return """
            # groupd configuration (generated for local use). Every key but apps is optional;
            # the values below are the defaults unless noted. `kill -HUP` reloads apps, auth, log,
            # access_log and the TLS certificate files.

            listen:
              host: \(d.listen.host)        # address to bind; 0.0.0.0 for every interface
              port: \(port)                # TCP port; 0 picks a free one
            data_dir: \(yamlQuoted(dataDir))       # directory of groupd.sqlite; relative: to the working directory
            durability: full             # full: fsync every commit; normal: fsync at checkpoints
            write_batch:                 # group commit: the writes waiting share one transaction
              max_writes: \(d.writeBatch.maxWrites)            # at most this many per transaction (one fsync)
              max_wait_microseconds: \(d.writeBatch.maxWaitMicroseconds)     # wait this long for more (0: never wait)
            max_message_bytes: \(d.maxMessageBytes)   # larger gRPC messages get RESOURCE_EXHAUSTED
            max_header_list_bytes: \(d.maxHeaderListBytes)  # HTTP/2 SETTINGS_MAX_HEADER_LIST_SIZE
            max_concurrent_streams: \(d.maxConcurrentStreams)   # HTTP/2 streams per connection
            max_connections: \(d.maxConnections)     # at the limit an idle connection is evicted; refused only when all are busy
            drain_timeout_seconds: \(Int(d.drainTimeoutSeconds))     # time in-flight calls get on SIGTERM
            event_loop_threads: \(d.eventLoopThreads)        # 0 = one per core
            auth:
              clock_skew_seconds: \(d.auth.clockSkewSeconds)      # leeway on token exp / nbf
              token_cache_entries: \(d.auth.tokenCacheEntries) # verified tokens remembered; 0 = off
            log:                         # level and format reload on SIGHUP
              level: \(d.log.level.rawValue)                # trace, debug, info, notice, warning, error, critical
              format: \(d.log.format.rawValue)               # text, or json: one object per line
            access_log:                  # one line per call (docs/OBSERVABILITY.md); reloads
              enabled: \(d.accessLog.enabled)             # true to log calls
              sample_rate: 1             # share of OK calls logged; failed calls always are
            # metrics:                   # Prometheus text format at GET /metrics; absent = off
            #   host: 127.0.0.1
            #   port: 9464
            # console:                   # the operator console in a browser (docs/CONSOLE.md); absent = off
            #   host: 127.0.0.1          # no login of its own: keep it on loopback
            #   port: 8080
            # tls:                       # absent = plaintext h2c; paths relative to this file
            #   cert_file: server.crt    # PEM chain, leaf first
            #   key_file: server.key
            #   client_ca_file: ca.crt   # mutual TLS: clients need a certificate signed by it
            keepalive:                   # grpc-go's defaults (docs/TRANSPORT.md)
              time_seconds: \(Self.number(d.keepalive.timeSeconds))        # server PING after this long without a frame; 0 = off
              timeout_seconds: \(Self.number(d.keepalive.timeoutSeconds))       # close when the PING ack does not come
              max_connection_idle_seconds: \(Self.number(d.keepalive.maxConnectionIdleSeconds))  # GOAWAY after this long without a stream; 0 = off
              max_connection_age_seconds: \(Self.number(d.keepalive.maxConnectionAgeSeconds))   # GOAWAY after this long (±10 %); 0 = off
              min_ping_interval_seconds: \(Self.number(d.keepalive.minPingIntervalSeconds))  # client PINGs more often are strikes
            transport:                   # defences against hostile clients (docs/TRANSPORT.md)
              preface_timeout_seconds: \(Self.number(d.transport.prefaceTimeoutSeconds))   # close when the HTTP/2 preface and SETTINGS do not come
              idle_timeout_seconds: \(Self.number(d.transport.idleTimeoutSeconds))      # GOAWAY a connection that never opened a stream; 0 = off
              max_unauthenticated_calls: \(d.transport.maxUnauthenticatedCalls) # calls without a verified token in flight, all connections
              max_queued_bytes_per_connection: \(d.transport.maxQueuedBytesPerConnection)  # a client that does not read: its blocked streams reset past it
              max_queued_bytes: \(d.transport.maxQueuedBytes)        # the same over every connection
              stalled_write_timeout_seconds: \(Self.number(d.transport.stalledWriteTimeoutSeconds))  # nothing sent this long while bytes wait: GOAWAY, close
              reset_burst: \(d.transport.resetBurst)           # streams a connection may reset in a burst (rapid reset)
              max_resets_per_second: \(d.transport.maxResetsPerSecond) # then per second; past that GOAWAY ENHANCE_YOUR_CALM
              reads_per_turn: \(d.transport.readsPerTurn)           # socket reads of one connection per event-loop turn
              read_buffer_bytes: \(d.transport.readBufferBytes)   # the largest single read (a power of two)
            compression:                 # gzip and deflate requests are always accepted
              responses: \(d.compression.responses)            # answer in the request's encoding when accepted
              min_bytes: \(d.compression.minBytes)            # smaller responses go uncompressed
            reflection: \(d.reflection)             # grpc.reflection v1 and v1alpha, no token needed

            apps:
              - id: \(yamlQuoted(appID))
                secrets:
                  # HS256 secrets, at least 32 bytes; tokens pick one with their kid header.
                  - kid: \(yamlQuoted(kid))
                    secret: \(yamlQuoted(secret))
                limits:                  # every key optional; defaults shown
                  group_name_bytes: 30
                  introduction_bytes: 120
                  notification_bytes: 150
                  face_url_bytes: 100
                  name_card_bytes: 50
                  application_message_bytes: 100
                  user_id_bytes: 64
                  max_members:           # per group type; 0 = unlimited
                    work: 200
                    public: 2000
                    meeting: 6000
                    av_chat_room: 0
                  max_groups_per_user: 1000
                  max_users_per_batch: 100
                  max_groups_per_request: 50
                  max_page_size: 50
                  application_expiry_seconds: 604800
                  event_retention_seconds: 604800
                  av_chat_room_messages_per_second: 40
                  message_retention_seconds: 0   # group message history; 0 = kept forever
                  max_bans_per_group: 1000
                  max_mute_bypass_per_group: 100
                  max_mentions_per_message: 30   # user ids one message mentions
                  recall_window_seconds: 120   # a sender recalls their own message this long
                  edit_window_seconds: 86400   # a sender edits their own message this long
                  max_slow_mode_interval_seconds: 21600   # the largest slow mode a group may set
                  max_group_attribute_keys: 32
                  group_attribute_key_bytes: 64
                  group_attribute_bytes: 16384   # keys and values of a group's attributes together
                  max_group_counters: 32
                  max_invite_links_per_group: 10
                  max_pinned_messages: 10        # pinned messages per group
                  read_receipt_max_members: 200  # largest Work/Public group with read receipts
                  read_receipt_interval_ms: 1000 # a sender's receipts are batched this long
                  reaction_key_bytes: 32         # UTF-8 bytes of a reaction key
                  max_reaction_keys_per_message: 20        # distinct reaction keys on a message
                  max_reactions_per_message: 100000        # reactions on a message, all keys
                  max_reactions_per_user_per_message: 20   # keys one user reacts with on a message
                  max_topics_per_community: 100            # live topics of a Community group
                # rate_limits:           # token buckets; absent = unlimited (docs/CONFIGURATION.md)
                #   app: {per_second: 2000, burst: 4000}
                #   operator: {per_second: 50, burst: 100}
                #   operator_writes: {per_second: 10}

            """
    }

    /// `value` as a double-quoted YAML scalar.
    /// A number of seconds as YAML: `7200` for a whole number, `0.5` otherwise.
    private static func number(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
    }

    private static func yamlQuoted(_ value: String) -> String {
        var text = "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": text += "\\\""
            case "\\": text += "\\\\"
            case "\n": text += "\\n"
            default: text.unicodeScalars.append(scalar)
            }
        }
        return text + "\""
    }
}
