import GRPCProtocol
import NIOCore

/// The HTTP/2 settings groupd announces and enforces, chosen for many small RPCs and a few
/// long-lived event streams per connection. `docs/TRANSPORT.md` explains each choice.
public struct HTTP2Settings: Sendable, Equatable {
    /// SETTINGS_MAX_CONCURRENT_STREAMS: calls in flight per connection. 256 covers the usual
    /// client fan-in (gRPC clients multiplex 100 by default) with room for event streams.
    public var maxConcurrentStreams: Int = 256
    /// SETTINGS_INITIAL_WINDOW_SIZE: bytes a client may send on one stream before the server
    /// takes them. 1 MiB lets a typical request arrive in one round trip.
    public var initialStreamWindowSize: Int = 1 << 20
    /// The connection-level receive window: 16 MiB, enough for every stream to be mid-request.
    public var connectionWindowSize: Int = 16 << 20
    /// SETTINGS_MAX_HEADER_LIST_SIZE: the request headers' size (names + values + 32 each).
    /// Larger header lists are refused with RESOURCE_EXHAUSTED.
    public var maxHeaderListSize: Int = 16 << 10

    /// The defaults above.
    public static var defaults: HTTP2Settings { HTTP2Settings() }
}

/// What the gRPC server needs to know to listen and serve.
public struct ServerConfiguration: Sendable {
    /// The address to listen on.
    public var host: String = "127.0.0.1"
    /// The TCP port; 0 picks a free one (see `GRPCServer.localPort`).
    public var port: Int = 50051
    /// The largest request message accepted; a larger length prefix ends the call with
    /// RESOURCE_EXHAUSTED before any of its bytes are buffered. Default 4 MiB, as in grpc-go.
    public var maxMessageBytes: Int = 4 << 20
    /// The HTTP/2 settings.
    public var http2: HTTP2Settings = .defaults
    /// Open connections at most; 0 = no limit. A connection accepted while this many are open
    /// takes the place of one without an open stream, which is evicted (the least advanced first:
    /// no valid preface yet, closed without a word; then never used; then idle the longest; those
    /// get GOAWAY `NO_ERROR`). When every open connection has a stream open, the new one is
    /// closed at once, before its preface is read (the client sees the connection fail and may
    /// retry).
    public var maxConnections: Int = 0
    /// Messages a server-streaming call may have queued before its writer waits.
    public var streamQueueCapacity: Int = 128
    /// Whether and from which size responses are compressed (requests in any supported
    /// encoding are always accepted).
    public var responseCompression: ResponseCompression = .defaults
    /// How long a graceful shutdown waits for calls in flight before closing connections.
    public var drainTimeout: TimeAmount = .seconds(10)
    /// Keepalive PINGs, idle and age limits, and the policing of client PINGs.
    public var keepalive: KeepaliveSettings = .defaults
    /// TLS for every connection (ALPN `h2`, client certificates when it asks for them); `nil`:
    /// plaintext HTTP/2 with prior knowledge (h2c).
    public var tls: ServerTLS? = nil
    /// How long a TLS handshake may take from the connection's start before it is closed.
    public var tlsHandshakeTimeout: TimeAmount = .seconds(120)
    /// Told about connections, streams and calls (metrics, access logs); `nil`: nobody.
    public var callObserver: (any CallObserver)? = nil
    /// Budgets and timeouts that keep hostile clients from exhausting the server.
    public var limits: TransportLimits = .defaults
    /// Whether Connect calls (JSON or binary protobuf over HTTP/1.1 or HTTP/2) are served beside
    /// gRPC on the same port (`ConnectProtocol`).
    public var connectEnabled: Bool = true
    /// JSON for the Connect protocol's messages; nil: Connect serves `application/proto` only.
    public var connectCodec: (any ConnectCodec)? = nil
    /// Files answered to HTTP/1.1 `GET` and `HEAD` requests before Connect sees them (the operator
    /// console's listener); nil: those requests get Connect's refusal, as on the gRPC port.
    public var staticFiles: StaticFiles? = nil

    /// The defaults above.
    public static var defaults: ServerConfiguration { ServerConfiguration() }

    /// Creates a configuration with the defaults.
    public init() {}
}

