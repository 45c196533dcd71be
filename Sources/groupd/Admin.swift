import ArgumentParser
import GRPCClient
import GRPCProtocol
import GroupAPI
import GroupService
import UnixSignals

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `groupd admin`: an operator's client of a running groupd. It mints an admin token for an app
/// of the configuration, calls the server at the configuration's `listen` address (or
/// `--address`) over gRPC, and prints each result as one JSON object per line (proto3 JSON
/// names), for `jq` and scripts.
///
/// Exit status: 0 on success; 1 when a call fails (the gRPC status, reason and field on stderr),
/// the server cannot be reached, or a requested group is not found; 2 for a usage error (unknown
/// option, unreadable configuration, unknown app, malformed address, unreadable TLS files).
struct Admin: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Call a running groupd as an app's backend and print JSON lines.",
        discussion: "Exit status: 0 success, 1 call failed (status and reason on stderr), 2 usage error.",
        subcommands: [AdminGroup.self, AdminGroups.self, AdminMembers.self, AdminEvents.self, AdminHealth.self]
    )
}

/// The options every `groupd admin` command takes.
struct AdminOptions: ParsableArguments {
    @Option(help: "The YAML configuration file (app secrets and the listen address).")
    var config = "groupd.yaml"

    @Option(help: "The app to act for (default: the first app of the configuration).")
    var app: String?

    @Option(help: "The server as HOST:PORT (default: the configuration's listen address).")
    var address: String?

    @Option(help: "Seconds a call may take (event tails have no deadline).")
    var timeout: Double = 10

    @Flag(help: "Indent the JSON over several lines.")
    var pretty = false

    @Flag(help: "Connect with TLS, trusting the system's CAs unless --ca-file is given.")
    var tls = false

    @Option(help: "PEM file of the CAs that sign the server's certificate (implies --tls).")
    var caFile: String?

    @Option(help: "PEM file of the client certificate for mutual TLS (implies --tls; needs --key-file).")
    var certFile: String?

    @Option(help: "PEM file of the client certificate's private key.")
    var keyFile: String?

    func validate() throws {
        guard timeout > 0 else { throw ValidationError("--timeout must be positive") }
        if (certFile == nil) != (keyFile == nil) {
            throw ValidationError("--cert-file and --key-file go together")
        }
        if let address { _ = try AdminOptions.parseAddress(address) }
    }

    /// `HOST:PORT` or `[V6]:PORT`.
    static func parseAddress(_ text: String) throws -> (host: String, port: Int) {
        let host: Substring
        let portText: Substring
        if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { throw ValidationError("--address \(text): expected [HOST]:PORT") }
            portText = rest.dropFirst()
        } else {
            guard let colon = text.lastIndex(of: ":") else { throw ValidationError("--address \(text): expected HOST:PORT") }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard !host.isEmpty, let port = Int(portText), (1...65535).contains(port) else {
            throw ValidationError("--address \(text): expected HOST:PORT with a port from 1 to 65535")
        }
        return (String(host), port)
    }
}

/// A connected admin session: the connection, the admin token's metadata and the output options.
struct AdminSession {
    let connection: GRPCClientConnection
    let metadata: [(name: String, value: String)]
    let timeout: Duration
    let pretty: Bool
    /// Whether the connection uses TLS (`--tls`, `--ca-file` or `--cert-file`).
    let usesTLS: Bool

