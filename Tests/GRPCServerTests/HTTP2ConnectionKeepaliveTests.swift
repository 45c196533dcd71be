import Logging
import NIOCore
import NIOEmbedded
import Testing

@testable import GRPCProtocol
@testable import GRPCServer

/// Keepalive PINGs, idle and age GOAWAYs and PING policing on a real `HTTP2Connection` (nghttp2
/// inside) in an `EmbeddedChannel`, its timers driven by the embedded loop's clock.
@Suite struct HTTP2ConnectionKeepaliveTests {
    // MARK: A client written frame by frame

    typealias Frame = EmbeddedHTTP2Client.Frame

    /// One connection under test.
    final class Client: EmbeddedHTTP2Client {
        init(_ keepalive: KeepaliveSettings, drainTimeout: TimeAmount = .seconds(30)) throws {
            var configuration = ServerConfiguration()
            configuration.keepalive = keepalive
            configuration.drainTimeout = drainTimeout
            // These tests hold connections without streams for hours: the unused-connection
            // timeout (ConnectionLimitsTests) would end them first.
            configuration.limits.unusedConnectionTimeout = nil
            try super.init(HTTP2Connection(router: Self.echoRouter(), configuration: configuration, logger: Logger(label: "test")))
            try sendPreface()
            _ = take()
        }

        /// Opens stream `id` with a request whose body has not ended (the stream stays open).
        func openStream(_ id: UInt32, endStream: Bool = false) throws {
            try send(Frame(type: Frame.headers, flags: Frame.endHeaders | (endStream ? Frame.endStream : 0), streamID: id, payload: requestHeaders()))
        }

        /// A whole unary call: HEADERS, one empty message with END_STREAM.
        func call(_ id: UInt32) throws {
            try openStream(id)
            try send(Frame(type: Frame.data, flags: Frame.endStream, streamID: id, payload: [0, 0, 0, 0, 0]))
        }

        func ping(_ payload: [UInt8] = Array("client!!".utf8)) throws {
            try send(Frame(type: Frame.ping, flags: 0, streamID: 0, payload: payload))
        }

        private func requestHeaders() -> [UInt8] {
            Self.headerBlock([(":method", "POST"), (":scheme", "http"), (":path", "/test.Echo/Now"), (":authority", "test"),
                              ("content-type", "application/grpc"), ("te", "trailers")])
        }
    }

    private func pings(_ frames: [Frame]) -> [Frame] { frames.filter { $0.type == Frame.ping && $0.flags & Frame.ack == 0 } }
    private func goAways(_ frames: [Frame]) -> [Frame] { frames.filter { $0.type == Frame.goAway } }

    private func keepalive(time: TimeAmount? = nil, timeout: TimeAmount = .seconds(20), _ adjust: (inout KeepaliveSettings) -> Void = { _ in }) -> KeepaliveSettings {
        var settings = KeepaliveSettings()
        settings.time = time
        settings.timeout = timeout
        adjust(&settings)
        return settings
    }

    // MARK: Keepalive PINGs

    @Test func silentClientGetsAPingAndIsClosedWithoutAnAnswer() throws {
        let client = try Client(keepalive(time: .seconds(10), timeout: .seconds(2)))
        client.advance(by: .milliseconds(9_900))
        #expect(pings(client.take()).isEmpty)
        client.advance(by: .milliseconds(100))
        #expect(pings(client.take()).count == 1)
        client.advance(by: .milliseconds(1_900))
        #expect(client.isOpen)
        client.advance(by: .milliseconds(100))
        #expect(!client.isOpen, "no answer to the keepalive PING within the timeout closes the connection")
    }

    @Test func answeredPingKeepsTheConnectionAndTheNextComesAfterTimeAgain() throws {
        let client = try Client(keepalive(time: .seconds(10), timeout: .seconds(2)))
        client.advance(by: .seconds(10))
        let ping = try #require(pings(client.take()).first)
        client.advance(by: .seconds(1))
        try client.send(Frame(type: Frame.ping, flags: Frame.ack, streamID: 0, payload: ping.payload))
        client.advance(by: .seconds(5))
        #expect(client.isOpen)
        #expect(pings(client.take()).isEmpty)
        // Ten seconds after the ACK (read at 11 s): the next PING.
        client.advance(by: .milliseconds(4_900))
        #expect(pings(client.take()).isEmpty)
        client.advance(by: .milliseconds(100))
        #expect(pings(client.take()).count == 1)
    }

