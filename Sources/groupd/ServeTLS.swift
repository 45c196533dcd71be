import ArgumentParser
import GRPCServer
import GroupService
import Logging

/// The TLS credentials `groupd serve` starts with: `nil` for plaintext h2c (no `tls` key). Relative
/// paths are relative to the configuration file's directory.
/// - Throws: `ExitCode(2)` after printing the problem (the file, and what is wrong with it: unreadable,
///   not PEM, expired, not yet valid, a key that does not match the certificate).
func loadServerTLS(_ configuration: GroupdConfiguration, configPath: String) throws -> ServerTLS? {
    guard let files = configuration.tlsFiles(relativeTo: ServicePolicy.directory(of: configPath)) else { return nil }
    do {
        return try ServerTLS(files: files)
    } catch {
        printError("groupd: \(configPath): tls: \(error)")
        throw ExitCode(2)
    }
}

/// After a reload put a configuration in force, read its TLS files again: new connections get the
/// new certificate, open ones keep theirs. A file that cannot be used keeps the credentials in force
/// and is logged with the reason.
func reloadServerTLS(_ tls: ServerTLS, service: GroupdService, configPath: String, logger: Logger) {
    // The configuration in force: with TLS turned off in the file, the reload kept it on.
    guard let files = service.configuration.tlsFiles(relativeTo: ServicePolicy.directory(of: configPath)) else { return }
    do {
        let credentials = try tls.reload(files)
        logger.info("TLS certificate reloaded", metadata: [
            "cert_file": "\(files.certificateChain)", "certificate_serial": "\(credentials.serialNumber)",
            "certificate_not_after": "\(ServerTLS.utc(credentials.notValidAfter))",
        ])
    } catch {
        logger.error("TLS reload refused, the certificate in force stays: \(error)", metadata: [
            "reason": "\(error.code)", "certificate_serial": "\(tls.credentials.serialNumber)",
        ])
    }
}
