import GRPCProtocol
import NIOCore

/// How the connection reports to the server's ``CallObserver``.
extension SocketAddress {
    /// `ip:port`, `[ip]:port` for IPv6, the path for a Unix socket.
    var peerDescription: String {
        switch self {
        case .v4:
            return "\(ipAddress ?? "?"):\(port ?? 0)"
        case .v6:
            return "[\(ipAddress ?? "?")]:\(port ?? 0)"
        case .unixDomainSocket:
            return pathname ?? "unix"
        }
    }
}

// MARK: The connection's observation points

extension HTTP2Connection {
    /// A call's request headers are complete: stamp its start.
    func observeCallStart(_ stream: HTTP2Stream) {
        guard let observer = configuration.callObserver, observer.observesCalls else { return }
        stream.observedStart = DispatchTimeNanos.now()
        stream.annotations = CallAnnotations()
        observer.callStarted(path: stream.path)
    }

    /// A call's outcome is decided (first time only).
    func observeCallEnd(_ stream: HTTP2Stream, status: GRPCStatus) {
        guard stream.observedStart != 0, let observer = configuration.callObserver else { return }
        let elapsed = DispatchTimeNanos.now() &- stream.observedStart
        stream.observedStart = 0
        observer.callFinished(FinishedCall(
            path: stream.path, status: status, durationNanoseconds: Int64(truncatingIfNeeded: elapsed),
            peer: peer, metadata: stream.observedMetadata ?? stream.metadata, annotations: stream.annotations,
            callProtocol: stream.isConnect ? .connect : .grpc))
    }

    /// A stream is gone: a call still without an outcome ends as cancelled.
    func observeStreamGone(_ stream: HTTP2Stream) {
        guard let observer = configuration.callObserver else { return }
        if !stream.state.outcomeKnown {
            observeCallEnd(stream, status: GRPCStatus(.cancelled, "the stream was reset or its connection lost"))
        }
        observer.streamClosed()
    }
}

/// The monotonic clock, in nanoseconds (never 0 once the machine is up).
enum DispatchTimeNanos {
    static func now() -> UInt64 {
        UInt64(NIODeadline.now().uptimeNanoseconds) | 1
    }
}
