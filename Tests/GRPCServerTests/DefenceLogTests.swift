import Logging
import NIOCore
import Synchronization
import Testing

@testable import GRPCProtocol
@testable import GRPCServer

/// The defences' log: one line per defence and message a second, the rest counted.
@Suite struct DefenceLogTests {
    final class Lines: Sendable {
        private let stored = Mutex<[(message: String, metadata: Logger.Metadata)]>([])
        var all: [(message: String, metadata: Logger.Metadata)] { stored.withLock { $0 } }
        func append(_ message: String, _ metadata: Logger.Metadata) { stored.withLock { $0.append((message, metadata)) } }
    }

    struct Capturing: LogHandler {
        let lines: Lines
        var logLevel: Logger.Level = .trace
        var metadata: Logger.Metadata = [:]
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            lines.append("\(event.message)", event.metadata ?? [:])
        }
    }

    let lines = Lines()
    var log: DefenceLog {
        let lines = self.lines
        return DefenceLog(logger: Logger(label: "test") { _ in Capturing(lines: lines) })
    }

    @Test func aFloodIsOneLineASecondCountingTheRest() {
        let log = self.log
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
        for i in 0..<500 {
            log.record(.prefaceTimeout, "closing connection: no preface", metadata: ["peer": "p\(i)"], now: start + .milliseconds(Int64(i)))
        }
        #expect(lines.all.map(\.message) == ["closing connection: no preface"])
        #expect(lines.all[0].metadata["peer"] == "p0")
        #expect(lines.all[0].metadata["defence"] == "preface_timeouts")
        #expect(lines.all[0].metadata["skipped_since_last_line"] == nil)

        log.record(.prefaceTimeout, "closing connection: no preface", metadata: ["peer": "late"], now: start + .milliseconds(1000))
        #expect(lines.all.count == 2)
        #expect(lines.all[1].metadata["peer"] == "late")
        #expect(lines.all[1].metadata["skipped_since_last_line"] == "499")
    }

    @Test func eachMessageOfADefenceIsLoggedAndDefencesAreApart() {
        let log = self.log
        let now = NIODeadline.uptimeNanoseconds(5_000_000_000)
        log.record(.prefaceTimeout, "closed silently", metadata: [:], now: now)
        log.record(.prefaceTimeout, "GOAWAY PROTOCOL_ERROR", metadata: [:], now: now)
        log.record(.idleEviction, "closed silently", metadata: [:], now: now)
        log.record(.prefaceTimeout, "closed silently", metadata: [:], now: now + .milliseconds(10))
        log.record(.idleEviction, "evicted", metadata: [:], now: now + .milliseconds(20))
        #expect(lines.all.map(\.message) == ["closed silently", "GOAWAY PROTOCOL_ERROR", "closed silently", "evicted"])
        #expect(lines.all.map { $0.metadata["defence"] } == ["preface_timeouts", "preface_timeouts", "idle_evictions", "idle_evictions"])
    }
}
