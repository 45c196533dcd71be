import Dispatch
import Foundation
import GroupModel
import GroupStore
import GroupStoreSQL
import Logging
import NIOCore
import PostgresNIO
import Synchronization

/// Delivers every event committed to the database, by any node, to this node's observers: each
/// app's in `event_id` order, each once.
///
/// - Per app it keeps a **mark**: the highest `event_id` delivered (at start, the app's head in
///   `app_event_heads`: what was committed before this node started is backlog, read by streams
///   from the table).
/// - After another node's commit, its doorbell notifies ``PostgresSchema/eventChannel`` with the
///   app and the `event_id` range it committed (``PostgresBackend``); unless the mark is at the
///   range's end already, the follower reads the app's events after the mark from the table,
///   delivers them and moves the mark.
/// - Every `PostgresStoreSettings.eventPollMilliseconds` it also reads the apps' heads and
///   catches up every app whose head is past its mark: a doorbell lost (its node died after the
///   commit, or the notification connection failed) delays those events by one poll at most.
/// - This node's commits arrive through ``publishLocal(_:previousHeads:deliver:)`` with their events in hand.
///   An app's `event_id`s are dense and in commit order (each batch takes them from the app's
///   ticket row in its last statement, ``PostgresStreamTail``), so every id below the batch's
///   first one is committed already: when the mark is lower, the ids between are read from the
///   table and delivered first.
/// - All of it runs on one serial queue, so an app's deliveries never interleave. Its statements
///   run on its connection's event loop while the queue waits for them (`PostgresSession`'s
///   blocking forms): the writer's `publish` waits on the queue, off the event loops.
/// - When the listening connection is lost, it reconnects (with back-off) and catches every
///   known app up from the table: a notification missed meanwhile loses nothing.
final class PostgresEventFollower: @unchecked Sendable {
    // @unchecked Sendable: every mutable property is touched on `queue` only.
    private let settings: PostgresStoreSettings
    private let eventLoop: any EventLoop
    private let logger: Logger
    private let session: PostgresSession
    private let queue = DispatchQueue(label: "groupd.postgres.events")
    private var marks: [String: Int64] = [:]
    private var deliver: (@Sendable ([LoggedEvent]) -> Void)?
    /// Per app, the highest `room_messages.id` read; and where room messages go.
    private var roomMarks: [String: Int64] = [:]
    private var deliverRooms: (@Sendable ([GroupMessage]) -> Void)?
    /// This process, in the `node` column of the room messages it relays.
    let nodeID = UUID().uuidString
    /// The server processes of this node's writer and room relay: their notifications are this
    /// node's own commits, which ``publishLocal(_:deliver:)`` (or the sender) delivers already.
    private let ownProcesses = Mutex<Set<Int32>>([])

    /// The connection of this node's writer or relay is now served by `pid` (`old`: before).
    func own(_ pid: Int32, replacing old: Int32?) {
        ownProcesses.withLock { processes in
            if let old { processes.remove(old) }
            processes.insert(pid)
        }
    }
    private var listener: PostgresConnection?
    private var stopped = false
    private var reconnectDelay = 0.05
    /// Whether the next poll of the heads is scheduled.
    private var polling = false
    /// Reads of the events table (on the queue).
    private var tableReads = 0
    /// The most rows one catch-up read takes (it reads again until it is short).
    static let pageSize = 1000

    init(settings: PostgresStoreSettings, eventLoop: any EventLoop, logger: Logger, session: PostgresSession) {
        self.settings = settings
        self.eventLoop = eventLoop
        self.logger = logger
        self.session = session
    }

    /// Starts listening and following: from now on other nodes' events go to `deliver`.
    func start(deliver: @escaping @Sendable ([LoggedEvent]) -> Void) {
        queue.sync {
            self.deliver = deliver
            do {
                try listen()
                marks = try heads()
            } catch {
                logger.warning("cannot follow other nodes' commits yet", metadata: ["error": "\(error)"])
                scheduleReconnect()
            }
            schedulePoll()
        }
    }

    /// Starts following relayed AVChatRoom messages: from now on other nodes' go to `deliver`.
    func startRooms(deliver: @escaping @Sendable ([GroupMessage]) -> Void) {
        queue.sync {
            deliverRooms = deliver
            do {
                for row in try session.rowsBlocking("SELECT app_id, max(id) FROM room_messages GROUP BY app_id") {
                    roomMarks[try row.text(0)] = try row.int64(1)
                }
            } catch {
                logger.warning("cannot follow other nodes' room messages yet", metadata: ["error": "\(error)"])
            }
        }
    }

