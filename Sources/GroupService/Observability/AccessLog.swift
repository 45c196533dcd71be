import GRPCProtocol
import Logging
import Synchronization

/// One line per call (`access_log`), written to the log output with the label `groupd.access`
/// whatever `log.level` says: method, status code and reason, duration, app, operator, peer,
/// request id and the W3C trace context the caller sent.
///
/// Successful calls are sampled (`access_log.sample_rate`); failed calls are always written.
/// Both settings follow a reload.
public final class AccessLog: Sendable {
    /// The label of access-log lines.
    public static let label = "groupd.access"

    private let output: LogOutput
    private let enabledValue: Atomic<Bool>
    /// The sample rate as a threshold on 0..<2^32 (2^32: every call).
    private let threshold: Atomic<UInt64>
    /// Counts calls for sampling and generated request ids.
    private let counter = Atomic<UInt64>(0)
    /// Starts every generated request id: random per process, so ids differ across restarts.
    private let idPrefix: String

    /// An access log writing to `output`.
    public init(settings: AccessLogSettings, output: LogOutput) {
        self.output = output
        self.enabledValue = Atomic(settings.enabled)
        self.threshold = Atomic(Self.threshold(for: settings.sampleRate))
        let random = UInt64.random(in: 0...UInt64.max)
        self.idPrefix = String(String(random, radix: 16).suffix(12))
    }

    /// Whether calls are logged now.
    public var isEnabled: Bool { enabledValue.load(ordering: .relaxed) }

    /// Puts `settings` in force for the calls that end from now on.
    public func apply(_ settings: AccessLogSettings) {
        enabledValue.store(settings.enabled, ordering: .relaxed)
        threshold.store(Self.threshold(for: settings.sampleRate), ordering: .relaxed)
    }

    /// Writes the line of `call` (when enabled; an `OK` call only when sampled).
    /// - Parameters:
    ///   - call: What the transport knows of the finished call: its status, duration, peer, request
    ///     headers and the service's annotations.
    ///   - method: The method's metrics name (the registered path, or `unknown`).
    func record(_ call: FinishedCall, method: String) {
        guard isEnabled else { return }
        let sequence = counter.add(1, ordering: .relaxed).newValue
        if call.status.code == .ok {
            let limit = threshold.load(ordering: .relaxed)
            guard limit > 0 else { return }
            if limit < (1 << 32), Self.mix(sequence) & 0xFFFF_FFFF >= limit { return }
        }
        output.write(
            level: call.status.code == .ok ? .info : .notice, label: Self.label, message: "rpc",
            fields: fields(call, method: method, sequence: sequence), source: "access", batched: true)
    }

    /// The fields of a call's line, sorted by key (the order the line shows them in).
    func fields(_ call: FinishedCall, method: String, sequence: UInt64) -> [(key: String, value: Logger.MetadataValue)] {
        let annotations = call.annotations?.values ?? CallAnnotations.Values()
        let requestID: String
        if let id = call.metadata["x-request-id"], Self.isValidRequestID(id) {
            requestID = id
        } else {
            requestID = "\(idPrefix)-\(String(sequence, radix: 16))"
        }
        var trace: TraceParent?
        var traceInvalid = false
        if let header = call.metadata["traceparent"] {
            trace = TraceParent(header)
            traceInvalid = trace == nil
        }
        var fields: [(key: String, value: Logger.MetadataValue)] = []
        fields.reserveCapacity(14)
        if let app = annotations.app { fields.append(("app", .string(app))) }
        fields.append(("code", .string(call.status.code.description)))
        fields.append(("duration_ms", .string(Self.milliseconds(call.durationNanoseconds))))
        if call.status.code != .ok, !call.status.message.isEmpty {
            fields.append(("error", .string(Self.printable(call.status.message, limit: 512))))
        }
        fields.append(("method", .string(method)))
        if let user = annotations.operatorID { fields.append(("operator", .string(user))) }
        if let trace { fields.append(("parent_id", .string(trace.parentID))) }
        if method == GroupdMetrics.unknownMethod { fields.append(("path", .string(Self.printable(call.path, limit: 256)))) }
        fields.append(("peer", .string(call.peer)))
        fields.append(("protocol", .string(call.callProtocol.rawValue)))
        if let reason = annotations.reason { fields.append(("reason", .string(reason))) }
        fields.append(("request_id", .string(requestID)))
        if let trace {
            fields.append(("trace_flags", .string(trace.flags)))
            fields.append(("trace_id", .string(trace.traceID)))
        }
        if traceInvalid { fields.append(("traceparent_invalid", .string("true"))) }
        return fields
    }

    /// A caller's `x-request-id` is kept when it is 1 to 128 visible ASCII characters.
    static func isValidRequestID(_ id: String) -> Bool {
        let bytes = id.utf8
        return (1...128).contains(bytes.count) && bytes.allSatisfy { (0x21...0x7E).contains($0) }
    }

    /// `text` cut to `limit` bytes with control characters replaced, so that a line stays one line.
    static func printable(_ text: String, limit: Int) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            if out.utf8.count >= limit { return out + "…" }
            out.unicodeScalars.append(scalar.value < 0x20 || scalar.value == 0x7F ? "?" : scalar)
        }
        return out
    }

    /// Nanoseconds as milliseconds with three decimals (`0.042`).
    static func milliseconds(_ nanoseconds: Int64) -> String {
        let micros = max(0, nanoseconds) / 1000
        let fraction = micros % 1000
        let text = String(fraction)
        return "\(micros / 1000).\(String(repeating: "0", count: 3 - text.count))\(text)"
    }

    /// `rate` (0 to 1) as a threshold on the low 32 bits of a mixed counter.
    private static func threshold(for rate: Double) -> UInt64 {
        guard rate.isFinite, rate > 0 else { return 0 }
        if rate >= 1 { return 1 << 32 }
        return UInt64(rate * Double(UInt64(1) << 32))
    }

    /// splitmix64: spreads a counter over 64 bits, so that every n-th call is not the one sampled.
    private static func mix(_ value: UInt64) -> UInt64 {
        var z = value &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
