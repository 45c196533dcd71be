import Foundation
import GroupModel
import GroupStoreSettings
import Yams

extension GroupdConfiguration {
    /// Read, decode and validate the configuration file at `path`.
    /// - Throws: ``ConfigurationError`` naming the file, the key path and what was expected.
    public static func load(path: String) throws -> GroupdConfiguration {
        return try parse(yaml: try readFile(path), file: path)
    }

    /// The text of the file at `path`.
    /// - Throws: ``ConfigurationError`` `cannot read the file: <the system's reason>` (e.g. `No
    ///   such file or directory`, `Permission denied`, `Is a directory`) or `… not UTF-8 text`.
    static func readFile(_ path: String) throws -> String {
        func failure(_ reason: String) -> ConfigurationError {
            ConfigurationError(file: path, keyPath: "", message: "cannot read the file: \(reason)")
        }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw failure(String(cString: strerror(errno))) }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw failure(String(cString: strerror(errno)))
            }
            if count == 0 { break }
            bytes += buffer[0..<count]
        }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw failure("not UTF-8 text") }
        return text
    }

    /// Decode and validate configuration text.
    /// - Parameters:
    ///   - yaml: The YAML document.
    ///   - file: The name to report in errors.
    ///   - environment: The environment `testing.clock: manual` is checked against (`nil`: the process's).
    /// - Throws: ``ConfigurationError`` naming `file`, the key path and what was expected.
    public static func parse(
        yaml: String, file: String = "<string>", environment: [String: String]? = nil
    ) throws -> GroupdConfiguration {
        // Mistakes decoding can go on after (an unknown key, a value outside its set or range)
        // are gathered here, then reported with the range checks of `validate`.
        let log = ConfigurationFaultLog()
        let configuration: GroupdConfiguration
        do {
            // An empty document (or one of comments only) is an empty mapping: every default.
            let document = try Yams.compose(yaml: yaml) == nil ? "{}" : yaml
            configuration = try YAMLDecoder().decode(
                GroupdConfiguration.self, from: document, userInfo: [ConfigurationFaultLog.key: log])
        } catch {
            throw ConfigurationProblems.combined(
                log.faults.map { configurationError($0, file: file) } + [configurationError(error, file: file)])!
        }
        let decodingProblems = log.faults.map { configurationError($0, file: file) }
        do {
            try configuration.validate(file: file, environment: environment)
        } catch let error as ConfigurationError {
            throw ConfigurationProblems.combined(decodingProblems + error.all)!
        }
        if let error = ConfigurationProblems.combined(decodingProblems) { throw error }
        return configuration
    }

    /// Check every value against its documented range.
    /// - Parameters:
    ///   - file: The name to report in errors.
    ///   - environment: The environment `testing.clock: manual` is checked against (`nil`: the process's).
    /// - Throws: ``ConfigurationError`` for the first mistake found, every further one in its
    ///   ``ConfigurationError/more``.
    public func validate(file: String = "<string>", environment: [String: String]? = nil) throws {
        var problems = ConfigurationProblems(file: file)
        problems.require(!self.listen.host.isEmpty, "listen.host", "expected an address, found an empty string")
        problems.inRange(self.listen.port, 0...65535, "listen.port")
        problems.require(!self.dataDir.isEmpty, "data_dir", "expected a directory, found an empty string")
        problems.inRange(self.writeBatch.maxWrites, 1...10_000, "write_batch.max_writes")
        problems.inRange(self.writeBatch.maxWaitMicroseconds, 0...100_000, "write_batch.max_wait_microseconds")
        if self.store.backend == .postgres {
            do {
                _ = try self.store.postgres.endpoint()
            } catch let error as GroupError {
                problems.add("store.url", error.message)
            } catch {
                problems.add("store.url", "\(error)")
            }
        }
        problems.inRange(self.store.poolSize, 1...1000, "store.pool_size")
        problems.inRange(self.store.maxWaiting, 0...1_000_000, "store.max_waiting")
        problems.inRange(self.store.statementTimeoutMilliseconds, 1...3_600_000, "store.statement_timeout_ms")
        problems.inRange(self.store.connectTimeoutMilliseconds, 1...60_000, "store.connect_timeout_ms")
        problems.inRange(self.maxMessageBytes, 1...Int(Int32.max), "max_message_bytes")
        problems.inRange(self.maxHeaderListBytes, 1024...(64 * 1024 * 1024), "max_header_list_bytes")
        problems.inRange(self.maxConcurrentStreams, 1...Int(Int32.max), "max_concurrent_streams")
        problems.inRange(self.maxConnections, 1...1_000_000, "max_connections")
        if self.drainTimeoutSeconds.isFinite {
            problems.inRange(self.drainTimeoutSeconds, 0...3600, "drain_timeout_seconds")
        } else {
            problems.add("drain_timeout_seconds", "expected a number of seconds")
        }
        problems.inRange(self.eventLoopThreads, 0...1024, "event_loop_threads")
        problems.inRange(self.auth.clockSkewSeconds, 0...3600, "auth.clock_skew_seconds")
        problems.inRange(self.auth.tokenCacheEntries, 0...1_000_000, "auth.token_cache_entries")
        validateTransport(&problems)
        validateTransportLimits(&problems)
        validateObservability(&problems)
        validateConsole(&problems)
        validateTracing(&problems)
        validateTesting(&problems, environment: environment)

        problems.require(!self.apps.isEmpty, "apps", "expected at least one app")
        var firstIndexOfID: [String: Int] = [:]
        for (i, app) in self.apps.enumerated() {
            let appPath = "apps[\(i)]"
            problems.require(Self.isValidAppID(app.id), appPath + ".id",
                             "expected 1 to 64 characters of A-Z a-z 0-9 _ - ., found '\(app.id)'")
            if let first = firstIndexOfID[app.id] {
                problems.add(appPath + ".id", "duplicate app id '\(app.id)' (already used by apps[\(first)].id)")
            } else {
                firstIndexOfID[app.id] = i
            }

            problems.require(!app.secrets.isEmpty, appPath + ".secrets", "expected at least one secret")
            var kids: Set<String> = []
            for (j, secret) in app.secrets.enumerated() {
                let secretPath = appPath + ".secrets[\(j)]"
                problems.require(!secret.kid.isEmpty && secret.kid.utf8.count <= 128, secretPath + ".kid",
                                 "expected a key id of 1 to 128 bytes")
                problems.require(kids.insert(secret.kid).inserted, secretPath + ".kid",
                                 "duplicate kid '\(secret.kid)' in this app")
                problems.require(secret.secret.utf8.count >= Self.minimumSecretBytes, secretPath + ".secret",
                                 "expected a secret of at least \(Self.minimumSecretBytes) bytes, found \(secret.secret.utf8.count)")
            }

            let limitsPath = appPath + ".limits"
            for (key, path) in LimitsCoding.integerKeys {
                // message_retention_seconds: 0 keeps history forever; max_slow_mode_interval_seconds:
                // 0 keeps slow mode off; every other limit is at least 1.
                let lowest = LimitsCoding.zeroAllowedKeys.contains(key) ? 0 : 1
                problems.inRange(app.limits[keyPath: path], lowest...Int(Int32.max), limitsPath + "." + key)
            }
            for (key, path) in RateLimits.bucketKeys {
                guard let rate = app.rateLimits[keyPath: path] else { continue }
                let ratePath = appPath + ".rate_limits." + key
                problems.require(
                    rate.perSecond.isFinite && rate.perSecond > 0 && rate.perSecond <= Double(RateLimits.maximumRate),
                    ratePath + ".per_second",
                    "expected calls per second above 0 and at most \(RateLimits.maximumRate), found \(rate.perSecond)")
                problems.inRange(rate.burst, 1...RateLimits.maximumRate, ratePath + ".burst")
            }
        }
        if let error = ConfigurationProblems.combined(problems.list) { throw error }
    }

    /// The shortest secret accepted: 32 bytes, the HS256 hash length (RFC 7518 §3.2).
    public static let minimumSecretBytes = 32

    static func isValidAppID(_ id: String) -> Bool {
        let bytes = Array(id.utf8)
        return (1...64).contains(bytes.count) && bytes.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "-"), UInt8(ascii: "."):
                true
            default: false
            }
        }
    }

    // MARK: Error rendering

    /// `apps[1].secrets[0].secret` from a coding path.
    static func keyPath(_ path: [any CodingKey]) -> String {
        var text = ""
        for key in path {
            if let index = key.intValue {
                text += "[\(index)]"
            } else {
                text += text.isEmpty ? key.stringValue : "." + key.stringValue
            }
        }
        return text
    }

    static func configurationError(_ error: any Error, file: String) -> ConfigurationError {
        switch error {
        case let fault as ConfigurationFault:
            return ConfigurationError(file: file, keyPath: keyPath(fault.path), message: fault.message)
        case let error as YamlError:
            return ConfigurationError(file: file, keyPath: "", message: "not valid YAML: \(error)")
        case let error as ConfigurationError:
            return error
        case let error as DecodingError:
            return configurationError(error, file: file)
        default:
            return ConfigurationError(file: file, keyPath: "", message: "\(error)")
        }
    }

    private static func configurationError(_ error: DecodingError, file: String) -> ConfigurationError {
        switch error {
        case .typeMismatch(let type, let context):
            return ConfigurationError(
                file: file, keyPath: keyPath(context.codingPath), message: "expected \(describe(type))")
        case .valueNotFound(let type, let context):
            return ConfigurationError(
                file: file, keyPath: keyPath(context.codingPath), message: "expected \(describe(type)), found nothing")
        case .keyNotFound(let key, let context):
            return ConfigurationError(
                file: file, keyPath: keyPath(context.codingPath + [key]), message: "required key is missing")
        case .dataCorrupted(let context):
            // Yams wraps errors thrown by `init(from:)` (our own faults among them).
            if let underlying = context.underlyingError {
                return configurationError(underlying, file: file)
            }
            return ConfigurationError(
                file: file, keyPath: keyPath(context.codingPath), message: context.debugDescription)
        @unknown default:
            return ConfigurationError(file: file, keyPath: "", message: "\(error)")
        }
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is Int.Type, is Int64.Type, is Int32.Type, is UInt.Type: return "an integer"
        case is Double.Type, is Float.Type: return "a number"
        case is String.Type: return "a string"
        case is Bool.Type: return "true or false"
        case is Node.Mapping.Type: return "a mapping of keys to values"
        case is Node.Sequence.Type: return "a list"
        case is Node.Scalar.Type: return "a single value"
        default:
            let name = String(describing: type)
            if name.hasPrefix("Array") { return "a list" }
            return "a mapping of keys to values"
        }
    }
}

/// The problems `validate` finds, in the order checked: each check adds its own and the checks go
/// on, so that every value out of range is reported, not only the first.
struct ConfigurationProblems {
    /// The file named in every problem.
    let file: String
    /// What was found so far.
    var list: [ConfigurationError] = []

    init(file: String) { self.file = file }

    /// Adds a problem at `path`.
    mutating func add(_ path: String, _ message: String) {
        list.append(ConfigurationError(file: file, keyPath: path, message: message))
    }

    /// Adds the problem at `path` unless `ok`.
    mutating func require(_ ok: Bool, _ path: String, _ message: @autoclosure () -> String) {
        if !ok { add(path, message()) }
    }

    /// Adds "expected a value from … to …, found …" unless `value` is in `range`.
    mutating func inRange<T: Comparable>(_ value: T, _ range: ClosedRange<T>, _ path: String) {
        require(range.contains(value), path, "expected a value from \(range.lowerBound) to \(range.upperBound), found \(value)")
    }

    /// The first problem with the others in its ``ConfigurationError/more``; `nil` for none.
    static func combined(_ problems: [ConfigurationError]) -> ConfigurationError? {
        guard var first = problems.first else { return nil }
        first.more = Array(problems.dropFirst())
        return first
    }
}
