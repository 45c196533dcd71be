import GroupModel
import GroupService
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import ServiceLifecycle

/// The manual clock's control endpoint (`testing.clock: manual`, `testing.clock_port`): HTTP/1.1
/// on 127.0.0.1 only, for groupd's own tests.
///
/// - `GET /clock` answers the time the clock stands at, in milliseconds since the Unix epoch.
/// - `POST /clock/advance?ms=N` (N from 0 to 10 years) lets the periodic jobs finish what they
///   are doing, moves the clock forward by N ms, and answers the new time once every job the move
///   woke (the retention pass) has finished its run: when the answer arrives, what the advance
///   made due has been done.
struct TestClockEndpoint: Service {
    let clock: ManualWallClock
    let port: Int
    let group: any EventLoopGroup
    let logger: Logger

    /// The largest advance accepted, in milliseconds (ten years).
    static let maximumAdvance: Int64 = 10 * 366 * 86_400_000

    func run() async throws {
        let clock = self.clock
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 16)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(TestClockHTTPHandler(clock: clock))
                }
            }
        let channel: any Channel
        do {
            channel = try await bootstrap.bind(host: "127.0.0.1", port: port).get()
        } catch {
            logger.error("cannot listen for the test clock on 127.0.0.1:\(port): \(error)")
            throw error
        }
        logger.warning(
            "testing.clock is manual: the server's time stands still until advanced; for tests only",
            metadata: ["address": "127.0.0.1:\(channel.localAddress?.port ?? port)", "path": "/clock/advance?ms=N"])
        try? await gracefulShutdown()
        try? await channel.close()
    }
}

/// Answers one connection's clock requests, in order.
final class TestClockHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let clock: ManualWallClock
    private var request: HTTPRequestHead?
    /// False once the handler left the pipeline: an advance finishing later writes nothing.
    private var attached = true

    init(clock: ManualWallClock) {
        self.clock = clock
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        attached = false
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            request = head
        case .body:
            break
        case .end:
            guard let head = request else { return }
            request = nil
            answer(head, context: context)
        }
    }

    private func answer(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
        let parts = head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let path = parts.first.map(String.init) ?? ""
        let query = parts.count > 1 ? String(parts[1]) : ""
        switch (path, head.method) {
        case ("/clock", .GET):
            respond(.ok, "\(clock.now().millisecondsSince1970)\n", head: head, context: context)
        case ("/clock/advance", .POST):
            let values = query.split(separator: "&").filter { $0.hasPrefix("ms=") }.map { $0.dropFirst(3) }
            guard values.count == 1, let milliseconds = Int64(values[0]),
                (0...TestClockEndpoint.maximumAdvance).contains(milliseconds)
            else {
                respond(.badRequest, "expected ?ms=N with N from 0 to \(TestClockEndpoint.maximumAdvance)\n", head: head, context: context)
                return
            }
            let clock = self.clock
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            let eventLoop = context.eventLoop
            Task {
                // The server's one periodic job (the retention pass) has started and finished its
                // run first, so that the advance reaches its next turn rather than landing inside a run.
                await clock.settle(jobs: 1)
                clock.advance(milliseconds: milliseconds)
                await clock.settle(jobs: 1)
                let now = clock.now().millisecondsSince1970
                eventLoop.execute {
                    let (handler, context) = bound.value
                    guard handler.attached else { return }
                    handler.respond(.ok, "\(now)\n", head: head, context: context)
                }
            }
        case ("/clock", _), ("/clock/advance", _):
            respond(.methodNotAllowed, "use GET /clock or POST /clock/advance?ms=N\n", head: head, context: context)
        default:
            respond(.notFound, "not found; the clock is at /clock and /clock/advance?ms=N\n", head: head, context: context)
        }
    }

    private func respond(_ status: HTTPResponseStatus, _ text: String, head: HTTPRequestHead, context: ChannelHandlerContext) {
        let body = Array(text.utf8)
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
        headers.add(name: "Content-Length", value: String(body.count))
        let keepAlive = head.isKeepAlive
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
        var buffer = context.channel.allocator.buffer(capacity: body.count)
        buffer.writeBytes(body)
        context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive {
            let channel = context.channel
            done.whenComplete { _ in channel.close(promise: nil) }
        }
    }
}
