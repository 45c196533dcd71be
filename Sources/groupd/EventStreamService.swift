import GroupService
import ServiceLifecycle

/// The event log's upkeep as a lifecycle service: purges events past each app's retention every
/// minute; at graceful shutdown it stops and ends every `Subscribe` stream (UNAVAILABLE with
/// its resume cursor) before the server drains (services shut down in reverse order, and this
/// one comes after the server).
struct EventStreamService: Service {
    let service: GroupdService

    func run() async throws {
        try? await cancelWhenGracefulShutdown {
            await service.runEventRetention()
        }
        service.events.shutdown()
    }
}
