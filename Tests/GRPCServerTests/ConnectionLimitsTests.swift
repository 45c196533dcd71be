import CNGHTTP2
import Foundation
import Logging
import NIOCore
import NIOEmbedded
import NIOTLS
import Testing

@testable import GRPCProtocol
@testable import GRPCServer

/// The defences against silent, half-open and unused connections and the budget of calls without
/// a verified token: the rules as plain values, then on a real `HTTP2Connection` (nghttp2 inside)
/// in an `EmbeddedChannel` whose clock the test advances.
@Suite struct ConnectionLimitsTests {
    typealias Frame = EmbeddedHTTP2Client.Frame

    private let start = NIODeadline.uptimeNanoseconds(1_000_000_000_000)
    private func seconds(_ s: Int64) -> NIODeadline { start + .seconds(s) }

    private func management(_ adjust: (inout TransportLimits) -> Void = { _ in }) -> ConnectionManagement {
        var limits = TransportLimits()
        adjust(&limits)
        var m = ConnectionManagement(settings: KeepaliveSettings(), limits: limits, now: start)
        m.http2Started(at: start)
        return m
    }

    // MARK: The preface rule

    @Test func defaultsProtect() {
        let limits = TransportLimits.defaults
        #expect(limits.prefaceTimeout == .seconds(10))
        #expect(limits.unusedConnectionTimeout == .seconds(60))
        #expect(limits.maxUnauthenticatedCalls == 256)
        #expect(limits.unauthenticatedCallsRefusal.code == .resourceExhausted)
    }

    @Test func silentConnectionIsClosedWithoutAWordAtThePrefaceTimeout() {
        let m = management { $0.prefaceTimeout = .seconds(3) }
        #expect(m.prefaceDeadline == seconds(3))
        #expect(m.prefaceTimerFired(at: seconds(2)) == .wait(until: seconds(3)))
        #expect(m.prefaceTimerFired(at: seconds(3)) == .close)
    }

    @Test func partOfTheMagicIsStillNothingValid() {
        var m = management { $0.prefaceTimeout = .seconds(3) }
        m.accepted(bytes: 23)
        #expect(m.preface == .awaitingMagic)
        #expect(m.prefaceTimerFired(at: seconds(3)) == .close)
    }

    @Test func magicWithoutSettingsGetsAGoAway() {
        var m = management { $0.prefaceTimeout = .seconds(3) }
        m.accepted(bytes: 10)
        m.accepted(bytes: 14)
        #expect(m.preface == .awaitingSettings)
        #expect(m.prefaceTimerFired(at: seconds(3)) == .goAwayAndClose)
    }

    @Test func settingsCompleteThePreface() {
        var m = management { $0.prefaceTimeout = .seconds(3) }
        m.accepted(bytes: 24)
        m.clientSettingsReceived()
        #expect(m.preface == .complete)
        #expect(m.prefaceDeadline == nil)
        #expect(m.prefaceTimerFired(at: seconds(3)) == .satisfied)
    }

    @Test func theClockStartsWithHTTP2NotWithTheConnection() {
        // On TLS the connection starts before its handshake; HTTP/2 starts after it.
        var m = ConnectionManagement(settings: KeepaliveSettings(), limits: TransportLimits(), now: start)
        #expect(m.prefaceDeadline == nil)
        #expect(m.unusedDeadline == nil)
        m.http2Started(at: seconds(100))
        #expect(m.prefaceDeadline == seconds(110))
        #expect(m.unusedDeadline == seconds(160))
        m.http2Started(at: seconds(200))
        #expect(m.prefaceDeadline == seconds(110), "only the first start counts")
    }

    // MARK: The unused-connection rule

    @Test func connectionThatNeverOpensAStreamGetsAGoAway() {
        let m = management { $0.unusedConnectionTimeout = .seconds(60) }
        #expect(m.unusedTimerFired(at: seconds(59)) == .wait(until: seconds(60)))
        #expect(m.unusedTimerFired(at: seconds(60)) == .goAway)
    }

    @Test func oneStreamEndsTheUnusedRuleForGood() {
        var m = management { $0.unusedConnectionTimeout = .seconds(60) }
        m.streamOpened()
        m.lastStreamClosed(at: seconds(1))
        #expect(m.everOpenedStream)
        #expect(m.unusedDeadline == nil)
        #expect(m.unusedTimerFired(at: seconds(600)) == .stop)
    }

