import Dispatch
import GRPCProtocol
import GroupAPI
import GroupModel
import GroupStore
import Logging
import NIOCore
import Synchronization

/// The event stream's fan-out: every committed `group_events` row (whatever wrote it) and every
/// AVChatRoom message reaches the live `Subscribe` streams it is for, from memory.
///
/// - The store calls ``publish(_:)`` once per commit, in commit order, with the committed events
///   (as its mutations wrote them); the hub routes them on one serial queue, so every stream sees items
///   in `event_id` order. Each item is encoded once and the same bytes are queued on every stream
///   (`ServerStreamWriter.tryWrite`, never waiting): a stream whose bounded queue is full is
///   ended with its cursor (``StreamEnd/tooSlow(_:)``).
/// - Routing state per user stream: the groups it receives (from the stored memberships when it
///   subscribed, then kept current by the membership events it routes: joins add a group before
///   the join is delivered, kicks and quits remove it after), with the join point and the
///   receive option. Indexes by group and by user make one item cost its recipients only.
/// - A topic's items (group id `<community>@TOPIC#_…`, the topic's own sequence) reach the
///   streams of the community's members, with the community's receive option; their join point
///   is compared by `event_id`, never the community's sequence with the topic's.
/// - Meeting member-change tips never reach user streams; AVChatRoom member-change tips reach
///   them at most ``Settings/avChatRoomMemberEventsPerSecond`` per room (the firehose gets all).
public final class EventHub: Sendable {
    /// Tunables.
    public struct Settings: Sendable {
        /// The most live items a stream keeps while it catches up from the store; beyond, it is
        /// ended as too slow.
        public var pendingLimit: Int = 1024
        /// How many rows one backlog read examines.
        public var backlogPageSize: Int = 256
        /// AVChatRoom member-change tips delivered per room and second to user streams.
        public var avChatRoomMemberEventsPerSecond: Int = 10

        /// The defaults.
        public init() {}
    }

    /// One group a user stream receives, shared by the stream's route and the group's index (so
    /// routing an item to the group's streams reads it without a lookup per stream).
    final class GroupView {
        /// The route of the stream (which owns its views).
        unowned let route: Route
        /// The stream (held here too, so that routing reads it without going through `route`).
        let subscriber: EventSubscriber
        /// Items of the group with a greater sequence reach the stream.
        let joinSequence: Int64
        /// Items of the group's topics (a Community's; each topic has a sequence of its own, not
        /// comparable with ``joinSequence``) with a greater `event_id` reach the stream: the
        /// join's `event_id` for a join routed live, the memberships' watermark for stored
        /// memberships (the stream's store read after them delivers the items up to it).
        let joinEventID: Int64
        /// Whether messages reach it.
        var receiveOption: ReceiveOption
        /// The user's role in the group, and in a community the user's permission groups: the
        /// items of a private topic reach the owner, the admins and the members in its audience
        /// (`LoggedEvent.audience`).
        var role: MemberRole
        var permissionGroups: [String]

        /// A view of a group for `route`.
        init(
            route: Route, joinSequence: Int64, joinEventID: Int64, receiveOption: ReceiveOption, role: MemberRole,
            permissionGroups: [String]
        ) {
            self.route = route
            self.subscriber = route.subscriber
            self.joinSequence = joinSequence
            self.joinEventID = joinEventID
            self.receiveOption = receiveOption
            self.role = role
            self.permissionGroups = permissionGroups
        }

        /// Whether an item with `audience` reaches the stream (`nil`: every member's item).
        func admits(_ audience: Set<String>?) -> Bool {
            Group.audience(audience, admits: role, inGroups: permissionGroups)
        }
    }

    /// The routing state of one stream.
    final class Route {
        /// The stream.
        let subscriber: EventSubscriber
        /// The groups it receives; `nil` until the stored memberships are installed.
        var groups: [String: GroupView]?
        /// Membership items of the user routed before the memberships were installed.
        var unsettled: [LoggedEvent] = []

        /// A route with no groups installed yet.
        init(subscriber: EventSubscriber) {
            self.subscriber = subscriber
        }
    }

