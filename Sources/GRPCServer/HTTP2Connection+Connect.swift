import GRPCProtocol
import NIOCore

/// Connect calls on HTTP/2 streams (`ConnectProtocol`): a stream whose `content-type` is not
/// gRPC's is judged by the Connect protocol, its body gathered whole, its handler run as a gRPC
/// call's, and its response (a unary message, a stream's envelopes, or the error object) sent
/// as it is, ending with END_STREAM on the last DATA frame instead of trailers.
extension HTTP2Connection {
    /// Accepts a Connect call's head, or answers the refusal: the route to take, or nil.
    func startConnect(_ stream: HTTP2Stream, allocator: ByteBufferAllocator) -> ServerRouter.Route? {
        guard let connect else { return nil }
        var headers = stream.metadata.entries
        if let contentType = stream.otherContentType { headers.append((name: "content-type", value: contentType)) }
        switch connect.start(method: stream.isPost ? "POST" : stream.method, path: stream.path, headers: headers) {
        case .refuse(let response):
            sendConnectResponse(stream, response)
            end(stream, status: response.status, httpStatus: response.head.status)
            return nil
        case .call(let call):
            stream.connectCall = call
            stream.metadata = call.metadata
            stream.timeoutNanos = call.timeoutNanos
            stream.connectBody = allocator.buffer(capacity: 0)
            // A stream's head goes out with its first message, whoever queues it.
            if call.streaming { stream.connectHead = call.streamHead }
            return ServerRouter.Route(handler: call.handler, needsToken: call.needsToken)
        }
    }

    /// Queues a whole Connect response (head and body): the last bytes of the call.
    func sendConnectResponse(_ stream: HTTP2Stream, _ response: ConnectResponse) {
        var head = response.head
        head.headers.append(.init(name: "content-length", value: String(response.body.readableBytes)))
        stream.connectHead = head
        stream.connectOutcomeQueued = true
        enqueueRaw(response.body, on: stream)
    }

    /// Queues what a Connect call's outcome sends, unless its last bytes are queued already: a
    /// unary call's error object, or a stream's end-of-stream envelope (after its messages).
    func queueConnectOutcome(_ stream: HTTP2Stream, status: GRPCStatus) {
        guard !stream.connectOutcomeQueued else { return }
        let allocator = context?.channel.allocator ?? ByteBufferAllocator()
        if let call = stream.connectCall, call.streaming {
            stream.connectOutcomeQueued = true
            if stream.connectHead == nil { stream.connectHead = call.streamHead }
            enqueueRaw(call.endOfStream(status, allocator: allocator), on: stream)
            return
        }
        let response = stream.connectCall?.unaryResponse(.failure(status), allocator: allocator)
            ?? ConnectResponse.error(status, codec: connect?.codec)
        sendConnectResponse(stream, response)
    }

    /// A unary Connect call's outcome: its response, then the end.
    func completeConnect(_ stream: HTTP2Stream, call: ConnectCall, with result: Result<ByteBuffer, GRPCStatus>) {
        let response = call.unaryResponse(result, allocator: context?.channel.allocator ?? ByteBufferAllocator())
        sendConnectResponse(stream, response)
        finish(stream, status: response.status)
        stream.releaseRequestState()
        stream.task = nil
    }

    private func enqueueRaw(_ bytes: ByteBuffer, on stream: HTTP2Stream) {
        let queuedBefore = stream.queuedBytes
        stream.appendMessage(bytes, fromWriter: false)
        accountQueued(stream.queuedBytes - queuedBefore)
        perform(stream.state.messageQueued(), on: stream)
        checkQueuedBytes()
    }
}