/// The transport's defences against hostile clients: budgets and timeouts, each with a default
/// that protects. `docs/TRANSPORT.md` ("Hostile clients") tells what each does on the wire.
public struct TransportLimits: Sendable, Equatable {
    // MARK: Slowloris: silent, half-open and unused connections

    /// A connection that has not sent the client connection preface and its first SETTINGS frame
    /// this long after it started (on TLS: after its handshake completed) is closed: with GOAWAY
    /// `PROTOCOL_ERROR` (debug data `preface_timeout`) when the preface arrived but not the
    /// SETTINGS, without a word when nothing valid did. Default 10 s.
    public var prefaceTimeout: TimeAmount = .seconds(10)
    /// A connection that has never opened a stream this long after it started (on TLS: after its
    /// handshake) gets GOAWAY `NO_ERROR` (debug data `idle_timeout`) and closes; `nil`: never.
    /// Connections that have served calls are ruled by `KeepaliveSettings.maxConnectionIdle`.
    /// Default 60 s.
    public var unusedConnectionTimeout: TimeAmount? = .seconds(60)

    // MARK: Unauthenticated work

    /// Calls in flight, over every connection, that carry no verified token: calls of methods
    /// that need none (health, reflection) until their stream closes, and calls of the other
    /// methods until their handler starts (and checks the token). A call above it is refused at
    /// once with `RESOURCE_EXHAUSTED` (``unauthenticatedCallsRefusal``), except a call of a
    /// method that needs a token whose token the router's verifier accepts. Default 256.
    public var maxUnauthenticatedCalls: Int = 256
    /// The status a call refused by ``maxUnauthenticatedCalls`` ends with.
    public var unauthenticatedCallsRefusal: GRPCStatus = GRPCStatus(
        .resourceExhausted, "too many calls without a verified token in flight; retry later, or send a valid token")

    // MARK: Clients that do not read
    // A zero flow-control window (SETTINGS_INITIAL_WINDOW_SIZE 0, no WINDOW_UPDATE) or a socket
    // left unread keeps every response queued on the server.

    /// Bytes one connection may hold queued for its client and not yet sent: response messages
    /// (with their gRPC prefixes) plus ``HTTP2Stream/waitingStreamBytes`` for each stream waiting
    /// to send. Past it, the connection's streams blocked by the client (window spent, or socket
    /// not writable) are reset with RST_STREAM(ENHANCE_YOUR_CALM), newest first, until it is under
    /// again, and it gets REFUSED_STREAM for new streams until it is under half. Default 4 MiB.
    public var maxQueuedBytesPerConnection: Int = 4 << 20
    /// The same across every connection of the server: a connection adding to a total above it
    /// sheds its blocked streams. Default 128 MiB.
    public var maxQueuedBytes: Int = 128 << 20
    /// A connection with bytes queued that sends none of them for this long (its client opened
    /// no window and read nothing) gets GOAWAY(ENHANCE_YOUR_CALM) and is closed. Default 30 s.
    public var stalledWriteTimeout: TimeAmount = .seconds(30)

    // MARK: Rapid reset
    // CVE-2023-44487: streams opened and at once reset cost the server a stream
    // each while the client pays a few bytes. Each connection has a token bucket; every stream
    // the client resets (RST_STREAM) and every stream the server must refuse or reset for the
    // client's fault takes a token. An empty bucket ends the connection with GOAWAY
    // ENHANCE_YOUR_CALM.

    /// Tokens a connection starts with, and the most it can hold: the resets allowed in a burst.
    public var resetBurst: Int = 200
    /// Tokens added back per second, up to ``resetBurst``: the sustained reset rate allowed.
    public var resetsPerSecond: Int = 100

    // MARK: Fairness
    // Between the connections of one event loop: a connection whose socket always has
    // bytes waiting (a flood, or just a heavy client) is read at most ``readsPerTurn`` times, each
    // read at most ``readBufferBytes``, before the loop turns to its other connections; what is
    // left waits in the socket (and TCP flow control slows the sender).

    /// Socket reads of one connection per event-loop turn (NIO's `maxMessagesPerRead`).
    public var readsPerTurn: Int = 4
    /// The largest single read, in bytes (a power of two; the read buffer starts at 2 KiB and
    /// grows up to it while reads fill it).
    public var readBufferBytes: Int = 64 << 10

    /// The defaults above.
    public static var defaults: TransportLimits { TransportLimits() }

    /// Creates the defaults.
    public init() {}
}