    @Test func unusedRuleOff() {
        let m = management { $0.unusedConnectionTimeout = nil }
        #expect(m.unusedDeadline == nil)
        #expect(m.unusedTimerFired(at: seconds(100_000)) == .stop)
    }

    // MARK: Eviction at maxConnections

    private struct Fake {}

    private func activity(_ stage: ConnectionActivity.Stage, idleSince: Int64 = 0, open: Int = 0) -> ConnectionActivity {
        let activity = ConnectionActivity(acceptedAt: seconds(idleSince))
        if stage >= .unused { activity.prefaceCompleted() }
        if stage == .used {
            activity.streamOpened(openStreams: 1)
            activity.streamClosed(openStreams: 0, at: seconds(idleSince))
        }
        if open > 0 { activity.streamOpened(openStreams: open) }
        return activity
    }

    private final class Key {}

    @Test func belowTheLimitEveryConnectionIsTaken() {
        var slots = ConnectionSlots<Fake>(limit: 2)
        let keys = [Key(), Key()]
        for key in keys {
            guard case .accepted = slots.admit(ObjectIdentifier(key), Fake(), activity: activity(.opening)) else {
                Issue.record("expected accepted")
                return
            }
        }
        #expect(slots.count == 2)
    }

    @Test func atTheLimitTheLeastAdvancedIdleConnectionIsEvicted() {
        var slots = ConnectionSlots<Fake>(limit: 4)
        let busy = Key(), usedLongIdle = Key(), usedRecent = Key(), unused = Key()
        _ = slots.admit(ObjectIdentifier(busy), Fake(), activity: activity(.used, idleSince: 0, open: 3))
        _ = slots.admit(ObjectIdentifier(usedLongIdle), Fake(), activity: activity(.used, idleSince: 5))
        _ = slots.admit(ObjectIdentifier(usedRecent), Fake(), activity: activity(.used, idleSince: 50))
        _ = slots.admit(ObjectIdentifier(unused), Fake(), activity: activity(.unused, idleSince: 90))
        var order: [ObjectIdentifier] = []
        let newcomers = [Key(), Key(), Key(), Key()]
        for newcomer in newcomers {
            switch slots.admit(ObjectIdentifier(newcomer), Fake(), activity: activity(.used, idleSince: 0, open: 1)) {
            case .acceptedEvicting(let victim, _, _): order.append(victim)
            case .accepted: Issue.record("a newcomer above the limit was taken without an eviction")
            case .refused: order.append(ObjectIdentifier(newcomer))
            }
        }
        #expect(order.prefix(3) == [ObjectIdentifier(unused), ObjectIdentifier(usedLongIdle), ObjectIdentifier(usedRecent)],
                "never used first, then the longest idle")
        #expect(order.last == ObjectIdentifier(newcomers[3]), "refused: every connection left has a stream open")
        #expect(slots.count == 7, "evicted connections stay listed until they have closed")
    }

    @Test func connectionsWithoutAPrefaceGoFirstOldestFirst() {
        var slots = ConnectionSlots<Fake>(limit: 3)
        let unused = Key(), silentOld = Key(), silentNew = Key()
        _ = slots.admit(ObjectIdentifier(unused), Fake(), activity: activity(.unused, idleSince: 1))
        _ = slots.admit(ObjectIdentifier(silentNew), Fake(), activity: activity(.opening, idleSince: 9))
        _ = slots.admit(ObjectIdentifier(silentOld), Fake(), activity: activity(.opening, idleSince: 2))
        #expect(slots.evictionCandidate() == ObjectIdentifier(silentOld))
    }

    @Test func aClosedConnectionFreesItsSlot() {
        var slots = ConnectionSlots<Fake>(limit: 1)
        let first = Key(), second = Key(), third = Key()
        _ = slots.admit(ObjectIdentifier(first), Fake(), activity: activity(.used, open: 1))
        guard case .refused = slots.admit(ObjectIdentifier(second), Fake(), activity: activity(.opening)) else {
            Issue.record("expected refused: the only connection has a stream open")
            return
        }
        slots.remove(ObjectIdentifier(first))
        guard case .accepted = slots.admit(ObjectIdentifier(third), Fake(), activity: activity(.opening)) else {
            Issue.record("expected accepted once the slot is free")
            return
        }
    }

    @Test func budgetOfUnauthenticatedCalls() {
        let budget = UnauthenticatedCallBudget(limit: 2)
        #expect(budget.acquire() && budget.acquire())
        #expect(!budget.acquire())
        budget.release()
        #expect(budget.count == 1)
        #expect(budget.acquire())
    }

    // MARK: On a real connection

    final class Client: EmbeddedHTTP2Client {
        let budget: UnauthenticatedCallBudget
        private var statuses: [UInt32: String] = [:]
        private let inflater: OpaquePointer = {
            var inflater: OpaquePointer?
            precondition(nghttp2_hd_inflate_new(&inflater) == 0)
            return inflater!
        }()

        init(limits: TransportLimits, tls: ServerTLS? = nil, tokenVerifier: (@Sendable (Metadata) -> Bool)? = nil) throws {
            var configuration = ServerConfiguration()
            configuration.limits = limits
            configuration.tls = tls
            configuration.keepalive.time = nil
            var router = Self.echoRouter()
            router.register("/test.Health/Check", .inlineUnary { request, _ in .success(request) }, needsToken: false)
            router.tokenVerifier = tokenVerifier
            let budget = UnauthenticatedCallBudget(limit: limits.maxUnauthenticatedCalls)
            self.budget = budget
            try super.init(
                HTTP2Connection(
                    router: router, configuration: configuration, logger: Logger(label: "test"),
                    activity: ConnectionActivity(acceptedAt: .now()), unauthenticatedBudget: budget))
        }

        /// One read from the socket: the bytes, then the end of the read batch (the server flushes).
        override func send(_ bytes: [UInt8]) throws {
            try super.send(bytes)
            channel.pipeline.fireChannelReadComplete()
            channel.embeddedEventLoop.run()
        }

        override func take() -> [Frame] {
            let frames = super.take()
            frames.forEach(decodeHeaders)
            return frames
        }

        /// Request headers on stream `id` for `path`, the request not ended (the stream stays open).
        func open(_ id: UInt32, path: String, authorization: String? = nil, endStream: Bool = false) throws {
            var fields = [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "test"),
                          ("content-type", "application/grpc")]
            if let authorization { fields.append(("authorization", authorization)) }
            try send(Frame(type: Frame.headers, flags: Frame.endHeaders | (endStream ? Frame.endStream : 0), streamID: id,
                           payload: Self.headerBlock(fields)))
        }

        /// The `grpc-status` the server sent on stream `id` so far, if any.
        func status(of id: UInt32) -> String? {
            _ = take()
            return statuses[id]
        }

        /// Decodes the server's header blocks in order (HPACK state is the connection's).
        private func decodeHeaders(_ frame: Frame) {
            guard frame.type == Frame.headers else { return }
            var input = frame.payload
            input.withUnsafeMutableBufferPointer { bytes in
                var base = bytes.baseAddress!
                var left = bytes.count
                while true {
                    var nv = nghttp2_nv()
                    var flags: Int32 = 0
                    let used = nghttp2_hd_inflate_hd2(inflater, &nv, &flags, base, left, 1)
                    guard used >= 0 else { return }
                    base += used
                    left -= used
                    if flags & Int32(NGHTTP2_HD_INFLATE_EMIT.rawValue) != 0 {
                        let name = String(decoding: UnsafeBufferPointer(start: nv.name, count: nv.namelen), as: UTF8.self)
                        if name == "grpc-status" {
                            statuses[frame.streamID] = String(decoding: UnsafeBufferPointer(start: nv.value, count: nv.valuelen), as: UTF8.self)
                        }
                    }
                    if flags & Int32(NGHTTP2_HD_INFLATE_FINAL.rawValue) != 0 {
                        nghttp2_hd_inflate_end_headers(inflater)
                        return
                    }
                    if flags & Int32(NGHTTP2_HD_INFLATE_EMIT.rawValue) == 0 && left == 0 { return }
                }
            }
        }

        deinit { nghttp2_hd_inflate_del(inflater) }
    }

    private func limits(_ adjust: (inout TransportLimits) -> Void) -> TransportLimits {
        var limits = TransportLimits()
        adjust(&limits)
        return limits
    }

    @Test func silentClientIsClosedAtThePrefaceTimeoutWithoutAGoAway() throws {
        let client = try Client(limits: limits { $0.prefaceTimeout = .seconds(2) })
        _ = client.take()  // the server's SETTINGS
        client.advance(by: .milliseconds(1_900))
        #expect(client.isOpen)
        client.advance(by: .milliseconds(100))
        #expect(!client.isOpen)
        #expect(client.take().filter { $0.type == Frame.goAway }.isEmpty, "nothing valid arrived: closed without a word")
    }

    @Test func onTLSThePrefaceClockStartsWhenTheHandshakeCompletes() throws {
        let directory = try TLSFixtures.directory(["server.pem": TLSFixtures.server, "server.key": TLSFixtures.serverKey])
        defer { try? FileManager.default.removeItem(at: directory) }
        let tls = try ServerTLS(files: TLSFiles(
            certificateChain: directory.appendingPathComponent("server.pem").path,
            privateKey: directory.appendingPathComponent("server.key").path))
        let client = try Client(limits: limits { $0.prefaceTimeout = .seconds(2) }, tls: tls)
        // The handshake's own timeout (TLSHandshakeGate) rules until it completes.
        client.advance(by: .minutes(5))
        #expect(client.isOpen)
        client.channel.pipeline.fireUserInboundEventTriggered(TLSUserEvent.handshakeCompleted(negotiatedProtocol: "h2"))
        client.advance(by: .milliseconds(1_900))
        #expect(client.isOpen)
        client.advance(by: .milliseconds(100))
        #expect(!client.isOpen, "no preface within the timeout after the handshake")
    }

    @Test func prefaceWithoutSettingsGetsGoAwayProtocolError() throws {
        let client = try Client(limits: limits { $0.prefaceTimeout = .seconds(2) })
        try client.send(Client.magic)
        client.advance(by: .seconds(2))
        let goAway = try #require(client.take().first { $0.type == Frame.goAway }?.goAway)
        #expect(goAway.errorCode == 1 && goAway.debug == "preface_timeout" && goAway.lastStreamID == 0)
        #expect(!client.isOpen)
    }

    @Test func completePrefaceStopsThePrefaceTimer() throws {
        let client = try Client(limits: limits { $0.prefaceTimeout = .seconds(2); $0.unusedConnectionTimeout = nil })
        try client.sendPreface()
        client.advance(by: .hours(1))
        #expect(client.isOpen)
        #expect(client.take().filter { $0.type == Frame.goAway }.isEmpty)
    }

    @Test func connectionThatNeverOpensAStreamGetsGoAwayNoErrorAndCloses() throws {
        let client = try Client(limits: limits { $0.unusedConnectionTimeout = .seconds(30) })
        try client.sendPreface()
        client.advance(by: .milliseconds(29_900))
        #expect(client.take().filter { $0.type == Frame.goAway }.isEmpty)
        client.advance(by: .milliseconds(100))
        let goAway = try #require(client.take().first { $0.type == Frame.goAway }?.goAway)
        #expect(goAway.errorCode == 0 && goAway.debug == "idle_timeout" && goAway.lastStreamID == 0)
        #expect(!client.isOpen)
    }

    @Test func aStreamOpenedBeforeTheUnusedTimeoutKeepsTheConnection() throws {
        let client = try Client(limits: limits { $0.unusedConnectionTimeout = .seconds(30) })
        try client.sendPreface()
        try client.open(1, path: "/test.Echo/Now")
        try client.send(Frame(type: Frame.data, flags: Frame.endStream, streamID: 1, payload: [0, 0, 0, 0, 0]))
        client.advance(by: .hours(1))
        #expect(client.isOpen)
        #expect(client.take().filter { $0.type == Frame.goAway }.isEmpty)
    }

    @Test func evictionClosesASilentConnectionAndGoAwaysAnIdleOne() throws {
        let silent = try Client(limits: limits { _ in })
        silent.channel.pipeline.fireUserInboundEventTriggered(HTTP2Connection.EvictionEvent())
        #expect(!silent.isOpen)
        #expect(silent.take().filter { $0.type == Frame.goAway }.isEmpty)

        let idle = try Client(limits: limits { _ in })
        try idle.sendPreface()
        idle.channel.pipeline.fireUserInboundEventTriggered(HTTP2Connection.EvictionEvent())
        let goAway = try #require(idle.take().first { $0.type == Frame.goAway }?.goAway)
        #expect(goAway.errorCode == 0 && goAway.debug == "idle_eviction")
        #expect(!idle.isOpen)
    }

    @Test func aStreamRacingTheEvictionIsServedThenTheConnectionCloses() throws {
        let client = try Client(limits: limits { _ in })
        try client.sendPreface()
        try client.open(1, path: "/test.Echo/Now")
        client.channel.pipeline.fireUserInboundEventTriggered(HTTP2Connection.EvictionEvent())
        #expect(client.isOpen, "stream 1 is in flight")
        try client.send(Frame(type: Frame.data, flags: Frame.endStream, streamID: 1, payload: [0, 0, 0, 0, 0]))
        #expect(client.status(of: 1) == "0")
        #expect(!client.isOpen)
    }

    @Test func tokenFreeCallsOverTheBudgetAreRefusedResourceExhausted() throws {
        let client = try Client(limits: limits { $0.maxUnauthenticatedCalls = 2 })
        try client.sendPreface()
        try client.open(1, path: "/test.Health/Check")
        try client.open(3, path: "/test.Health/Check")
        #expect(client.budget.count == 2)
        try client.open(5, path: "/test.Health/Check", endStream: true)
        #expect(client.status(of: 5) == "8", "RESOURCE_EXHAUSTED")
        #expect(client.status(of: 1) == nil && client.status(of: 3) == nil)
        // One held call ends: its place is free again.
        try client.send(Frame(type: Frame.rstStream, flags: 0, streamID: 1, payload: [0, 0, 0, 8]))
        #expect(client.budget.count == 1)
        try client.open(7, path: "/test.Health/Check")
        try client.send(Frame(type: Frame.data, flags: Frame.endStream, streamID: 7, payload: [0, 0, 0, 0, 0]))
        #expect(client.status(of: 7) == "0")
        #expect(client.isOpen, "refusals are per call: the connection serves on")
    }

    @Test func callsNeedingATokenHoldAPlaceUntilTheirHandlerStarts() throws {
        let client = try Client(limits: limits { $0.maxUnauthenticatedCalls = 1 })
        try client.sendPreface()
        try client.open(1, path: "/test.Echo/Now")
        #expect(client.budget.count == 1, "its request has not ended: no handler has checked a token yet")
        try client.send(Frame(type: Frame.data, flags: Frame.endStream, streamID: 1, payload: [0, 0, 0, 0, 0]))
        #expect(client.budget.count == 0)
    }

    @Test func overTheBudgetACallWhoseTokenVerifiesGoesThrough() throws {
        let client = try Client(limits: limits { $0.maxUnauthenticatedCalls = 1 }) { metadata in
            metadata["authorization"] == "Bearer good"
        }
        try client.sendPreface()
        try client.open(1, path: "/test.Health/Check")
        try client.open(3, path: "/test.Echo/Now", authorization: "Bearer bad", endStream: true)
        try client.open(5, path: "/test.Echo/Now", endStream: true)
        try client.open(7, path: "/test.Echo/Now", authorization: "Bearer good")
        try client.send(Frame(type: Frame.data, flags: Frame.endStream, streamID: 7, payload: [0, 0, 0, 0, 0]))
        #expect(client.status(of: 3) == "8")
        #expect(client.status(of: 5) == "8")
        #expect(client.status(of: 7) == "0")
        #expect(client.budget.count == 1)
    }

    @Test func aLostConnectionGivesItsPlacesBack() throws {
        let client = try Client(limits: limits { $0.maxUnauthenticatedCalls = 4 })
        try client.sendPreface()
        try client.open(1, path: "/test.Health/Check")
        try client.open(3, path: "/test.Echo/Now")
        #expect(client.budget.count == 2)
        _ = try client.channel.finish(acceptAlreadyClosed: true)
        #expect(client.budget.count == 0)
    }
}
