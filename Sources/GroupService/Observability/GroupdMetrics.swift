import CoreMetrics
import GRPCProtocol
import Prometheus
import Synchronization

/// groupd's metrics: swift-metrics instruments made by a swift-prometheus factory over a
/// registry of their own, rendered in the Prometheus text format by ``render()``.
///
/// The RPC path touches only instruments made in advance (per method: the `OK` counter and the
/// latency histogram) or found in a small per-method table (failures by code and reason): atomic
/// counters and one short per-histogram lock, no lock shared by every call. `docs/OBSERVABILITY.md`
/// lists every metric.
public final class GroupdMetrics: Sendable {
    /// The `method` label of a call to a path the router does not serve.
    public static let unknownMethod = "unknown"

    /// Latency buckets of calls, store commits and plugin hooks: 50 µs to 10 s.
    static let durationBuckets: [Duration] = [
        .microseconds(50), .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1),
        .microseconds(2500), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
        .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .microseconds(2_500_000),
        .seconds(5), .seconds(10),
    ]
    /// Batch-size buckets (mutations per transaction): powers of two up to 4096.
    static let batchSizeBuckets: [Double] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]

    /// The registry every instrument is in.
    public let registry: PrometheusCollectorRegistry
    let factory: PrometheusMetricsFactory

    private let methods: [String: MethodMetrics]
    private let unknown: MethodMetrics
    /// `groupd_rpc_calls_in_flight`.
    let inFlight: Meter
    /// `groupd_connections_open`.
    let connections: Meter
    /// `groupd_streams_open`.
    let streams: Meter
    /// `groupd_store_commit_duration_seconds`.
    let commitDuration: CoreMetrics.Timer
    /// `groupd_store_commit_batch_size`.
    let commitBatchSize: Recorder
    /// `groupd_trace_spans_dropped_total`: spans lost on the way to the trace collector (its queue
    /// full, or an export that failed).
    private let traceSpansDropped: CoreMetrics.Counter
    /// `groupd_rate_limit_refusals_total` by limit.
    private let refusals: Mutex<[String: CoreMetrics.Counter]> = Mutex([:])
    /// `groupd_transport_<name>_total` by defence.
    private let defences: Mutex<[String: CoreMetrics.Counter]> = Mutex([:])
    /// `groupd_policy_hook_duration_seconds` by plugin and hook.
    private let hookDurations: Mutex<[String: CoreMetrics.Timer]> = Mutex([:])
    /// Gauges set at each scrape: `name|labels` → meter, dropped when a scrape no longer sets them.
    private let scraped: Mutex<[String: Meter]> = Mutex([:])
    /// Run before each render to set the gauges read from elsewhere (event hub, policy host).
    private let collectors: Mutex<[@Sendable (inout ScrapedGauges) -> Void]> = Mutex([])

    /// Metrics for a server serving `methods` (the router's paths).
    public init(methods: [String]) {
        let registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = Self.durationBuckets
        factory.valueHistogramBuckets = ["groupd_store_commit_batch_size": Self.batchSizeBuckets]
        self.registry = registry
        self.factory = factory
        var table: [String: MethodMetrics] = [:]
        for path in methods { table[path] = MethodMetrics(name: path, factory: factory) }
        self.methods = table
        self.unknown = MethodMetrics(name: Self.unknownMethod, factory: factory)
        self.inFlight = Meter(label: "groupd_rpc_calls_in_flight", factory: factory)
        self.connections = Meter(label: "groupd_connections_open", factory: factory)
        self.streams = Meter(label: "groupd_streams_open", factory: factory)
        self.commitDuration = CoreMetrics.Timer(label: "groupd_store_commit_duration_seconds", factory: factory)
        self.commitBatchSize = Recorder(label: "groupd_store_commit_batch_size", aggregate: true, factory: factory)
        self.traceSpansDropped = CoreMetrics.Counter(label: "groupd_trace_spans_dropped_total", factory: factory)
        for limit in ["app", "operator", "operator_writes"] { _ = refusalCounter(limit) }
        for defence in TransportDefence.all { _ = defenceCounter(defence) }
    }

    // MARK: Recording

    /// The `method` label of `path`: itself when the router serves it, else ``unknownMethod``.
    public func methodName(for path: String) -> String {
        methods[path] != nil ? path : Self.unknownMethod
    }

    /// Counts a finished call and records its latency.
    /// - Parameters:
    ///   - path: The `:path` the client sent.
    ///   - code: Its status code.
    ///   - reason: The stable reason of its error (`nil`: none).
    ///   - nanoseconds: How long it took.
    ///   - callProtocol: The protocol it came in (the `protocol` label).
    public func callFinished(path: String, code: GRPCStatus.Code, reason: String?, nanoseconds: Int64, callProtocol: CallProtocol = .grpc) {
        (methods[path] ?? unknown).finished(code: code, reason: reason, nanoseconds: nanoseconds, callProtocol: callProtocol)
    }

    /// Counts spans the trace exporter lost (`groupd_trace_spans_dropped_total`).
    public func traceSpansDropped(_ count: Int) {
        traceSpansDropped.increment(by: Int64(count))
    }

    /// Counts a call refused by the rate limit `limit` (`app`, `operator`, `operator_writes`).
    public func rateLimitRefused(limit: String) {
        refusalCounter(limit).increment()
    }

    /// Counts one action of a transport defence (`groupd_transport_<name>_total`).
    public func transportDefence(_ defence: TransportDefence) {
        defenceCounter(defence).increment()
    }

    /// Records a committed (or failed) store transaction.
    public func storeCommitted(mutations: Int, duration: Duration) {
        commitDuration.recordNanoseconds(Self.nanoseconds(duration))
        commitBatchSize.record(mutations)
    }

    /// Records one policy plugin call.
    public func pluginCalled(plugin: String, hook: String, duration: Duration) {
        let key = plugin + "|" + hook
        let timer = hookDurations.withLock { timers in
            if let timer = timers[key] { return timer }
            let timer = CoreMetrics.Timer(
                label: "groupd_policy_hook_duration_seconds", dimensions: [("plugin", plugin), ("hook", hook)],
                factory: factory)
            timers[key] = timer
            return timer
        }
        timer.recordNanoseconds(Self.nanoseconds(duration))
    }

    /// `duration` in whole nanoseconds (saturating).
    static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? (seconds < 0 ? .min : .max) : whole &+ attoseconds / 1_000_000_000
    }

    private func refusalCounter(_ limit: String) -> CoreMetrics.Counter {
        refusals.withLock { counters in
            if let counter = counters[limit] { return counter }
            let counter = CoreMetrics.Counter(label: "groupd_rate_limit_refusals_total", dimensions: [("limit", limit)], factory: factory)
            counters[limit] = counter
            return counter
        }
    }

    private func defenceCounter(_ defence: TransportDefence) -> CoreMetrics.Counter {
        defences.withLock { counters in
            if let counter = counters[defence.name] { return counter }
            let counter = CoreMetrics.Counter(label: "groupd_transport_\(defence.name)_total", factory: factory)
            counters[defence.name] = counter
            return counter
        }
    }

    // MARK: Rendering

    /// Adds a collector run before each render, which sets gauges read from elsewhere.
    public func addCollector(_ collector: @escaping @Sendable (inout ScrapedGauges) -> Void) {
        collectors.withLock { $0.append(collector) }
    }

    /// Every metric in the Prometheus text exposition format (version 0.0.4).
    ///
    /// Runs the collectors, then renders; call it off the event loops. No lock the RPC path
    /// takes is held while rendering: the registry lends its table, and each instrument is
    /// copied under its own lock before it is written out.
    public func render() -> [UInt8] {
        var gauges = ScrapedGauges()
        for collector in collectors.withLock({ $0 }) { collector(&gauges) }
        apply(gauges)
        var buffer: [UInt8] = []
        buffer.reserveCapacity(16 << 10)
        registry.emit(into: &buffer)
        return buffer
    }

    /// Sets the scraped gauges, and drops the ones this scrape did not set (a plugin chain
    /// replaced by a reload).
    private func apply(_ gauges: ScrapedGauges) {
        let stale = scraped.withLock { meters -> [Meter] in
            var seen: Set<String> = []
            for value in gauges.values {
                let key = value.name + "|" + value.labels.map { "\($0.0)=\($0.1)" }.joined(separator: ",")
                seen.insert(key)
                let meter = meters[key] ?? Meter(label: value.name, dimensions: value.labels, factory: factory)
                meters[key] = meter
                meter.set(value.value)
            }
            let gone = meters.keys.filter { !seen.contains($0) }
            return gone.compactMap { meters.removeValue(forKey: $0) }
        }
        for meter in stale { meter.destroy() }
    }
}