    /// The routing indexes of one app.
    final class AppRoutes {
        /// The views of the user streams receiving each group, by stream id.
        var byGroup: [String: [Int: GroupView]] = [:]
        /// Each user's streams, by stream id.
        var byUser: [String: [Int: EventSubscriber]] = [:]
        /// The backend's firehose streams, by stream id.
        var firehoses: [Int: EventSubscriber] = [:]
    }

    /// An AVChatRoom of an app.
    struct RoomKey: Hashable {
        /// The app.
        var app: String
        /// The room.
        var group: String
    }

    /// Everything routing reads and changes, behind one lock (routing runs on ``fanout``;
    /// registration on the streams' tasks).
    struct State {
        /// Per-app indexes.
        var apps: [String: AppRoutes] = [:]
        /// Every registered stream's route, by stream id.
        var routes: [Int: Route] = [:]
        /// The last stream id given.
        var nextID = 0
        /// The cursor of the last stored item routed.
        var lastPublished: EventCursor?
        /// AVChatRoom member-change tips routed per room in the current second.
        var roomWindows: [RoomKey: (second: Int64, count: Int)] = [:]
        /// Set by ``shutdown()``: no new stream registers.
        var shuttingDown = false
    }

    /// The event log (`nil`: the store keeps none).
    let store: Store?
    /// The time source.
    let clock: any WallClock
    /// Where failures are logged.
    let logger: Logger
    /// Tunables.
    let settings: Settings
    /// The routing state.
    let state = Mutex(State())
    /// The serial queue every routing runs on.
    let fanout = DispatchQueue(label: "groupd.events.fanout", qos: .userInitiated)
    /// Called when a user stream registers or a user's last stream ends (``observePresence(_:)``).
    let presenceHandler = Mutex<(@Sendable (String, String, Timestamp) async -> Void)?>(nil)
    /// The `observeCommitted` handlers, each with its own queue.
    private let observers = Mutex<[(queue: DispatchQueue, handler: @Sendable ([LoggedEvent]) -> Void)]>([])

    /// Creates the hub and, with a store, subscribes it to the store's commits.
    /// - Parameters:
    ///   - store: The event log (`nil`: no stream can be served; `Subscribe` answers UNIMPLEMENTED).
    ///   - clock: The time source (retention cutoffs, AVChatRoom windows).
    ///   - logger: Where read failures of committed rows are logged.
    ///   - settings: Tunables.
    public init(store: Store?, clock: any WallClock, logger: Logger, settings: Settings = Settings()) {
        self.store = store
        self.clock = clock
        self.logger = logger
        self.settings = settings
        store?.observeCommittedEvents { [weak self] result in self?.publish(result) }
    }

    // MARK: Publishing

    /// Routes one commit's rows (called by the store on its writer, in commit order).
    func publish(_ result: Result<[LoggedEvent], any Error>) {
        fanout.async { [self] in
            switch result {
            case .success(let events): route(events)
            case .failure(let error): interruptAll(error)
            }
        }
    }

    /// Delivers an AVChatRoom message (not stored) to the room's current audience on this node,
    /// in order with the stored items. Its cursor is the last stored position routed, so a
    /// stream resuming from it misses no stored item.
    /// - Parameters:
    ///   - app: The app.
    ///   - groupID: The AVChatRoom.
    ///   - message: The message as the API shows it.
    public func publishRoomMessage(app: String, groupID: String, message: Groupd_V1_GroupMessage) {
        fanout.async { [self] in
            let (targets, cursor) = state.withLock { state -> ([EventSubscriber], EventCursor?) in
                guard let routes = state.apps[app] else { return ([], nil) }
                var targets: [EventSubscriber] = []
                for subscriber in routes.firehoses.values
                where subscriber.filter.accepts(kind: .groupMessage, groupID: groupID, addressed: false) {
                    targets.append(subscriber)
                }
                for view in routes.byGroup[groupID]?.values ?? [:].values {
                    let subscriber = view.subscriber
                    guard view.receiveOption != .notReceive,
                        subscriber.filter.accepts(kind: .groupMessage, groupID: groupID, addressed: false)
                    else { continue }
                    targets.append(subscriber)
                }
                return (targets, state.lastPublished)
            }
            var shared: ByteBuffer?
            for subscriber in targets {
                let position = cursor ?? subscriber.cursor
                let bytes: ByteBuffer
                if cursor != nil, let shared {
                    bytes = shared
                } else {
                    bytes = MessageCoding.encode(Groupd_V1_SubscribeResponse.with {
                        $0.message = message
                        $0.cursor = position.encoded
                    })
                    if cursor != nil { shared = bytes }
                }
                deliver(EventSubscriber.Offer(eventID: nil, cursor: position, bytes: bytes), to: subscriber)
            }
        }
    }

