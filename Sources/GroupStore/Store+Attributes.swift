public import GroupModel

/// Group attributes and counters: one write path (snapshot with the group's attributes and
/// counters, pure plan, write with its event in the same transaction) and one read.
extension Store {
    /// Runs a plan over a group, the operator's membership and the group's attributes and
    /// counters, and writes what it decided (attributes set and deleted, counters set, events)
    /// atomically. Counters are read and written inside the transaction, so concurrent
    /// increments never lose one another.
    /// - Parameters:
    ///   - app: The app.
    ///   - groupID: The group.
    ///   - operatorID: The acting user, whose membership the snapshot carries (`nil`: the backend).
    ///   - time: The change's time.
    ///   - plan: Pure: returns the change (or throws a `GroupError`: nothing is written)
    ///     and a value for the caller.
    /// - Returns: The caller's value, the group after the change and the committed events.
    /// - Throws: `GROUP_NOT_FOUND`; the plan's error; `INTERNAL`.
    public func mutateAttributes<Value: Sendable>(
        app: String, groupID: String, operatorID: String?, at time: Timestamp,
        plan: @escaping @Sendable (GroupSnapshot, GroupAttributeSet) throws -> (AttributeChange, Value)
    ) async throws -> Committed<Value> {
        try await mutate("mutateAttributes", scope: .groups([groupID], app: app)) { transaction, effects in
            let snapshot = try await transaction.load(SnapshotRequest(
                app: app, group: groupID, operatorID: operatorID, time: time, parts: .attributes))
            var group = try Self.loadedGroup(snapshot)
            let (change, value) = try plan(
                GroupSnapshot(snapshot, group: group, operatorID: operatorID, targets: []), snapshot.attributes)
            if change.isEmpty { return Committed(value: value, group: group, events: []) }
            let written = try await transaction.write(WriteSet(events: change.events, attributes: change), over: snapshot)
            if let last = written.events.last {
                group.latestSequence = last.sequence
                try await effects.wrote(written, to: group, transaction: transaction)
            }
            return Committed(value: value, group: group, events: written.events)
        }
    }

    /// A live group's attributes and counters, read at one instant.
    /// - Throws: `GROUP_NOT_FOUND`.
    public func attributes(app: String, groupID: String) async throws -> GroupAttributeSet {
        try await read { try await backend.attributes(app: app, groupID: groupID) }
    }
}