    /// Reads the configuration, mints the admin token and connects.
    /// - Throws: `ExitCode(2)` for usage problems, `ExitCode(1)` when the server cannot be reached
    ///   (each after a line on stderr).
    static func open(_ options: AdminOptions) async throws -> AdminSession {
        let configuration = try loadConfiguration(options.config)
        let app: GroupdConfiguration.App
        if let id = options.app {
            guard let found = configuration.app(id) else {
                printError("groupd admin: no app \(id) in \(options.config)")
                throw ExitCode(2)
            }
            app = found
        } else {
            guard let first = configuration.apps.first else {
                printError("groupd admin: \(options.config) has no app")
                throw ExitCode(2)
            }
            app = first
        }
        guard let secret = app.secrets.first else {
            printError("groupd admin: app \(app.id) has no secret")
            throw ExitCode(2)
        }
        let token: String
        do {
            token = try await TokenMinter.mint(app: app.id, secret: secret.secret, kid: secret.kid, user: "admin", admin: true, ttl: .seconds(3600))
        } catch {
            printError("groupd admin: cannot mint a token for app \(app.id): \(error)")
            throw ExitCode(2)
        }
        var host = configuration.listen.host
        var port = configuration.listen.port
        if let address = options.address {
            (host, port) = try AdminOptions.parseAddress(address)
        } else if host == "0.0.0.0" || host.isEmpty {
            host = "127.0.0.1"  // a wildcard listener is reached through loopback
        } else if host == "::" {
            host = "::1"
        }
        var tls: GRPCClientConnection.TLS?
        if options.tls || options.caFile != nil || options.certFile != nil {
            let settings = GRPCClientConnection.TLS(caFile: options.caFile, certificateFile: options.certFile, keyFile: options.keyFile)
            do {
                try settings.validate()
            } catch {
                printError("groupd admin: \(error.message)")
                throw ExitCode(2)
            }
            tls = settings
        }
        do {
            let connection = try await GRPCClientConnection.connect(to: .init(host: host, port: port, tls: tls))
            return AdminSession(
                connection: connection, metadata: [("authorization", "Bearer \(token)")],
                timeout: .milliseconds(Int64(options.timeout * 1000)), pretty: options.pretty, usesTLS: tls != nil)
        } catch {
            printError("groupd admin: \(error)\(hint(for: error, usesTLS: tls != nil))")
            throw ExitCode(1)
        }
    }

    /// A unary call; a failure is printed (`groupd admin: METHOD: CODE: message (reason R, field F)`)
    /// and ends the command with exit status 1.
    func unary<Request, Response>(_ method: ProtoMethod<Request, Response>, _ request: Request) async -> Response {
        do {
            return try await connection.unary(method, request, metadata: metadata, timeout: timeout)
        } catch {
            await fail(method.methodName, error)
        }
    }

    /// Prints a failed call and exits 1.
    func fail(_ methodName: String, _ error: GRPCCallError) async -> Never {
        printError("groupd admin: \(methodName): \(error)\(AdminSession.hint(for: error, usesTLS: usesTLS))")
        await connection.close()
        Glibc.exit(1)
    }

    /// What to try next after a connection failure an operator meets first, as the end of its line:
    /// a TLS server reached without TLS, a certificate the given CAs did not sign.
    static func hint(for error: GRPCCallError, usesTLS: Bool) -> String {
        guard error.code == .unavailable else { return "" }
        let message = error.message
        if !usesTLS && (message.contains("may expect TLS") || message.contains("answered in TLS")) {
            return "; connect with --tls (and --ca-file PEM when a private CA signed its certificate)"
        }
        if usesTLS && message.contains("CERTIFICATE_VERIFY_FAILED") {
            return "; name the CA that signed it with --ca-file PEM"
        }
        if usesTLS && message.contains("does not speak TLS") {
            return "; leave out --tls for a plaintext server"
        }
        return ""
    }

    /// Writes one message as a JSON line.
    func emit<M: ProtoMessage>(_ message: M) {
        AdminOutput.line(ProtoJSON.encode(message, pretty: pretty))
    }
}

/// Standard output, one line per write(2): nothing is buffered, so a tail piped into another
/// program shows each event as it arrives.
enum AdminOutput {
    static func line(_ text: String) {
        var bytes = Array(text.utf8)
        bytes.append(UInt8(ascii: "\n"))
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.write(1, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                // The reader went away (a closed pipe): nothing more can be shown.
                Glibc.exit(1)
            }
            offset += written
        }
    }
}