    func stop() {
        queue.sync {
            stopped = true
            if let listener { try? listener.close().wait() }
            listener = nil
            session.disconnectBlocking()
        }
    }

    /// The database answers again after an outage: listen again if needed and catch up.
    func recovered() {
        queue.async { self.reconnect() }
    }

    /// Delivers a local batch's events, after the events of other nodes that precede them.
    /// `previousHeads`: per app, its head before the batch; when the mark reached it, nothing
    /// was committed elsewhere since, and the table is not read (other apps' ids, from the same
    /// sequence, leave gaps in an app's ids that need no read).
    func publishLocal(_ events: [LoggedEvent], previousHeads: [String: Int64], deliver: ([LoggedEvent]) -> Void) {
        queue.sync {
            var start = 0
            while start < events.count {
                let app = events[start].event.appID
                var end = start + 1
                while end < events.count, events[end].event.appID == app { end += 1 }
                let run = events[start..<end]
                let mark = marks[app] ?? 0
                if let first = run.first?.eventID, mark < first - 1, mark < previousHeads[app] ?? Int64.max {
                    // Events of the app committed elsewhere before this batch, not delivered yet.
                    do {
                        var after = mark
                        while true {
                            let gap = try read(app: app, after: after, before: first)
                            if !gap.isEmpty { deliver(gap) }
                            guard gap.count == Self.pageSize, let last = gap.last?.eventID else { break }
                            after = last
                        }
                    } catch {
                        logger.warning("cannot read other nodes' events", metadata: ["app": "\(app)", "error": "\(error)"])
                    }
                }
                let fresh = run.filter { $0.eventID > mark }
                if !fresh.isEmpty { deliver(Array(fresh)) }
                marks[app] = max(mark, run.last?.eventID ?? mark)
                start = end
            }
        }
    }

