import ArgumentParser
import GroupService
import GroupdBuildInfo
import Logging

/// `groupd`: the group system of an instant-messaging backend, served over gRPC.
@main
struct GroupdCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "groupd",
        abstract: "The group system of an instant-messaging backend, served over gRPC.",
        version: buildVersion,
        subcommands: [Serve.self, CheckConfig.self, Token.self, DemoConfig.self, Quickstart.self, Admin.self],
        defaultSubcommand: Serve.self
    )

    /// Runs the command; a usage error (unknown option, missing argument, failed validation)
    /// exits 2, like a configuration error, instead of ArgumentParser's 64.
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var command = command as? any AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch {
            if exitCode(for: error) == .validationFailure {
                printError(fullMessage(for: error))
                exit(withError: ExitCode(2))
            }
            exit(withError: error)
        }
    }
}

/// `groupd --version`: the release and the git commit of the build.
let buildVersion = "groupd \(String(cString: groupd_build_version())) (commit \(String(cString: groupd_build_commit())))"

/// Loads and validates a configuration file, or exits 2 with every problem found, one line each.
func loadConfiguration(_ path: String) throws -> GroupdConfiguration {
    do {
        return try GroupdConfiguration.load(path: path)
    } catch let error as ConfigurationError {
        if access(path, F_OK) != 0 && errno == ENOENT {
            // A first run: say how to get a file.
            printError("groupd: \(error); write one with: groupd demo-config > \(path)")
            throw ExitCode(2)
        }
        for problem in error.all { printError("groupd: \(problem)") }
        throw ExitCode(2)
    } catch {
        printError("groupd: \(error)")
        throw ExitCode(2)
    }
}

/// Writes a line to standard error.
func printError(_ line: String) {
    var stream = StandardError()
    print(line, to: &stream)
}

private struct StandardError: TextOutputStream {
    mutating func write(_ string: String) {
        var bytes = Array(string.utf8)
        _ = bytes.withUnsafeMutableBytes { Glibc.write(2, $0.baseAddress, $0.count) }
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `groupd check-config FILE`: validates a configuration without serving: the file, its TLS
/// files, then every policy plugin it names (loaded and instantiated with its config, with
/// `GROUPD_POLICY_CHECK=1` in the environment, then torn down). A failure
/// prints `groupd: FILE: KEY PATH: what went wrong` per problem (every value out of range, not only
/// the first) and exits 2.
struct CheckConfig: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config", abstract: "Validate a configuration file and its policy plugins, and exit.")

    @Argument(help: "The YAML configuration file.")
    var file: String

    func run() async throws {
        // Tells the plugins' instance_new that this is a check: the shipped webhook plugin then
        // checks its queue_dir without creating it or starting its delivery (docs/PLUGINS.md).
        setenv("GROUPD_POLICY_CHECK", "1", 1)
        let config = try loadConfiguration(file)
        // The TLS files are read and checked as `serve` does (expiry, key, PEM).
        _ = try loadServerTLS(config, configPath: file)
        // The host's own log lines would repeat what is printed below.
        var logger = Logger(label: "groupd", factory: { label in StreamLogHandler.standardError(label: label) })
        logger.logLevel = .critical
        let policy = ServicePolicy.standard(logger: logger)
        let (failures, checked) = policy.checkLoad(config, baseDirectory: ServicePolicy.directory(of: file))
        try await policy.shutdown()
        for failure in failures { printError("groupd: \(file): \(failure)") }
        if !failures.isEmpty { throw ExitCode(2) }
        let apps = "\(config.apps.count) app\(config.apps.count == 1 ? "" : "s")"
        let plugins = checked == 0 ? "" : ", \(checked) plugin\(checked == 1 ? "" : "s") loaded"
        print("\(file): ok (\(apps)\(plugins))")
    }
}

/// `groupd token`: mints an HS256 token for an app, for scripts and tests.
struct Token: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Mint a token for an app's user or backend.")

    @Option(help: "The YAML configuration file.") var config = "groupd.yaml"
    @Option(help: "The app id.") var app: String
    @Option(help: "The user id (the token's sub); required for a user token.") var user: String?
    @Flag(help: "An admin (backend) token (sub \"admin\" unless --user names another).") var admin = false
    @Option(help: "Lifetime in seconds, at least 1.") var ttl = 3600
    @Option(help: "The key id of the secret to sign with (default: the app's first).") var kid: String?

    /// A user token names its user; a lifetime is positive (a token that is born expired is refused
    /// by every call). Both are usage errors: exit 2.
    func validate() throws {
        if user == nil && !admin {
            throw ValidationError("name the token's user with --user ID, or ask for a backend token with --admin")
        }
        if let user, user.isEmpty { throw ValidationError("--user must not be empty") }
        if ttl < 1 { throw ValidationError("--ttl must be at least 1 second, found \(ttl)") }
    }

    func run() async throws {
        let configuration = try loadConfiguration(config)
        guard let app = configuration.app(app) else {
            printError("groupd: no app \(self.app) in \(config)")
            throw ExitCode(2)
        }
        let kids = app.secrets.map(\.kid)
        let chosen = kid.map { kid in app.secrets.first { $0.kid == kid } } ?? app.secrets.first
        guard let secret = chosen else {
            // An unknown kid is refused: a token signed with another key would not be the one asked for.
            printError("groupd: app \(app.id) in \(config) has no secret with kid \(kid ?? ""); its kids: \(kids.joined(separator: ", "))")
            throw ExitCode(2)
        }
        print(try await TokenMinter.mint(app: app.id, secret: secret.secret, kid: secret.kid, user: user ?? "admin", admin: admin, ttl: .seconds(ttl)))
    }
}

/// `groupd demo-config`: prints a commented configuration with one demo app and a fresh secret.
struct DemoConfig: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo-config", abstract: "Print a configuration with a demo app.")

    @Option(help: "The port to listen on.") var port = 50051

    func run() async throws {
        print(GroupdConfiguration.demoYAML(port: port), terminator: "")
    }
}

/// `groupd quickstart`: prints an admin token for the first app and a call to paste.
struct Quickstart: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print an admin token and a first call to paste.")

    @Option(help: "The YAML configuration file.") var config = "groupd.yaml"

    func run() async throws {
        let configuration = try loadConfiguration(config)
        guard let app = configuration.apps.first, let secret = app.secrets.first else { return }
        let token = try await TokenMinter.mint(app: app.id, secret: secret.secret, kid: secret.kid, user: "admin", admin: true, ttl: .seconds(24 * 3600))
        let address = "\(configuration.listen.host):\(configuration.listen.port)"
        print("""

            groupd will listen on \(address) (app "\(app.id)", data in \(configuration.dataDir)).
            An admin token for app "\(app.id)", valid 24 hours:

              export GROUPD_TOKEN=\(token)

            In another terminal, create and read a group (Python grpcio; stubs are generated from Protos/):

              GROUPD_TOKEN=\(token) python3 scripts/first_call.py \(address)

            """)
    }
}
