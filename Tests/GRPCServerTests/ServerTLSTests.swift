import Foundation
import Testing

@testable import GRPCProtocol
@testable import GRPCServer

/// Loading TLS credentials: every file problem is refused naming the file, and a reload that
/// fails keeps the credentials in force.
@Suite struct ServerTLSTests {
    /// A directory with every fixture, removed at the end of `body`.
    private func withFixtures(_ body: (URL) throws -> Void) throws {
        let directory = try TLSFixtures.directory([
            "ca.pem": TLSFixtures.ca, "server.pem": TLSFixtures.server, "server.key": TLSFixtures.serverKey,
            "expired.pem": TLSFixtures.expired, "other.key": TLSFixtures.otherKey, "garbage.pem": "not a certificate",
        ])
        defer { try? FileManager.default.removeItem(at: directory) }
        try body(directory)
    }

    private func files(_ directory: URL, cert: String = "server.pem", key: String = "server.key", ca: String? = nil) -> TLSFiles {
        TLSFiles(
            certificateChain: directory.appendingPathComponent(cert).path,
            privateKey: directory.appendingPathComponent(key).path,
            clientCA: ca.map { directory.appendingPathComponent($0).path })
    }

    /// The error loading `files` throws, or `nil`.
    private func loadError(_ files: TLSFiles, now: Int = Int(Date().timeIntervalSince1970)) -> TLSCredentialsError? {
        do {
            _ = try ServerTLS.load(files, now: now)
            return nil
        } catch {
            return error
        }
    }

    @Test func validCertificateAndKeyLoad() throws {
        try withFixtures { directory in
            let tls = try ServerTLS(files: files(directory))
            #expect(tls.credentials.serialNumber == "1001")
            // The fixture's own validity (100 years), not the wall clock, which moves on.
            #expect(tls.credentials.notValidAfter - tls.credentials.notValidBefore > 99 * 365 * 86400)
            let mutual = try ServerTLS(files: files(directory, ca: "ca.pem"))
            #expect(mutual.credentials.files.clientCA?.hasSuffix("ca.pem") == true)
        }
    }

    @Test func expiredCertificateIsRefusedNamingTheFile() throws {
        try withFixtures { directory in
            let error = try #require(loadError(files(directory, cert: "expired.pem")))
            #expect(error.code == .expired)
            #expect(error.file.hasSuffix("/expired.pem"))
            #expect(error.description.contains("expired.pem: the certificate expired at "))
        }
    }

    @Test func notYetValidCertificateIsRefused() throws {
        try withFixtures { directory in
            // A clock two days before the certificate's own notBefore (read from the fixture, so the
            // test does not depend on when the fixture was made or when the test runs).
            let notBefore = try ServerTLS.load(files(directory), now: Int(Date().timeIntervalSince1970)).notValidBefore
            let error = try #require(loadError(files(directory), now: notBefore - 2 * 86400))
            #expect(error.code == .notYetValid)
            #expect(error.file.hasSuffix("/server.pem"))
            #expect(error.message.contains("not valid before \(ServerTLS.utc(notBefore))"))
            // One second after notBefore, the same files load.
            #expect(loadError(files(directory), now: notBefore + 1) == nil)
        }
    }

    @Test func keyOfAnotherCertificateIsRefusedNamingTheKeyFile() throws {
        try withFixtures { directory in
            let error = try #require(loadError(files(directory, key: "other.key")))
            #expect(error.code == .keyMismatch)
            #expect(error.file.hasSuffix("/other.key"))
            #expect(error.message.contains("does not belong to the certificate"))
        }
    }

    @Test(arguments: [
        ("missing.pem", "server.key", nil, "missing.pem"),
        ("server.pem", "missing.key", nil, "missing.key"),
        ("server.pem", "server.key", "missing-ca.pem", "missing-ca.pem"),
    ] as [(String, String, String?, String)])
    func unreadableFileIsRefusedNamingIt(cert: String, key: String, ca: String?, named: String) throws {
        try withFixtures { directory in
            let error = try #require(loadError(files(directory, cert: cert, key: key, ca: ca)))
            #expect(error.code == .unreadable)
            #expect(error.file.hasSuffix("/" + named))
            #expect(error.message.contains("No such file or directory"))
        }
    }

    @Test(arguments: [
        ("garbage.pem", "server.key", nil, "garbage.pem"),
        ("server.pem", "garbage.pem", nil, "garbage.pem"),
        ("server.pem", "server.key", "garbage.pem", "garbage.pem"),
        // A certificate where the key should be.
        ("server.pem", "ca.pem", nil, "ca.pem"),
    ] as [(String, String, String?, String)])
    func fileWithoutPEMIsRefusedNamingIt(cert: String, key: String, ca: String?, named: String) throws {
        try withFixtures { directory in
            let error = try #require(loadError(files(directory, cert: cert, key: key, ca: ca)))
            #expect(error.code == .invalid)
            #expect(error.file.hasSuffix("/" + named))
        }
    }

    @Test func failedReloadKeepsTheCredentialsInForce() throws {
        try withFixtures { directory in
            let tls = try ServerTLS(files: files(directory))
            let before = tls.credentials.context
            #expect(throws: TLSCredentialsError.self) { try tls.reload(files(directory, cert: "expired.pem")) }
            #expect(throws: TLSCredentialsError.self) { try tls.reload(files(directory, key: "other.key")) }
            #expect(throws: TLSCredentialsError.self) { try tls.reload(files(directory, cert: "missing.pem")) }
            #expect(tls.context === before)
            #expect(tls.credentials.serialNumber == "1001")
            // A good reload swaps the context for the next connections.
            try tls.reload(files(directory, ca: "ca.pem"))
            #expect(tls.context !== before)
            #expect(tls.credentials.files.clientCA != nil)
        }
    }

    @Test func timesAreRenderedInUTC() {
        #expect(ServerTLS.utc(0) == "1970-01-01T00:00:00Z")
        #expect(ServerTLS.utc(1_700_000_000) == "2023-11-14T22:13:20Z")
    }
}
