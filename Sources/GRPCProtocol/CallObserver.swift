/// Told by the transport when connections, streams and calls begin and end: the hook for
/// metrics and access logs. The transport knows nothing of what the observer does with it.
///
/// Every method is called on the event loop of the connection concerned, so it must be cheap
/// and never block: count with atomics, hand slow work elsewhere.
public protocol CallObserver: Sendable {
    /// Whether calls are observed now (read once per call, as it starts). When false the call
    /// gets no annotations, no start time and no ``callStarted(path:)``/``callFinished(_:)``.
    var observesCalls: Bool { get }
    /// A client connection was accepted (one refused for `maxConnections` is reported opened and
    /// closed at once).
    func connectionOpened()
    /// A connection observed by ``connectionOpened()`` closed.
    func connectionClosed()
    /// An HTTP/2 stream opened (its request headers began).
    func streamOpened()
    /// A stream observed by ``streamOpened()`` closed, reset, or was lost with its connection.
    func streamClosed()
    /// A call's request headers are in: it is under way from now on.
    /// - Parameter path: The `:path` the client sent (not necessarily a registered method).
    func callStarted(path: String)
    /// A call started by ``callStarted(path:)`` has its outcome: its status is decided (the
    /// trailers may still be queued behind response messages), or it was cancelled by the client,
    /// its deadline or the loss of its connection.
    func callFinished(_ call: FinishedCall)
    /// A defence against hostile clients acted: it ended a connection or refused a call.
    func defenceTriggered(_ defence: TransportDefence)
}

extension CallObserver {
    /// Observers that do not count defences ignore them.
    public func defenceTriggered(_ defence: TransportDefence) {}
}

/// A defence of the transport against hostile clients (the transport's `TransportLimits`), as counted by the
/// call observer: `groupd_transport_<name>_total`.
public struct TransportDefence: Sendable, Hashable, CustomStringConvertible {
    /// The counter's name without the `groupd_transport_` prefix and the `_total` suffix.
    public let name: String

    private init(_ name: String) { self.name = name }

    public var description: String { name }

    /// A connection closed for not sending its preface and SETTINGS within the preface timeout.
    public static let prefaceTimeout = TransportDefence("preface_timeouts")
    /// A connection closed for never opening a stream within the unused-connection timeout.
    public static let unusedConnectionTimeout = TransportDefence("idle_timeouts")
    /// A connection without an open stream evicted to make room for a new one at `maxConnections`.
    public static let idleEviction = TransportDefence("idle_evictions")
    /// A connection refused at accept: `maxConnections` open, each with a stream open.
    public static let connectionRefused = TransportDefence("connections_refused")
    /// A call refused because `maxUnauthenticatedCalls` calls without a verified token are in flight.
    public static let unauthenticatedCallRefused = TransportDefence("unauthenticated_refused")
    /// A stream waiting to send to a client that does not read was reset with
    /// RST_STREAM(ENHANCE_YOUR_CALM): its connection (or the server) held more queued bytes than
    /// allowed.
    public static let stalledStreamReset = TransportDefence("stalled_streams_reset")
    /// A new stream was refused with RST_STREAM(REFUSED_STREAM): its connection had to shed
    /// stalled streams and is not yet under half its queued-bytes cap.
    public static let queuedBytesStreamRefused = TransportDefence("queued_bytes_streams_refused")
    /// A connection with bytes queued sent none of them for the stalled-write timeout and was
    /// closed after GOAWAY(ENHANCE_YOUR_CALM).
    public static let stalledConnectionClosed = TransportDefence("stalled_connections_closed")
    /// A request header field over nghttp2's HPACK limit (65536 bytes on the wire) was replaced
    /// before decoding, so only its stream was refused (RESOURCE_EXHAUSTED).
    public static let oversizedHeaderFieldRefused = TransportDefence("oversized_header_fields_refused")
    /// A connection ended with GOAWAY `ENHANCE_YOUR_CALM` for resetting streams (or making the
    /// server refuse them) faster than the reset budget allows (rapid reset, CVE-2023-44487).
    public static let resetFlood = TransportDefence("reset_flood_goaways")

    /// Every defence (metrics make their counters in advance, so a scrape shows zeros).
    public static let all: [TransportDefence] = [
        .prefaceTimeout, .unusedConnectionTimeout, .idleEviction, .connectionRefused, .unauthenticatedCallRefused,
        .stalledStreamReset, .queuedBytesStreamRefused, .stalledConnectionClosed, .oversizedHeaderFieldRefused,
        .resetFlood,
    ]
}

/// What the transport knows of a finished call.
public struct FinishedCall: Sendable {
    /// The `:path` the client sent (not necessarily a registered method).
    public var path: String
    /// The status the call ended with (`CANCELLED` when the client reset the stream or the
    /// connection was lost before an outcome).
    public var status: GRPCStatus
    /// From the request headers to the outcome, in nanoseconds.
    public var durationNanoseconds: Int64
    /// The client's address, `ip:port` (`[ip]:port` for IPv6).
    public var peer: String
    /// The request metadata.
    public var metadata: Metadata
    /// What the handler told of the call (app, operator, error reason).
    public var annotations: CallAnnotations?
    /// The protocol the call came in.
    public var callProtocol: CallProtocol

    /// Creates a record (the transport does; tests may too).
    public init(
        path: String, status: GRPCStatus, durationNanoseconds: Int64, peer: String, metadata: Metadata,
        annotations: CallAnnotations?, callProtocol: CallProtocol = .grpc
    ) {
        self.callProtocol = callProtocol
        self.path = path
        self.status = status
        self.durationNanoseconds = durationNanoseconds
        self.peer = peer
        self.metadata = metadata
        self.annotations = annotations
    }
}

/// The protocol of a call: what the `protocol` label of the metrics and the access log say.
public enum CallProtocol: String, Sendable, Hashable, CaseIterable {
    /// gRPC over HTTP/2.
    case grpc
    /// Connect (JSON or binary protobuf over HTTP/1.1 or HTTP/2).
    case connect
}
