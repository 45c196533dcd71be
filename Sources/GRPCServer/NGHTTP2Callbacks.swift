import CNGHTTP2
import GRPCProtocol

/// The nghttp2 callback table, made once and shared by every session, and the session options of
/// each (nghttp2 copies both at `nghttp2_session_server_new2`).
///
/// Each callback is a non-capturing trampoline: it recovers the `HTTP2Connection` from the
/// session's user data and calls a Swift method. No Swift error crosses these C frames; every
/// callback returns 0 except where nghttp2 defines a special return.
final class NGHTTP2Callbacks: @unchecked Sendable {
    // @unchecked Sendable: the pointer is written once in init and only read afterwards.
    let callbacks: OpaquePointer

    static let shared = NGHTTP2Callbacks()

    private init() {
        var callbacks: OpaquePointer?
        precondition(nghttp2_session_callbacks_new(&callbacks) == 0, "nghttp2_session_callbacks_new failed")
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, Self.onBeginHeaders)
        nghttp2_session_callbacks_set_on_header_callback(callbacks, Self.onHeader)
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, Self.onFrameRecv)
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, Self.onDataChunkRecv)
        nghttp2_session_callbacks_set_on_frame_send_callback(callbacks, Self.onFrameSend)
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, Self.onStreamClose)
        nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(callbacks, Self.onInvalidFrameRecv)
        self.callbacks = callbacks!
    }

    /// Runs `body` with the session options of a connection (freed afterwards: nghttp2 copies
    /// them into the session).
    func withOptions<Result>(_ body: (OpaquePointer) -> Result) -> Result {
        var options: OpaquePointer?
        precondition(nghttp2_option_new(&options) == 0, "nghttp2_option_new failed")
        defer { nghttp2_option_del(options) }
        // Windows reopen only as the server takes bytes (nghttp2_session_consume), so a client
        // cannot push more than the server has agreed to hold.
        nghttp2_option_set_no_auto_window_update(options, 1)
        // The connection's own reset budget (TransportLimits, HTTP2Connection+ResetFlood.swift)
        // replaces nghttp2's: it sees every RST_STREAM nghttp2's sees (on_frame_recv is called
        // for each before nghttp2 counts it), counts refused streams too, and ends the connection
        // at once, where nghttp2's answers INTERNAL_ERROR and waits for the streams to close.
        _ = groupd_nghttp2_option_set_stream_reset_rate_limit(options, UInt64.max, UInt64.max)
        // A header block may span this many frames (nghttp2's default, 8 CONTINUATIONs, ends the
        // connection of a client sending a 256 KiB metadata value; the guard and the header
        // list limit make any smaller block a refusal of its own stream).
        nghttp2_option_set_max_continuations(options, HeaderFieldGuard.maxHeaderBlockFrames - 1)
        return body(options!)
    }

    private static func connection(_ userData: UnsafeMutableRawPointer?) -> HTTP2Connection {
        Unmanaged<HTTP2Connection>.fromOpaque(userData!).takeUnretainedValue()
    }

    private static let headersType = UInt8(NGHTTP2_HEADERS.rawValue)
    private static let dataType = UInt8(NGHTTP2_DATA.rawValue)
    private static let endStreamFlag = UInt8(NGHTTP2_FLAG_END_STREAM.rawValue)
    private static let pingType = UInt8(NGHTTP2_PING.rawValue)
    private static let settingsType = UInt8(NGHTTP2_SETTINGS.rawValue)
    private static let rstStreamType = UInt8(NGHTTP2_RST_STREAM.rawValue)
    private static let ackFlag = UInt8(NGHTTP2_FLAG_ACK.rawValue)
    private static let requestCategory = Int32(NGHTTP2_HCAT_REQUEST.rawValue)

    private static let onBeginHeaders: nghttp2_on_begin_headers_callback = { _, frame, userData in
        guard let frame else { return 0 }
        if groupd_nghttp2_frame_type(frame) == headersType && groupd_nghttp2_frame_headers_category(frame) == requestCategory {
            connection(userData).onBeginHeaders(streamID: groupd_nghttp2_frame_stream_id(frame))
        }
        return 0
    }

    private static let onHeader: nghttp2_on_header_callback = { _, frame, name, nameLength, value, valueLength, _, userData in
        guard let frame else { return 0 }
        connection(userData).onHeader(
            streamID: groupd_nghttp2_frame_stream_id(frame),
            isRequestHeaders: groupd_nghttp2_frame_headers_category(frame) == requestCategory,
            name: UnsafeBufferPointer(start: name, count: nameLength),
            value: UnsafeBufferPointer(start: value, count: valueLength)
        )
        return 0
    }

    private static let onFrameRecv: nghttp2_on_frame_recv_callback = { _, frame, userData in
        guard let frame else { return 0 }
        let type = groupd_nghttp2_frame_type(frame)
        let streamID = groupd_nghttp2_frame_stream_id(frame)
        let endStream = groupd_nghttp2_frame_flags(frame) & endStreamFlag != 0
        if type == headersType {
            if groupd_nghttp2_frame_headers_category(frame) == requestCategory {
                connection(userData).onRequestHeadersComplete(streamID: streamID, endStream: endStream)
            } else if endStream {
                connection(userData).onEndOfRequest(streamID: streamID)
            }
        } else if type == dataType && endStream {
            connection(userData).onEndOfRequest(streamID: streamID)
        } else if type == pingType {
            connection(userData).onPingReceived(ack: groupd_nghttp2_frame_flags(frame) & ackFlag != 0)
        } else if type == settingsType && groupd_nghttp2_frame_flags(frame) & ackFlag == 0 {
            connection(userData).onSettingsReceived()
        } else if type == rstStreamType {
            connection(userData).onStreamResetByClient()
        }
        return 0
    }

    /// A frame nghttp2 refused: on a stream, that stream was reset for the client's fault
    /// (REFUSED_STREAM past SETTINGS_MAX_CONCURRENT_STREAMS, a malformed request, a frame on a
    /// closed stream); on stream 0 the connection is ending anyway.
    private static let onInvalidFrameRecv: nghttp2_on_invalid_frame_recv_callback = { _, frame, _, userData in
        guard let frame else { return 0 }
        if groupd_nghttp2_frame_stream_id(frame) != 0 {
            connection(userData).onStreamRefused()
        }
        return 0
    }

    private static let onDataChunkRecv: nghttp2_on_data_chunk_recv_callback = { _, _, streamID, data, length, userData in
        connection(userData).onDataChunk(streamID: streamID, data: UnsafeRawBufferPointer(start: data, count: length))
        return 0
    }

    private static let onFrameSend: nghttp2_on_frame_send_callback = { _, frame, userData in
        guard let frame else { return 0 }
        let type = groupd_nghttp2_frame_type(frame)
        if type == headersType || type == dataType {
            connection(userData).onFrameSent(
                streamID: groupd_nghttp2_frame_stream_id(frame),
                endStream: groupd_nghttp2_frame_flags(frame) & endStreamFlag != 0
            )
        }
        return 0
    }

    private static let onStreamClose: nghttp2_on_stream_close_callback = { _, streamID, _, userData in
        connection(userData).onStreamClose(streamID: streamID)
        return 0
    }

    /// The data provider's read callback: fills a DATA frame from the stream's queue.
    static let readCallback: nghttp2_data_source_read_callback = { _, streamID, buffer, length, flags, _, userData in
        connection(userData).readData(
            streamID: streamID,
            into: UnsafeMutableRawBufferPointer(start: buffer, count: length),
            flags: flags!
        )
    }
}
