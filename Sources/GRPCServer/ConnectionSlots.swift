import GRPCProtocol
import NIOCore
import Synchronization

/// What one connection is doing, published by its event loop for the thread that accepts new
/// connections: how far it has come (preface, first stream) and whether a stream is open. Read
/// only when `maxConnections` is reached, to pick the connection to evict.
final class ConnectionActivity: Sendable {
    /// How far a connection has come; a lower stage is evicted first.
    enum Stage: UInt8, Comparable {
        /// No complete preface yet (on TLS, maybe no handshake yet): nothing valid arrived.
        case opening = 0
        /// The preface is complete, but the client has never opened a stream.
        case unused = 1
        /// The client has opened streams.
        case used = 2

        static func < (lhs: Stage, rhs: Stage) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    private let stageValue = Atomic<UInt8>(Stage.opening.rawValue)
    private let openStreamsValue = Atomic<Int>(0)
    /// Since when (uptime nanoseconds) no stream has been open: the accept, or the last stream's end.
    private let idleSinceValue: Atomic<UInt64>

    /// A connection accepted at `now`.
    init(acceptedAt now: NIODeadline) {
        idleSinceValue = Atomic(now.uptimeNanoseconds)
    }

    /// How far the connection has come.
    var stage: Stage { Stage(rawValue: stageValue.load(ordering: .relaxed)) ?? .used }
    /// Streams open now.
    var openStreams: Int { openStreamsValue.load(ordering: .relaxed) }
    /// Since when no stream has been open (meaningful while ``openStreams`` is 0).
    var idleSince: NIODeadline { .uptimeNanoseconds(idleSinceValue.load(ordering: .relaxed)) }

    /// The client's preface is complete.
    func prefaceCompleted() {
        if stage == .opening { stageValue.store(Stage.unused.rawValue, ordering: .relaxed) }
    }

    /// A stream opened; `count` are open now.
    func streamOpened(openStreams count: Int) {
        if stage != .used { stageValue.store(Stage.used.rawValue, ordering: .relaxed) }
        openStreamsValue.store(count, ordering: .relaxed)
    }

    /// A stream closed; `count` are open now (`now` is the time when that is none).
    func streamClosed(openStreams count: Int, at now: NIODeadline?) {
        if let now { idleSinceValue.store(now.uptimeNanoseconds, ordering: .relaxed) }
        openStreamsValue.store(count, ordering: .relaxed)
    }
}

/// The open connections and the `maxConnections` rule, as a value without I/O: a connection
/// accepted while `limit` are open takes the slot of one without an open stream, which is evicted
/// (the least advanced first: no valid preface, then never used, then the longest idle; the oldest
/// among equals); only when every open connection has a stream open is the newcomer refused.
struct ConnectionSlots<Connection> {
    /// What the accept of a connection calls for.
    enum Admission {
        /// Take it.
        case accepted
        /// Take it, and evict this connection (which stays listed until it has closed).
        case acceptedEvicting(ObjectIdentifier, Connection, ConnectionActivity)
        /// Refuse it: every connection has a stream open.
        case refused
    }

    fileprivate struct Entry {
        var connection: Connection
        var activity: ConnectionActivity
    }

    /// Open connections at most; 0: no limit.
    let limit: Int
    private var open: [ObjectIdentifier: Entry] = [:]
    /// Connections told to leave; they keep their entry until they have closed, but no slot.
    private var evicting: Set<ObjectIdentifier> = []

    /// No connection yet.
    init(limit: Int) {
        self.limit = limit
    }

    /// Connections open (evicted ones still closing included).
    var count: Int { open.count }
    /// Every open connection.
    var connections: [Connection] { open.values.map(\.connection) }

    /// A connection was accepted: take it, evicting another if the limit is reached, or refuse it.
    mutating func admit(_ id: ObjectIdentifier, _ connection: Connection, activity: ConnectionActivity) -> Admission {
        guard limit > 0, open.count - evicting.count >= limit else {
            open[id] = Entry(connection: connection, activity: activity)
            return .accepted
        }
        // Evicted connections still closing hold no slot, but they are not let grow without end.
        guard evicting.count < limit, let victim = evictionCandidate() else { return .refused }
        evicting.insert(victim)
        open[id] = Entry(connection: connection, activity: activity)
        let entry = open[victim]!
        return .acceptedEvicting(victim, entry.connection, entry.activity)
    }

    /// A connection closed.
    mutating func remove(_ id: ObjectIdentifier) {
        open.removeValue(forKey: id)
        evicting.remove(id)
    }

    /// The connection to evict: no open stream, lowest stage, then idle the longest.
    func evictionCandidate() -> ObjectIdentifier? {
        var best: (id: ObjectIdentifier, stage: ConnectionActivity.Stage, since: NIODeadline)?
        for (id, entry) in open where !evicting.contains(id) {
            let activity = entry.activity
            guard activity.openStreams == 0 else { continue }
            let stage = activity.stage
            let since = activity.idleSince
            if let current = best, (current.stage, current.since.uptimeNanoseconds) <= (stage, since.uptimeNanoseconds) { continue }
            best = (id, stage, since)
        }
        return best?.id
    }
}

// Sendable when its connections are: the rest is values and `Sendable` activities.
extension ConnectionSlots: Sendable where Connection: Sendable {}
extension ConnectionSlots.Entry: Sendable where Connection: Sendable {}

/// The budget of calls in flight without a verified token, shared by every connection of a
/// server (``TransportLimits/maxUnauthenticatedCalls``): one atomic counter.
public final class UnauthenticatedCallBudget: Sendable {
    /// Calls at most.
    public let limit: Int
    private let inFlight = Atomic<Int>(0)

    /// A budget of `limit` calls.
    public init(limit: Int) {
        self.limit = limit
    }

    /// Calls holding a place now.
    public var count: Int { inFlight.load(ordering: .relaxed) }

    /// Takes a place; false when all `limit` are taken.
    func acquire() -> Bool {
        var current = inFlight.load(ordering: .relaxed)
        while current < limit {
            let (exchanged, original) = inFlight.compareExchange(
                expected: current, desired: current + 1, successOrdering: .relaxed, failureOrdering: .relaxed)
            if exchanged { return true }
            current = original
        }
        return false
    }

    /// Gives a place back.
    func release() {
        inFlight.subtract(1, ordering: .relaxed)
    }
}
