import GRPCProtocol
import NIOCore

/// The state of one request stream, owned by its connection's event loop.
final class HTTP2Stream {
    let id: Int32
    var path = ""
    var isPost = false
    var contentTypeIsGRPC = false
    /// The `content-type` when it is not gRPC's (for the Connect protocol).
    var otherContentType: String?
    /// The `:method` when it is not `POST` (for the Connect protocol's refusal).
    var method = ""
    /// A Connect call (`ConnectProtocol`): its request is gathered whole, its responses go
    /// out as they are (no gRPC prefix) and it ends with END_STREAM on DATA, not with trailers.
    var isConnect = false
    /// The Connect call, once its head is accepted.
    var connectCall: ConnectCall?
    /// A Connect call's request body as it arrives.
    var connectBody: ByteBuffer?
    /// A Connect response's head, submitted with the first queued bytes.
    var connectHead: ConnectResponseHead?
    /// Whether the Connect call's last bytes (its response, error or end of stream) are queued.
    var connectOutcomeQueued = false
    var malformedTimeout = false
    var timeoutNanos: Int64?
    /// When the call must be over (`grpc-timeout`): the loop's timer, and the handler's context.
    var deadline: NIODeadline?
    var contextDeadline: ContinuousClock.Instant?
    /// The value of `grpc-encoding` when it names an encoding this server does not know.
    var encoding: [UInt8]?
    /// The request's `grpc-encoding` when it is one this server inflates.
    var requestCompression: GRPCCompression?
    /// The encodings `grpc-accept-encoding` lists (`GRPCCompression.bit`s), over all its lines.
    var acceptedEncodings: UInt8 = 0
    /// How response messages are compressed; nil: not at all (identity).
    var responseCompression: GRPCCompression?
    /// Response messages smaller than this go uncompressed.
    var responseCompressionMinBytes = 0
    var metadata = Metadata()
    var headerListBytes = 0
    var headersTooLarge = false
    /// Set when one request header field was longer than nghttp2's HPACK limit
    /// (``HeaderFieldGuard``) and replaced before decoding.
    var headerFieldTooLarge = false
    var handler: RPCHandler?
    var deframer: GRPCMessageDeframer
    var messageCount = 0
    var request: ByteBuffer?
    var task: Task<Void, Never>?
    /// How far the call and its response have come (``HTTP2StreamState``).
    var state = HTTP2StreamState()
    /// Whether and until when the call holds a place in the budget of calls without a verified token.
    var unauthenticatedPlace = UnauthenticatedPlace.none
    var deadlineTask: Scheduled<Void>?
    var writer: ServerStreamWriter?
    /// The request messages of a bidirectional-streaming call, fed as they arrive.
    var requests: ServerRequestStream.Source?
    /// The sequence of those messages until the handler starts and takes it.
    var pendingRequests: ServerRequestStream?
    /// Request bytes received (bidirectional streaming: their window reopens as messages are taken).
    var receivedBytes = 0
    /// Request bytes handed back to flow control with `nghttp2_session_consume`.
    var consumedBytes = 0
    /// The wire size of the request messages queued for the handler and not yet taken.
    var untakenBytes = 0
    /// When an observed call started (monotonic nanoseconds); 0: not observed, or its outcome
    /// was reported.
    var observedStart: UInt64 = 0
    /// The observed call's annotations.
    var annotations: CallAnnotations?
    /// An observed call's metadata, kept past ``releaseRequestState()`` for its observer.
    var observedMetadata: Metadata?
    /// Messages waiting for DATA frames, unframed: the 5-byte gRPC prefix is written as the
    /// frame is filled, so a message shared by many streams is never copied per stream.
    var outbound = CircularBuffer<OutboundMessage>(initialCapacity: 2)
    /// The bytes this stream holds for its client: the queued messages with their prefixes still
    /// unsent, plus ``waitingStreamBytes`` while any message waits (the connection's
    /// ``TransportLimits`` count them).
    private(set) var queuedBytes = 0
    /// What a stream waiting to send costs besides its messages: its state here and in nghttp2,
    /// and what its call left allocated. Resident memory grew by about 1.8 KB per stalled
    /// GetGroupsInfo call and 1.2 KB per stalled Health/Check (25,600 of them, debug build): the
    /// larger, rounded up, so the caps bound memory rather than messages.
    static let waitingStreamBytes = 2048
    /// One queued message.
    struct OutboundMessage {
        /// The serialized message; its reader index advances as it is sent.
        var bytes: ByteBuffer
        /// How many bytes of the 5-byte prefix have been sent.
        var prefixSent: Int
        /// Whether it counts against the writer's queue.
        var fromWriter: Bool
        /// Whether `bytes` are compressed (the prefix's flag).
        var compressed = false
    }

