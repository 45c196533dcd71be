import GRPCProtocol
import NIOCore

/// The keepalive, idle, age and ping-policing rules of one connection, and its preface and
/// unused-connection timeouts, as a value without I/O: the connection reports what happens (bytes
/// read, the client's SETTINGS, streams opened and closed, PINGs, response frames sent) with the
/// event loop's time, and asks what to do when one of its timers fires. `KeepaliveSettings` and
/// `TransportLimits` explain each rule.
struct ConnectionManagement {
    /// What a timer's firing calls for.
    enum TimerAction: Equatable {
        /// Nothing now; run the same timer again at this time.
        case wait(until: NIODeadline)
        /// Nothing, and no timer: the next event that matters starts it again.
        case stop
        /// Send a PING and wait for an answer until this time (the PING timer).
        case sendPing(timeoutAt: NIODeadline)
        /// Send a graceful GOAWAY (first with the maximum stream id, then the last processed).
        case goAway
        /// Close the connection now.
        case close
    }

    /// How far the client's connection preface (RFC 9113 §3.4) has come.
    enum Preface: Equatable {
        /// Fewer than the 24 bytes of the client magic `PRI * HTTP/2.0…` have arrived.
        case awaitingMagic
        /// The magic arrived (nghttp2 checked it), the client's first SETTINGS frame has not.
        case awaitingSettings
        /// The client's SETTINGS arrived: the connection speaks HTTP/2.
        case complete
    }

    /// What the preface timer's firing calls for.
    enum PrefaceTimeoutAction: Equatable {
        /// The preface is complete: nothing to do.
        case satisfied
        /// Not due yet: run the timer again at this time.
        case wait(until: NIODeadline)
        /// Nothing valid arrived: close without a word (the peer may not speak HTTP/2 at all).
        case close
        /// The magic arrived but no SETTINGS: GOAWAY `PROTOCOL_ERROR`, then close.
        case goAwayAndClose
    }

    /// The length of the client magic, `PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`.
    static let clientMagicLength = 24

    /// What a client's PING calls for.
    enum PingVerdict: Equatable {
        /// Within the policy (or forgiven: the server sent a response frame since the last one).
        case allowed
        /// Too soon, counted (the count is given); tolerated so far.
        case strike(Int)
        /// The strike too many: GOAWAY `ENHANCE_YOUR_CALM` (`too_many_pings`) and close.
        case tooManyPings
    }

    /// A PING while no stream is open (and `permitWithoutStream` is false) is a strike when the
    /// previous one came less than this long before, as in grpc-go.
    static let pingWithoutStreamInterval = TimeAmount.hours(2)
    /// Strikes tolerated; the next one ends the connection (grpc-go's `maxPingStrikes`).
    static let maxPingStrikes = 2

    let settings: KeepaliveSettings
    let limits: TransportLimits
    /// When the connection started.
    let startedAt: NIODeadline
    /// When HTTP/2 started: at the connection's start, or on TLS once the handshake completed;
    /// `nil` until then. The preface and unused-connection timeouts count from here.
    private(set) var http2StartedAt: NIODeadline?
    /// How far the client's preface has come.
    private(set) var preface = Preface.awaitingMagic
    /// Bytes read while waiting for the magic.
    private var magicBytesRead = 0
    /// Whether the client has opened a stream on this connection.
    private(set) var everOpenedStream = false
    /// When the last bytes arrived from the client.
    private(set) var lastRead: NIODeadline
    /// When the server's unanswered keepalive PING went out; `nil` when none is outstanding.
    private(set) var pingSentAt: NIODeadline?
    /// Since when no stream is open; `nil` while one is.
    private(set) var idleSince: NIODeadline?
    /// When the client's last PING arrived.
    private var lastClientPing: NIODeadline?
    /// Client PINGs that broke the policy since the last forgiveness.
    private(set) var pingStrikes = 0
    /// Set when the server sends HEADERS or DATA: the next client PING is not checked and
    /// clears the strikes (a client pinging while it gets responses is measuring, not abusing).
    private var forgiveNextPing = false

    /// A connection starting now: no stream open, nothing read yet.
    init(settings: KeepaliveSettings, limits: TransportLimits = .defaults, now: NIODeadline) {
        self.settings = settings
        self.limits = limits
        self.startedAt = now
        self.lastRead = now
        self.idleSince = now
    }

    // MARK: Events

    /// Bytes arrived from the client.
    mutating func read(at now: NIODeadline) {
        lastRead = now
    }

    /// HTTP/2 starts now: at the connection's start, or once its TLS handshake completed.
    mutating func http2Started(at now: NIODeadline) {
        if http2StartedAt == nil { http2StartedAt = now }
    }

    /// `count` bytes were read and accepted by nghttp2 (which checks the magic and refuses a bad
    /// one as a protocol error).
    mutating func accepted(bytes count: Int) {
        guard preface == .awaitingMagic else { return }
        magicBytesRead += count
        if magicBytesRead >= Self.clientMagicLength { preface = .awaitingSettings }
    }

