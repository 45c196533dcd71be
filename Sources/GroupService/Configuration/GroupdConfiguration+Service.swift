// The configuration loader and the token check live in GroupdConfig, a module light enough for the
// fuzz targets (no store, no metrics); re-exported, so that `import GroupService` sees
// `GroupdConfiguration`, `Authenticator` and `Caller` as before. Here: the parts of the
// configuration that speak the store's or the service's own types (the store's batching, a
// reload's restart-only keys, the transport's refusal as a gRPC status).
@_exported public import GroupdConfig
public import GroupStore
import GRPCServer
import GroupModel
import NIOCore

extension GroupdConfiguration {
    /// The store's batching, from ``writeBatch``.
    public var writeBatching: WriteBatching {
        WriteBatching(maxWrites: writeBatch.maxWrites, maxWait: .microseconds(writeBatch.maxWaitMicroseconds))
    }

    /// `self` with the transport keys a reload cannot change set to `running`'s values: TLS on or
    /// off (the listener's kind), `tls.handshake_timeout_seconds` and every `keepalive` key (each
    /// connection takes them when it is accepted). The TLS files reload.
    func keepingRestartOnlyTransportKeys(of running: GroupdConfiguration) -> (GroupdConfiguration, [RestartOnlyChange]) {
        var kept = self
        var changes: [RestartOnlyChange] = []
        if keepalive != running.keepalive {
            changes.append(RestartOnlyChange(key: "keepalive", running: "\(running.keepalive)", requested: "\(keepalive)"))
            kept.keepalive = running.keepalive
        }
        switch (tls, running.tls) {
        case (nil, nil):
            break
        case (let requested?, let inForce?):
            if requested.handshakeTimeoutSeconds != inForce.handshakeTimeoutSeconds {
                changes.append(RestartOnlyChange(
                    key: "tls.handshake_timeout_seconds", running: "\(inForce.handshakeTimeoutSeconds)",
                    requested: "\(requested.handshakeTimeoutSeconds)"))
                kept.tls?.handshakeTimeoutSeconds = inForce.handshakeTimeoutSeconds
            }
        default:
            changes.append(RestartOnlyChange(
                key: "tls", running: running.tls == nil ? "off (h2c)" : "on", requested: tls == nil ? "off (h2c)" : "on"))
            kept.tls = running.tls
        }
        return (kept, changes)
    }
}

extension GroupdConfiguration.Transport {
    /// The transport's limits.
    public var limits: TransportLimits {
        func amount(_ seconds: Double) -> TimeAmount { .nanoseconds(Int64((seconds * 1e9).rounded())) }
        var limits = TransportLimits()
        limits.prefaceTimeout = amount(prefaceTimeoutSeconds)
        limits.unusedConnectionTimeout = idleTimeoutSeconds == 0 ? nil : amount(idleTimeoutSeconds)
        limits.maxUnauthenticatedCalls = maxUnauthenticatedCalls
        limits.unauthenticatedCallsRefusal = GroupError(
            code: .resourceExhausted, reason: .tooManyUnauthenticatedCalls,
            message: "\(maxUnauthenticatedCalls) calls without a verified token are in flight "
                + "(transport.max_unauthenticated_calls); retry later, or call with a valid token",
            metadata: ["limit": "\(maxUnauthenticatedCalls)"]
        ).grpcStatus
        limits.maxQueuedBytesPerConnection = maxQueuedBytesPerConnection
        limits.maxQueuedBytes = maxQueuedBytes
        limits.stalledWriteTimeout = amount(stalledWriteTimeoutSeconds)
        limits.resetBurst = resetBurst
        limits.resetsPerSecond = maxResetsPerSecond
        limits.readsPerTurn = readsPerTurn
        limits.readBufferBytes = readBufferBytes
        return limits
    }
}
