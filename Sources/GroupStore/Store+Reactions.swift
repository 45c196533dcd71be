public import GroupModel

/// One key's reactions on a message as a read shows them (GetMessageReactions).
public struct ReactionSummary: Sendable, Hashable {
    /// The key.
    public var key: String
    /// How many users react with it.
    public var count: Int
    /// Whether the reading user is one of them.
    public var reactedByReader: Bool
    /// The first users who reacted with it, earliest first (at most the read's `usersPerKey`).
    public var firstUsers: [String]

    /// Creates a summary.
    public init(key: String, count: Int, reactedByReader: Bool, firstUsers: [String]) {
        self.key = key
        self.count = count
        self.reactedByReader = reactedByReader
        self.firstUsers = firstUsers
    }
}

/// A page of the users who reacted to a message with one key.
public struct ReactionUserPage: Sendable {
    /// The users, earliest first, with their ordinals (the page token continues after the last).
    public var users: [(userID: String, ordinal: Int64)]
    /// Whether more users follow.
    public var hasMore: Bool
    /// How many users react with the key.
    public var count: Int

    /// Creates a page.
    public init(users: [(userID: String, ordinal: Int64)], hasMore: Bool, count: Int) {
        self.users = users
        self.hasMore = hasMore
        self.count = count
    }
}

/// Message reactions: a `(message, key)` count row and a `(message, user, key)` row per reaction,
/// so adding or removing one reads and writes a fixed number of rows whatever the message's
/// reaction count (docs/STORE.md).
extension Store {
    /// Adds or removes the operator's reaction to the stored message `sequence`, atomically with
    /// the event `plan` returns.
    ///
    /// In one write transaction: find the group (`GROUP_NOT_FOUND`), load the operator's
    /// membership, the message and its reaction state (its key counts and the operator's keys on
    /// it), run `plan` (the pure rule, which throws to refuse), write the rows and the event when
    /// the plan changes something.
    /// - Parameters:
    ///   - app: The app.
    ///   - groupID: The group.
    ///   - sequence: The message.
    ///   - operatorID: The reacting user (`nil`: the backend, which `plan` refuses).
    ///   - time: The time of the change (event time, the reaction's time).
    ///   - plan: Pure: handed the group, the operator's membership, the message (`nil`: none) and
    ///     the reaction state.
    /// - Returns: The plan, the group after the change, and the committed events (none when the
    ///   plan changed nothing).
    /// - Throws: `GROUP_NOT_FOUND`; what `plan` throws; `INTERNAL`.
    public func react(
        app: String, groupID: String, sequence: Int64, operatorID: String?, at time: Timestamp,
        plan: @escaping @Sendable (Group, Member?, GroupMessage?, ReactionState) throws -> ReactionPlan
    ) async throws -> Committed<ReactionPlan> {
        try await mutate("react", scope: .groups([groupID], app: app)) { transaction, effects in
            var request = SnapshotRequest(app: app, group: groupID, operatorID: operatorID, time: time, messageSequence: sequence)
            request.reactionsOf = operatorID.map { (sequence: sequence, user: $0) }
            let snapshot = try await transaction.load(request)
            var group = try Self.loadedGroup(snapshot)
            let decided = try plan(
                group, operatorID.flatMap { snapshot.members[$0] }, snapshot.message?.message, snapshot.reactions)
            guard let write = decided.write, let event = decided.event else {
                return Committed(value: decided, group: group, events: [])
            }
            var writes = WriteSet(events: [event])
            writes.reaction = write
            let written = try await transaction.write(writes, over: snapshot)
            if let last = written.events.last { group.latestSequence = last.sequence }
            try await effects.wrote(written, to: group, transaction: transaction)
            return Committed(value: decided, group: group, events: written.events)
        }
    }

    /// The reactions of a live group's stored, unrecalled messages among `sequences`, by sequence
    /// (a message without reactions maps to an empty list; a sequence that names no such message
    /// is absent). Keys in the order they were first used.
    /// - Parameters:
    ///   - app: The app.
    ///   - groupID: The group.
    ///   - sequences: The messages.
    ///   - reader: Whose reactions `reactedByReader` marks (`nil`: nobody's).
    ///   - usersPerKey: How many of each key's first users to list (0: none).
    /// - Throws: `GROUP_NOT_FOUND` (missing or dismissed); `INTERNAL`.
    public func reactions(
        app: String, groupID: String, sequences: [Int64], reader: String?, usersPerKey: Int
    ) async throws -> [Int64: [ReactionSummary]] {
        if sequences.isEmpty { return [:] }
        return try await read {
            try await backend.reactions(
                app: app, groupID: groupID, sequences: sequences, reader: reader, usersPerKey: max(0, usersPerKey))
        }
    }

    /// A page of the users who reacted to message `sequence` of a live group with `key`, earliest
    /// first, after the ordinal `after` (0: from the first), at most `limit`.
    /// - Parameters:
    ///   - app: The app.
    ///   - groupID: The group.
    ///   - sequence: The message.
    ///   - key: The reaction key.
    ///   - after: The ordinal of the last user of the previous page (0: from the first).
    ///   - limit: The most users to list.
    /// - Throws: `GROUP_NOT_FOUND` (missing or dismissed); `INTERNAL`.
    public func reactionUsers(
        app: String, groupID: String, sequence: Int64, key: String, after: Int64, limit: Int
    ) async throws -> ReactionUserPage {
        try await read {
            try await backend.reactionUsers(
                app: app, groupID: groupID, sequence: sequence, key: key, after: after, limit: max(1, limit))
        }
    }
}
