import Dispatch
import Foundation
import GroupModel
import GroupStore
import GroupStoreSQL
import Logging
import NIOCore
import NIOPosix
import Synchronization

/// The shared `StoreBackend`: one PostgreSQL database that any number of groupd nodes use at
/// once (docs/SCALING.md).
///
/// - **Writes**: each node's group commit runs its batches on one writer connection, one
///   transaction each. A batch first locks what its mutations write (`WriteScope`): the
///   64-bit keys of their groups and of the users whose limits they check, with the app's write
///   lock shared (exclusive only for a mutation of a whole app, such as a retention pass), all
///   in one statement and one global order, so two batches never deadlock on them. Batches of
///   different groups of one app, on any nodes, hold no lock in common and run in parallel; two
///   batches of one group run one after the other, so its sequence stays gap-free. The events
///   are numbered at the batch's end (``PostgresStreamTail``): its last statement takes the app's
///   next positions from the app's ticket row and inserts them, so positions are dense and in
///   commit order within an app. A deadlock PostgreSQL breaks (rows the locks do not cover, such
///   as the per-user counts a dismissal decrements) rolls the batch back, and it runs again.
/// - **Events across nodes**: after a batch that appended events commits, the node rings a
///   doorbell: it notifies ``PostgresSchema/eventChannel`` with each app's `event_id` range, on a
///   connection of its own with `synchronous_commit = off`. The notification is sent outside the
///   data transaction, because PostgreSQL holds a cluster-wide lock from a notifying
///   transaction's pre-commit until after its commit record is flushed: a `NOTIFY` inside every
///   batch made the commits of all apps wait on each other's flushes. Every node listens and
///   reads the app's events after the last one it delivered from the table, so a subscriber on
///   any node receives every event in `event_id` order (``PostgresEventFollower``). A node that
///   dies between its commit and its doorbell loses nothing: every node also reads the apps'
///   heads every `PostgresStoreSettings.eventPollMilliseconds` and catches up what it missed.
/// - **Reads** run on a pool of connections (`PostgresStoreSettings.poolSize`), each in one
///   `REPEATABLE READ` snapshot; when every connection is busy up to
///   `PostgresStoreSettings.maxWaiting` calls wait, and the next is refused (`STORE_BUSY`).
/// - **Availability**: a connection lost makes the store unavailable at once; calls then fail
///   fast with `UNAVAILABLE` (`STORE_UNAVAILABLE`) while a monitor reconnects with back-off, and
///   the store is available again once it succeeds (``isAvailable``).
/// - **The driver, asynchronously**: a batch is a task on the writer connection's event loop, a
///   read a task on its pooled connection's (a task executor preference): statements are written
///   from the loop and the task resumes there when PostgreSQL answered, so no thread waits on a
///   statement and a call's statements cost no thread switch. The connections spread over one
///   event loop per core. Only the event follower and the availability probe keep a serial
///   dispatch queue of their own and wait for their statements there.
public final class PostgresBackend: StoreBackend {
    /// The connection settings.
    public let settings: PostgresStoreSettings
    let logger: Logger
    let group: MultiThreadedEventLoopGroup
    /// The writer: one batch at a time, each a task on the writer connection's event loop.
    let writer: PostgresSession
    /// Where a batch's `then` runs, after its task: one at a time, off the event loops.
    let completions = DispatchQueue(label: "groupd.postgres.writer.completions")
    /// Per app the last committed batch appended to, the position before its first event (the
    /// app's head before it), for ``publish(_:deliver:)``; set by the batch's task before its
    /// `then` is queued, read there.
    nonisolated(unsafe) var lastBatchBases: [String: Int64] = [:]
    /// Batches rolled back by a deadlock or a serialization failure and run again (tests).
    let retriedBatches = Atomic<Int>(0)
    let readers: PostgresReaders
    /// Reads of groups by id, those that arrive together answered together.
    let groupReads: CoalescedReads<GroupIDsRead, [String: Group]>
    /// Users' views of groups by id (GetGroupsInfo with an operator), those that arrive together
    /// answered together.
    let userGroupReads: CoalescedReads<UserGroupsRead, GroupsForUser>
    /// The connection relaying AVChatRoom messages (without waiting for their flush: they are
    /// live only), a pool of one that relays take in turn; ``relayed`` counts them there.
    let roomSession: PostgresSession
    let rooms: PostgresReaders
    nonisolated(unsafe) var relayed = 0
    /// The connection holding the periodic passes' locks (``exclusively(_:_:)``), a pool of one.
    let passSession: PostgresSession
    let passes: PostgresReaders
    /// The connection the doorbells go out on (`ringDoorbells(_:)`), with
    /// `synchronous_commit = off`; one task at a time sends on it.
    let doorbellSession: PostgresSession
    /// Doorbells not sent yet: per app, the `event_id` range committed since the last one went
    /// out. Rings that come faster than one round trip are merged into one notification per app.
    /// `sending`: a task sends on the doorbell connection now (and sends what is pending before
    /// it ends).
    private let pendingDoorbells = Mutex<(ranges: [String: ClosedRange<Int64>], sending: Bool)>(([:], false))
    /// Tests only: drop every doorbell instead of sending it (a node that dies between its commit
    /// and its doorbell).
    let doorbellFault = Mutex(false)
    /// Doorbells sent (one per app and notification), for the tests.
    let doorbellsSent = Atomic<Int>(0)
    let follower: PostgresEventFollower
    let monitor: PostgresAvailability
    /// The migrations applied when the backend opened.
    public let appliedMigrations: [String]
    /// Tests only: makes the next batches' `COMMIT` fail.
    let commitFault = Mutex<(any Error)?>(nil)
    private let closed = Mutex(false)

