import GroupService
import Logging
import NIOCore
import NIOHTTP1
import ServiceLifecycle

/// The Prometheus endpoint (`metrics: {host, port}`): HTTP/1.1 on the server's event loops,
/// `GET /metrics` answers the text exposition format, anything else 404 (405 for another
/// method on `/metrics`). The exposition is rendered off the event loops, on a task of the
/// cooperative pool, so a scrape never stalls the connections of the loop it arrived on.
enum MetricsEndpoint {
    /// Binds the endpoint (it serves once the returned service runs).
    /// - Throws: `ExitCode(1)` when the port cannot be bound, after logging why.
    static func bind(
        metrics: GroupdMetrics, settings: MetricsSettings, group: any EventLoopGroup, logger: Logger
    ) async throws -> BoundEndpoint {
        let endpoint = LocalHTTPEndpoint(
            host: settings.host, port: settings.port, backlog: 64, group: group, logger: logger,
            answer: { head in Self.answer(head, metrics: metrics) })
        let bound = try await endpoint.bind(what: "metrics")
        logger.info("metrics endpoint listening", metadata: ["address": "\(bound.address)", "path": "/metrics"])
        return bound
    }

    /// The answer to one request.
    static func answer(_ head: HTTPRequestHead, metrics: GroupdMetrics) -> LocalHTTPAnswer {
        let path = head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
        guard path == "/metrics" else {
            return LocalHTTPAnswer(.notFound, "not found; the metrics are at /metrics\n")
        }
        guard head.method == .GET || head.method == .HEAD else {
            return LocalHTTPAnswer(.methodNotAllowed, "use GET\n", allow: "GET, HEAD")
        }
        let body = metrics.render()
        return LocalHTTPAnswer(
            status: .ok, body: head.method == .HEAD ? [] : body, contentType: "text/plain; version=0.0.4; charset=utf-8",
            contentLength: body.count)
    }
}
