import CNGHTTP2
import GRPCProtocol
import NIOCore

/// Responses (Trailers-Only refusals, response headers, trailers) and the graceful shutdown.
extension HTTP2Connection {
    // MARK: Graceful shutdown

    func beginDraining() {
        guard let session, let context, !draining else { return }
        draining = true
        // First GOAWAY with the maximum stream id: clients stop opening streams, and the ones
        // already in flight to us are still served.
        nghttp2_submit_shutdown_notice(session)
        flush()
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        context.eventLoop.scheduleTask(in: .milliseconds(200)) {
            let connection = bound.value
            guard let session = connection.session else { return }
            nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nghttp2_session_get_last_proc_stream_id(session), UInt32(NGHTTP2_NO_ERROR.rawValue), nil, 0)
            connection.finalGoAwaySubmitted = true
            connection.flush()
        }
    }

    // MARK: Submitting responses

    /// A response that ends the call at once, as a Trailers-Only HEADERS frame.
    enum ImmediateResponse: Error {
        case status(GRPCStatus)
        case unsupportedEncoding([UInt8])
        case httpStatus(Int, GRPCStatus)

        /// The call's status.
        var status: GRPCStatus {
            switch self {
            case .status(let status), .httpStatus(_, let status):
                status
            case .unsupportedEncoding(let encoding):
                GRPCStatus(
                    .unimplemented,
                    "grpc-encoding \(String(decoding: encoding, as: UTF8.self)) is not supported; use one of \(GRPCCompression.acceptEncoding)")
            }
        }

        /// The HTTP status of its HEADERS frame.
        var httpStatus: Int {
            if case .httpStatus(let code, _) = self { code } else { 200 }
        }
    }

    /// Ends the call at once with `response` (Trailers-Only when nothing went out yet).
    func respond(_ stream: HTTP2Stream, _ response: ImmediateResponse) {
        end(stream, status: response.status, httpStatus: response.httpStatus)
    }

    /// Decides the call's outcome, unless it is known already; no write is taken from then on,
    /// and a detached call's owner learns it here.
    func end(_ stream: HTTP2Stream, status: GRPCStatus, httpStatus: Int) {
        guard let session else { return }
        if stream.isConnect, !stream.state.outcomeKnown { queueConnectOutcome(stream, status: status) }
        let action = stream.state.finish(status)
        if action == .alreadyKnown { return }
        defer {
            stream.writer?.close()
            stream.requests?.cancel()
        }
        observeCallEnd(stream, status: status)
        switch action {
        case .trailersOnly:
            stream.deadlineTask?.cancel()
            stream.task?.cancel()
            var fields = HeaderFields()
            fields.append(StaticHeaders.shared.status(httpStatus))
            fields.append(StaticHeaders.shared.contentType)
            fields.append(StaticHeaders.shared.acceptEncoding)
            fields.appendStatus(status)
            fields.withNVArray { nva, count in
                _ = nghttp2_submit_response(session, stream.id, nva, count, nil)
            }
        case .trailersAfterMessages(let resume):
            if resume { nghttp2_session_resume_data(session, stream.id) }
        case .alreadyKnown:
            break
        }
    }

    /// Submits the response headers with the data provider that sends the queued messages (the
    /// stream's state says when: ``HTTP2StreamState/messageQueued()``).
    func submitResponseHeaders(_ stream: HTTP2Stream) {
        guard let session else { return }
        var provider = nghttp2_data_provider()
        provider.read_callback = NGHTTP2Callbacks.readCallback
        if stream.isConnect {
            let head = stream.connectHead ?? ConnectResponseHead(status: 200, headers: [])
            var fields = HeaderFields()
            fields.append(name: ":status", value: Array(String(head.status).utf8))
            for header in head.headers { fields.append(name: header.name, value: Array(header.value.utf8)) }
            fields.withNVArray { nva, count in
                _ = nghttp2_submit_response(session, stream.id, nva, count, &provider)
            }
            return
        }
        let headers = StaticHeaders.shared.responseHeaders(stream.responseCompression)
        _ = headers.withUnsafeBufferPointer { nva in
            nghttp2_submit_response(session, stream.id, nva.baseAddress, nva.count, &provider)
        }
    }

    func submitTrailers(session: OpaquePointer, streamID: Int32, status: GRPCStatus) {
        if status.code == .ok && status.message.isEmpty && status.details == nil {
            let trailers = StaticHeaders.shared.okTrailers
            _ = trailers.withUnsafeBufferPointer { nva in
                nghttp2_submit_trailer(session, streamID, nva.baseAddress, nva.count)
            }
            return
        }
        var fields = HeaderFields()
        fields.appendStatus(status)
        fields.withNVArray { nva, count in
            _ = nghttp2_submit_trailer(session, streamID, nva, count)
        }
    }
}