    private init(
        settings: PostgresStoreSettings, logger: Logger, group: MultiThreadedEventLoopGroup, writer: PostgresSession,
        appliedMigrations: [String]
    ) {
        self.settings = settings
        self.logger = logger
        self.group = group
        let loop = writer.executor.eventLoop
        self.writer = writer
        self.appliedMigrations = appliedMigrations
        self.passSession = PostgresSession(settings: settings, eventLoop: loop, logger: logger, id: 4)
        self.roomSession = PostgresSession(
            settings: settings, eventLoop: loop, logger: logger, id: 5, setup: ["SET synchronous_commit = off"])
        self.doorbellSession = PostgresSession(
            settings: settings, eventLoop: loop, logger: logger, id: 6, setup: ["SET synchronous_commit = off"])
        let monitor = PostgresAvailability(
            session: PostgresSession(settings: settings, eventLoop: loop, logger: logger, id: 1), logger: logger)
        self.monitor = monitor
        // The readers spread over the event loops (`next()` takes them in turn): each decodes its
        // rows on its own loop.
        self.readers = PostgresReaders(
            sessions: (0..<settings.poolSize).map {
                PostgresSession(settings: settings, eventLoop: group.next(), logger: logger, id: 100 + $0)
            },
            maxWaiting: settings.maxWaiting, availability: monitor)
        self.rooms = PostgresReaders(sessions: [roomSession], maxWaiting: .max, availability: monitor)
        self.passes = PostgresReaders(sessions: [passSession], maxWaiting: .max, availability: monitor)
        // Half the pool for reads by id, a quarter for users' views: a quarter is left for every
        // other read when both kinds queue.
        let refusal: @Sendable (Int) -> any Error = { PostgresStoreError.poolExhausted($0).groupError }
        self.groupReads = CoalescedReads(
            maxRunning: settings.poolSize / 2, maxWaiting: settings.maxWaiting, weight: { $0.ids.count }, refusal: refusal,
            fetch: { [readers] reads in try await PostgresRows.groups(answering: reads, readers: readers) })
        self.userGroupReads = CoalescedReads(
            maxRunning: settings.poolSize / 4, maxWaiting: settings.maxWaiting, weight: { $0.ids.count }, refusal: refusal,
            fetch: { [readers] reads in try await readers.run { try await PostgresRows.groupsForUsers(reads, session: $0) } })
        self.follower = PostgresEventFollower(
            settings: settings, eventLoop: loop, logger: logger,
            session: PostgresSession(settings: settings, eventLoop: loop, logger: logger, id: 2))
        monitor.start(onRecovery: { [follower] in follower.recovered() })
        // This node's own commits and relays are delivered without a read-back.
        let follower = self.follower
        for session in [writer, roomSession, doorbellSession] {
            if let pid = session.backendPID { follower.own(pid, replacing: nil) }
            let previous = Mutex<Int32?>(session.backendPID)
            session.onConnect = { pid in
                follower.own(pid, replacing: previous.withLock { old in defer { old = pid }; return old })
            }
        }
    }

