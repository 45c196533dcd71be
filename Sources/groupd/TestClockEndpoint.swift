import GroupModel
import GroupService
import Logging
import NIOCore
import NIOHTTP1
import ServiceLifecycle

/// The manual clock's control endpoint (`testing.clock: manual`, `testing.clock_port`): HTTP/1.1
/// on 127.0.0.1 only, for groupd's own tests.
///
/// - `GET /clock` answers the time the clock stands at, in milliseconds since the Unix epoch.
/// - `POST /clock/advance?ms=N` (N from 0 to 10 years) lets the periodic jobs finish what they
///   are doing, moves the clock forward by N ms, and answers the new time once every job the move
///   woke (the retention pass) has finished its run: when the answer arrives, what the advance
///   made due has been done.
enum TestClockEndpoint {
    /// The largest advance accepted, in milliseconds (ten years).
    static let maximumAdvance: Int64 = 10 * 366 * 86_400_000

    /// Binds the endpoint on 127.0.0.1 (it serves once the returned service runs).
    /// - Throws: `ExitCode(1)` when the port cannot be bound, after logging why.
    static func bind(clock: ManualWallClock, port: Int, group: any EventLoopGroup, logger: Logger) async throws -> BoundEndpoint {
        let endpoint = LocalHTTPEndpoint(
            host: "127.0.0.1", port: port, backlog: 16, group: group, logger: logger,
            answer: { head in await Self.answer(head, clock: clock) })
        let bound = try await endpoint.bind(what: "the test clock")
        logger.warning(
            "testing.clock is manual: the server's time stands still until advanced; for tests only",
            metadata: ["address": "\(bound.address)", "path": "/clock/advance?ms=N"])
        return bound
    }

    /// The answer to one request.
    static func answer(_ head: HTTPRequestHead, clock: ManualWallClock) async -> LocalHTTPAnswer {
        let parts = head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let path = parts.first.map(String.init) ?? ""
        let query = parts.count > 1 ? String(parts[1]) : ""
        switch (path, head.method) {
        case ("/clock", .GET):
            return LocalHTTPAnswer(.ok, "\(clock.now().millisecondsSince1970)\n")
        case ("/clock/advance", .POST):
            let values = query.split(separator: "&").filter { $0.hasPrefix("ms=") }.map { $0.dropFirst(3) }
            guard values.count == 1, let milliseconds = Int64(values[0]), (0...maximumAdvance).contains(milliseconds) else {
                return LocalHTTPAnswer(.badRequest, "expected ?ms=N with N from 0 to \(maximumAdvance)\n")
            }
            // The server's one periodic job (the retention pass) has started and finished its
            // run first, so that the advance reaches its next turn rather than landing inside a run.
            await clock.settle(jobs: 1)
            clock.advance(milliseconds: milliseconds)
            await clock.settle(jobs: 1)
            return LocalHTTPAnswer(.ok, "\(clock.now().millisecondsSince1970)\n")
        case ("/clock", _), ("/clock/advance", _):
            return LocalHTTPAnswer(.methodNotAllowed, "use GET /clock or POST /clock/advance?ms=N\n")
        default:
            return LocalHTTPAnswer(.notFound, "not found; the clock is at /clock and /clock/advance?ms=N\n")
        }
    }
}
