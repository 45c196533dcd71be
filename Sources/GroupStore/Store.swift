import GroupModel
import Synchronization
import Tracing

/// Persistence of groups, members, applications, messages and their events: the one store the
/// service uses, over a ``StoreBackend`` (`SQLiteBackend` of `GroupStoreSQLite` by default).
///
/// What it adds to the backend, the same for every database:
/// - **The rules of each mutation**: what it loads (a ``StoreSnapshot``), the pure plan the
///   caller passes (from `GroupRules`), what it writes (a ``WriteSet``). A plan runs inside the
///   write transaction with the state as it is at that moment, so a permission check and the
///   change cannot be separated by a concurrent write.
/// - **Group commit** (``WriteBatching``): every mutation waiting when the backend is free
///   commits in one transaction, one fsync. A mutation returns only after the commit that holds
///   it; one that fails, fails alone (its batch runs again without it if it had written).
/// - **The group cache**: ``groups(app:ids:)`` answers from memory when it can, exactly (never
///   older than a mutation that has returned). A mutation that changes a group row marks it
///   pending before its transaction commits and, once it has committed, puts the group as the
///   mutation left it in the cache (write-through).
/// - **The event feed**: each committed batch's events go to ``observeCommittedEvents(_:)``
///   before any of its mutations returns, built by the mutations as they wrote them (with the
///   group's type, name and member count after the write, the message body, the application
///   items written, the approvers): no read-back.
///
/// Rules every method keeps:
/// - Every method is scoped by app id: nothing of one app is visible to another.
/// - A mutation and its events commit together; the group's event sequence is assigned inside
///   the transaction (1, 2, 3… per group, no gaps).
/// - Methods throw only `GroupError` (storage failures become `INTERNAL` with a `cause`).
/// - Dismissed groups are invisible to reads but keep their id taken and their events readable
///   until purged.
public final class Store: Sendable {
    /// The default number of group records the cache holds.
    public static let defaultCacheCapacity = 100_000

    /// The database.
    public let backend: any StoreBackend
    /// The group records cache of ``groups(app:ids:)``.
    let cache: GroupCache
    /// Group commit: every mutation goes through it.
    let commits: GroupCommitQueue
    /// Group types read by ``groupType(app:id:)`` (immutable, so exact on any node).
    let types = Mutex<[GroupCache.Key: GroupType]>([:])
    /// Tests only: called with the method name at the end of each mutation, inside its
    /// transaction; throwing rolls that mutation back (alone).
    let faultInjection = Mutex<(@Sendable (String) throws -> Void)?>(nil)

    /// A store over `backend`.
    /// - Parameters:
    ///   - backend: The database (opened and migrated).
    ///   - cacheCapacity: The most group records kept in memory (0: no cache).
    ///   - batching: How pending mutations are grouped into transactions.
    public init(backend: any StoreBackend, cacheCapacity: Int = Store.defaultCacheCapacity, batching: WriteBatching = .defaults) {
        self.backend = backend
        self.cache = GroupCache(capacity: cacheCapacity)
        let commits = GroupCommitQueue(backend: backend, batching: batching)
        self.commits = commits
        backend.followCommits { events in commits.deliver(events) }
    }

    /// Whether the database can be reached now (health reports `NOT_SERVING` while it cannot).
    public var isAvailable: Bool { backend.isAvailable }

    /// Hands an AVChatRoom message to the other nodes' streams (a shared database; otherwise
    /// nothing to do).
    public func relayRoomMessage(_ message: GroupMessage) async throws {
        try await read { try await backend.relayRoomMessage(message) }
    }

    /// Calls `deliver` with the AVChatRoom messages other nodes relay.
    public func followRoomMessages(_ deliver: @escaping @Sendable ([GroupMessage]) -> Void) {
        backend.followRoomMessages(deliver)
    }

    // MARK: AVChatRoom presence