    private let allocator: ByteBufferAllocator

    init(id: Int32, maxMessageBytes: Int, allocator: ByteBufferAllocator) {
        self.id = id
        self.allocator = allocator
        self.deframer = GRPCMessageDeframer(maxMessageBytes: maxMessageBytes, allocator: allocator)
    }

    func acceptHeader(name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        if name.first == UInt8(ascii: ":") {
            if name.elementsEqual(HeaderName.path) {
                path = String(decoding: value, as: UTF8.self)
            } else if name.elementsEqual(HeaderName.method) {
                isPost = value.elementsEqual(HeaderName.post)
                if !isPost { method = String(decoding: value, as: UTF8.self) }
            }
            return
        }
        if name.elementsEqual(HeaderName.contentType) {
            contentTypeIsGRPC = Self.isGRPCContentType(value)
            otherContentType = contentTypeIsGRPC ? nil : String(decoding: value, as: UTF8.self)
        } else if name.elementsEqual(HeaderName.te) || name.elementsEqual(HeaderName.userAgent) {
            return
        } else if name.elementsEqual(HeaderName.grpcAcceptEncoding) {
            // Lines of one name form one list (RFC 9110 §5.3): grpc-swift-2 sends each encoding
            // on a line of its own.
            acceptedEncodings |= GRPCCompression.acceptedSet(value)
        } else if name.elementsEqual(HeaderName.grpcTimeout) {
            if let nanos = GRPCTimeout.parse(value) { timeoutNanos = nanos } else { malformedTimeout = true }
        } else if name.elementsEqual(HeaderName.grpcEncoding) {
            if value.elementsEqual(HeaderName.identity) {
                requestCompression = nil
                encoding = nil
            } else if let known = GRPCCompression(name: value) {
                requestCompression = known
                encoding = nil
            } else {
                requestCompression = nil
                encoding = Array(value)
            }
        } else {
            metadata.append(name: String(decoding: name, as: UTF8.self), value: String(decoding: value, as: UTF8.self))
        }
    }

    /// `application/grpc`, optionally followed by `+format` or `;parameters`.
    static func isGRPCContentType(_ value: UnsafeBufferPointer<UInt8>) -> Bool {
        let prefix = HeaderName.applicationGRPC
        guard value.count >= prefix.count, value.prefix(prefix.count).elementsEqual(prefix) else { return false }
        if value.count == prefix.count { return true }
        let next = value[prefix.count]
        return next == UInt8(ascii: "+") || next == UInt8(ascii: ";")
    }

    /// Why the request must be refused as soon as its headers are in, if it must.
    func refusalAfterHeaders(maxHeaderListSize: Int, connect: Bool = false) -> HTTP2Connection.ImmediateResponse? {
        if headerFieldTooLarge {
            return .status(GRPCStatus(
                .resourceExhausted, "a request header field exceeds \(HeaderFieldGuard.maxLiteralLength) bytes (request headers are limited to \(maxHeaderListSize) bytes)"))
        }
        if headersTooLarge {
            return .status(GRPCStatus(.resourceExhausted, "request headers exceed \(maxHeaderListSize) bytes"))
        }
        if connect {
            return nil  // ConnectProtocol checks the method and the content type.
        }
        if !isPost {
            return .httpStatus(405, GRPCStatus(.internal, "gRPC requests use POST"))
        }
        if !contentTypeIsGRPC {
            return .httpStatus(415, GRPCStatus(.internal, "content-type must be application/grpc"))
        }
        if malformedTimeout {
            return .status(GRPCStatus(.internal, "malformed grpc-timeout"))
        }
        return nil
    }