    /// The client sent a SETTINGS frame (not an ACK); the first completes its preface.
    mutating func clientSettingsReceived() {
        preface = .complete
    }

    /// A stream opened: the connection is not idle.
    mutating func streamOpened() {
        idleSince = nil
        everOpenedStream = true
    }

    /// The last open stream closed: the connection is idle from now.
    mutating func lastStreamClosed(at now: NIODeadline) {
        idleSince = now
    }

    /// The server sent HEADERS or DATA.
    mutating func responseFrameSent() {
        forgiveNextPing = true
    }

    /// The client sent a PING (not an ACK).
    /// - Parameters:
    ///   - now: When the PING arrived (compared with the previous client PING's time, and recorded
    ///     as it).
    ///   - hasOpenStreams: Whether a stream is open on the connection.
    mutating func clientPing(at now: NIODeadline, hasOpenStreams: Bool) -> PingVerdict {
        defer { lastClientPing = now }
        if forgiveNextPing {
            forgiveNextPing = false
            pingStrikes = 0
            return .allowed
        }
        guard let last = lastClientPing else { return .allowed }
        let interval = !hasOpenStreams && !settings.permitWithoutStream
            ? Self.pingWithoutStreamInterval : settings.minPingInterval
        guard now < last + interval else { return .allowed }
        pingStrikes += 1
        return pingStrikes > Self.maxPingStrikes ? .tooManyPings : .strike(pingStrikes)
    }

    // MARK: Timers

    /// When the keepalive timer first fires; `nil` when keepalive PINGs are off.
    var firstKeepaliveDeadline: NIODeadline? {
        settings.time.map { lastRead + $0 }
    }

    /// The keepalive timer fired: PING when nothing was read for `time`, else wait until then.
    mutating func keepaliveTimerFired(at now: NIODeadline) -> TimerAction {
        guard let time = settings.time else { return .stop }
        let due = lastRead + time
        if now < due { return .wait(until: due) }
        pingSentAt = now
        return .sendPing(timeoutAt: now + settings.timeout)
    }

    /// The keepalive PING's timeout fired: anything read since the PING went out (its ACK or any
    /// frame) proves the client alive, and the keepalive timer starts over; else close.
    mutating func pingTimeoutFired(at now: NIODeadline) -> TimerAction {
        guard let sent = pingSentAt else { return .stop }
        guard lastRead > sent else { return .close }
        pingSentAt = nil
        return settings.time.map { .wait(until: lastRead + $0) } ?? .stop
    }

    /// When the idle timer should fire; `nil` while a stream is open or when idleness is allowed.
    var idleDeadline: NIODeadline? {
        guard let limit = settings.maxConnectionIdle, let idleSince else { return nil }
        return idleSince + limit
    }

    /// The idle timer fired: GOAWAY when no stream has been open for `maxConnectionIdle`.
    func idleTimerFired(at now: NIODeadline) -> TimerAction {
        guard let due = idleDeadline else { return .stop }
        return now < due ? .wait(until: due) : .goAway
    }

    /// When the preface timer should fire; `nil` once the preface is complete, or before HTTP/2
    /// started.
    var prefaceDeadline: NIODeadline? {
        guard preface != .complete, let start = http2StartedAt else { return nil }
        return start + limits.prefaceTimeout
    }

    /// The preface timer fired: close a connection that has not sent its preface in time.
    func prefaceTimerFired(at now: NIODeadline) -> PrefaceTimeoutAction {
        guard let due = prefaceDeadline else { return .satisfied }
        if now < due { return .wait(until: due) }
        return preface == .awaitingMagic ? .close : .goAwayAndClose
    }

    /// When the unused-connection timer should fire; `nil` once a stream opened, when the timeout
    /// is off, or before HTTP/2 started.
    var unusedDeadline: NIODeadline? {
        guard !everOpenedStream, let limit = limits.unusedConnectionTimeout, let start = http2StartedAt else { return nil }
        return start + limit
    }

    /// The unused-connection timer fired: GOAWAY when no stream was ever opened.
    func unusedTimerFired(at now: NIODeadline) -> TimerAction {
        guard let due = unusedDeadline else { return .stop }
        return now < due ? .wait(until: due) : .goAway
    }

    /// When the connection has lived long enough: `maxConnectionAge` scaled by `jitter`
    /// (0.9–1.1 in production); `nil` when age is not limited.
    func ageDeadline(jitter: Double) -> NIODeadline? {
        guard let age = settings.maxConnectionAge else { return nil }
        return startedAt + .nanoseconds(Int64((Double(age.nanoseconds) * jitter).rounded()))
    }

    /// A jitter factor for ``ageDeadline(jitter:)``: uniform in 0.9–1.1, as grpc-go's.
    static func randomAgeJitter() -> Double {
        Double.random(in: 0.9...1.1)
    }
}