    @Test func anyFrameFromTheClientPostponesThePing() throws {
        let client = try Client(keepalive(time: .seconds(10), timeout: .seconds(2)))
        client.advance(by: .seconds(6))
        try client.send(Frame(type: Frame.windowUpdate, flags: 0, streamID: 0, payload: [0, 0, 1, 0]))
        client.advance(by: .milliseconds(9_900))
        #expect(pings(client.take()).isEmpty, "the PING is due 10 s after the last frame read, at 16 s")
        client.advance(by: .milliseconds(100))
        #expect(pings(client.take()).count == 1)
    }

    @Test func keepaliveOffSendsNoPing() throws {
        let client = try Client(keepalive(time: nil))
        client.advance(by: .hours(30))
        #expect(pings(client.take()).isEmpty)
        #expect(client.isOpen)
    }

    // MARK: Idle

    @Test func idleConnectionGetsAGracefulGoAwayAndCloses() throws {
        let client = try Client(keepalive { $0.maxConnectionIdle = .seconds(5) })
        client.advance(by: .milliseconds(4_900))
        #expect(goAways(client.take()).isEmpty)
        client.advance(by: .milliseconds(100))
        let first = try #require(goAways(client.take()).first?.goAway)
        #expect(first.lastStreamID == 0x7FFF_FFFF && first.errorCode == 0, "first GOAWAY: the maximum stream id, NO_ERROR")
        client.advance(by: .milliseconds(200))
        let second = try #require(goAways(client.take()).first?.goAway)
        #expect(second.lastStreamID == 0 && second.errorCode == 0)
        #expect(!client.isOpen)
    }

    @Test func openStreamHoldsOffIdleUntilItCloses() throws {
        let client = try Client(keepalive { $0.maxConnectionIdle = .seconds(5) })
        client.advance(by: .seconds(1))
        try client.openStream(1)
        client.advance(by: .seconds(20))
        #expect(goAways(client.take()).isEmpty, "a connection with an open stream is not idle")
        try client.send(Frame(type: Frame.rstStream, flags: 0, streamID: 1, payload: [0, 0, 0, 8]))  // CANCEL
        client.advance(by: .milliseconds(4_900))
        #expect(goAways(client.take()).isEmpty, "idle counts from the last stream's close, at 21 s")
        client.advance(by: .milliseconds(100))
        #expect(goAways(client.take()).count == 1)
    }

    @Test func callsKeepResettingTheIdleClock() throws {
        let client = try Client(keepalive { $0.maxConnectionIdle = .seconds(5) })
        for id in stride(from: UInt32(1), through: 9, by: 2) {
            client.advance(by: .seconds(4))
            try client.call(id)
        }
        let frames = client.take()
        #expect(goAways(frames).isEmpty)
        #expect(frames.filter { $0.type == Frame.headers }.count == 10, "five calls answered: headers and trailers each")
        client.advance(by: .seconds(5))
        #expect(goAways(client.take()).count == 1)
    }

    // MARK: Age

    @Test func oldConnectionGetsGoAwayWithinTheJitterAndClosesAfterTheGrace() throws {
        let client = try Client(keepalive {
            $0.maxConnectionAge = .seconds(100)
            $0.maxConnectionAgeGrace = .seconds(50)
        })
        try client.openStream(1)
        client.advance(by: .milliseconds(89_999))
        #expect(goAways(client.take()).isEmpty, "not before 90 % of the age")
        // The GOAWAY comes between 90 and 110 s, the final one 200 ms after it; the close 50 s
        // after the first, between 140 and 160 s.
        client.advance(by: .milliseconds(21_001))
        #expect(goAways(client.take()).count == 2, "GOAWAY by 110 % of the age: the notice and the final one")
        #expect(client.isOpen, "the call in flight may finish during the grace")
        client.advance(by: .seconds(28))
        #expect(client.isOpen)
        client.advance(by: .seconds(22))
        #expect(!client.isOpen, "closed when the grace is over, the call in flight or not")
    }

