import GRPCProtocol
import GroupModel
import GroupStore
import NIOCore
import Synchronization

/// What one `Subscribe` stream asks for.
struct StreamFilter: Sendable {
    /// The user whose stream it is; `nil` for the backend firehose (every event of the app).
    let userID: String?
    /// Only the group items of these groups (empty: all). A community's id selects its topics'
    /// items too; a topic's id selects that topic's only. Addressed notifications of other
    /// groups still pass on a user stream.
    let groupIDs: Set<String>
    /// Only events of these kinds (empty: all); messages are not events and pass.
    let kinds: Set<GroupEvent.Kind>
    /// No messages.
    let excludeMessages: Bool

    /// Whether the stream takes `logged`, once routing has decided it may reach the stream.
    func accepts(_ logged: LoggedEvent) -> Bool {
        accepts(kind: logged.event.reportedKind, groupID: logged.event.groupID, addressed: logged.event.recipient != .group)
    }

    /// Whether the stream takes an item of `kind` in `groupID` (`addressed`: not a group item).
    func accepts(kind: GroupEvent.Kind, groupID: String, addressed: Bool) -> Bool {
        if kind == .groupMessage {
            if excludeMessages { return false }
        } else if !kinds.isEmpty, !kinds.contains(kind) {
            return false
        }
        if !groupIDs.isEmpty, !groupIDs.contains(groupID),
            !(GroupID.communityID(ofTopic: groupID).map(groupIDs.contains) ?? false)
        {
            // A user stream keeps notifications addressed to the user from other groups.
            return userID != nil && addressed
        }
        return true
    }
}

/// Why a stream ended on the server's side.
enum StreamEnd: Sendable, Equatable {
    /// Its bounded queue was full: it resumes from the store with its cursor.
    case tooSlow(EventCursor)
    /// Committed items could not be read for live delivery: it resumes from the store.
    case interrupted(EventCursor)
    /// The server is shutting down.
    case shutdown
    /// The call is over (client gone or cancelled).
    case cancelled
}

/// One live `Subscribe` stream: its writer (the bounded queue), its filter, and where it is.
///
/// Phases: while catching up from the store, live items routed to it are kept in `pending`
/// (at most ``pendingLimit``); `goLive` hands them over after the backlog, skipping what the
/// backlog delivered, then `caught_up`; from then on items go straight to the writer with
/// `tryWrite`, never waiting: a full queue ends the stream (``StreamEnd/tooSlow(_:)``).
final class EventSubscriber: Sendable {
    /// A live item offered to the stream.
    struct Offer: Sendable {
        /// Its `event_id` (`nil`: an unstored AVChatRoom message, never part of a backlog).
        var eventID: Int64?
        /// The cursor after it.
        var cursor: EventCursor
        /// The encoded `SubscribeResponse`, shared by every stream it goes to.
        var bytes: ByteBuffer
    }

    /// Where the stream is.
    private enum Phase {
        /// Reading its backlog; live items are kept in `pending`.
        case catchingUp
        /// Live items go straight to the writer.
        case live
        /// Over.
        case ended
    }

    /// The stream's mutable state, behind its lock.
    private struct State {
        /// Where the stream is.
        var phase = Phase.catchingUp
        /// Live items kept while catching up.
        var pending: [Offer] = []
        /// The cursor of the last item queued.
        var cursor: EventCursor
        /// Why it ended, once it has.
        var end: StreamEnd?
        /// The handler given to ``whenEnded(_:)``.
        var onEnd: (@Sendable (StreamEnd) -> Void)?
    }

    /// The hub's id of the stream.
    let id: Int
    /// The app.
    let app: String
    /// What it asks for.
    let filter: StreamFilter
    /// Its bounded queue to the connection.
    let writer: ServerStreamWriter
    /// The most live items kept while catching up.
    let pendingLimit: Int
    /// The state.
    private let state: Mutex<State>

    /// A stream catching up from `start`.
    init(id: Int, app: String, filter: StreamFilter, writer: ServerStreamWriter, start: EventCursor, pendingLimit: Int) {
        self.id = id
        self.app = app
        self.filter = filter
        self.writer = writer
        self.pendingLimit = pendingLimit
        self.state = Mutex(State(cursor: start))
    }

    /// The cursor of the last item queued (or where the stream started).
    var cursor: EventCursor { state.withLock { $0.cursor } }

    /// How many live items wait in `pending` (tests).
    var pendingCount: Int { state.withLock { $0.pending.count } }

    /// Records that the backlog delivered everything through `cursor`.
    func advance(to cursor: EventCursor) {
        state.withLock { $0.cursor = cursor }
    }

    /// Offers a live item. Returns why the stream must end, if it must (the caller ends it).
    func offer(_ offer: Offer) -> StreamEnd? {
        state.withLock { state -> StreamEnd? in
            switch state.phase {
            case .ended:
                return nil
            case .catchingUp:
                if state.pending.count >= pendingLimit { return .tooSlow(state.cursor) }
                state.pending.append(offer)
                return nil
            case .live:
                // An item committed before the stream registered but routed after it went live
                // was delivered by the backlog already: every item up to the cursor has been.
                if let eventID = offer.eventID, eventID <= state.cursor.eventID { return nil }
                return Self.write(offer, state: &state, writer: writer)
            }
        }
    }

    /// Ends the catch-up: queues the pending items the backlog did not deliver, then
    /// `caughtUp` (encoded with the cursor it is given), and goes live. Returns why the stream
    /// must end, if it must.
    func goLive(caughtUp: (EventCursor) -> ByteBuffer) -> StreamEnd? {
        state.withLock { state -> StreamEnd? in
            guard state.phase == .catchingUp else { return nil }
            let pending = state.pending
            state.pending = []
            let delivered = state.cursor.eventID
            for offer in pending where offer.eventID.map({ $0 > delivered }) ?? false {
                if let end = Self.write(offer, state: &state, writer: writer) { return end }
            }
            let marker = Offer(eventID: nil, cursor: state.cursor, bytes: caughtUp(state.cursor))
            if let end = Self.write(marker, state: &state, writer: writer) { return end }
            state.phase = .live
            return nil
        }
    }

    /// Queues `offer` without waiting; returns why the stream must end, if it must.
    private static func write(_ offer: Offer, state: inout State, writer: ServerStreamWriter) -> StreamEnd? {
        switch writer.tryWrite(offer.bytes) {
        case .enqueued:
            // Every item up to a live item's cursor has been offered to this stream already.
            if offer.cursor.eventID >= state.cursor.eventID { state.cursor = offer.cursor }
            return nil
        case .full:
            return .tooSlow(state.cursor)
        case .closed:
            return .cancelled
        }
    }

    /// Ends the stream (once): runs the ``whenEnded(_:)`` handler.
    func end(_ reason: StreamEnd) {
        let onEnd = state.withLock { state -> (@Sendable (StreamEnd) -> Void)? in
            guard state.phase != .ended else { return nil }
            state.phase = .ended
            state.pending = []
            state.end = reason
            let onEnd = state.onEnd
            state.onEnd = nil
            return onEnd
        }
        onEnd?(reason)
    }

    /// Runs `handler` once when the stream ends (at once if it has): how a stream served
    /// without a waiting task learns its end.
    func whenEnded(_ handler: @escaping @Sendable (StreamEnd) -> Void) {
        let ended = state.withLock { state -> StreamEnd? in
            if let end = state.end { return end }
            state.onEnd = handler
            return nil
        }
        if let ended { handler(ended) }
    }
}
