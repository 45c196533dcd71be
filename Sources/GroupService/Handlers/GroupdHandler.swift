import GroupModel
import GroupStore
import Logging

/// The handler of one proto service: its `register(in:)` adds exactly that service's methods to
/// the router, and its RPC entry methods run over the shared context, ``GroupdService``.
///
/// The extension forwards the shared context's stored properties (`store`, `clock`, ...), so a
/// handler's body reads them as the service's own did; the service's methods (`mutate`,
/// `loadGroup`, the views) are called on ``service`` or on `GroupdService`.
protocol GroupdHandler: Sendable {
    /// The shared context: store, clock, configuration, policy, events, telemetry, and the helpers
    /// several services use.
    var service: GroupdService { get }

    /// Registers every method of the handler's proto service, and no other.
    /// - Parameter routes: The router being built; each method's path is marked implemented.
    func register(in routes: inout Routes)
}

extension GroupdHandler {
    /// The service's store.
    var store: Store { service.store }
    /// The service's time source.
    var clock: any WallClock { service.clock }
    /// Where the service logs unexpected failures.
    var logger: Logger { service.logger }
    /// AVChatRoom membership: audiences, presences, online counts.
    var rooms: LiveRooms { service.rooms }
    /// The AVChatRoom message rates and recent client message ids this node holds in memory.
    var roomMessages: RoomMessageLimiter { service.roomMessages }
    /// The read receipts waiting to be reported to senders.
    var readReceipts: ReadReceiptBatcher { service.readReceipts }
    /// The policy plugins' per-app chains.
    var policy: ServicePolicy { service.policy }
    /// The event stream's fan-out.
    var events: EventHub { service.events }
    /// Metrics, access log and log settings.
    var telemetry: ServiceTelemetry { service.telemetry }
}
