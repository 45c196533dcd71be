import Logging
import NIOConcurrencyHelpers
import NIOCore

/// Logs the connections the transport's defences end, at `notice`, without letting an attack
/// flood the log: per defence, the first connection and then at most one line a second, each
/// line saying how many connections that defence ended since the previous line.
///
/// Shared by the connections of one server; called on their event loops.
public final class DefenceLog: Sendable {
    private let logger: Logger
    private let interval: TimeAmount
    private let state = NIOLockedValueBox([String: (lastLogged: NIODeadline, unlogged: Int)]())

    /// A log writing to `logger`, at most one line per defence and `interval`.
    public init(logger: Logger, interval: TimeAmount = .seconds(1)) {
        self.logger = logger
        self.interval = interval
    }

    /// A connection was ended by `defence`: logs it (with `metadata`, the peer included) unless a
    /// line for that defence went out less than the interval ago.
    func connectionEnded(by defence: TransportDefence, message: Logger.Message, metadata: Logger.Metadata, now: NIODeadline = .now()) {
        let suppressed: Int? = state.withLockedValue { state in
            if let entry = state[defence.name], now - entry.lastLogged < interval {
                state[defence.name] = (entry.lastLogged, entry.unlogged + 1)
                return nil
            }
            let unlogged = state[defence.name]?.unlogged ?? 0
            state[defence.name] = (now, 0)
            return unlogged
        }
        guard let suppressed else { return }
        var metadata = metadata
        metadata["defence"] = "\(defence.name)"
        if suppressed > 0 { metadata["also_ended_since_last_line"] = "\(suppressed)" }
        logger.notice(message, metadata: metadata)
    }
}