    /// Holds the presence of `users` in an AVChatRoom until `until` (a presence already held
    /// longer keeps its end). A presence is a lease: every node serving a viewer's stream renews
    /// it (``renewPresence(app:users:now:until:)``), and a room's online count is the number of
    /// presences that have not ended.
    public func holdPresence(app: String, groupID: String, users: [String], until: Timestamp) async throws {
        guard !users.isEmpty else { return }
        try await read { try await backend.holdPresence(app: app, groupID: groupID, users: users, until: until) }
    }

    /// Extends to `until` the presences of `users`, in every room of `app`, that have not ended
    /// at `now` (an ended presence stays ended: the viewer joins again).
    public func renewPresence(app: String, users: [String], now: Timestamp, until: Timestamp) async throws {
        guard !users.isEmpty else { return }
        try await read { try await backend.renewPresence(app: app, users: users, now: now, until: until) }
    }

    /// Ends presences in a room: of `users` (they quit), or of everyone (`nil`: dismissed).
    public func dropPresence(app: String, groupID: String, users: [String]?) async throws {
        if let users, users.isEmpty { return }
        try await read { try await backend.dropPresence(app: app, groupID: groupID, users: users) }
    }

    /// How many presences in each of the rooms have not ended at `now` (rooms with none: 0).
    public func presence(app: String, groupIDs: [String], now: Timestamp) async throws -> [String: Int] {
        guard !groupIDs.isEmpty else { return [:] }
        return try await read { try await backend.presence(app: app, groupIDs: groupIDs, now: now) }
    }

    /// Which of `users` hold a presence in a room that has not ended at `now`.
    public func presentUsers(app: String, groupID: String, users: [String], now: Timestamp) async throws -> Set<String> {
        guard !users.isEmpty else { return [] }
        return try await read { try await backend.presentUsers(app: app, groupID: groupID, users: users, now: now) }
    }

    /// Deletes the presences that ended before `before` (every app); returns how many.
    @discardableResult
    public func sweepPresence(before: Timestamp) async throws -> Int {
        try await read { try await backend.sweepPresence(before: before) }
    }

    /// Whether other nodes write the same database (PostgreSQL): per-node state follows their
    /// events, and ``catchUp(app:)`` brings it up to date before a read of it.
    public var isShared: Bool { backend.isShared }

    /// The bytes the backend's database library holds in this process (SQLite: its page caches,
    /// schemas and statements); nil when the database runs elsewhere (PostgreSQL).
    public var libraryMemoryBytes: Int? { backend.libraryMemoryBytes }

    /// Returns once every event of `app` committed before the call, by any node, has reached
    /// ``observeCommittedEvents(_:)``'s observers (at once when no other node writes).
    public func catchUp(app: String) async throws {
        try await read { try await backend.catchUp(app: app) }
    }

    /// Runs `body` unless another node sharing the database runs the pass named `pass` now (then
    /// returns `nil`): periodic passes run on one node at a time. What `body` throws comes through
    /// as it is (a cancellation stays one).
    public func exclusively<T: Sendable>(_ pass: String, _ body: @Sendable () async throws -> T) async throws -> T? {
        try await backend.exclusively(pass, body)
    }

    /// Calls `observer` with every change of ``isAvailable``.
    public func observeAvailability(_ observer: @escaping @Sendable (Bool) -> Void) {
        backend.observeAvailability(observer)
    }

    /// What the group cache holds and has served.
    public func cacheStatistics() -> GroupCacheStatistics {
        cache.statistics
    }

    /// What group commit has done: batches committed, the mutations they held, aborted and failed
    /// batches.
    public var commitStatistics: GroupCommitStatistics { commits.statistics }

    /// Traces commits from now on: each mutation made inside a traced call (its span the task's
    /// current `ServiceContext`) gets a `store.commit` span under that call's span, from the start
    /// of its batch's transaction to its end, with the batch's size (`groupd.store.batch_size`),
    /// the mutation (`groupd.store.mutation`) and the batch's outcome (`groupd.store.outcome`).
    public func traceCommits(with tracer: any Tracer) { commits.trace(with: tracer) }

    /// Tests: mutations queue and no batch starts until ``releaseCommits()`` (a batch under way
    /// finishes).
    public func holdCommits() { commits.hold() }

