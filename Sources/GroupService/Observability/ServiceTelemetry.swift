import CoreMetrics
import GRPCProtocol
import GroupAPI
import Logging

/// Metrics, the access log and the log output of one server, and the transport's call
/// observer that feeds them (`ServerConfiguration.callObserver`).
public final class ServiceTelemetry: CallObserver {
    /// The metrics (`nil`: `metrics` is not configured).
    public let metrics: GroupdMetrics?
    /// The access log.
    public let accessLog: AccessLog
    /// The log output whose level and format a reload changes.
    public let logOutput: LogOutput
    private let paths: Set<String>

    /// Telemetry for a server serving ``GroupdService/methodPaths``.
    /// - Parameters:
    ///   - configuration: `metrics`, `access_log` and `log`.
    ///   - logOutput: Where log and access-log lines go (the one `LoggingSystem` was bootstrapped with).
    public init(configuration: GroupdConfiguration, logOutput: LogOutput) {
        let paths = GroupdService.methodPaths
        self.paths = Set(paths)
        self.metrics = configuration.metrics.map { _ in GroupdMetrics(methods: paths) }
        self.logOutput = logOutput
        self.accessLog = AccessLog(settings: configuration.accessLog, output: logOutput)
    }

    /// No metrics, no access log, lines to standard error at `info`.
    public static var disabled: ServiceTelemetry {
        ServiceTelemetry(configuration: .defaults, logOutput: LogOutput())
    }

    /// Puts the reloadable settings (`access_log`, `log`) of `configuration` in force.
    public func apply(_ configuration: GroupdConfiguration) {
        logOutput.apply(configuration.log)
        accessLog.apply(configuration.accessLog)
    }

    // MARK: CallObserver

    /// Calls are observed while metrics are kept or the access log is on.
    public var observesCalls: Bool { metrics != nil || accessLog.isEnabled }

    public func connectionOpened() { metrics?.connections.increment() }
    public func connectionClosed() { metrics?.connections.decrement() }
    public func streamOpened() { metrics?.streams.increment() }
    public func streamClosed() { metrics?.streams.decrement() }
    public func callStarted(path: String) { metrics?.inFlight.increment() }
    public func defenceTriggered(_ defence: TransportDefence) { metrics?.transportDefence(defence) }

    public func callFinished(_ call: FinishedCall) {
        let reason = call.status.code == .ok ? nil : call.annotations?.values.reason
        if let metrics {
            metrics.inFlight.decrement()
            metrics.callFinished(path: call.path, code: call.status.code, reason: reason, nanoseconds: call.durationNanoseconds,
                callProtocol: call.callProtocol)
        }
        if accessLog.isEnabled {
            accessLog.record(call, method: paths.contains(call.path) ? call.path : GroupdMetrics.unknownMethod)
        }
    }
}

extension GroupdService {
    /// Every method path the router of ``makeRouter()`` serves: the health service's and the API's.
    public static var methodPaths: [String] {
        Set(Grpc_Health_V1_Health.allMethods.map(\.path) + GroupAPI.allMethods.map(\.path)).sorted()
    }
}