    /// Connects to the database, applies pending migrations (under the migration lock) and
    /// starts listening for other nodes' commits.
    /// - Throws: `INVALID_ARGUMENT` for a malformed URL; `UNAVAILABLE` when the database cannot
    ///   be reached; a migration's error.
    public static func open(settings: PostgresStoreSettings, logger: Logger = Logger(label: "groupd.postgres")) async throws -> PostgresBackend {
        _ = try settings.endpoint()
        // One event loop per core, at most one per pooled connection: the writer and the other
        // single connections share the first.
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, min(System.coreCount, settings.poolSize)))
        let writer = PostgresSession(settings: settings, eventLoop: group.next(), logger: logger, id: 0)
        let applied: [String]
        do {
            applied = try await writer.run { try await PostgresSchema.migrate($0) }
        } catch {
            await writer.disconnect()
            try? await group.shutdownGracefully()
            if let error = error as? PostgresStoreError { throw error.groupError }
            throw error
        }
        return PostgresBackend(settings: settings, logger: logger, group: group, writer: writer, appliedMigrations: applied)
    }

    /// Whether the database answers (the health check's readiness).
    public var isAvailable: Bool { monitor.isAvailable }

    /// Holds the session-level advisory lock of `pass` (class ``PostgresSchema/Lock/passes``) on a
    /// connection of its own while `body` runs; another node holding it: `nil` at once. A node
    /// that dies mid-pass loses its connection, and with it the lock.
    public func exclusively<T: Sendable>(_ pass: String, _ body: @Sendable () async throws -> T) async throws -> T? {
        let arguments: [PGValue] = [.integer(Int64(PostgresSchema.Lock.passes)), .text(pass)]
        let locked = try await passes.run { session in
            try await session.first("SELECT pg_try_advisory_lock(?::int4, hashtext(?))", arguments) { try $0.bool(0) } ?? false
        }
        guard locked else { return nil }
        do {
            let value = try await body()
            _ = try? await passes.run { session in try await session.command("SELECT pg_advisory_unlock(?::int4, hashtext(?))", arguments) }
            return value
        } catch {
            _ = try? await passes.run { session in try await session.command("SELECT pg_advisory_unlock(?::int4, hashtext(?))", arguments) }
            throw error
        }
    }

    public func observeAvailability(_ observer: @escaping @Sendable (Bool) -> Void) {
        monitor.observe(observer)
    }

    /// Tests only: from now on every batch's `COMMIT` fails with `error` (`nil`: commits work).
    public func injectCommitFailure(_ error: (any Error)?) {
        commitFault.withLock { $0 = error }
    }

    public func close() async throws {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                self.closeNow()
                continuation.resume()
            }
        }
    }

    /// Closes every connection and stops the backend's threads, blocking (not from an event
    /// loop); a second call does nothing.
    public func closeNow() {
        guard closed.withLock({ closed in defer { closed = true }; return !closed }) else { return }
        monitor.stop()
        follower.stop()
        writer.disconnectBlocking()
        for pool in [passes, rooms, readers] { pool.closeNow() }
        // A doorbell still being sent fails and is dropped (the other nodes poll).
        doorbellSession.disconnectBlocking()
        try? group.syncShutdownGracefully()
    }

    /// Creates the database `name` on the server of `settings` (tests and tools: a fresh
    /// database per test), connecting to the database the settings name.
    public static func createDatabase(named name: String, settings: PostgresStoreSettings) async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let session = PostgresSession(settings: settings, eventLoop: group.next(), logger: Logger(label: "groupd.postgres"), id: 9)
        let quoted = "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
        var failure: (any Error)?
        do {
            try await session.run { try await $0.command("CREATE DATABASE \(quoted)") }
        } catch {
            failure = error
        }
        await session.disconnect()
        try? await group.shutdownGracefully()
        if let failure { throw failure }
    }

    // MARK: Writes

    public func commit(_ work: [TransactionWork], scopes: [WriteScope], then: @escaping @Sendable (BatchOutcome) -> Void) {
        Task(executorPreference: writer.executor) {
            let outcome = await self.run(work, scopes: scopes)
            // Off the event loop: `then` publishes the batch's events, and the follower may read
            // other nodes' events first, waiting for it (never on an event loop).
            self.completions.async { then(outcome) }
        }
    }

    /// One transaction on the writer: the locks of what the pieces of work write, the pieces in
    /// order, the tail (each app's events numbered and inserted), `COMMIT`; then the doorbell for
    /// the events it appended. A deadlock or serialization failure rolls back and the store runs
    /// the whole batch again.
    private func run(_ work: [TransactionWork], scopes: [WriteScope]) async -> BatchOutcome {
        if !monitor.isAvailable {
            return BatchOutcome(failures: [:], ending: .failed(monitor.unavailableError()))
        }
        var failures: [Int: any Error] = [:]
        let transaction = PostgresTransaction(session: writer)
        do {
            try await writer.begin()
            try await lock(scopes)
            try await transaction.preloadSends(scopes)
        } catch {
            return await ended(error, failures: [:], at: 0)
        }
        for (index, item) in work.enumerated() {
            let writes = writer.writeCount + transaction.bufferedWrites
            transaction.scope = index < scopes.count ? scopes[index] : nil
            do {
                try await item(transaction)
            } catch {
                // The session turns a lost connection or a timeout into a PostgresStoreError.
                if !writer.inTransaction || error is PostgresStoreError || PGState.isRetryable(error) {
                    if !PGState.isRetryable(error) { failures[index] = monitor.reported(error) }
                    return await ended(error, failures: failures, at: index)
                }
                failures[index] = error
                if !writer.transactionFailed && writer.writeCount + transaction.bufferedWrites == writes { continue }
                await writer.rollback()
                return BatchOutcome(failures: failures, ending: .aborted(at: index))
            }
        }
        var bases: [String: Int64] = [:]
        var ranges: [String: ClosedRange<Int64>] = [:]
        do {
            for tail in try await transaction.takeTails() where tail.count > 0 {
                let (sql, arguments) = tail.statement
                guard let base = try await writer.first(sql, arguments, { try $0.int64(0) }) else {
                    throw GroupError.internal("the tail of \(tail.app)'s events returned no position")
                }
                bases[tail.app] = base
                ranges[tail.app] = (base + 1)...(base + Int64(tail.count))
            }
            if let fault = commitFault.withLock({ $0 }) { throw fault }
            try await writer.commit()
        } catch {
            return await ended(error, failures: failures, at: work.count - 1)
        }
        lastBatchBases = bases
        if let file = settings.dieBeforeDoorbellFile, !ranges.isEmpty, FileManager.default.fileExists(atPath: file) {
            logger.critical("killing this process between a commit and its doorbell, as \(PostgresStoreSettings.dieBeforeDoorbellVariable) asks")
            kill(getpid(), SIGKILL)
        }
        ringDoorbells(ranges)
        return BatchOutcome(failures: failures, ending: .committed, positions: EventPositions(bases: bases))
    }

    /// The batch's first statement after `BEGIN`: the write locks of the apps (exclusive when a
    /// piece of work may write any row of its app, shared otherwise), then the keys of the groups
    /// and users the pieces name, ascending (``PostgresSchema/v11``). Every batch on every node
    /// takes its locks in this one order, so two batches never deadlock on them; batches writing
    /// different groups of one app hold no lock in common.
    private func lock(_ scopes: [WriteScope]) async throws {
        var exclusive = Set<String>()
        var shared = Set<String>()
        var keys = Set<Int64>()
        for scope in scopes {
            if scope.groups == nil {
                exclusive.insert(scope.app)
            } else {
                shared.insert(scope.app)
                keys.formUnion(scope.lockKeys)
            }
        }
        shared.subtract(exclusive)
        try await writer.command(
            "SELECT groupd_lock_batch(?, ?, ?)",
            [.texts(exclusive.sorted()), .texts(shared.sorted()), .integers(keys.sorted())])
    }

    /// Tells the other nodes, after the commit, which events of which apps it made visible:
    /// `ranges` join the pending doorbells, and the doorbell connection sends all that are pending
    /// in one statement (one notification per app: `"<first> <last> <app>"`). Never waits for the
    /// database; a failure is logged only (the other nodes' poll of the heads catches up).
    private func ringDoorbells(_ ranges: [String: ClosedRange<Int64>]) {
        guard !ranges.isEmpty else { return }
        let start = pendingDoorbells.withLock { pending in
            for (app, range) in ranges {
                pending.ranges[app] = pending.ranges[app].map {
                    min($0.lowerBound, range.lowerBound)...max($0.upperBound, range.upperBound)
                } ?? range
            }
            defer { pending.sending = true }
            return !pending.sending
        }
        // One task sends at a time; each send takes everything pending when it starts.
        guard start else { return }
        Task(executorPreference: doorbellSession.executor) {
            while true {
                let due = self.pendingDoorbells.withLock { pending in
                    defer { pending.ranges = [:] }
                    if pending.ranges.isEmpty { pending.sending = false }
                    return pending.ranges
                }
                if due.isEmpty { return }
                if self.doorbellFault.withLock({ $0 }) { continue }
                let payloads = due.keys.sorted().map { app in Self.doorbellPayload(app: app, range: due[app]!) }
                do {
                    try await self.doorbellSession.command(
                        "SELECT pg_notify(?, payload) FROM unnest(?::text[]) AS payload",
                        [.text(PostgresSchema.eventChannel), .texts(payloads)])
                    self.doorbellsSent.add(payloads.count, ordering: .relaxed)
                } catch {
                    self.logger.debug(
                        "a doorbell was not sent; the other nodes catch up at their next poll",
                        metadata: ["error": "\(error)"])
                }
            }
        }
    }

    /// What a doorbell for `range` of `app`'s events says.
    static func doorbellPayload(app: String, range: ClosedRange<Int64>) -> String {
        "\(range.lowerBound) \(range.upperBound) \(app)"
    }

    /// Tests only: from now on drop every doorbell (`true`) or send them again (`false`).
    func dropDoorbells(_ drop: Bool) {
        doorbellFault.withLock { $0 = drop }
    }

    /// Rolls back; a deadlock or serialization failure aborts the batch (the store runs it again
    /// at once: nothing of it is stored), anything else fails it as a whole.
    private func ended(_ error: any Error, failures: [Int: any Error], at index: Int) async -> BatchOutcome {
        await writer.rollback()
        if PGState.isRetryable(error) {
            retriedBatches.add(1, ordering: .relaxed)
            return BatchOutcome(failures: failures, ending: .aborted(at: max(0, index)))
        }
        return BatchOutcome(failures: failures, ending: .failed(monitor.reported(error)))
    }

    // MARK: Events across nodes

    public func followCommits(_ deliver: @escaping @Sendable ([LoggedEvent]) -> Void) {
        follower.start(deliver: deliver)
    }

    public var isShared: Bool { true }

    public func relayRoomMessage(_ message: GroupMessage) async throws {
        let node = follower.nodeID
        try await rooms.run { session in
            let content = message.content
            try await session.command(
                "SELECT groupd_relay_room_message(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    .text(message.appID), .text(node), .text(message.groupID), .text(message.messageID),
                    .text(message.senderID), .text(message.senderNameCard), .text(content.clientMessageID),
                    .text(content.type), .text(content.text), .bytes(content.payload), .text(content.priority.rawValue),
                    .integer(message.time.millisecondsSince1970),
                ])
            self.relayed += 1
            if self.relayed % 1000 == 0 {
                // Every node has read them long since: relayed messages live about a minute.
                try await session.execute(
                    "DELETE FROM room_messages WHERE time < ?", [.integer(message.time.millisecondsSince1970 - 60_000)])
            }
        }
    }

    public func followRoomMessages(_ deliver: @escaping @Sendable ([GroupMessage]) -> Void) {
        follower.startRooms(deliver: deliver)
    }

    public func catchUp(app: String) async throws {
        guard monitor.isAvailable else { throw monitor.unavailableError() }
        try await monitor.reporting { try await follower.catchUp(app: app) }
    }

    /// Called from the batch's `then` right after the batch committed (``commit(_:scopes:then:)``'s
    /// `then`), so ``lastBatchBases`` are this batch's: the apps' heads before it (the events
    /// come numbered, `BatchOutcome.positions`).
    public func publish(_ events: [LoggedEvent], deliver: ([LoggedEvent]) -> Void) {
        follower.publishLocal(events, previousHeads: lastBatchBases, deliver: deliver)
    }

    // MARK: Reads

    /// Runs `body` on a pooled connection, first as one statement outside a transaction
    /// (`inSnapshot` false: one round trip instead of three); when it needs a second statement
    /// (custom fields to read), it returns `nil` and runs again in one read snapshot.
    func readOne<T: Sendable>(_ body: @Sendable (PostgresSession, _ inSnapshot: Bool) async throws -> T?) async throws -> T {
        try await readers.runOne(body)
    }

    /// Runs `body`, which runs exactly one statement, on a pooled connection outside a
    /// transaction: one round trip instead of three (`BEGIN`, the statement, `COMMIT`), and the
    /// same consistency, since a statement reads one snapshot by itself. Debug builds check that
    /// the body ran one statement.
    func readStatement<T: Sendable>(_ body: @Sendable (PostgresSession) async throws -> T) async throws -> T {
        try await readers.run { session in
            let before = session.statementCount
            let value = try await body(session)
            assert(session.statementCount == before + 1, "readStatement ran \(session.statementCount - before) statements")
            return value
        }
    }

    /// Runs `body` on a pooled connection in one read snapshot.
    func read<T: Sendable>(_ body: @Sendable (PostgresSession) async throws -> T) async throws -> T {
        try await readers.run { session in try await session.readTransaction { try await body(session) } }
    }
}