    /// Tests: batches start again; the first takes every mutation that queued meanwhile (up to
    /// the batch size).
    public func releaseCommits() { commits.release() }

    /// Tests: returns once at least `count` mutations wait for a batch.
    public func waitUntilQueued(_ count: Int) async { await commits.waitUntilQueued(count) }

    /// Tells `observer` the size of every write batch and how long its transaction took, from
    /// now on (metrics: `groupd_store_commit_*`).
    public func observeCommitBatches(_ observer: @escaping @Sendable (_ mutations: Int, _ duration: Duration) -> Void) {
        commits.observeBatches(observer)
    }

    /// Calls `handler` after every commit that appended events, with those events in commit
    /// order (`event_id` order), before the mutations of that commit return.
    public func observeCommittedEvents(_ handler: @escaping @Sendable (Result<[LoggedEvent], any Error>) -> Void) {
        commits.observe(handler)
    }

    /// Closes the store; later calls fail. Call once, at shutdown, after in-flight calls finished.
    public func close() async throws {
        cache.close()
        try await read { try await self.backend.close() }
    }

    // MARK: Mutations

    /// Records what a mutation leaves besides its rows, for the end of its batch: the group
    /// records it changes, as they are after it (write-through), and the events it appended as the
    /// commit feed hands them over. Not a result: a mutation's result is ``Committed``.
    final class WriteRecorder: @unchecked Sendable {
        // @unchecked Sendable: filled by one mutation on the backend's writer, then read by the
        // commit queue once that batch has ended; never touched concurrently.
        private let cache: GroupCache
        private(set) var keys: [GroupCache.Key] = []
        private var records: [GroupCache.Key: Group] = [:]
        /// The events the mutation appended, in order.
        private(set) var events: [LoggedEvent] = []

        init(cache: GroupCache) {
            self.cache = cache
        }

        /// The mutation wrote `written` to `group`, which it leaves as given (`dismissed`: gone
        /// from reads). Its cache record becomes `group` (reads of it bypass the cache until the
        /// batch ends) and its events join the commit feed, with what subscribers receive with
        /// them: the group's type, name and member count after the write, the message, the
        /// application items the mutation wrote, the approvers now, and the audience of a
        /// private topic's items (`group`'s when it is a topic, else `audience`: the topic a
        /// community's `TOPIC_*` events name).
        func wrote(
            _ written: WriteResult, to group: Group, dismissed: Bool = false, message: StoredMessage? = nil,
            applications: [Application] = [], audience: Set<String>? = nil, transaction: any StoreTransaction
        ) async throws {
            let key = GroupCache.Key(app: group.appID, id: group.id)
            if !keys.contains(key) {
                keys.append(key)
                cache.beginWrite([key])
            }
            records[key] = dismissed ? nil : group
            var approvers: [String]?
            for (event, eventID) in zip(written.events, written.eventIDs) {
                var logged = LoggedEvent(
                    eventID: eventID, event: event, groupType: group.type, groupName: group.name,
                    memberCount: group.memberCount, audience: group.isTopic ? group.audience : audience)
                if case .approvers = event.recipient {
                    if approvers == nil {
                        approvers = dismissed ? [] : try await transaction.load(SnapshotRequest(
                            app: group.appID, group: group.id, time: event.time, parts: .approvers)).approvers
                    }
                    logged.approvers = approvers ?? []
                }
                if event.kind == .groupMessage, let message, message.eventID == eventID { logged.message = message }
                if LoggedEvent.applicationKinds.contains(event.kind), let id = event.changes["application_id"] {
                    logged.application = applications.last { $0.id == id }
                }
                events.append(logged)
            }
        }

        /// The mutation wrote the row of group `id` (a topic) without events: its cache record
        /// becomes `group` (`nil`: gone from reads).
        func replaced(app: String, id: String, with group: Group?) {
            let key = GroupCache.Key(app: app, id: id)
            if !keys.contains(key) {
                keys.append(key)
                cache.beginWrite([key])
            }
            records[key] = group
        }

