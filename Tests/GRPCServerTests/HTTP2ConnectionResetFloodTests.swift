import Logging
import NIOCore
import NIOEmbedded
import Synchronization
import Testing

@testable import GRPCProtocol
@testable import GRPCServer

/// The rapid-reset defence (CVE-2023-44487) and the start of calls at the end of a read, on a real
/// `HTTP2Connection` (nghttp2 inside) in an `EmbeddedChannel` whose clock the test advances.
@Suite struct HTTP2ConnectionResetFloodTests {
    typealias Frame = EmbeddedHTTP2Client.Frame

    static let enhanceYourCalm: UInt32 = 0xB
    static let refusedStream: UInt32 = 0x7
    static let cancel: [UInt8] = [0, 0, 0, 8]

    /// Counts the calls that reached a handler, and the defences the observer heard of.
    final class Probe: CallObserver, Sendable {
        let handled = Mutex(0)
        let defences = Mutex<[TransportDefence]>([])
        var observesCalls: Bool { false }
        func connectionOpened() {}
        func connectionClosed() {}
        func streamOpened() {}
        func streamClosed() {}
        func callStarted(path: String) {}
        func callFinished(_ call: FinishedCall) {}
        func defenceTriggered(_ defence: TransportDefence) { defences.withLock { $0.append(defence) } }
    }

    /// One connection under test; `/test.Echo/Now` counts in `probe.handled`.
    final class Client: EmbeddedHTTP2Client {
        let probe: Probe

        init(burst: Int, perSecond: Int, maxConcurrentStreams: Int = 256, acknowledgeSettings: Bool = true) throws {
            let probe = Probe()
            self.probe = probe
            var configuration = ServerConfiguration()
            configuration.limits.resetBurst = burst
            configuration.limits.resetsPerSecond = perSecond
            configuration.http2.maxConcurrentStreams = maxConcurrentStreams
            configuration.callObserver = probe
            var router = ServerRouter()
            router.register("/test.Echo/Now", .inlineUnary { request, _ in
                probe.handled.withLock { $0 += 1 }
                return .success(request)
            })
            router.register("/test.Echo/Chat", .bidirectionalStreaming { _, _, _ in
                probe.handled.withLock { $0 += 1 }
            })
            try super.init(HTTP2Connection(router: router, configuration: configuration, logger: Logger(label: "test")))
            try sendPreface(acknowledgingSettings: acknowledgeSettings)
            _ = take()
        }

        var handled: Int { probe.handled.withLock { $0 } }

        /// HEADERS of a call to `path` (HPACK literals without indexing).
        static func headers(_ id: UInt32, path: String = "/test.Echo/Now", endStream: Bool = false, omitPath: Bool = false) -> [UInt8] {
            var fields = [(":method", "POST"), (":scheme", "http"), (":authority", "test"), ("content-type", "application/grpc")]
            if !omitPath { fields.insert((":path", path), at: 2) }
            return Frame(type: Frame.headers, flags: Frame.endHeaders | (endStream ? Frame.endStream : 0), streamID: id,
                         payload: headerBlock(fields)).bytes
        }

        /// A whole request: HEADERS, then one empty message with END_STREAM.
        static func request(_ id: UInt32) -> [UInt8] {
            headers(id) + Frame(type: Frame.data, flags: Frame.endStream, streamID: id, payload: [0, 0, 0, 0, 0]).bytes
        }

        static func reset(_ id: UInt32) -> [UInt8] {
            Frame(type: Frame.rstStream, flags: 0, streamID: id, payload: HTTP2ConnectionResetFloodTests.cancel).bytes
        }
    }

    private func goAways(_ frames: [Frame]) -> [(lastStreamID: UInt32, errorCode: UInt32, debug: String)] {
        frames.compactMap(\.goAway)
    }

    @Test func resetsPastTheBurstEndTheConnectionWithEnhanceYourCalm() throws {
        let client = try Client(burst: 10, perSecond: 5)
        for index in 0..<10 {
            let id = UInt32(2 * index + 1)
            try client.send(Client.headers(id) + Client.reset(id))
        }
        #expect(goAways(client.take()).isEmpty)
        #expect(client.isOpen, "ten resets are within a burst of ten")
        try client.send(Client.headers(21) + Client.reset(21))
        let goAway = try #require(goAways(client.take()).first)
        #expect(goAway.errorCode == Self.enhanceYourCalm)
        #expect(goAway.debug == "too_many_resets")
        #expect(goAway.lastStreamID == 21, "the last stream processed: the one whose reset ended the connection")
        #expect(!client.isOpen, "closed once the GOAWAY is written")
        #expect(client.probe.defences.withLock { $0 } == [.resetFlood])
        #expect(client.handled == 0)
    }