    /// Reads and delivers the app's events committed so far, before returning.
    /// - Throws: The read's failure.
    func catchUp(app: String) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            queue.async { continuation.resume(with: Result { try self.catchUp(app: app, throwing: true) }) }
        }
    }

    /// How many times the events table was read so far, for the tests: a doorbell for events
    /// delivered already makes no read.
    var tableReadCount: Int { queue.sync { tableReads } }

    private func isOwn(_ pid: Int32) -> Bool {
        ownProcesses.withLock { $0.contains(pid) }
    }

    // MARK: On the queue

    private func heads() throws -> [String: Int64] {
        var heads: [String: Int64] = [:]
        for row in try session.rowsBlocking("SELECT app_id, last_event_id FROM app_event_heads") {
            heads[try row.text(0)] = try row.int64(1)
        }
        return heads
    }

    private func listen() throws {
        let connection = try PostgresConnection.connect(
            on: eventLoop, configuration: try settings.connectionConfiguration(), id: 3, logger: logger
        ).wait()
        // Closed when LISTEN fails (the server went away meanwhile): see PostgresSession.open().
        var listening = false
        defer { if !listening { try? connection.close().wait() } }
        connection.addListener(channel: PostgresSchema.eventChannel) { [weak self] _, notification in
            guard let follower = self, !follower.isOwn(notification.backendPID) else { return }
            let (app, last) = Self.parseDoorbell(notification.payload)
            follower.queue.async {
                // A range this node delivered already (a poll or an earlier doorbell read it).
                if let last, let mark = follower.marks[app], mark >= last { return }
                try? follower.catchUp(app: app)
            }
        }
        connection.addListener(channel: PostgresSchema.roomChannel) { [weak self] _, notification in
            guard let follower = self, !follower.isOwn(notification.backendPID) else { return }
            let app = notification.payload
            follower.queue.async { follower.catchUpRooms(app: app) }
        }
        for channel in [PostgresSchema.eventChannel, PostgresSchema.roomChannel] {
            let query = connection.query(PostgresQuery(unsafeSQL: "LISTEN \(channel)"), logger: logger)
            _ = try waitBlocking(on: EventLoopTaskExecutor(connection.eventLoop)) {
                try await PostgresSession.answer(query, of: connection)
            }
        }
        connection.closeFuture.whenComplete { [weak self] _ in
            guard let follower = self else { return }
            follower.queue.async { follower.lost(connection) }
        }
        listener = connection
        listening = true
        reconnectDelay = 0.05
    }

    /// The app and the last `event_id` a doorbell's payload names (`"<first> <last> <app>"`); a
    /// payload of another form is an app id alone (`last` `nil`: read whatever is new).
    static func parseDoorbell(_ payload: String) -> (app: String, last: Int64?) {
        let parts = payload.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, Int64(parts[0]) != nil, let last = Int64(parts[1]), !parts[2].isEmpty else {
            return (payload, nil)
        }
        return (String(parts[2]), last)
    }

    private func schedulePoll() {
        guard !stopped, !polling else { return }
        polling = true
        queue.asyncAfter(deadline: .now() + .milliseconds(settings.eventPollMilliseconds)) {
            self.polling = false
            self.poll()
        }
    }

    /// Reads the apps' heads and catches up every app with events past its mark; schedules the
    /// next poll (also when the database does not answer: the poll is the backstop).
    private func poll() {
        guard !stopped else { return }
        defer { schedulePoll() }
        guard deliver != nil, let heads = try? heads() else { return }
        for (app, head) in heads.sorted(by: { $0.key < $1.key }) where head > (marks[app] ?? 0) {
            try? catchUp(app: app)
        }
    }

    private func lost(_ connection: PostgresConnection) {
        guard !stopped, listener === connection else { return }
        listener = nil
        logger.warning("lost the connection that listens for other nodes' commits; reconnecting")
        scheduleReconnect()
    }

    private func scheduleReconnect() {
        guard !stopped else { return }
        let delay = reconnectDelay
        reconnectDelay = min(reconnectDelay * 2, 2)
        queue.asyncAfter(deadline: .now() + delay) { self.reconnect() }
    }

    /// Listens again (if the connection is gone) and catches every app up.
    private func reconnect() {
        guard !stopped else { return }
        do {
            if listener == nil || listener?.isClosed == true {
                listener = nil
                try listen()
            }
            // An app first written while this node could not listen: from its start.
            for app in try heads().keys where marks[app] == nil { marks[app] = 0 }
            for app in marks.keys.sorted() { try? catchUp(app: app) }
            for app in roomMarks.keys.sorted() { catchUpRooms(app: app) }
        } catch {
            scheduleReconnect()
        }
    }

    /// Reads and delivers the app's events after its mark; a failed read is logged (the next
    /// notification or reconnection catches up), or thrown when `throwing`.
    private func catchUp(app: String, throwing: Bool = false) throws {
        guard !stopped, let deliver else { return }
        do {
            while true {
                let mark = marks[app] ?? 0
                let events = try read(app: app, after: mark, before: nil)
                if let last = events.last?.eventID {
                    deliver(events)
                    marks[app] = last
                }
                if events.count < Self.pageSize { return }
            }
        } catch {
            if throwing { throw error }
            logger.warning("cannot read other nodes' events", metadata: ["app": "\(app)", "error": "\(error)"])
        }
    }

    /// Reads and delivers the app's room messages relayed by other nodes after its mark (rows
    /// relayed by this node were delivered when sent).
    private func catchUpRooms(app: String) {
        guard !stopped, let deliverRooms else { return }
        do {
            while true {
                var messages: [GroupMessage] = []
                var last: Int64?
                var count = 0
                for row in try session.rowsBlocking(
                    """
                    SELECT id, node, group_id, message_id, sender_id, sender_name_card, client_message_id, type, text,
                        payload, priority, time
                    FROM room_messages WHERE app_id = ? AND id > ? ORDER BY id LIMIT \(Self.pageSize)
                    """, [.text(app), .integer(roomMarks[app] ?? 0)]
                ) {
                    last = try row.int64(0)
                    count += 1
                    guard try row.text(1) != nodeID else { continue }
                    messages.append(GroupMessage(
                        appID: app, groupID: try row.text(2), sequence: 0, messageID: try row.text(3),
                        senderID: try row.text(4), senderNameCard: try row.text(5),
                        content: MessageContent(
                            type: try row.text(7), text: try row.text(8), payload: try row.blob(9),
                            priority: try Rows.parse(row.text(10), MessagePriority.init(rawValue:)),
                            clientMessageID: try row.optionalText(6)),
                        time: Timestamp(millisecondsSince1970: try row.int64(11))))
                }
                guard let last else { return }
                roomMarks[app] = last
                if !messages.isEmpty { deliverRooms(messages) }
                if count < Self.pageSize { return }
            }
        } catch {
            logger.warning("cannot read other nodes' room messages", metadata: ["app": "\(app)", "error": "\(error)"])
        }
    }

    private func read(app: String, after: Int64, before: Int64?) throws -> [LoggedEvent] {
        tableReads += 1
        return try session.blocking { session in
            try await session.readTransaction {
                try await PostgresEventRows.loggedEvents(
                    session, app: app,
                    where: "e.event_id > ?" + (before == nil ? "" : " AND e.event_id < ?")
                        + " ORDER BY e.event_id LIMIT \(Self.pageSize)",
                    arguments: [.integer(after)] + (before.map { [PGValue.integer($0)] } ?? []))
            }
        }
    }
}
