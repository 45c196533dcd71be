import GRPCProtocol
import NIOConcurrencyHelpers
import NIOSSL

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The PEM files a TLS listener is made of.
public struct TLSFiles: Sendable, Hashable {
    /// The server's certificate, then any intermediates (PEM, leaf first).
    public var certificateChain: String
    /// The certificate's private key (PEM; unencrypted).
    public var privateKey: String
    /// The CAs whose client certificates are accepted (PEM). `nil`: no client certificate is
    /// asked for; set: every client must present one signed by these CAs (mutual TLS).
    public var clientCA: String?

    /// Name the files.
    public init(certificateChain: String, privateKey: String, clientCA: String? = nil) {
        self.certificateChain = certificateChain
        self.privateKey = privateKey
        self.clientCA = clientCA
    }
}

/// Why TLS credentials were refused: at start-up groupd stops, on a reload the credentials in
/// force stay. The description names the file.
public struct TLSCredentialsError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, as a stable value.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Wrapped: String, Sendable, Hashable {
            case unreadable, invalid, expired, notYetValid, keyMismatch
        }

        private let wrapped: Wrapped

        private init(_ wrapped: Wrapped) { self.wrapped = wrapped }

        /// The file cannot be opened or read.
        public static let unreadable = Code(.unreadable)
        /// The file holds no certificate or key in PEM, or one that cannot be used.
        public static let invalid = Code(.invalid)
        /// The server's certificate is past its `notAfter`.
        public static let expired = Code(.expired)
        /// The server's certificate is before its `notBefore`.
        public static let notYetValid = Code(.notYetValid)
        /// The private key is not the key of the certificate.
        public static let keyMismatch = Code(.keyMismatch)

        /// The code's name, e.g. `expired`.
        public var description: String { wrapped.rawValue }
    }

    /// What went wrong.
    public var code: Code
    /// The file concerned.
    public var file: String
    /// What is wrong with it.
    public var message: String

    /// Create an error.
    public init(code: Code, file: String, message: String) {
        self.code = code
        self.file = file
        self.message = message
    }

    /// `FILE: message`.
    public var description: String { "\(file): \(message)" }
}

/// The TLS credentials a listener serves new connections with, replaceable while it runs:
/// ``reload(_:)`` swaps in a new context for the connections accepted afterwards, and
/// connections already open keep the one they were accepted with.
///
/// Every certificate chain is checked when it is loaded: readable PEM, a private key that
/// belongs to the first certificate, and that first certificate valid now (`notBefore` ≤ now ≤
/// `notAfter`). ALPN offers `h2` only.
public final class ServerTLS: Sendable {
    /// What is in force, with a few facts about it for logs.
    public struct Credentials: Sendable {
        /// The context new connections are accepted with.
        public let context: NIOSSLContext
        /// The files it was loaded from.
        public let files: TLSFiles
        /// The server certificate's serial number, in hex.
        public let serialNumber: String
        /// The server certificate's `notBefore`, in seconds since the epoch.
        public let notValidBefore: Int
        /// The server certificate's `notAfter`, in seconds since the epoch.
        public let notValidAfter: Int
    }

    private let current: NIOLockedValueBox<Credentials>

    /// Load the credentials a listener starts with.
    /// - Parameter files: The PEM files.
    /// - Throws: ``TLSCredentialsError`` naming the file that is unreadable, invalid, expired,
    ///   not yet valid, or whose key does not match the certificate.
    public init(files: TLSFiles) throws(TLSCredentialsError) {
        self.current = NIOLockedValueBox(try Self.load(files, now: Int(time(nil))))
    }

    /// The credentials in force.
    public var credentials: Credentials { current.withLockedValue { $0 } }

    /// The context for the next connection.
    var context: NIOSSLContext { current.withLockedValue { $0.context } }

    /// Load `files` again (they may be the same paths with new contents) and serve new
    /// connections with them; on any error the credentials in force stay.
    /// - Returns: The credentials now in force.
    /// - Throws: ``TLSCredentialsError`` naming the file; nothing changed.
    @discardableResult
    public func reload(_ files: TLSFiles) throws(TLSCredentialsError) -> Credentials {
        let loaded = try Self.load(files, now: Int(time(nil)))
        current.withLockedValue { $0 = loaded }
        return loaded
    }

