import GroupAPI
import Logging
import Synchronization

#if canImport(Dispatch)
import Dispatch
#endif

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where groupd's log lines go, and the level and format in force: one shared box that the
/// log handlers read on every line and a reload (SIGHUP) updates, so `log.level` and
/// `log.format` change without a restart.
public final class LogOutput: Sendable {
    private let levelValue: Atomic<UInt8>
    private let formatValue: Atomic<UInt8>
    /// Writes finished lines (newlines included); serialised by `lock`, so lines keep their order.
    private let sink: @Sendable (String) -> Void
    private let lock = Mutex(())
    /// Batched lines (the access log's) waiting for the writer queue, and whether a flush is
    /// scheduled.
    private let pending = Mutex(Pending())
    /// Whether batched lines wait for the writer queue; false: every line is written at once
    /// (an output with a test sink).
    private let batching: Bool
    /// Where batched lines are written from, `flushDelay` after the first of a batch: one
    /// `write(2)` for every line that came meanwhile, and one wake-up of the queue's thread.
    private static let writer = DispatchQueue(label: "groupd.log-writer")
    /// How long a batched line may wait for others (by default).
    public static let defaultFlushDelay = DispatchTimeInterval.milliseconds(5)
    /// How long a batched line may wait for others here.
    private let flushDelay: DispatchTimeInterval
    /// Batched bytes at which the caller writes them itself: under load batches are written by
    /// the calls, a `write(2)` per 64 KiB, and the writer queue only catches the stragglers; a
    /// log that cannot keep up slows the calls down instead of growing the memory.
    static let pendingLimit = 64 << 10

    private struct Pending {
        var text = ""
        var scheduled = false
    }

    /// An output writing to standard error. Lines of ``write(level:label:message:metadata:source:batched:)``
    /// with `batched` (the access log's, one per call) are gathered and written by a queue of the
    /// output's own, one `write(2)` for all those that came meanwhile; every other line is written
    /// at once, after the batched lines before it.
    /// - Parameter settings: The level and format to start with.
    public convenience init(settings: LogSettings = .defaults) {
        self.init(settings: settings, batching: true) { text in
            var bytes = Array(text.utf8)
            bytes.withUnsafeMutableBytes { buffer in
                var offset = 0
                while offset < buffer.count {
                    let written = Glibc.write(2, buffer.baseAddress! + offset, buffer.count - offset)
                    if written < 0 {
                        if errno == EINTR { continue }
                        return
                    }
                    offset += written
                }
            }
        }
    }

    /// An output writing each line with `sink` (tests capture lines this way).
    /// - Parameters:
    ///   - settings: The level and format to start with.
    ///   - batching: Whether batched lines wait for the writer queue; without it (the default)
    ///     every line reaches `sink` before `write` returns.
    ///   - flushDelay: How long a batched line may wait for others before the writer queue writes
    ///     the batch (5 ms; tests that must see only the caller's writes make it long).
    ///   - sink: Writes lines, newlines included; never called concurrently.
    public init(
        settings: LogSettings, batching: Bool = false, flushDelay: DispatchTimeInterval = LogOutput.defaultFlushDelay,
        sink: @escaping @Sendable (String) -> Void
    ) {
        self.levelValue = Atomic(Self.code(of: settings.level))
        self.formatValue = Atomic(settings.format == .json ? 1 : 0)
        self.sink = sink
        self.batching = batching
        self.flushDelay = flushDelay
    }

    /// The lowest level written now.
    public var level: Logger.Level {
        Self.levels[Int(levelValue.load(ordering: .relaxed))]
    }

    /// The format in force.
    public var format: LogSettings.Format {
        formatValue.load(ordering: .relaxed) == 1 ? .json : .text
    }

    /// Puts `settings` in force for every line written from now on.
    public func apply(_ settings: LogSettings) {
        levelValue.store(Self.code(of: settings.level), ordering: .relaxed)
        formatValue.store(settings.format == .json ? 1 : 0, ordering: .relaxed)
    }

    /// A log handler for `label` writing here (for `LoggingSystem.bootstrap`).
    public func handler(label: String) -> any LogHandler {
        GroupdLogHandler(label: label, output: self)
    }

    /// Formats and writes one line, whatever the level in force (the caller decided).
    /// - Parameters:
    ///   - level: The line's level.
    ///   - label: The logger's label.
    ///   - message: The message.
    ///   - metadata: Fields, written sorted by key.
    ///   - source: The module that logged (text format only).
    ///   - batched: Whether the line may wait for the writer queue (access-log lines: a batch is
    ///     written within the queue's next turn, so a crash can lose the lines of the last
    ///     moment); other lines are written before this returns.
    public func write(
        level: Logger.Level, label: String, message: String, metadata: Logger.Metadata, source: String,
        batched: Bool = false
    ) {
        write(
            level: level, label: label, message: message, fields: metadata.keys.sorted().map { ($0, metadata[$0]!) },
            source: source, batched: batched)
    }

    /// ``write(level:label:message:metadata:source:batched:)`` with the fields as pairs sorted by key.
    public func write(
        level: Logger.Level, label: String, message: String, fields: [(key: String, value: Logger.MetadataValue)],
        source: String, batched: Bool = false
    ) {
        let line = Self.format(
            format, time: Self.now(), level: level, label: label, message: message, fields: fields, source: source)
        guard batched, batching else {
            lock.withLock { _ in
                let waiting = takePending()
                sink(waiting.isEmpty ? line : waiting + line)
            }
            return
        }
        let (schedule, full) = pending.withLock { state -> (Bool, Bool) in
            state.text += line
            let schedule = !state.scheduled
            state.scheduled = true
            return (schedule, state.text.utf8.count >= Self.pendingLimit)
        }
        if full {
            flush()
        } else if schedule {
            Self.writer.asyncAfter(deadline: .now() + flushDelay) { self.flush() }
        }
    }

