import GRPCProtocol
import NIOCore

/// The response side of one client call as a value-type state machine, fed what nghttp2 reports
/// for the stream (header fields, the end of a header block, DATA payloads, the stream's close)
/// and answering with the messages to hand out and whether the call is over. No sockets, no
/// nghttp2: tested with plain values.
///
/// A gRPC response is HEADERS (`:status` 200, `content-type: application/grpc…`), zero or more
/// length-prefixed messages in DATA, then trailers with `grpc-status`; or a single Trailers-Only
/// HEADERS frame carrying both.
public struct GRPCResponseState: Sendable {
    /// What the caller does after feeding an event.
    public enum Action: Sendable, Equatable {
        /// Nothing to do yet.
        case none
        /// Hand these messages to the caller (the call goes on).
        case deliver([ByteBuffer])
        /// The call is over: deliver these messages first, then end with `error` (nil for OK).
        case finish([ByteBuffer], GRPCCallError?)
    }

    private enum Phase: Sendable {
        case awaitingHeaders
        case receivingMessages
        case finished
    }

    private var phase = Phase.awaitingHeaders
    private var fields: [(name: String, value: String)] = []
    private var deframer: GRPCMessageDeframer

    /// Creates the state of a call that has sent its request.
    /// - Parameter maxMessageBytes: The largest response message accepted; a larger length prefix
    ///   ends the call with RESOURCE_EXHAUSTED.
    public init(maxMessageBytes: Int) {
        self.deframer = GRPCMessageDeframer(maxMessageBytes: maxMessageBytes)
    }

    /// Whether the call's outcome is known.
    public var isFinished: Bool {
        if case .finished = phase { return true }
        return false
    }

    /// One field of the header block being received (names lowercase, as HTTP/2 requires).
    public mutating func receiveHeaderField(name: String, value: String) {
        guard !isFinished else { return }
        fields.append((name, value))
    }

    /// The end of a header block (response headers, or trailers).
    /// - Parameter endStream: Whether the frame ended the stream.
    public mutating func endOfHeaders(endStream: Bool) -> Action {
        let block = fields
        fields.removeAll()
        switch phase {
        case .finished:
            return .none
        case .awaitingHeaders:
            let statusText = block.first { $0.name == ":status" }?.value
            if endStream {
                // Trailers-Only: the status is in this block; an HTTP error without one maps from :status.
                phase = .finished
                if block.contains(where: { $0.name == "grpc-status" }) {
                    return .finish([], GRPCCallError.fromTrailers(block))
                }
                return .finish([], GRPCCallError.fromHTTPStatus(Int(statusText ?? "") ?? 0))
            }
            guard statusText == "200" else {
                phase = .finished
                return .finish([], GRPCCallError.fromHTTPStatus(Int(statusText ?? "") ?? 0))
            }
            let contentType = block.first { $0.name == "content-type" }?.value ?? ""
            guard contentType == "application/grpc" || contentType.hasPrefix("application/grpc+")
                || contentType.hasPrefix("application/grpc;") else {
                phase = .finished
                return .finish([], GRPCCallError(.unknown, "the response's content-type is \(contentType.isEmpty ? "missing" : contentType), not application/grpc"))
            }
            phase = .receivingMessages
            return .none
        case .receivingMessages:
            phase = .finished
            if deframer.hasPartialMessage {
                return .finish([], GRPCCallError(.internal, "the response ended inside a message"))
            }
            return .finish([], GRPCCallError.fromTrailers(block))
        }
    }

    /// A DATA payload of the stream.
    public mutating func receiveData(_ bytes: UnsafeRawBufferPointer) -> Action {
        switch phase {
        case .finished:
            return .none
        case .awaitingHeaders:
            phase = .finished
            return .finish([], GRPCCallError(.internal, "DATA before the response headers"))
        case .receivingMessages:
            deframer.append(bytes)
            var messages: [ByteBuffer] = []
            do {
                while let message = try deframer.next() {
                    if message.compressed {
                        // No grpc-accept-encoding is sent, so a compressed message is the server's fault.
                        phase = .finished
                        return .finish(messages, GRPCCallError(.internal, "a compressed response message, though the client accepts identity only"))
                    }
                    messages.append(message.bytes)
                }
            } catch {
                phase = .finished
                switch error {
                case .messageTooLarge(let length, let limit):
                    return .finish(messages, GRPCCallError(.resourceExhausted, "a response message of \(length) bytes exceeds the limit of \(limit) bytes"))
                case .invalidFlags(let flags):
                    return .finish(messages, GRPCCallError(.internal, "invalid message flags 0x\(String(flags, radix: 16))"))
                }
            }
            return messages.isEmpty ? .none : .deliver(messages)
        }
    }

    /// The stream closed (nghttp2's `on_stream_close`): a call not finished by trailers ends with
    /// the status its reset maps to.
    /// - Parameter http2ErrorCode: The stream's close error code (0 for NO_ERROR).
    public mutating func streamClosed(http2ErrorCode: UInt32) -> Action {
        guard !isFinished else { return .none }
        phase = .finished
        return .finish([], GRPCCallError.fromReset(http2ErrorCode))
    }

    /// The call ends for a reason of the client's (deadline, connection lost, cancelled).
    public mutating func fail(_ error: GRPCCallError) -> Action {
        guard !isFinished else { return .none }
        phase = .finished
        return .finish([], error)
    }
}
