import ArgumentParser
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import ServiceLifecycle

/// What a `LocalHTTPEndpoint` sends back for one request.
struct LocalHTTPAnswer: Sendable {
    var status: HTTPResponseStatus
    var body: [UInt8]
    var contentType = "text/plain; charset=utf-8"
    /// The `Content-Length` announced when it is not the body's (a HEAD answer sends none of it).
    var contentLength: Int? = nil
    /// The `Allow` header, sent when set (a 405's list of methods).
    var allow: String? = nil
}

extension LocalHTTPAnswer {
    /// A plain-text answer.
    init(_ status: HTTPResponseStatus, _ text: String, allow: String? = nil) {
        self.init(status: status, body: Array(text.utf8), allow: allow)
    }
}

/// A small HTTP/1.1 server on the server's event loops (the metrics and test-clock endpoints).
/// ``bind(what:)`` opens its socket (``Serve`` binds every endpoint before the gRPC listener, so
/// a client that reached the gRPC port finds them up); the ``BoundEndpoint`` it returns serves
/// until graceful shutdown. Each request is answered by `answer`, which runs on a task of the
/// cooperative pool, off the event loops.
struct LocalHTTPEndpoint {
    let host: String
    let port: Int
    let backlog: Int32
    let group: any EventLoopGroup
    let logger: Logger
    let answer: @Sendable (HTTPRequestHead) async -> LocalHTTPAnswer

    /// Binds the endpoint's socket; it accepts connections from then on.
    /// - Parameter what: what the endpoint serves, for the error logged when it cannot listen
    ///   ("cannot listen for <what> on host:port: error").
    /// - Returns: the endpoint as a lifecycle service, with the address it listens on.
    /// - Throws: `ExitCode(1)` when it cannot bind, after logging why: groupd does not start,
    ///   since the endpoint was asked for and cannot be served.
    func bind(what: String) async throws -> BoundEndpoint {
        let answer = self.answer
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: backlog)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(LocalHTTPHandler(answer: answer))
                }
            }
        let channel: any Channel
        do {
            channel = try await bootstrap.bind(host: host, port: port).get()
        } catch {
            logger.error("cannot listen for \(what) on \(listenAddress(host, port)): \(bindFailure(error))")
            throw ExitCode(1)
        }
        return BoundEndpoint(channel: channel, address: "\(host):\(channel.localAddress?.port ?? port)")
    }
}

/// A bound ``LocalHTTPEndpoint`` as a lifecycle service: serves until graceful shutdown, then
/// closes its socket.
struct BoundEndpoint: Service {
    let channel: any Channel
    /// Where it listens (host:port).
    let address: String

    func run() async throws {
        try? await gracefulShutdown()
        try? await channel.close()
    }

    /// Closes the socket without serving (a later start-up step failed).
    func close() async {
        try? await channel.close()
    }
}

/// Answers one connection's requests, in order (the HTTP server pipeline holds the next request
/// until the answer to this one is written).
final class LocalHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let answer: @Sendable (HTTPRequestHead) async -> LocalHTTPAnswer
    private var request: HTTPRequestHead?
    /// False once the handler left the pipeline: an answer finishing later writes nothing.
    private var attached = true

    init(answer: @escaping @Sendable (HTTPRequestHead) async -> LocalHTTPAnswer) {
        self.answer = answer
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
            let answer = self.answer
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            let eventLoop = context.eventLoop
            Task.detached {
                let response = await answer(head)
                eventLoop.execute {
                    let (handler, context) = bound.value
                    guard handler.attached else { return }
                    handler.respond(response, head: head, context: context)
                }
            }
        }
    }

    private func respond(_ response: LocalHTTPAnswer, head: HTTPRequestHead, context: ChannelHandlerContext) {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: response.contentType)
        headers.add(name: "Content-Length", value: String(response.contentLength ?? response.body.count))
        if let allow = response.allow { headers.add(name: "Allow", value: allow) }
        let keepAlive = head.isKeepAlive
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: response.status, headers: headers))),
            promise: nil)
        if !response.body.isEmpty {
            var buffer = context.channel.allocator.buffer(capacity: response.body.count)
            buffer.writeBytes(response.body)
            context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        }
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive {
            let channel = context.channel
            done.whenComplete { _ in channel.close(promise: nil) }
        }
    }
}
