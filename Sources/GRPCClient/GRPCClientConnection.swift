import GRPCProtocol
import GroupAPI
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A gRPC client connection over HTTP/2 (nghttp2's client session): h2c with prior knowledge, or
/// TLS with ALPN `h2` (optionally presenting a client certificate). Unary and server-streaming
/// calls; every call may carry a timeout (sent as `grpc-timeout` and enforced locally) and
/// metadata such as `authorization`. A failed call throws ``GRPCCallError`` with the status, and
/// the reason and field of the server's `grpc-status-details-bin`.
///
/// ```swift
/// let connection = try await GRPCClientConnection.connect(to: .init(host: "127.0.0.1", port: 50051))
/// let info = try await connection.unary(Groupd_V1_GroupService.Method.getGroupsInfo, request,
///                                       metadata: [("authorization", "Bearer \(token)")])
/// await connection.close()
/// ```
public final class GRPCClientConnection: Sendable {
    /// Where and how to connect.
    public struct Configuration: Sendable {
        /// The server's host name or address.
        public var host: String
        /// The server's port.
        public var port: Int
        /// TLS settings; nil for plaintext h2c.
        public var tls: TLS?
        /// How long the TCP (and TLS) connection may take.
        public var connectTimeout: TimeAmount = .seconds(10)
        /// The largest response message accepted (default 4 MiB, as gRPC clients).
        public var maxMessageBytes: Int = 4 << 20
        /// The `user-agent` header.
        public var userAgent: String = "groupd-grpc-client"

        /// A plaintext configuration.
        /// - Parameters:
        ///   - host: The server's host name or address.
        ///   - port: The server's port.
        ///   - tls: TLS settings, or nil for h2c.
        public init(host: String, port: Int, tls: TLS? = nil) {
            self.host = host
            self.port = port
            self.tls = tls
        }
    }

    /// TLS for a connection: the CAs the server's certificate must chain to, and the client's own
    /// certificate and key for mutual TLS.
    public struct TLS: Sendable {
        /// PEM file of the CA certificates to trust; nil trusts the system's roots.
        public var caFile: String?
        /// PEM file of the client certificate chain (mutual TLS); needs `keyFile`.
        public var certificateFile: String?
        /// PEM file of the client's private key.
        public var keyFile: String?
        /// The name the server's certificate must carry; nil uses the host.
        public var serverHostname: String?

        /// TLS settings.
        public init(caFile: String? = nil, certificateFile: String? = nil, keyFile: String? = nil, serverHostname: String? = nil) {
            self.caFile = caFile
            self.certificateFile = certificateFile
            self.keyFile = keyFile
            self.serverHostname = serverHostname
        }

        /// Reads the files and builds the TLS context once, without connecting, so a caller can tell
        /// a bad file from a server that cannot be reached.
        /// - Throws: ``GRPCCallError`` INVALID_ARGUMENT naming the problem (a file missing or not
        ///   PEM, a certificate without its key).
        public func validate() throws(GRPCCallError) {
            do {
                _ = try GRPCClientConnection.makeSSLContext(self)
            } catch let error as GRPCCallError {
                throw error
            } catch {
                throw GRPCCallError(.invalidArgument, "TLS setup failed: \(error)")
            }
        }
    }

    private let channel: any Channel
    private let handler: NIOLoopBound<HTTP2ClientHandler>
    private let configuration: Configuration

    private init(channel: any Channel, handler: NIOLoopBound<HTTP2ClientHandler>, configuration: Configuration) {
        self.channel = channel
        self.handler = handler
        self.configuration = configuration
    }

    /// Opens a connection.
    /// - Parameters:
    ///   - configuration: The address, TLS and limits.
    ///   - group: The event loops; the process-wide singleton by default.
    /// - Returns: The connected client.
    /// - Throws: ``GRPCCallError`` UNAVAILABLE when the connection cannot be made (refused,
    ///   timed out, name not resolved, TLS files unreadable or the handshake failing).
    public static func connect(
        to configuration: Configuration, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws(GRPCCallError) -> GRPCClientConnection {
        let address = "\(configuration.host):\(configuration.port)"
        let sslContext: NIOSSLContext?
        do {
            sslContext = try configuration.tls.map { try Self.makeSSLContext($0) }
        } catch {
            throw GRPCCallError(.unavailable, "TLS setup for \(address) failed: \(error)")
        }
        let serverHostname = configuration.tls?.serverHostname ?? configuration.host
        // Why a connection failed when it closes before `connect` reaches its handler, per channel
        // (Happy Eyeballs may open more than one).
        let failures = ChannelFailures()
        let bootstrap = ClientBootstrap(group: group)
            .connectTimeout(configuration.connectTimeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let sslContext {
                        // An IP address is no SNI name; verification still checks it against the certificate.
                        let isAddress = (try? SocketAddress(ipAddress: serverHostname, port: 0)) != nil
                        let tls = try NIOSSLClientHandler(context: sslContext, serverHostname: isAddress ? nil : serverHostname)
                        try channel.pipeline.syncOperations.addHandler(tls)
                    }
                    let handler = HTTP2ClientHandler(
                        authority: address, scheme: sslContext == nil ? "http" : "https", userAgent: configuration.userAgent)
                    failures.add(handler.firstFailure, for: channel)
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }
        let channel: any Channel
        do {
            channel = try await bootstrap.connect(host: configuration.host, port: configuration.port).get()
        } catch {
            throw GRPCCallError(.unavailable, "cannot connect to \(address): \(describe(error))")
        }
        do {
            let handler = try await channel.eventLoop.submit {
                NIOLoopBound(try channel.pipeline.syncOperations.handler(type: HTTP2ClientHandler.self), eventLoop: channel.eventLoop)
            }.get()
            return GRPCClientConnection(channel: channel, handler: handler, configuration: configuration)
        } catch {
            try? await channel.close()
            // The handler left the pipeline as the connection closed; it kept the reason.
            throw failures.first(for: channel) ?? GRPCCallError(.unavailable, "connection to \(address) closed at once")
        }
    }

    /// A connection failure in one line: the system's words for a socket error (`Connection
    /// refused`), a timeout, a name that does not resolve, or the reason of a failed TLS handshake
    /// (BoringSSL's reason code, without its stack of source locations).
    static func describe(_ error: any Error) -> String {
        switch error {
        case let error as NIOConnectionError:
            if let failure = error.connectionErrors.first { return describe(failure.error) }
            if error.dnsAError != nil || error.dnsAAAAError != nil { return "the host name \(error.host) does not resolve" }
            return "no address found for \(error.host)"
        case let error as IOError:
            return String(cString: strerror(error.errnoCode))
        case ChannelError.connectTimeout(let amount):
            return "no answer within \(amount.nanoseconds / 1_000_000) ms"
        case NIOSSLError.handshakeFailed(let failure):
            return "TLS handshake failed: \(describe(failure))"
        case let error as BoringSSLError:
            return describe(error)
        default:
            return "\(error)"
        }
    }

    /// BoringSSL's reasons (`CERTIFICATE_VERIFY_FAILED`), said in words where an operator meets them.
    private static func describe(_ error: BoringSSLError) -> String {
        let stack: NIOBoringSSLErrorStack
        switch error {
        case .sslError(let errors), .unknownError(let errors), .invalidSNIName(let errors), .failedToSetALPN(let errors):
            stack = errors
        default:
            return "\(error)"
        }
        // Each entry reads "Error: CODE error:HEX:LIBRARY:FUNCTION:REASON at FILE:LINE".
        let reasons = stack.compactMap { entry -> String? in
            let text = "\(entry)"
            let head = text.firstRange(of: " at ").map { text[..<$0.lowerBound] } ?? Substring(text)
            return head.split(separator: ":").last.map(String.init)
        }
        switch reasons.first {
        case "CERTIFICATE_VERIFY_FAILED":
            return "the server's certificate is not signed by a trusted CA (CERTIFICATE_VERIFY_FAILED)"
        case "WRONG_VERSION_NUMBER":
            return "the server does not speak TLS there (WRONG_VERSION_NUMBER)"
        case let reason?:
            return reason
        case nil:
            return "\(error)"
        }
    }

    fileprivate static func makeSSLContext(_ tls: TLS) throws -> NIOSSLContext {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.applicationProtocols = ["h2"]
        if let caFile = tls.caFile {
            configuration.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(caFile))
        }
        switch (tls.certificateFile, tls.keyFile) {
        case (nil, nil):
            break
        case (let certificateFile?, let keyFile?):
            configuration.certificateChain = try NIOSSLCertificate.fromPEMFile(certificateFile).map { .certificate($0) }
            configuration.privateKey = .privateKey(try NIOSSLPrivateKey(file: keyFile, format: .pem))
        default:
            throw GRPCCallError(.invalidArgument, "a client certificate needs both a certificate file and a key file")
        }
        return try NIOSSLContext(configuration: configuration)
    }

    /// Starts a call and streams its raw response messages.
    /// - Parameters:
    ///   - path: The method path, `/package.Service/Method`.
    ///   - request: The serialized request message.
    ///   - metadata: Request headers (lowercase names), e.g. `("authorization", "Bearer …")`.
    ///   - timeout: The call's deadline from now; nil for none.
    /// - Returns: The response messages; the sequence ends after an OK status and throws
    ///   ``GRPCCallError`` for any other. Ending the iteration early (or cancelling the task that
    ///   iterates) cancels the call with RST_STREAM. Messages not yet taken hold the stream's
    ///   HTTP/2 window shut beyond 1 MiB, so a slow reader slows the server down.
    public func call(
        path: String, request: [UInt8], metadata: [(name: String, value: String)] = [], timeout: Duration? = nil
    ) -> GRPCResponseStream {
        let (stream, continuation) = AsyncThrowingStream<ByteBuffer, any Error>.makeStream()
        let token = CallToken()
        let handler = self.handler
        let loop = channel.eventLoop
        continuation.onTermination = { termination in
            if case .cancelled = termination {
                loop.execute { handler.value.cancel(token) }
            }
        }
        let callRequest = HTTP2ClientHandler.CallRequest(
            path: path, metadata: metadata, message: request,
            timeout: timeout.map { TimeAmount.nanoseconds(Self.nanoseconds($0)) },
            maxMessageBytes: configuration.maxMessageBytes, token: token, continuation: continuation)
        loop.execute { handler.value.start(callRequest) }
        return GRPCResponseStream(base: stream, token: token, handler: handler, loop: loop)
    }

    /// A unary call.
    /// - Parameters:
    ///   - method: The method.
    ///   - request: The request.
    ///   - metadata: Request headers (lowercase names).
    ///   - timeout: The call's deadline from now; nil for none.
    /// - Returns: The response.
    /// - Throws: ``GRPCCallError``: the server's status, or one of the client's (UNAVAILABLE when
    ///   the connection fails, DEADLINE_EXCEEDED, INTERNAL for a response that is not exactly one
    ///   decodable message), CANCELLED when the task is cancelled.
    public func unary<Request, Response>(
        _ method: ProtoMethod<Request, Response>, _ request: Request,
        metadata: [(name: String, value: String)] = [], timeout: Duration? = nil
    ) async throws(GRPCCallError) -> Response {
        var response: Response?
        do {
            for try await bytes in call(path: method.path, request: request.serializedBytes(), metadata: metadata, timeout: timeout) {
                guard response == nil else {
                    throw GRPCCallError(.internal, "a unary call answered with more than one message")
                }
                response = try Self.decode(Response.self, bytes)
            }
        } catch {
            throw Self.callError(error)
        }
        guard let response else { throw GRPCCallError(.internal, "a unary call ended OK without a response message") }
        return response
    }

    /// A server-streaming call.
    /// - Parameters:
    ///   - method: The method.
    ///   - request: The request.
    ///   - metadata: Request headers (lowercase names).
    ///   - timeout: The call's deadline from now; nil for none.
    /// - Returns: The responses, ending after an OK status and throwing ``GRPCCallError``
    ///   otherwise. Stopping the iteration cancels the call.
    public func serverStreaming<Request, Response>(
        _ method: ProtoMethod<Request, Response>, _ request: Request,
        metadata: [(name: String, value: String)] = [], timeout: Duration? = nil
    ) -> AsyncThrowingMapSequence<GRPCResponseStream, Response> {
        call(path: method.path, request: request.serializedBytes(), metadata: metadata, timeout: timeout)
            .map { bytes in try Self.decode(Response.self, bytes) }
    }

    /// Closes the connection; calls in flight end with UNAVAILABLE.
    public func close() async {
        try? await channel.close()
    }

    private static func decode<Response: ProtoMessage>(_ type: Response.Type, _ bytes: ByteBuffer) throws(GRPCCallError) -> Response {
        do {
            return try bytes.withUnsafeReadableBytes { raw in try Response(serializedBytes: raw) }
        } catch {
            throw GRPCCallError(.internal, "the response is not a valid \(Response.protoMessageName): \(error)")
        }
    }

    private static func callError(_ error: any Error) -> GRPCCallError {
        if let error = error as? GRPCCallError { return error }
        if error is CancellationError { return GRPCCallError(.cancelled, "the call was cancelled") }
        return GRPCCallError(.unknown, "\(error)")
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        let (product, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? Int64.max : product + attoseconds / 1_000_000_000
    }
}

/// The response messages of one call, in order (see ``GRPCClientConnection/call(path:request:metadata:timeout:)``).
///
/// Taking a message tells the connection, which reopens the stream's flow-control window while
/// fewer than 1 MiB of messages wait to be taken.
public struct GRPCResponseStream: AsyncSequence, Sendable {
    public typealias Element = ByteBuffer

    fileprivate let base: AsyncThrowingStream<ByteBuffer, any Error>
    fileprivate let token: CallToken
    fileprivate let handler: NIOLoopBound<HTTP2ClientHandler>
    fileprivate let loop: any EventLoop

    /// Iterates the messages.
    public struct AsyncIterator: AsyncIteratorProtocol {
        fileprivate var base: AsyncThrowingStream<ByteBuffer, any Error>.AsyncIterator
        fileprivate let token: CallToken
        fileprivate let handler: NIOLoopBound<HTTP2ClientHandler>
        fileprivate let loop: any EventLoop

        /// The next message; nil after an OK status.
        /// - Throws: ``GRPCCallError`` when the call ends with another status.
        public mutating func next() async throws -> ByteBuffer? {
            guard let message = try await base.next() else { return nil }
            let (handler, token, bytes) = (self.handler, self.token, 5 + message.readableBytes)
            loop.execute { handler.value.consumed(token, bytes: bytes) }
            return message
        }
    }

    /// An iterator over the messages (one per call: the underlying stream has a single consumer).
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: base.makeAsyncIterator(), token: token, handler: handler, loop: loop)
    }
}
