import CNGHTTP2

/// The nghttp2 callback table and session options of client sessions, made once and shared
/// (nghttp2 copies both at `nghttp2_session_client_new2`).
///
/// Each callback is a non-capturing trampoline: it recovers the ``HTTP2ClientHandler`` from the
/// session's user data and calls a Swift method. No Swift error crosses these C frames.
final class NGHTTP2ClientCallbacks: @unchecked Sendable {
    // @unchecked Sendable: both pointers are written once in init and only read afterwards.
    let callbacks: OpaquePointer
    let options: OpaquePointer

    static let shared = NGHTTP2ClientCallbacks()

    private init() {
        var callbacks: OpaquePointer?
        precondition(nghttp2_session_callbacks_new(&callbacks) == 0, "nghttp2_session_callbacks_new failed")
        nghttp2_session_callbacks_set_on_header_callback(callbacks, Self.onHeader)
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, Self.onFrameRecv)
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, Self.onDataChunkRecv)
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, Self.onStreamClose)
        self.callbacks = callbacks!

        var options: OpaquePointer?
        precondition(nghttp2_option_new(&options) == 0, "nghttp2_option_new failed")
        // Windows reopen as the caller takes messages (nghttp2_session_consume), so a slow reader
        // holds the server back instead of buffering without bound.
        nghttp2_option_set_no_auto_window_update(options, 1)
        self.options = options!
    }

    private static func handler(_ userData: UnsafeMutableRawPointer?) -> HTTP2ClientHandler {
        Unmanaged<HTTP2ClientHandler>.fromOpaque(userData!).takeUnretainedValue()
    }

    private static let headersType = UInt8(NGHTTP2_HEADERS.rawValue)
    private static let goAwayType = UInt8(NGHTTP2_GOAWAY.rawValue)
    private static let endStreamFlag = UInt8(NGHTTP2_FLAG_END_STREAM.rawValue)

    private static let onHeader: nghttp2_on_header_callback = { _, frame, name, nameLength, value, valueLength, _, userData in
        guard let frame else { return 0 }
        handler(userData).onHeader(
            streamID: groupd_nghttp2_frame_stream_id(frame),
            name: String(decoding: UnsafeBufferPointer(start: name, count: nameLength), as: UTF8.self),
            value: String(decoding: UnsafeBufferPointer(start: value, count: valueLength), as: UTF8.self)
        )
        return 0
    }

    private static let onFrameRecv: nghttp2_on_frame_recv_callback = { _, frame, userData in
        guard let frame else { return 0 }
        let type = groupd_nghttp2_frame_type(frame)
        if type == headersType {
            handler(userData).onHeadersComplete(
                streamID: groupd_nghttp2_frame_stream_id(frame),
                endStream: groupd_nghttp2_frame_flags(frame) & endStreamFlag != 0
            )
        } else if type == goAwayType {
            handler(userData).onGoAway()
        }
        return 0
    }

    private static let onDataChunkRecv: nghttp2_on_data_chunk_recv_callback = { _, _, streamID, data, length, userData in
        handler(userData).onDataChunk(streamID: streamID, data: UnsafeRawBufferPointer(start: data, count: length))
        return 0
    }

    private static let onStreamClose: nghttp2_on_stream_close_callback = { _, streamID, errorCode, userData in
        handler(userData).onStreamClose(streamID: streamID, errorCode: errorCode)
        return 0
    }

    /// The request body's read callback: copies the call's framed request into DATA frames and
    /// ends the stream after the last byte.
    static let readCallback: nghttp2_data_source_read_callback = { _, streamID, buffer, length, flags, _, userData in
        handler(userData).readRequest(
            streamID: streamID,
            into: UnsafeMutableRawBufferPointer(start: buffer, count: length),
            flags: flags!
        )
    }
}
