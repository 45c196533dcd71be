/// `tracing`: OpenTelemetry traces exported over OTLP/gRPC (docs/OBSERVABILITY.md, "Traces").
/// Absent: no span is made and nothing is exported.
///
/// ```yaml
/// tracing:
///   otlp_endpoint: http://127.0.0.1:4317   # required: the collector's OTLP/gRPC address
///   sample_ratio: 0.01        # share of calls traced, 0 to 1 (default 1); a caller's
///                             # sampled flag in `traceparent` is followed
///   service_name: groupd      # the spans' `service.name` (default groupd)
///   export_interval_ms: 1000  # how often a batch is sent (default 1000)
///   max_queue_size: 2048      # spans waiting for export; past it they are dropped and counted
///   max_batch_size: 512       # spans per export request
/// ```
public struct TracingSettings: Sendable, Hashable {
    /// `tracing.otlp_endpoint`: `http://host:port` (or `https://`) of an OTLP/gRPC receiver.
    public var otlpEndpoint: String
    /// `tracing.sample_ratio`: the share of calls without a caller's decision to trace, 0 to 1,
    /// spread evenly. A call whose `traceparent` carries the caller's decision follows it.
    public var sampleRatio: Double
    /// `tracing.service_name`: the resource's `service.name`.
    public var serviceName: String
    /// `tracing.export_interval_ms`: the time between two exports of the queued spans.
    public var exportIntervalMilliseconds: Int
    /// `tracing.max_queue_size`: ended spans kept for the next export; more are dropped (and
    /// counted in `groupd_trace_spans_dropped_total`).
    public var maxQueueSize: Int
    /// `tracing.max_batch_size`: the most spans one export request carries.
    public var maxBatchSize: Int

    /// The defaults of every key but `otlp_endpoint`.
    public static let defaultSampleRatio = 1.0
    public static let defaultServiceName = "groupd"
    public static let defaultExportIntervalMilliseconds = 1000
    public static let defaultMaxQueueSize = 2048
    public static let defaultMaxBatchSize = 512

    /// Create tracing settings.
    public init(
        otlpEndpoint: String, sampleRatio: Double = Self.defaultSampleRatio, serviceName: String = Self.defaultServiceName,
        exportIntervalMilliseconds: Int = Self.defaultExportIntervalMilliseconds, maxQueueSize: Int = Self.defaultMaxQueueSize,
        maxBatchSize: Int = Self.defaultMaxBatchSize
    ) {
        self.otlpEndpoint = otlpEndpoint
        self.sampleRatio = sampleRatio
        self.serviceName = serviceName
        self.exportIntervalMilliseconds = exportIntervalMilliseconds
        self.maxQueueSize = maxQueueSize
        self.maxBatchSize = maxBatchSize
    }
}

extension TracingSettings: Codable {
    private static let keys = [
        "otlp_endpoint", "sample_ratio", "service_name", "export_interval_ms", "max_queue_size", "max_batch_size",
    ]

    /// Decode; `otlp_endpoint` is required, the rest default, unknown keys refused.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.configMapping(allowing: Self.keys)
        self.init(
            otlpEndpoint: try c.required("otlp_endpoint"),
            sampleRatio: try c.value("sample_ratio", or: Self.defaultSampleRatio),
            serviceName: try c.value("service_name", or: Self.defaultServiceName),
            exportIntervalMilliseconds: try c.value("export_interval_ms", or: Self.defaultExportIntervalMilliseconds),
            maxQueueSize: try c.value("max_queue_size", or: Self.defaultMaxQueueSize),
            maxBatchSize: try c.value("max_batch_size", or: Self.defaultMaxBatchSize))
    }

    /// Encode every key.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: ConfigKey.self)
        try c.encode(otlpEndpoint, forKey: ConfigKey("otlp_endpoint"))
        try c.encode(sampleRatio, forKey: ConfigKey("sample_ratio"))
        try c.encode(serviceName, forKey: ConfigKey("service_name"))
        try c.encode(exportIntervalMilliseconds, forKey: ConfigKey("export_interval_ms"))
        try c.encode(maxQueueSize, forKey: ConfigKey("max_queue_size"))
        try c.encode(maxBatchSize, forKey: ConfigKey("max_batch_size"))
    }
}

extension GroupdConfiguration {
    /// Checks `tracing`: an `http://` or `https://` endpoint with a host and a port, a ratio from 0
    /// to 1, a service name, and positive interval and sizes (a batch no larger than the queue).
    func validateTracing(_ problems: inout ConfigurationProblems) {
        guard let tracing else { return }
        if TracingSettings.endpointProblem(tracing.otlpEndpoint) != nil {
            problems.add(
                "tracing.otlp_endpoint",
                "expected http://host:port or https://host:port, found \"\(tracing.otlpEndpoint)\"")
        }
        if !(tracing.sampleRatio.isFinite && (0...1).contains(tracing.sampleRatio)) {
            problems.add("tracing.sample_ratio", "expected a share from 0 to 1, found \(tracing.sampleRatio)")
        }
        problems.require(!tracing.serviceName.isEmpty, "tracing.service_name", "expected a name, found an empty string")
        problems.inRange(tracing.exportIntervalMilliseconds, 1...3_600_000, "tracing.export_interval_ms")
        problems.inRange(tracing.maxQueueSize, 1...1_000_000, "tracing.max_queue_size")
        problems.inRange(tracing.maxBatchSize, 1...tracing.maxQueueSize.clamped(to: 1...1_000_000), "tracing.max_batch_size")
    }
}

extension TracingSettings {
    /// Why `endpoint` is not `http(s)://host:port` with nothing after the port but an optional
    /// `/` (nil: it is).
    static func endpointProblem(_ endpoint: String) -> String? {
        let rest: Substring
        if endpoint.hasPrefix("http://") {
            rest = endpoint.dropFirst(7)
        } else if endpoint.hasPrefix("https://") {
            rest = endpoint.dropFirst(8)
        } else {
            return "scheme"
        }
        let authority = rest.hasSuffix("/") ? rest.dropLast() : rest
        guard let colon = authority.lastIndex(of: ":") else { return "port" }
        let host = authority[..<colon]
        guard !host.isEmpty, !host.contains("/") else { return "host" }
        guard let port = Int(authority[authority.index(after: colon)...]), (1...65535).contains(port) else { return "port" }
        return nil
    }
}

extension Comparable {
    fileprivate func clamped(to range: ClosedRange<Self>) -> Self { min(max(self, range.lowerBound), range.upperBound) }
}
