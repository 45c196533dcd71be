import CNGHTTP2
import GRPCProtocol
import Logging
import NIOCore

/// The defence against rapid reset (CVE-2023-44487): a client that opens streams and resets them
/// at once makes the server pay for each stream while it pays a few bytes. Every stream the
/// client resets, and every stream nghttp2 must refuse or reset for the client's fault, takes a
/// token from the connection's ``TokenBucket`` (``TransportLimits/resetBurst`` tokens,
/// ``TransportLimits/resetsPerSecond`` back each second). When none is left the connection gets
/// GOAWAY `ENHANCE_YOUR_CALM` naming the last stream processed, the rest of its input is dropped
/// unread, no call it made ready starts, and it closes once the GOAWAY is written.
extension HTTP2Connection {
    /// The debug data of the GOAWAY sent for too many resets.
    static let tooManyResetsDebugData: [UInt8] = Array("too_many_resets".utf8)

    /// Bytes handed to nghttp2 at a time: a connection a defence ends mid-read is stopped within
    /// this many bytes of the frame that ended it.
    static let inputSliceBytes = 4096

    /// A full bucket for `limits`.
    static func makeResetBucket(_ limits: TransportLimits, now: NIODeadline) -> TokenBucket {
        TokenBucket(capacity: limits.resetBurst, refillPerSecond: limits.resetsPerSecond, now: now)
    }

    /// The client sent RST_STREAM (from inside `mem_recv`). A stream not yet started is dropped
    /// by `onStreamClose` before the end of the read, so its handler never runs; a started one has
    /// its task cancelled there.
    func onStreamResetByClient() {
        chargeReset()
    }

    /// nghttp2 refused or reset a stream for the client's fault (from inside `mem_recv`).
    func onStreamRefused() {
        chargeReset()
    }

    /// Takes a token; with none left, ends the connection.
    private func chargeReset() {
        guard !terminating, let context else { return }
        if resetBucket.take(at: context.eventLoop.now) { return }
        endForResetFlood(context: context)
    }

    private func endForResetFlood(context: ChannelHandlerContext) {
        guard let session else { return }
        let lastStreamID = nghttp2_session_get_last_proc_stream_id(session)
        Self.tooManyResetsDebugData.withUnsafeBufferPointer { debug in
            _ = nghttp2_submit_goaway(
                session, UInt8(NGHTTP2_FLAG_NONE.rawValue), lastStreamID,
                UInt32(NGHTTP2_ENHANCE_YOUR_CALM.rawValue), debug.baseAddress, debug.count)
        }
        // Closed once the GOAWAY is written, calls in flight or not; channelRead stops feeding.
        draining = true
        finalGoAwaySubmitted = true
        terminating = true
        configuration.callObserver?.defenceTriggered(.resetFlood)
        let limits = configuration.limits
        defenceLog.record(.resetFlood, "client resets streams too fast: GOAWAY ENHANCE_YOUR_CALM", metadata: [
            "peer": "\(context.channel.remoteAddress?.peerDescription ?? "?")",
            "last_stream_id": "\(lastStreamID)",
            "reset_burst": "\(limits.resetBurst)",
            "resets_per_second": "\(limits.resetsPerSecond)",
        ])
    }
}