    /// Writes the batched lines still waiting (at shutdown; the writer queue does it otherwise).
    public func flush() {
        lock.withLock { _ in
            let waiting = takePending()
            if !waiting.isEmpty { sink(waiting) }
        }
    }

    /// The batched lines waiting, now taken; the next batched line schedules a flush again.
    private func takePending() -> String {
        guard batching else { return "" }
        return pending.withLock { state in
            let text = state.text
            state.text = ""
            state.scheduled = false
            return text
        }
    }

    // MARK: Formatting

    /// One line in `format`, newline included.
    static func format(
        _ format: LogSettings.Format, time: String, level: Logger.Level, label: String, message: String,
        metadata: Logger.Metadata, source: String
    ) -> String {
        self.format(
            format, time: time, level: level, label: label, message: message,
            fields: metadata.keys.sorted().map { ($0, metadata[$0]!) }, source: source)
    }

    /// One line in `format`, newline included, with `fields` in the order given (sorted by key:
    /// the access log builds its fields in that order, without a dictionary).
    static func format(
        _ format: LogSettings.Format, time: String, level: Logger.Level, label: String, message: String,
        fields: [(key: String, value: Logger.MetadataValue)], source: String
    ) -> String {
        switch format {
        case .text:
            // swift-log's StreamLogHandler layout, which scripts and tests already read; a value
            // that is empty or holds a space, a quote or a control character is quoted as in
            // JSON, so that `key=value` pairs split unambiguously.
            var line = "\(time) \(level) \(label) :"
            for (key, metadataValue) in fields {
                let value = if case .string(let string) = metadataValue { string } else { "\(metadataValue)" }
                line += " \(key)="
                if value.isEmpty || value.unicodeScalars.contains(where: { $0 == " " || $0 == "\"" || $0.value < 0x20 }) {
                    appendJSON(string: value, to: &line)
                } else {
                    line += value
                }
            }
            line += " [\(source)] \(message)\n"
            return line
        case .json:
            var line = "{\"ts\":"
            appendJSON(string: time, to: &line)
            line += ",\"level\":"
            appendJSON(string: level.rawValue, to: &line)
            line += ",\"label\":"
            appendJSON(string: label, to: &line)
            line += ",\"msg\":"
            appendJSON(string: message, to: &line)
            for (key, value) in fields {
                line += ","
                // A field named like one of the four above is kept, prefixed with an underscore.
                appendJSON(string: ["ts", "level", "label", "msg"].contains(key) ? "_" + key : key, to: &line)
                line += ":"
                appendJSON(value: value, to: &line)
            }
            line += "}\n"
            return line
        }
    }

    private static func appendJSON(value: Logger.MetadataValue, to out: inout String) {
        switch value {
        case .string(let string):
            appendJSON(string: string, to: &out)
        case .stringConvertible(let convertible):
            appendJSON(string: convertible.description, to: &out)
        case .array(let values):
            out += "["
            for (index, element) in values.enumerated() {
                if index > 0 { out += "," }
                appendJSON(value: element, to: &out)
            }
            out += "]"
        case .dictionary(let fields):
            out += "{"
            for (index, key) in fields.keys.sorted().enumerated() {
                if index > 0 { out += "," }
                appendJSON(string: key, to: &out)
                out += ":"
                appendJSON(value: fields[key]!, to: &out)
            }
            out += "}"
        }
    }

    /// A JSON string literal.
    static func appendJSON(string: String, to out: inout String) {
        JSONString.append(string, to: &out)
    }

    /// Now, UTC, to the millisecond: `2026-01-31T23:59:59.123Z`.
    static func now() -> String {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        var seconds = spec.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let millis = Int(spec.tv_nsec / 1_000_000)
        let millisText = millis < 10 ? "00\(millis)" : millis < 100 ? "0\(millis)" : "\(millis)"
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T"
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)).\(millisText)Z"
    }

    private static let levels: [Logger.Level] = [.trace, .debug, .info, .notice, .warning, .error, .critical]

    private static func code(of level: LogSettings.Level) -> UInt8 {
        UInt8(LogSettings.Level.allCases.firstIndex(of: level)!)
    }
}

/// A swift-log handler writing to a ``LogOutput``: the level and format are the output's, read
/// on every line, unless a logger sets its own level.
public struct GroupdLogHandler: LogHandler {
    /// The logger's label.
    public let label: String
    private let output: LogOutput
    private var levelOverride: Logger.Level?

    /// The handler's metadata, added to every line.
    public var metadata: Logger.Metadata = [:]
    /// Adds metadata to each line (task-local values).
    public var metadataProvider: Logger.MetadataProvider?

    /// A handler for `label` writing to `output`.
    public init(label: String, output: LogOutput) {
        self.label = label
        self.output = output
    }

    /// The output's level, unless set on this logger.
    public var logLevel: Logger.Level {
        get { levelOverride ?? output.level }
        set { levelOverride = newValue }
    }

    /// One metadata value.
    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// Writes the line.
    public func log(event: LogEvent) {
        var fields = metadata
        if let provided = metadataProvider?.get() { fields.merge(provided) { _, new in new } }
        if let own = event.metadata { fields.merge(own) { _, new in new } }
        output.write(level: event.level, label: label, message: event.message.description, metadata: fields, source: event.source)
    }
}
