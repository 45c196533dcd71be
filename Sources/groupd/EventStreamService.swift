import GroupService
import ServiceLifecycle

/// The store's upkeep as a lifecycle service: every minute it expires due applications and
/// invitations (committing their APPLICATION_EXPIRED events), purges events past each app's
/// `event_retention_seconds` and messages past its `message_retention_seconds`; every 20 seconds
/// it renews the AVChatRoom presences of the viewers whose streams this node holds; every 100 ms
/// it reports the due read receipt batches (MESSAGE_READ_RECEIPT); at graceful
/// shutdown it stops and ends every `Subscribe` stream (UNAVAILABLE with its resume cursor)
/// before the server drains (services shut down in reverse order, and this one comes after the
/// server).
struct EventStreamService: Service {
    let service: GroupdService

    func run() async throws {
        await cancelWhenGracefulShutdown {
            await withDiscardingTaskGroup { group in
                group.addTask { await service.runEventRetention() }
                group.addTask { await service.runPresenceRenewal() }
                group.addTask { await service.runReadReceiptFlush() }
            }
        }
        service.events.shutdown()
    }
}
