import GRPCProtocol
import NIOCore

/// How a connection is kept alive, aged and policed, after grpc-go's
/// `keepalive.ServerParameters` and `keepalive.EnforcementPolicy` (same defaults).
public struct KeepaliveSettings: Sendable, Equatable {
    /// After this long without any byte from the client, the server sends a PING; `nil`: never.
    /// Default 2 hours.
    public var time: TimeAmount? = .hours(2)
    /// How long the server waits for anything from the client (the PING's ACK, or any frame)
    /// after its PING before it closes the connection. Default 20 s.
    public var timeout: TimeAmount = .seconds(20)
    /// A connection with no open stream for this long gets a graceful GOAWAY; `nil`: never.
    /// Default `nil`.
    public var maxConnectionIdle: TimeAmount? = nil
    /// A connection open this long (±10 % jitter, so connections opened together do not all
    /// leave together) gets a graceful GOAWAY; `nil`: never. Default `nil`.
    public var maxConnectionAge: TimeAmount? = nil
    /// After the GOAWAY of ``maxConnectionAge``, how long calls in flight may run before the
    /// connection is closed; `nil`: the server's drain timeout. Default `nil`.
    public var maxConnectionAgeGrace: TimeAmount? = nil
    /// Client PINGs closer together than this are a strike; so is a PING while no stream is
    /// open, unless ``permitWithoutStream``, when the previous one was less than 2 hours ago.
    /// The third strike in a row (strikes reset whenever the server sends HEADERS or DATA) gets
    /// GOAWAY `ENHANCE_YOUR_CALM` with debug data `too_many_pings`, and the connection closes.
    /// Default 5 minutes.
    public var minPingInterval: TimeAmount = .minutes(5)
    /// Whether client PINGs are welcome while no stream is open. Default false.
    public var permitWithoutStream: Bool = false

    /// The defaults above (grpc-go's).
    public static var defaults: KeepaliveSettings { KeepaliveSettings() }

    /// Creates the defaults.
    public init() {}
}
