import Foundation
import GroupModel
import GroupStore
import Yams

extension GroupdConfiguration {
    /// Read, decode and validate the configuration file at `path`.
    /// - Throws: ``ConfigurationError`` naming the file, the key path and what was expected.
    public static func load(path: String) throws -> GroupdConfiguration {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw ConfigurationError(file: path, keyPath: "", message: "cannot read the file: \(error.localizedDescription)")
        }
        return try parse(yaml: text, file: path)
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
        let configuration: GroupdConfiguration
        do {
            // An empty document (or one of comments only) is an empty mapping: every default.
            let document = try Yams.compose(yaml: yaml) == nil ? "{}" : yaml
            configuration = try YAMLDecoder().decode(GroupdConfiguration.self, from: document)
        } catch {
            throw configurationError(error, file: file)
        }
        try configuration.validate(file: file, environment: environment)
        return configuration
    }

    /// Check every value against its documented range.
    /// - Parameters:
    ///   - file: The name to report in errors.
    ///   - environment: The environment `testing.clock: manual` is checked against (`nil`: the process's).
    /// - Throws: ``ConfigurationError`` for the first mistake found, every further one in its
    ///   ``ConfigurationError/more`` (each section's checks stop at its own first mistake).
    public func validate(file: String = "<string>", environment: [String: String]? = nil) throws {
        var problems: [ConfigurationError] = []
        func require(_ ok: Bool, _ path: String, _ message: @autoclosure () -> String) throws {
            if !ok { problems.append(ConfigurationError(file: file, keyPath: path, message: message())) }
        }
        func check(_ section: () throws -> Void) {
            do {
                try section()
            } catch let error as ConfigurationError {
                problems.append(contentsOf: error.all)
            } catch {
                problems.append(ConfigurationError(file: file, keyPath: "", message: "\(error)"))
            }
        }
        func inRange<T: Comparable>(_ value: T, _ range: ClosedRange<T>, _ path: String) throws {
            try require(range.contains(value), path,
                        "expected a value from \(range.lowerBound) to \(range.upperBound), found \(value)")
        }

        try require(!self.listen.host.isEmpty, "listen.host", "expected an address, found an empty string")
        try inRange(self.listen.port, 0...65535, "listen.port")
        try require(!self.dataDir.isEmpty, "data_dir", "expected a directory, found an empty string")
        try inRange(self.writeBatch.maxWrites, 1...10_000, "write_batch.max_writes")
        try inRange(self.writeBatch.maxWaitMicroseconds, 0...100_000, "write_batch.max_wait_microseconds")
        if self.store.backend == .postgres {
            do {
                _ = try self.store.postgres.endpoint()
            } catch let error as GroupError {
                problems.append(ConfigurationError(file: file, keyPath: "store.url", message: error.message))
            } catch {
                problems.append(ConfigurationError(file: file, keyPath: "store.url", message: "\(error)"))
            }
        }
        try inRange(self.store.poolSize, 1...1000, "store.pool_size")
        try inRange(self.store.maxWaiting, 0...1_000_000, "store.max_waiting")
        try inRange(self.store.statementTimeoutMilliseconds, 1...3_600_000, "store.statement_timeout_ms")
        try inRange(self.store.connectTimeoutMilliseconds, 1...60_000, "store.connect_timeout_ms")
        try inRange(self.maxMessageBytes, 1...Int(Int32.max), "max_message_bytes")
        try inRange(self.maxHeaderListBytes, 1024...(64 * 1024 * 1024), "max_header_list_bytes")
        try inRange(self.maxConcurrentStreams, 1...Int(Int32.max), "max_concurrent_streams")
        try inRange(self.maxConnections, 1...1_000_000, "max_connections")
        try require(self.drainTimeoutSeconds.isFinite, "drain_timeout_seconds", "expected a number of seconds")
        try inRange(self.drainTimeoutSeconds, 0...3600, "drain_timeout_seconds")
        try inRange(self.eventLoopThreads, 0...1024, "event_loop_threads")
        try inRange(self.auth.clockSkewSeconds, 0...3600, "auth.clock_skew_seconds")
        try inRange(self.auth.tokenCacheEntries, 0...1_000_000, "auth.token_cache_entries")
        check { try validateTransport(file: file) }
        check { try validateTransportLimits(file: file) }
        check { try validateObservability(file: file) }
        check { try validateTesting(file: file, environment: environment) }

        try require(!self.apps.isEmpty, "apps", "expected at least one app")
        var firstIndexOfID: [String: Int] = [:]
        for (i, app) in self.apps.enumerated() {
            let appPath = "apps[\(i)]"
            try require(Self.isValidAppID(app.id), appPath + ".id",
                        "expected 1 to 64 characters of A-Z a-z 0-9 _ - ., found '\(app.id)'")
            if let first = firstIndexOfID[app.id] {
                problems.append(ConfigurationError(
                    file: file, keyPath: appPath + ".id",
                    message: "duplicate app id '\(app.id)' (already used by apps[\(first)].id)"))
            } else {
                firstIndexOfID[app.id] = i
            }

            try require(!app.secrets.isEmpty, appPath + ".secrets", "expected at least one secret")
            var kids: Set<String> = []
            for (j, secret) in app.secrets.enumerated() {
                let secretPath = appPath + ".secrets[\(j)]"
                try require(!secret.kid.isEmpty && secret.kid.utf8.count <= 128, secretPath + ".kid",
                            "expected a key id of 1 to 128 bytes")
                try require(kids.insert(secret.kid).inserted, secretPath + ".kid",
                            "duplicate kid '\(secret.kid)' in this app")
                try require(secret.secret.utf8.count >= Self.minimumSecretBytes, secretPath + ".secret",
                            "expected a secret of at least \(Self.minimumSecretBytes) bytes, found \(secret.secret.utf8.count)")
            }

            let limitsPath = appPath + ".limits"
            for (key, path) in LimitsCoding.integerKeys {
                // message_retention_seconds: 0 keeps history forever; max_slow_mode_interval_seconds:
                // 0 keeps slow mode off; every other limit is at least 1.
                let lowest = LimitsCoding.zeroAllowedKeys.contains(key) ? 0 : 1
                try inRange(app.limits[keyPath: path], lowest...Int(Int32.max), limitsPath + "." + key)
            }
            for (key, path) in RateLimits.bucketKeys {
                guard let rate = app.rateLimits[keyPath: path] else { continue }
                let ratePath = appPath + ".rate_limits." + key
                try require(
                    rate.perSecond.isFinite && rate.perSecond > 0 && rate.perSecond <= Double(RateLimits.maximumRate),
                    ratePath + ".per_second",
                    "expected calls per second above 0 and at most \(RateLimits.maximumRate), found \(rate.perSecond)")
                try inRange(rate.burst, 1...RateLimits.maximumRate, ratePath + ".burst")
            }
        }
        if var first = problems.first {
            first.more = Array(problems.dropFirst())
            throw first
        }
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

    private static func configurationError(_ error: any Error, file: String) -> ConfigurationError {
        switch error {
        case let fault as ConfigurationFault:
            return ConfigurationError(file: file, keyPath: keyPath(fault.path), message: fault.message)
        case let error as YamlError:
            return ConfigurationError(file: file, keyPath: "", message: "not valid YAML: \(error)")
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
