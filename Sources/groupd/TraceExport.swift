import GroupService
import Logging
import OTel
import ServiceLifecycle
import Synchronization
import Tracing

/// `tracing`: swift-otel's tracer bootstrapped as the process's `InstrumentationSystem`, and the
/// service that exports its spans over OTLP/gRPC (docs/OBSERVABILITY.md, "Traces").
///
/// Ended spans go into swift-otel's batch processor: a queue of `max_queue_size` spans, sent
/// every `export_interval_ms` in requests of up to `max_batch_size`, from its own task, never
/// from an event loop or a call's task. A span that finds the queue full is dropped, and so is
/// every span of an export that failed (the collector down or too slow): both are counted in
/// `groupd_trace_spans_dropped_total`, and the export's own warnings reach groupd's log at most
/// once a minute.
enum TraceExport {
    /// Bootstraps the tracer and returns the exporter's lifecycle service.
    static func bootstrap(_ settings: TracingSettings, metrics: GroupdMetrics?, logger: Logger) throws -> some Service {
        var configuration = OTel.Configuration.default
        configuration.serviceName = settings.serviceName
        configuration.logs.enabled = false
        configuration.metrics.enabled = false
        configuration.traces.enabled = true
        configuration.propagators = [.traceContext]
        // The service samples each call before making its span (`CallTracing`, by the caller's
        // decision or `sample_ratio`): every span the tracer is asked for is kept.
        configuration.traces.sampler = .parentBasedAlwaysOn
        configuration.traces.exporter = .otlp
        configuration.traces.otlpExporter.endpoint = settings.otlpEndpoint
        configuration.traces.otlpExporter.protocol = .grpc
        configuration.traces.otlpExporter.timeout = .seconds(5)
        configuration.traces.batchSpanProcessor.scheduleDelay = .milliseconds(settings.exportIntervalMilliseconds)
        configuration.traces.batchSpanProcessor.exportTimeout = .seconds(10)
        configuration.traces.batchSpanProcessor.maxQueueSize = settings.maxQueueSize
        configuration.traces.batchSpanProcessor.maxExportBatchSize = settings.maxBatchSize
        let diagnostics = ExportDiagnostics(logger: logger, dropped: { count in metrics?.traceSpansDropped(count) })
        configuration.diagnosticLogger = .custom(Logger(label: "groupd.tracing") { _ in diagnostics })
        configuration.diagnosticLogLevel = .warning
        let backend = try OTel.makeTracingBackend(configuration: configuration)
        InstrumentationSystem.bootstrap(backend.factory)
        logger.info("tracing: exporting spans over OTLP/gRPC", metadata: [
            "endpoint": "\(settings.otlpEndpoint)", "sample_ratio": "\(settings.sampleRatio)",
        ])
        return backend.service
    }
}

/// The exporter's diagnostic log: counts the spans it drops (its "queue was full" warning's
/// `dropped_count`, a failed export's `batch_size`) and passes its warnings on to groupd's log,
/// at most one a minute (the collector being down would otherwise log every export interval).
struct ExportDiagnostics: LogHandler {
    /// How often a warning reaches groupd's log.
    static let warningInterval: Duration = .seconds(60)

    private let logger: Logger
    private let dropped: @Sendable (Int) -> Void
    private let lastWarning: SharedLastWarning
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .warning
    var metadataProvider: Logger.MetadataProvider?

    /// What the handler's copies share: when a warning last went through, and how many were held
    /// back since.
    final class SharedLastWarning: Sendable {
        let state = Mutex<(at: ContinuousClock.Instant?, suppressed: Int)>((nil, 0))
    }

    init(logger: Logger, dropped: @escaping @Sendable (Int) -> Void) {
        self.logger = logger
        self.dropped = dropped
        self.lastWarning = SharedLastWarning()
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var all = metadata
        if let more = event.metadata { all.merge(more) { _, new in new } }
        let message = event.message.description
        if let count = Self.droppedSpans(message: message, metadata: all) { dropped(count) }
        guard event.level >= .warning else { return }
        let now = ContinuousClock.now
        let suppressed: Int? = lastWarning.state.withLock { state in
            if let at = state.at, now - at < Self.warningInterval {
                state.suppressed += 1
                return nil
            }
            defer { state = (now, 0) }
            return state.suppressed
        }
        guard let suppressed else { return }
        var fields: Logger.Metadata = ["component": "\(all["component"] ?? "otel")"]
        if let error = event.error { fields["error"] = "\(error)" }
        for key in ["batch_size", "dropped_count", "queue_size"] { if let value = all[key] { fields[key] = value } }
        if suppressed > 0 { fields["warnings_held_back"] = "\(suppressed)" }
        logger.warning("tracing: \(message)", metadata: fields)
    }

    /// The spans a diagnostic line says were lost, if it says so.
    static func droppedSpans(message: String, metadata: Logger.Metadata) -> Int? {
        let key = if message.hasPrefix("Spans were dropped") {
            "dropped_count"
        } else if message.hasPrefix("Failed to export batch") {
            "batch_size"
        } else {
            ""
        }
        return metadata[key].flatMap { Int("\($0)") }
    }
}