/// Gauges a collector sets at scrape time.
public struct ScrapedGauges: Sendable {
    struct Value: Sendable {
        var name: String
        var labels: [(String, String)]
        var value: Double
    }

    var values: [Value] = []

    /// Sets the gauge `name` with `labels` to `value`.
    public mutating func set(_ name: String, _ labels: [(String, String)] = [], to value: Double) {
        values.append(Value(name: name, labels: labels, value: value))
    }
}

/// One method's instruments.
final class MethodMetrics: Sendable {
    let name: String
    private let factory: PrometheusMetricsFactory
    /// Calls that ended OK, by ``CallProtocol`` (in `allCases` order).
    private let ok: [CoreMetrics.Counter]
    private let duration: CoreMetrics.Timer
    /// Failures by `code|reason`; found under this method's own lock (never every call's).
    private let failures: Mutex<[String: CoreMetrics.Counter]> = Mutex([:])

    init(name: String, factory: PrometheusMetricsFactory) {
        self.name = name
        self.factory = factory
        self.ok = CallProtocol.allCases.map { callProtocol in
            CoreMetrics.Counter(
                label: "groupd_rpc_calls_total",
                dimensions: [("method", name), ("code", "OK"), ("reason", ""), ("protocol", callProtocol.rawValue)],
                factory: factory)
        }
        self.duration = CoreMetrics.Timer(label: "groupd_rpc_duration_seconds", dimensions: [("method", name)], factory: factory)
    }

    func finished(code: GRPCStatus.Code, reason: String?, nanoseconds: Int64, callProtocol: CallProtocol) {
        duration.recordNanoseconds(nanoseconds)
        if code == .ok, reason == nil {
            ok[callProtocol == .grpc ? 0 : 1].increment()
            return
        }
        let codeName = code.description
        let reasonName = reason ?? ""
        let key = codeName + "|" + reasonName + "|" + callProtocol.rawValue
        let counter = failures.withLock { counters in
            if let counter = counters[key] { return counter }
            let counter = CoreMetrics.Counter(
                label: "groupd_rpc_calls_total", dimensions: [("method", name), ("code", codeName), ("reason", reasonName), ("protocol", callProtocol.rawValue)],
                factory: factory)
            counters[key] = counter
            return counter
        }
        counter.increment()
    }
}
