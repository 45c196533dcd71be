public import GroupModel

/// The result of a committed mutation: its value and the events committed with it, numbered.
public struct Committed<Value: Sendable>: Sendable {
    /// What the mutation produced (the created group, say).
    public var value: Value
    /// The events committed in the same transaction, in sequence order.
    public var events: [GroupEvent]

    /// Create a result.
    public init(value: Value, events: [GroupEvent]) {
        self.value = value
        self.events = events
    }
}

/// How hard the store pushes each commit to disk (SQLite's `synchronous` pragma in WAL mode).
public enum Durability: String, Sendable, Hashable, CaseIterable, Codable {
    /// `synchronous=FULL`: the WAL is fsynced at every commit; an acknowledged commit survives a
    /// process crash and also an OS crash or power loss.
    case full
    /// `synchronous=NORMAL`: the WAL is fsynced only at checkpoints; an acknowledged commit
    /// survives a process crash, but the latest commits may be lost on OS crash or power loss.
    case normal
}

/// Persistence of groups, members and their events, behind one protocol so that the SQLite store
/// can be joined by a PostgreSQL one (DESIGN.md §5).
///
/// Rules every implementation keeps:
/// - Every method is scoped by app id: no method reads or changes another app's rows.
/// - A mutation and its events commit in one transaction; the group's event sequence is assigned
///   inside it (1, 2, 3… per group, no gaps). A method returns only after the commit.
/// - Methods throw only ``GroupError`` (storage failures become `INTERNAL` with a `cause`).
/// - Dismissed groups are invisible to reads (``groups(app:ids:)``) but keep their id reserved
///   and their events readable until they are purged.
public protocol GroupStore: Sendable {
    /// Create a group with its members and events, atomically.
    /// - Parameter plan: From ``GroupRules/planCreation(_:appID:creatorID:limits:now:generateID:)``.
    /// - Returns: The stored group (with `latestSequence`) and its numbered events.
    /// - Throws: `ALREADY_EXISTS` / `GROUP_ID_TAKEN` if the id is taken in that app (nothing is
    ///   written); `INTERNAL` on storage failure.
    func createGroup(_ plan: GroupCreationPlan) async throws -> Committed<Group>

    /// Read groups of one app by id, in one query, with member count, owner and custom fields.
    ///
    /// An implementation may answer from a cache, provided the answer is exactly what the
    /// database holds: never older than a mutation that has returned, and one consistent instant
    /// for the whole batch (``SQLiteGroupStore`` does, for one node).
    /// - Returns: The groups found, keyed by id; ids not found (or dismissed) are absent.
    func groups(app: String, ids: [String]) async throws -> [String: Group]

    /// Read one user's membership in several groups of one app (for visibility and permissions).
    /// - Returns: The user's member record per group id where the user is a member.
    func memberships(app: String, userID: String, groupIDs: [String]) async throws -> [String: Member]

    /// Dismiss a group: check, mark dismissed and append events, in one transaction.
    ///
    /// `plan` runs inside the transaction with the group and the operator's membership as they
    /// are at that moment, so the permission check and the change cannot be separated by a
    /// concurrent write (ownership transferred in between, say).
    /// - Parameters:
    ///   - app: The app.
    ///   - groupID: The group.
    ///   - operatorID: The acting user, whose membership `plan` receives; `nil` for the backend.
    ///   - time: The time of the change (event time).
    ///   - plan: The pure rule: throws to refuse, returns the events to append.
    /// - Returns: The committed events.
    /// - Throws: `GROUP_NOT_FOUND`, whatever `plan` throws, `INTERNAL`.
    func dismissGroup(
        app: String, groupID: String, operatorID: String?, at time: Timestamp,
        plan: @escaping @Sendable (Group, Member?) throws -> [GroupEvent.Draft]
    ) async throws -> [GroupEvent]

    /// Read a group's events with sequence greater than `sequence`, in order (dismissed groups
    /// included, so their last events can still be delivered).
    /// - Parameters:
    ///   - app: The app.
    ///   - groupID: The group.
    ///   - sequence: Return events after this one (0: from the first).
    ///   - limit: At most this many.
    /// - Throws: `GROUP_NOT_FOUND` if the app has no such group, dismissed or not.
    func events(app: String, groupID: String, after sequence: Int64, limit: Int) async throws -> [GroupEvent]

    /// Close the store; later calls fail. Call once, at shutdown, after in-flight calls finished.
    func close() async throws
}