    @Test func resetsAtTheSustainedRateAreNeverRefused() throws {
        let client = try Client(burst: 10, perSecond: 5)
        var id: UInt32 = 1
        // The burst, then five a second for a minute: always within the budget.
        for _ in 0..<10 {
            try client.send(Client.headers(id) + Client.reset(id))
            id += 2
        }
        for _ in 0..<300 {
            client.advance(by: .milliseconds(200))
            try client.send(Client.headers(id) + Client.reset(id))
            id += 2
        }
        #expect(goAways(client.take()).isEmpty)
        #expect(client.isOpen)
        // Served calls cost no token.
        for _ in 0..<50 {
            try client.send(Client.request(id))
            id += 2
        }
        #expect(client.handled == 50)
        #expect(goAways(client.take()).isEmpty)
        // The refill of each fifth of a second went to its reset: one more now is over the budget.
        try client.send(Client.headers(id) + Client.reset(id))
        #expect(goAways(client.take()).first?.errorCode == Self.enhanceYourCalm)
        #expect(!client.isOpen)
    }

    @Test func aRequestResetInTheSameReadNeverReachesItsHandler() throws {
        let client = try Client(burst: 100, perSecond: 100)
        try client.send(Client.request(1) + Client.reset(1))
        #expect(client.handled == 0, "complete, then reset before the read ended: never started")
        let frames = client.take()
        #expect(!frames.contains { $0.streamID == 1 && $0.type == Frame.headers }, "no response to a reset stream")
        try client.send(Client.request(3))
        #expect(client.handled == 1, "the same request without the reset is served")
        #expect(client.take().contains { $0.streamID == 3 && $0.type == Frame.headers })
    }

    @Test func aBidirectionalCallResetInTheReadOfItsHeadersNeverStarts() throws {
        let client = try Client(burst: 100, perSecond: 100)
        try client.send(Client.headers(1, path: "/test.Echo/Chat") + Client.reset(1))
        client.channel.embeddedEventLoop.run()
        #expect(client.handled == 0, "its headers, then its reset, in one read: the handler never started")
        try client.send(Client.headers(3, path: "/test.Echo/Chat"))
        client.channel.embeddedEventLoop.run()
        #expect(client.handled == 1, "the same call without the reset starts at the end of the read")
    }

    @Test func inputAfterTheFloodIsDroppedAndNothingOfItStarts() throws {
        let client = try Client(burst: 10, perSecond: 5)
        // One read: 100 requests reset at once, then a request left standing.
        var bytes: [UInt8] = []
        for index in 0..<100 {
            let id = UInt32(2 * index + 1)
            bytes += Client.request(id) + Client.reset(id)
        }
        bytes += Client.request(201)
        try client.send(bytes)
        let frames = client.take()
        let goAway = try #require(goAways(frames).first)
        #expect(goAway.errorCode == Self.enhanceYourCalm)
        #expect(goAway.lastStreamID == 21)
        #expect(client.handled == 0, "the request after the flood, in the same read, never started")
        #expect(!frames.contains { $0.type == Frame.headers }, "no response at all")
        #expect(!client.isOpen)
    }

    @Test func streamsRefusedOverTheConcurrencyLimitCountAsResets() throws {
        // Before the client acknowledges SETTINGS, nghttp2 refuses streams over the announced
        // limit with RST_STREAM(REFUSED_STREAM); a client that never acknowledges gets them
        // refused for free, unless they count.
        let client = try Client(burst: 5, perSecond: 1, maxConcurrentStreams: 2, acknowledgeSettings: false)
        try client.send(Client.headers(1) + Client.headers(3))
        var id: UInt32 = 5
        for _ in 0..<5 {
            try client.send(Client.headers(id))
            id += 2
        }
        let refused = client.take().filter { $0.type == Frame.rstStream }
        #expect(refused.count == 5)
        #expect(refused.allSatisfy { $0.payload == [0, 0, 0, UInt8(Self.refusedStream)] })
        #expect(client.isOpen)
        try client.send(Client.headers(id))
        #expect(goAways(client.take()).first?.errorCode == Self.enhanceYourCalm)
        #expect(!client.isOpen)
    }

    @Test func malformedRequestsTheServerMustResetCountAsResets() throws {
        // A request without :path is reset by nghttp2 (PROTOCOL_ERROR): the server's reset, the
        // client's fault.
        let client = try Client(burst: 3, perSecond: 1)
        for index in 0..<3 {
            try client.send(Client.headers(UInt32(2 * index + 1), endStream: true, omitPath: true))
        }
        #expect(client.take().filter { $0.type == Frame.rstStream }.count == 3)
        #expect(client.isOpen)
        try client.send(Client.headers(7, endStream: true, omitPath: true))
        #expect(goAways(client.take()).first?.errorCode == Self.enhanceYourCalm)
        #expect(!client.isOpen)
    }
}
