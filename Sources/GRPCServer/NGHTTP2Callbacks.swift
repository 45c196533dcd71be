import CNGHTTP2

/// The nghttp2 callback table and session options, made once and shared by every session
/// (nghttp2 copies both at `nghttp2_session_server_new2`).
///
/// Each callback is a non-capturing trampoline: it recovers the `HTTP2Connection` from the
/// session's user data and calls a Swift method. No Swift error crosses these C frames; every
/// callback returns 0 except where nghttp2 defines a special return.
final class NGHTTP2Callbacks: @unchecked Sendable {
    // @unchecked Sendable: both pointers are written once in init and only read afterwards.
    let callbacks: OpaquePointer
    let options: OpaquePointer

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
        self.callbacks = callbacks!

        var options: OpaquePointer?
        precondition(nghttp2_option_new(&options) == 0, "nghttp2_option_new failed")
        // Windows reopen only as the server takes bytes (nghttp2_session_consume), so a client
        // cannot push more than the server has agreed to hold.
        nghttp2_option_set_no_auto_window_update(options, 1)
        self.options = options!
    }

    private static func connection(_ userData: UnsafeMutableRawPointer?) -> HTTP2Connection {
        Unmanaged<HTTP2Connection>.fromOpaque(userData!).takeUnretainedValue()
    }

    private static let headersType = UInt8(NGHTTP2_HEADERS.rawValue)
    private static let dataType = UInt8(NGHTTP2_DATA.rawValue)
    private static let endStreamFlag = UInt8(NGHTTP2_FLAG_END_STREAM.rawValue)
    private static let pingType = UInt8(NGHTTP2_PING.rawValue)
    private static let settingsType = UInt8(NGHTTP2_SETTINGS.rawValue)
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