    /// Read and check the files and make a server context of them.
    /// - Parameters:
    ///   - files: The PEM files.
    ///   - now: Seconds since the epoch the server certificate must be valid at.
    static func load(_ files: TLSFiles, now: Int) throws(TLSCredentialsError) -> Credentials {
        let chainPEM = try readFile(files.certificateChain)
        let chain: [NIOSSLCertificate]
        do {
            chain = try NIOSSLCertificate.fromPEMBytes(chainPEM)
        } catch {
            throw TLSCredentialsError(code: .invalid, file: files.certificateChain, message: "no PEM certificate could be read (\(error))")
        }
        guard let leaf = chain.first else {
            throw TLSCredentialsError(code: .invalid, file: files.certificateChain, message: "the file holds no PEM certificate")
        }
        if Int(leaf.notValidAfter) < now {
            throw TLSCredentialsError(
                code: .expired, file: files.certificateChain,
                message: "the certificate expired at \(utc(Int(leaf.notValidAfter))) (notAfter)")
        }
        if Int(leaf.notValidBefore) > now {
            throw TLSCredentialsError(
                code: .notYetValid, file: files.certificateChain,
                message: "the certificate is not valid before \(utc(Int(leaf.notValidBefore))) (notBefore)")
        }

        let keyPEM = try readFile(files.privateKey)
        let key: NIOSSLPrivateKey
        do {
            key = try NIOSSLPrivateKey(bytes: keyPEM, format: .pem)
        } catch {
            throw TLSCredentialsError(code: .invalid, file: files.privateKey, message: "no unencrypted PEM private key could be read (\(error))")
        }

        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
        if let caFile = files.clientCA {
            let caPEM = try readFile(caFile)
            let roots: [NIOSSLCertificate]
            do {
                roots = try NIOSSLCertificate.fromPEMBytes(caPEM)
            } catch {
                throw TLSCredentialsError(code: .invalid, file: caFile, message: "no PEM certificate could be read (\(error))")
            }
            guard !roots.isEmpty else {
                throw TLSCredentialsError(code: .invalid, file: caFile, message: "the file holds no PEM certificate")
            }
            configuration.trustRoots = .certificates(roots)
            configuration.certificateVerification = .noHostnameVerification
            // Tell clients which CAs are accepted, so one with several certificates picks right.
            configuration.sendCANameList = true
        }
        configuration.minimumTLSVersion = .tlsv12
        // h2 first: the server's order decides. http/1.1 serves Connect calls; a server without
        // Connect refuses it after the handshake (TLSHandshakeGate).
        configuration.applicationProtocols = ["h2", "http/1.1"]

        let context: NIOSSLContext
        do {
            context = try NIOSSLContext(configuration: configuration)
        } catch NIOSSLError.failedToLoadPrivateKey {
            // The key parsed above, so BoringSSL refused it for not matching the certificate.
            throw TLSCredentialsError(
                code: .keyMismatch, file: files.privateKey,
                message: "the private key does not belong to the certificate in \(files.certificateChain)")
        } catch {
            throw TLSCredentialsError(code: .invalid, file: files.certificateChain, message: "cannot make a TLS context: \(error)")
        }
        let serial = leaf.serialNumber.map { byte in (byte < 16 ? "0" : "") + String(byte, radix: 16) }.joined()
        return Credentials(context: context, files: files, serialNumber: serial,
            notValidBefore: Int(leaf.notValidBefore), notValidAfter: Int(leaf.notValidAfter))
    }

    /// The whole file, or an error naming it and the system's reason.
    private static func readFile(_ path: String) throws(TLSCredentialsError) -> [UInt8] {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else {
            throw TLSCredentialsError(code: .unreadable, file: path, message: "cannot read the file: \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 << 10)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw TLSCredentialsError(code: .unreadable, file: path, message: "cannot read the file: \(String(cString: strerror(errno)))")
            }
            if count == 0 { return bytes }
            bytes += chunk[0..<count]
            // A certificate chain or a key is a few kilobytes; anything this large is not one.
            if bytes.count > 16 << 20 {
                throw TLSCredentialsError(code: .invalid, file: path, message: "the file is over 16 MiB: not a PEM certificate or key")
            }
        }
    }

    /// A time in seconds since the epoch as `2026-11-24T22:31:33Z`, for log lines and errors.
    public static func utc(_ seconds: Int) -> String {
        var t = time_t(seconds)
        var parts = tm()
        gmtime_r(&t, &parts)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
    }
}
