import GRPCProtocol
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// Logs what the transport's defences do, at `notice`, without letting an attack flood the log:
/// per line (a defence and its message), the first one and then at most one a second, each saying
/// how many of the same were left out since the previous one.
///
/// Shared by the connections of one server; called on their event loops.
public final class DefenceLog: Sendable {
    private let logger: Logger
    private let interval: TimeAmount
    private let state = NIOLockedValueBox([String: (lastLogged: NIODeadline, unlogged: Int)]())

    /// A log writing to `logger`, at most one line per defence and message and `interval`.
    public init(logger: Logger, interval: TimeAmount = .seconds(1)) {
        self.logger = logger
        self.interval = interval
    }

    /// `defence` acted (ended a connection, reset streams, refused calls): logs `message` (with
    /// `metadata`, the peer included) unless the same line went out less than the interval ago.
    func record(_ defence: TransportDefence, _ message: Logger.Message, metadata: Logger.Metadata, now: NIODeadline = .now()) {
        // Keyed by the message too: one defence ends connections in more than one way (the
        // preface timeout closes silently or with a GOAWAY), and each way is logged.
        let key = "\(defence.name)\u{0}\(message)"
        let skipped: Int? = state.withLockedValue { state in
            if let entry = state[key], now - entry.lastLogged < interval {
                state[key] = (entry.lastLogged, entry.unlogged + 1)
                return nil
            }
            let unlogged = state[key]?.unlogged ?? 0
            state[key] = (now, 0)
            return unlogged
        }
        guard let skipped else { return }
        var metadata = metadata
        metadata["defence"] = "\(defence.name)"
        if skipped > 0 { metadata["skipped_since_last_line"] = "\(skipped)" }
        logger.notice(message, metadata: metadata)
    }
}