    /// Queues a message (its prefix is added as it is sent), compressed first when the call's
    /// responses are and the message is large enough to gain from it.
    func appendMessage(_ message: ByteBuffer, fromWriter: Bool) {
        if outbound.isEmpty { queuedBytes += Self.waitingStreamBytes }
        if isConnect {
            // Framed (or not) by the Connect call already: sent as it is, no gRPC prefix.
            queuedBytes += message.readableBytes
            outbound.append(OutboundMessage(bytes: message, prefixSent: 5, fromWriter: fromWriter))
            return
        }
        if let compression = responseCompression, message.readableBytes >= responseCompressionMinBytes,
            let compressed = compression.deflate(message, allocator: allocator)
        {
            queuedBytes += 5 + compressed.readableBytes
            outbound.append(OutboundMessage(bytes: compressed, prefixSent: 0, fromWriter: fromWriter, compressed: true))
            return
        }
        queuedBytes += 5 + message.readableBytes
        outbound.append(OutboundMessage(bytes: message, prefixSent: 0, fromWriter: fromWriter))
    }

    /// Drops every queued message (the stream is reset): its writer's slots free.
    func dropOutbound() {
        while let dropped = outbound.popFirst() {
            if dropped.fromWriter { writer?.didSend() }
        }
        queuedBytes = 0
    }

    /// Copies queued bytes, gRPC prefixes included, into a DATA payload; returns how many.
    func drainOutbound(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        var written = 0
        while written < buffer.count, !outbound.isEmpty {
            let index = outbound.startIndex
            if outbound[index].prefixSent < 5 {
                let length = UInt32(outbound[index].bytes.readableBytes)
                while outbound[index].prefixSent < 5, written < buffer.count {
                    buffer[written] = GRPCMessageFramer.prefixByte(
                        outbound[index].prefixSent, length: length, compressed: outbound[index].compressed)
                    outbound[index].prefixSent += 1
                    written += 1
                }
                if outbound[index].prefixSent < 5 { break }
            }
            let take = min(buffer.count - written, outbound[index].bytes.readableBytes)
            if take > 0 {
                outbound[index].bytes.withUnsafeReadableBytes { source in
                    UnsafeMutableRawBufferPointer(rebasing: buffer[written..<(written + take)])
                        .copyMemory(from: UnsafeRawBufferPointer(rebasing: source[0..<take]))
                }
                outbound[index].bytes.moveReaderIndex(forwardBy: take)
                written += take
            }
            if outbound[index].bytes.readableBytes == 0 {
                let sent = outbound.removeFirst()
                if sent.fromWriter { writer?.didSend() }
            }
        }
        queuedBytes = outbound.isEmpty ? 0 : queuedBytes - written
        return written
    }

    /// Drops what only the request needed, once the call is dispatched: an idle stream keeps
    /// only its response state.
    func releaseRequestState() {
        if observedStart != 0 { observedMetadata = metadata }
        metadata = Metadata()
        request = nil
        connectBody = nil
        deframer.release()
    }

    /// The stream is gone (closed, reset, or its connection lost): stop its work.
    func abandon() {
        deadlineTask?.cancel()
        task?.cancel()
        writer?.close()
        requests?.cancel()
    }
}

/// Header names and values compared byte-wise on the hot path.
enum HeaderName {
    static let path: [UInt8] = Array(":path".utf8)
    static let method: [UInt8] = Array(":method".utf8)
    static let post: [UInt8] = Array("POST".utf8)
    static let contentType: [UInt8] = Array("content-type".utf8)
    static let applicationGRPC: [UInt8] = Array("application/grpc".utf8)
    static let te: [UInt8] = Array("te".utf8)
    static let userAgent: [UInt8] = Array("user-agent".utf8)
    static let grpcTimeout: [UInt8] = Array("grpc-timeout".utf8)
    static let grpcEncoding: [UInt8] = Array("grpc-encoding".utf8)
    static let grpcAcceptEncoding: [UInt8] = Array("grpc-accept-encoding".utf8)
    static let identity: [UInt8] = Array("identity".utf8)
}
