import GroupService
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import ServiceLifecycle

/// The Prometheus endpoint (`metrics: {host, port}`): HTTP/1.1 on the server's event loops,
/// `GET /metrics` answers the text exposition format, anything else 404 (405 for another
/// method on `/metrics`). The exposition is rendered off the event loops, on a task of the
/// cooperative pool, so a scrape never stalls the connections of the loop it arrived on.
struct MetricsEndpoint: Service {
    let metrics: GroupdMetrics
    let settings: MetricsSettings
    let group: any EventLoopGroup
    let logger: Logger

    func run() async throws {
        let metrics = self.metrics
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(MetricsHTTPHandler(metrics: metrics))
                }
            }
        let channel: any Channel
        do {
            channel = try await bootstrap.bind(host: settings.host, port: settings.port).get()
        } catch {
            // Stops the server: metrics were asked for and cannot be served.
            logger.error("cannot listen for metrics on \(settings.host):\(settings.port): \(error)")
            throw error
        }
        logger.info("metrics endpoint listening", metadata: [
            "address": "\(settings.host):\(channel.localAddress?.port ?? settings.port)", "path": "/metrics",
        ])
        try? await gracefulShutdown()
        try? await channel.close()
    }
}

/// Answers one connection's requests, in order.
final class MetricsHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let metrics: GroupdMetrics
    private var request: HTTPRequestHead?
    /// False once the handler left the pipeline: a render finishing later writes nothing.
    private var attached = true

    init(metrics: GroupdMetrics) {
        self.metrics = metrics
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
        let path = head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
        guard path == "/metrics" else {
            respond(status: .notFound, body: Array("not found; the metrics are at /metrics\n".utf8), head: head, context: context)
            return
        }
        guard head.method == .GET || head.method == .HEAD else {
            respond(status: .methodNotAllowed, body: Array("use GET\n".utf8), head: head, context: context, allow: true)
            return
        }
        let metrics = self.metrics
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let eventLoop = context.eventLoop
        Task.detached {
            let body = metrics.render()
            eventLoop.execute {
                let (handler, context) = bound.value
                guard handler.attached else { return }
                handler.respond(
                    status: .ok, body: head.method == .HEAD ? [] : body, head: head, context: context,
                    contentType: "text/plain; version=0.0.4; charset=utf-8", length: body.count)
            }
        }
    }

    private func respond(
        status: HTTPResponseStatus, body: [UInt8], head: HTTPRequestHead, context: ChannelHandlerContext,
        contentType: String = "text/plain; charset=utf-8", length: Int? = nil, allow: Bool = false
    ) {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: contentType)
        headers.add(name: "Content-Length", value: String(length ?? body.count))
        if allow { headers.add(name: "Allow", value: "GET, HEAD") }
        let keepAlive = head.isKeepAlive
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
        if !body.isEmpty {
            var buffer = context.channel.allocator.buffer(capacity: body.count)
            buffer.writeBytes(body)
            context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        }
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive {
            let channel = context.channel
            done.whenComplete { _ in channel.close(promise: nil) }
        }
    }
}