extension AdminSession {
    /// Prints every item of a paged listing, page after page from the empty token until the last
    /// page (an empty next token) or `limit` items, then closes the connection.
    /// - Parameters:
    ///   - limit: The most items to print; nil: all.
    ///   - page: One call for a page token: its items and the next token.
    func emitPages<Item: ProtoMessage>(
        limit: Int?, _ page: (_ token: String) async -> (items: [Item], next: String)
    ) async {
        var printed = 0
        var token = ""
        repeat {
            let (items, next) = await page(token)
            for item in items {
                if let limit, printed >= limit { break }
                emit(item)
                printed += 1
            }
            token = next
        } while !token.isEmpty && printed < (limit ?? .max)
        await connection.close()
    }
}

// MARK: group get

/// `groupd admin group …`
struct AdminGroup: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "group", abstract: "Read groups.", subcommands: [AdminGroupGet.self])
}

/// `groupd admin group get ID…`: GetGroupsInfo; one `Group` per line; groups not found are named on
/// stderr with their reason and make the exit status 1.
struct AdminGroupGet: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "get", abstract: "Print groups by id (GetGroupsInfo).")

    @OptionGroup var options: AdminOptions
    @Argument(help: ArgumentHelp("Group ids.", valueName: "group-id")) var groupIDs: [String]

    func validate() throws {
        guard !groupIDs.isEmpty else { throw ValidationError("name at least one group id") }
    }

    func run() async throws {
        let session = try await AdminSession.open(options)
        let response = await session.unary(
            Groupd_V1_GroupService.Method.getGroupsInfo, .with { $0.groupIds = groupIDs })
        for group in response.groups { session.emit(group) }
        for failure in response.failures {
            printError("groupd admin: group \(failure.groupID): \(Self.name(of: failure.error)) (reason \(failure.reason))")
        }
        await session.connection.close()
        if !response.failures.isEmpty { throw ExitCode(1) }
    }

    private static func name(of error: Groupd_V1_GroupLookupError) -> String {
        switch error {
        case .notFound: "NOT_FOUND"
        case .permissionDenied: "PERMISSION_DENIED"
        case .invalidID: "INVALID_ID"
        case .unspecified: "UNSPECIFIED"
        case .UNRECOGNIZED(let value): "error \(value)"
        }
    }
}

// MARK: groups search

/// `groupd admin groups …`
struct AdminGroups: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "groups", abstract: "Find groups.", subcommands: [AdminGroupsSearch.self])
}

/// `groupd admin groups search TEXT`: SearchGroups through every page; one `GroupSearchResult`
/// per line.
struct AdminGroupsSearch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "search", abstract: "Search groups by id or name (SearchGroups).")

    @OptionGroup var options: AdminOptions
    @Argument(help: "The keyword (1-30 bytes).") var text: String
    @Option(help: "Print at most this many results (default: all).") var limit: Int?
    @Option(help: "Results per call (default: the server's, 20; at most 100).") var pageSize: Int?

    func validate() throws {
        if let limit, limit < 1 { throw ValidationError("--limit must be at least 1") }
        if let pageSize, !(1...100).contains(pageSize) { throw ValidationError("--page-size must be from 1 to 100") }
    }

    func run() async throws {
        let session = try await AdminSession.open(options)
        await session.emitPages(limit: limit) { token in
            let response = await session.unary(Groupd_V1_GroupService.Method.searchGroups, .with {
                $0.keyword = text
                $0.pageSize = Int32(pageSize ?? 0)
                $0.pageToken = token
            })
            return (response.results, response.nextPageToken)
        }
    }
}

// MARK: members list

/// `groupd admin members …`
struct AdminMembers: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "members", abstract: "Read members.", subcommands: [AdminMembersList.self])
}