        /// The positions its batch gave the events it appended (set when the batch committed).
        private(set) var positions = EventPositions.none

        func committed(_ positions: EventPositions) {
            self.positions = positions
            cache.commitWrite(keys, records: records)
        }
        func discarded() { cache.rollbackWrite(keys) }
    }

    /// Runs `body` (a mutation of the rows `scope` names) as one mutation of the next batch and
    /// returns its value once that batch has committed. `body` may run more than once (an aborted
    /// batch runs again): it must do nothing outside the transaction but through
    /// `WriteRecorder`. It writes the rows of the scope's groups only and checks the per-user
    /// limits of its users only (a backend several nodes share locks just those).
    /// - Parameters:
    ///   - method: The mutation's name, handed to an injected fault (tests).
    ///   - scope: The groups and users whose rows `body` writes, and the app they belong to.
    ///   - numbered: Gives the value the positions of events it carries (``EventPositions``:
    ///     ids taken in the transaction may be provisional until the batch commits).
    ///   - body: The mutation: reads and writes through the batch's transaction, and reports what it
    ///     wrote through the `WriteRecorder`; returns the caller's value.
    /// - Throws: What `body` throws (nothing of it is stored); the commit's error (nothing of
    ///   the batch is stored); both as `GroupError`.
    func mutate<T: Sendable>(
        _ method: String, scope: WriteScope,
        numbered: @escaping @Sendable (T, EventPositions) -> T = { value, _ in value },
        _ body: @escaping @Sendable (any StoreTransaction, WriteRecorder) async throws -> T
    ) async throws -> T {
        let cache = self.cache
        // The caller's span (its call's), for the commit's span: nil unless the call is traced.
        let traceContext = ServiceContext.current
        return try await read {
            try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<T, any Error>) in
                self.commits.enqueue(GroupCommitQueue.PendingWrite(
                    scope: scope,
                    apply: { transaction in
                        let effects = WriteRecorder(cache: cache)
                        do {
                            let value = try await body(transaction, effects)
                            try self.injectedFault(method)
                            return GroupCommitQueue.Applied(
                                answer: { error in
                                    if let error {
                                        continuation.resume(throwing: error)
                                    } else {
                                        continuation.resume(returning: numbered(value, effects.positions))
                                    }
                                },
                                events: effects.events, committed: effects.committed, discarded: effects.discarded)
                        } catch {
                            effects.discarded()
                            throw error
                        }
                    },
                    fail: { error in continuation.resume(throwing: error) },
                    traceContext: traceContext, method: method))
            }
        }
    }

    /// Run `body`, letting `GroupError` through and wrapping anything else as `INTERNAL`.
    func read<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as GroupError {
            throw error
        } catch let error as any StoreFailure {
            throw error.groupError
        } catch {
            throw GroupError.internal("storage failure", cause: error)
        }
    }

    /// Tests only: make each mutation run `fault` (with the method name) at its end, inside its
    /// transaction; a throwing fault rolls that mutation back. `nil`: no fault.
    public func injectFault(_ fault: (@Sendable (String) throws -> Void)?) {
        faultInjection.withLock { $0 = fault }
    }

    private func injectedFault(_ method: String) throws {
        if let fault = faultInjection.withLock({ $0 }) { try fault(method) }
    }

    /// The group after `change` was written over `before`, as stored.
    package static func group(after change: GroupChange, before: Group, events: [GroupEvent]) -> Group {
        var group = change.group
        group.appID = before.appID
        group.id = before.id
        group.type = before.type
        group.createdAt = before.createdAt
        group.latestSequence = events.last?.sequence ?? before.latestSequence
        group.memberVersion = before.memberVersion + (change.changesMembers ? 1 : 0)
        return group
    }

    /// The snapshot's group, which a load of a request naming one always has.
    static func loadedGroup(_ snapshot: StoreSnapshot) throws -> Group {
        guard let group = snapshot.group else { throw GroupError.internal("the snapshot holds no group") }
        return group
    }
}
