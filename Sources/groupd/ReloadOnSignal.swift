import GroupService
import ServiceLifecycle
import UnixSignals

/// Reloads the configuration file on every SIGHUP until graceful shutdown (see
/// ``GroupdService/reload(path:)``): an invalid file is refused with a log line and the
/// configuration in force stays.
struct ReloadOnSignal: Service {
    /// The SIGHUP sequence, created as soon as the configuration is loaded so that an early
    /// SIGHUP is caught instead of ending the process (one during start-up is handled once
    /// serving begins).
    let signals: UnixSignalsSequence
    /// The service whose configuration is reloaded.
    let service: GroupdService
    /// The configuration file to read again.
    let path: String


    /// Reload on each SIGHUP until graceful shutdown.
    func run() async throws {
        for await _ in signals.cancelOnGracefulShutdown() {
            await service.reload(path: path)
        }
    }
}