/// `groupd admin members list GROUP`: ListMembers page after page until the last (or `--limit`);
/// one `Member` per line.
struct AdminMembersList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List a group's members (ListMembers, every page).")

    @OptionGroup var options: AdminOptions
    @Argument(help: "The group id.") var group: String
    @Option(help: "Print at most this many members (default: all).") var limit: Int?
    @Option(help: "Members per call (default: the server's, the app's max_page_size; at most 50).") var pageSize: Int?

    func validate() throws {
        if let limit, limit < 1 { throw ValidationError("--limit must be at least 1") }
        if let pageSize, !(1...50).contains(pageSize) { throw ValidationError("--page-size must be from 1 to 50") }
    }

    func run() async throws {
        let session = try await AdminSession.open(options)
        await session.emitPages(limit: limit) { token in
            let response = await session.unary(Groupd_V1_MemberService.Method.listMembers, .with {
                $0.groupID = group
                $0.pageSize = Int32(pageSize ?? 0)
                $0.pageToken = token
            })
            return (response.members, response.nextPageToken)
        }
    }
}

// MARK: events tail

/// `groupd admin events …`
struct AdminEvents: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "events", abstract: "Follow events.", subcommands: [AdminEventsTail.self])
}

/// `groupd admin events tail`: the app's firehose (EventService.Subscribe with an admin token),
/// one `SubscribeResponse` per line (an `event`, a `message` or the `caughtUp` marker, each with
/// its `cursor`), until SIGINT or SIGTERM (exit 0) or the stream fails (exit 1, status on stderr,
/// and the cursor to resume from when the server sent one).
struct AdminEventsTail: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "tail", abstract: "Print the app's events as they happen (Subscribe).")

    @OptionGroup var options: AdminOptions
    @Option(name: .customLong("group"), help: "Only this group (repeatable).") var groups: [String] = []
    @Flag(help: "Start from the oldest retained event.") var fromStart = false
    @Option(help: "Resume after this cursor (from an earlier line's cursor).") var after: String?
    @Flag(help: "Leave out group messages, only events.") var excludeMessages = false

    func validate() throws {
        if fromStart && after != nil { throw ValidationError("--from-start and --after exclude each other") }
    }

    func run() async throws {
        // Trapped before the stream starts, so an early SIGINT ends the tail cleanly too.
        let signals = await UnixSignalsSequence(trapping: .sigint, .sigterm)
        let session = try await AdminSession.open(options)
        let request = Groupd_V1_SubscribeRequest.with {
            $0.groupIds = groups
            $0.fromOldest = fromStart
            $0.cursor = after ?? ""
            $0.excludeMessages = excludeMessages
        }
        let connection = session.connection
        let metadata = session.metadata
        let pretty = session.pretty
        let failure: GRPCCallError? = await withTaskGroup(of: GRPCCallError?.self) { group in
            group.addTask {
                do {
                    let stream = connection.serverStreaming(Groupd_V1_EventService.Method.subscribe, request, metadata: metadata)
                    for try await response in stream {
                        AdminOutput.line(ProtoJSON.encode(response, pretty: pretty))
                    }
                    return nil
                } catch let error as GRPCCallError {
                    return error
                } catch {
                    return GRPCCallError(.unknown, "\(error)")
                }
            }
            group.addTask {
                for await _ in signals { return nil }
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        if let failure {
            // CURSOR_EXPIRED and SUBSCRIBER_TOO_SLOW say where to pick up again.
            if let resume = failure.details?.details.lazy.compactMap({ try? $0.unpack(Groupd_V1_StreamResumeInfo.self) }).first {
                printError("groupd admin: Subscribe: \(failure)")
                printError("groupd admin: resume with --after \(resume.cursor)")
                await session.connection.close()
                throw ExitCode(1)
            }
            await session.fail("Subscribe", failure)
        }
        await session.connection.close()
    }
}

// MARK: health

/// `groupd admin health`: `grpc.health.v1.Health/Check`; prints the response and exits 0 when the
/// service is SERVING, 1 otherwise (for container and orchestrator probes).
struct AdminHealth: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "health", abstract: "Check the server's health (exit 0 when SERVING).")

    @OptionGroup var options: AdminOptions
    @Option(help: "The service to check (default: the whole server).") var service = ""

    func run() async throws {
        let session = try await AdminSession.open(options)
        let response = await session.unary(Grpc_Health_V1_Health.Method.check, .with { $0.service = service })
        session.emit(response)
        await session.connection.close()
        if response.status != .serving { throw ExitCode(1) }
    }
}