    /// Calls `handler` with every committed batch of rows, in commit order, after they are
    /// routed, on a queue of its own: a slow handler delays only itself, never publishing.
    public func observeCommitted(_ handler: @escaping @Sendable ([LoggedEvent]) -> Void) {
        let queue = DispatchQueue(label: "groupd.events.observer")
        observers.withLock { $0.append((queue, handler)) }
    }

    /// Waits until every item published before the call has been routed (tests, benchmarks).
    public func drain() async {
        await withCheckedContinuation { continuation in
            fanout.async { continuation.resume() }
        }
    }

    /// Ends every stream (UNAVAILABLE with its cursor) and refuses new ones: the server drains.
    public func shutdown() {
        let subscribers = state.withLock { state -> [EventSubscriber] in
            state.shuttingDown = true
            return state.routes.values.map(\.subscriber)
        }
        for subscriber in subscribers { end(subscriber, .shutdown) }
    }

    /// How many streams are registered (tests, benchmarks).
    public var streamCount: Int { state.withLock { $0.routes.count } }

    private func route(_ events: [LoggedEvent]) {
        for logged in events {
            let cursor = EventCursor(eventID: logged.eventID, time: logged.event.time)
            let targets = state.withLock { state -> [EventSubscriber] in
                state.lastPublished = cursor
                return Self.route(logged, state: &state, now: clock.now(), settings: settings)
            }
            if targets.isEmpty { continue }
            let bytes = Self.encode(logged, cursor: cursor)
            let offer = EventSubscriber.Offer(eventID: logged.eventID, cursor: cursor, bytes: bytes)
            for subscriber in targets { deliver(offer, to: subscriber) }
        }
        let observers = self.observers.withLock { $0 }
        for observer in observers { observer.queue.async { observer.handler(events) } }
    }

    private func deliver(_ offer: EventSubscriber.Offer, to subscriber: EventSubscriber) {
        if let reason = subscriber.offer(offer) { end(subscriber, reason) }
    }

    private func interruptAll(_ error: any Error) {
        logger.error("committed events could not be read; every stream resumes from the store", metadata: [
            "error": "\(error)",
        ])
        let subscribers = state.withLock { $0.routes.values.map(\.subscriber) }
        for subscriber in subscribers { end(subscriber, .interrupted(subscriber.cursor)) }
    }

    /// Unregisters a stream and ends it.
    func end(_ subscriber: EventSubscriber, _ reason: StreamEnd) {
        unregister(subscriber)
        subscriber.end(reason)
    }

    // MARK: Encoding

    /// The `SubscribeResponse` of a stored item.
    static func encode(_ logged: LoggedEvent, cursor: EventCursor) -> ByteBuffer {
        MessageCoding.encode(response(logged, cursor: cursor))
    }

    /// The `SubscribeResponse` of a stored item, decoded.
    static func response(_ logged: LoggedEvent, cursor: EventCursor) -> Groupd_V1_SubscribeResponse {
        .with {
            if logged.event.kind == .groupMessage, let stored = logged.message {
                $0.message = MessageMapping.message(stored)
            } else {
                $0.event = EventMapping.event(logged)
            }
            $0.cursor = cursor.encoded
        }
    }

    /// The `caught_up` marker.
    static func caughtUp(_ cursor: EventCursor) -> ByteBuffer {
        MessageCoding.encode(Groupd_V1_SubscribeResponse.with {
            $0.caughtUp = Groupd_V1_CaughtUp()
            $0.cursor = cursor.encoded
        })
    }
}