    @Test func ageWithoutGraceWaitsForCallsUpToTheDrainTimeout() throws {
        let client = try Client(keepalive { $0.maxConnectionAge = .seconds(10) }, drainTimeout: .seconds(30))
        try client.openStream(1)
        // GOAWAY between 9 and 11 s, the close 30 s later: between 39 and 41 s.
        client.advance(by: .seconds(12))
        #expect(goAways(client.take()).count == 2)
        client.advance(by: .seconds(26))
        #expect(client.isOpen)
        client.advance(by: .seconds(4))
        #expect(!client.isOpen)
    }

    @Test func oldConnectionWhoseCallsEndedClosesAtOnce() throws {
        let client = try Client(keepalive {
            $0.maxConnectionAge = .seconds(10)
            $0.maxConnectionAgeGrace = .seconds(60)
        })
        try client.openStream(1)
        client.advance(by: .seconds(12))
        let last = try #require(goAways(client.take()).last?.goAway)
        #expect(last.lastStreamID == 1, "the final GOAWAY names the stream in flight")
        try client.send(Frame(type: Frame.data, flags: Frame.endStream, streamID: 1, payload: [0, 0, 0, 0, 0]))
        client.channel.embeddedEventLoop.run()
        #expect(!client.isOpen, "the last call answered, the draining connection closes")
    }

    // MARK: Client PINGs

    @Test func pingsTooCloseTogetherGetEnhanceYourCalm() throws {
        let client = try Client(keepalive())  // min_ping_interval 300 s
        try client.openStream(1)
        for _ in 0..<3 {
            try client.ping()
            client.advance(by: .seconds(1))
        }
        #expect(goAways(client.take()).isEmpty, "two strikes are tolerated")
        #expect(client.isOpen)
        try client.ping()
        let goAway = try #require(goAways(client.take()).first?.goAway)
        #expect(goAway.errorCode == 11, "ENHANCE_YOUR_CALM")
        #expect(goAway.debug == "too_many_pings")
        #expect(goAway.lastStreamID == 1)
        #expect(!client.isOpen, "the connection closes with the GOAWAY, its call in flight too")
    }

    @Test func pingsAtTheMinimumIntervalAreFine() throws {
        let client = try Client(keepalive { $0.minPingInterval = .seconds(10) })
        try client.openStream(1)
        for _ in 0..<6 {
            try client.ping()
            client.advance(by: .seconds(10))
        }
        let frames = client.take()
        #expect(goAways(frames).isEmpty)
        #expect(frames.filter { $0.type == Frame.ping && $0.flags == Frame.ack }.count == 6)
        #expect(client.isOpen)
    }

    @Test func pingsWithoutStreamAreStrikesUnlessPermitted() throws {
        let refused = try Client(keepalive { $0.minPingInterval = .seconds(10) })
        for _ in 0..<4 {
            try refused.ping()
            refused.advance(by: .seconds(60))
        }
        #expect(goAways(refused.take()).first?.goAway?.errorCode == 11, "a PING without a stream within 2 h of the last is a strike")
        #expect(!refused.isOpen)

        let permitted = try Client(keepalive {
            $0.minPingInterval = .seconds(10)
            $0.permitWithoutStream = true
        })
        for _ in 0..<6 {
            try permitted.ping()
            permitted.advance(by: .seconds(60))
        }
        #expect(goAways(permitted.take()).isEmpty)
        #expect(permitted.isOpen)
    }

    @Test func responsesForgiveTheStrikes() throws {
        let client = try Client(keepalive())
        var id: UInt32 = 1
        for _ in 0..<8 {
            try client.ping()
            try client.ping()
            // A response (HEADERS, DATA) between PINGs: the client is measuring, not abusing.
            try client.call(id)
            id += 2
        }
        #expect(goAways(client.take()).isEmpty)
        #expect(client.isOpen)
    }
}
