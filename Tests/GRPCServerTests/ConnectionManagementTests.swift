import NIOCore
import Testing

@testable import GRPCProtocol
@testable import GRPCServer

/// The keepalive, idle, age and PING rules as plain values: events in, timer actions out.
@Suite struct ConnectionManagementTests {
    private let start = NIODeadline.uptimeNanoseconds(1_000_000_000_000)

    private func seconds(_ s: Int64) -> NIODeadline { start + .seconds(s) }

    private func management(_ adjust: (inout KeepaliveSettings) -> Void = { _ in }) -> ConnectionManagement {
        var settings = KeepaliveSettings()
        adjust(&settings)
        return ConnectionManagement(settings: settings, now: start)
    }

    @Test func defaultsAreGRPCGos() {
        let settings = KeepaliveSettings.defaults
        #expect(settings.time == .hours(2))
        #expect(settings.timeout == .seconds(20))
        #expect(settings.maxConnectionIdle == nil)
        #expect(settings.maxConnectionAge == nil)
        #expect(settings.maxConnectionAgeGrace == nil)
        #expect(settings.minPingInterval == .minutes(5))
        #expect(!settings.permitWithoutStream)
    }

    @Test func keepaliveWaitsForSilenceThenPingsThenClosesWithoutAnswer() {
        var m = management { $0.time = .seconds(10); $0.timeout = .seconds(3) }
        #expect(m.firstKeepaliveDeadline == seconds(10))
        m.read(at: seconds(4))
        #expect(m.keepaliveTimerFired(at: seconds(10)) == .wait(until: seconds(14)))
        #expect(m.keepaliveTimerFired(at: seconds(14)) == .sendPing(timeoutAt: seconds(17)))
        #expect(m.pingTimeoutFired(at: seconds(17)) == .close)
    }

    @Test func anythingReadAfterThePingAnswersIt() {
        var m = management { $0.time = .seconds(10); $0.timeout = .seconds(3) }
        #expect(m.keepaliveTimerFired(at: seconds(10)) == .sendPing(timeoutAt: seconds(13)))
        m.read(at: seconds(11))
        #expect(m.pingTimeoutFired(at: seconds(13)) == .wait(until: seconds(21)))
        #expect(m.pingSentAt == nil)
    }

    @Test func keepaliveOff() {
        var m = management { $0.time = nil }
        #expect(m.firstKeepaliveDeadline == nil)
        #expect(m.keepaliveTimerFired(at: seconds(100_000)) == .stop)
    }

    @Test func idleCountsFromTheLastStreamClosing() {
        var m = management { $0.maxConnectionIdle = .seconds(5) }
        #expect(m.idleDeadline == seconds(5))
        m.streamOpened()
        #expect(m.idleDeadline == nil)
        #expect(m.idleTimerFired(at: seconds(5)) == .stop)
        m.lastStreamClosed(at: seconds(8))
        #expect(m.idleTimerFired(at: seconds(12)) == .wait(until: seconds(13)))
        #expect(m.idleTimerFired(at: seconds(13)) == .goAway)
        #expect(management().idleDeadline == nil, "idleness is allowed by default")
    }

    @Test(arguments: [0.9, 1.0, 1.1])
    func ageIsScaledByTheJitter(jitter: Double) {
        let m = management { $0.maxConnectionAge = .seconds(100) }
        #expect(m.ageDeadline(jitter: jitter) == start + .nanoseconds(Int64((100e9 * jitter).rounded())))
        #expect(management().ageDeadline(jitter: jitter) == nil)
    }

    @Test func jitterStaysWithinTenPercent() {
        for _ in 0..<1000 {
            #expect((0.9...1.1).contains(ConnectionManagement.randomAgeJitter()))
        }
    }

    @Test func pingStrikesAndForgiveness() {
        var m = management { $0.minPingInterval = .seconds(10) }
        m.streamOpened()
        #expect(m.clientPing(at: seconds(0), hasOpenStreams: true) == .allowed, "the first PING is never a strike")
        #expect(m.clientPing(at: seconds(10), hasOpenStreams: true) == .allowed)
        #expect(m.clientPing(at: seconds(15), hasOpenStreams: true) == .strike(1))
        #expect(m.clientPing(at: seconds(16), hasOpenStreams: true) == .strike(2))
        m.responseFrameSent()
        #expect(m.clientPing(at: seconds(17), hasOpenStreams: true) == .allowed, "forgiven after a response frame")
        #expect(m.pingStrikes == 0)
        #expect(m.clientPing(at: seconds(18), hasOpenStreams: true) == .strike(1))
        #expect(m.clientPing(at: seconds(19), hasOpenStreams: true) == .strike(2))
        #expect(m.clientPing(at: seconds(20), hasOpenStreams: true) == .tooManyPings)
    }

    @Test func pingsWithoutStreamUseTwoHoursUnlessPermitted() {
        var strict = management { $0.minPingInterval = .seconds(10) }
        #expect(strict.clientPing(at: seconds(0), hasOpenStreams: false) == .allowed)
        #expect(strict.clientPing(at: seconds(3600), hasOpenStreams: false) == .strike(1))
        #expect(strict.clientPing(at: seconds(3600 + 7200), hasOpenStreams: false) == .allowed)

        var permitted = management { $0.minPingInterval = .seconds(10); $0.permitWithoutStream = true }
        #expect(permitted.clientPing(at: seconds(0), hasOpenStreams: false) == .allowed)
        #expect(permitted.clientPing(at: seconds(10), hasOpenStreams: false) == .allowed)
        #expect(permitted.clientPing(at: seconds(11), hasOpenStreams: false) == .strike(1))
    }
}
