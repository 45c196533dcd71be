import GRPCServer
import GroupService
import Logging
import ServiceLifecycle
import UnixSignals

/// Reloads the configuration file on every SIGHUP until graceful shutdown (see
/// `GroupdService.reload(path:)`): an invalid file is refused with a log line and the
/// configuration in force stays. With TLS, the certificate files are read again after each
/// reload the service accepted (``reloadServerTLS(_:service:configPath:logger:)``).
struct ReloadOnSignal: Service {
    /// The SIGHUP sequence, created as soon as the configuration is loaded so that an early
    /// SIGHUP is caught instead of ending the process (one during start-up is handled once
    /// serving begins).
    let signals: UnixSignalsSequence
    /// The service whose configuration is reloaded.
    let service: GroupdService
    /// The configuration file to read again.
    let path: String
    /// The listener's TLS credentials, reloaded with the file; `nil` for h2c.
    var tls: ServerTLS? = nil
    /// Where the TLS reload is logged.
    var logger = Logger(label: "groupd")

    /// Reload on each SIGHUP until graceful shutdown.
    func run() async throws {
        for await _ in signals.cancelOnGracefulShutdown() {
            let outcome = await service.reload(path: path)
            if outcome != nil, let tls { reloadServerTLS(tls, service: service, configPath: path, logger: logger) }
        }
    }
}
