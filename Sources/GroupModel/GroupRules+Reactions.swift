/// One reaction key's count on a message, as stored: how many users react with it and the
/// ordinal the next one gets (users are listed by ordinal, so the first to react come first).
public struct ReactionCount: Sendable, Hashable {
    /// The key.
    public var key: String
    /// How many users react with it.
    public var count: Int
    /// The ordinal the next user to react with it gets (above every ordinal given so far).
    public var nextOrdinal: Int64
    /// The ordinal of the key itself among the message's keys (keys are listed by it).
    public var keyOrdinal: Int64

    /// Creates a count.
    public init(key: String, count: Int, nextOrdinal: Int64, keyOrdinal: Int64) {
        self.key = key
        self.count = count
        self.nextOrdinal = nextOrdinal
        self.keyOrdinal = keyOrdinal
    }
}

/// What a reaction mutation reads in its transaction: the message's key counts (at most the
/// app's ``AppLimits/maxReactionKeysPerMessage`` rows) and the operator's own keys on it (at most
/// ``AppLimits/maxReactionsPerUserPerMessage``). Neither grows with the message's reaction count.
public struct ReactionState: Sendable, Hashable {
    /// The message's keys, by key.
    public var counts: [String: ReactionCount]
    /// The keys the operator reacts with on the message.
    public var userKeys: Set<String>

    /// Creates a state.
    public init(counts: [String: ReactionCount] = [:], userKeys: Set<String> = []) {
        self.counts = counts
        self.userKeys = userKeys
    }

    /// All reactions on the message, every key together.
    public var total: Int { counts.values.reduce(0) { $0 + $1.count } }
}

/// A reaction's write: one `(message, key, user)` row inserted or deleted and the key's count row
/// set, both by their keys (``ReactionState`` tells the store the rows' values).
public struct ReactionWrite: Sendable, Hashable {
    /// Whether the user's row is inserted (add) or deleted (remove).
    public var adds: Bool
    /// The message.
    public var sequence: Int64
    /// The user.
    public var userID: String
    /// The key's count row after the change (`count` 0: the row is deleted).
    public var after: ReactionCount
    /// The user's ordinal (add: the one given; remove: unused).
    public var ordinal: Int64
    /// Whether the key's count row is new (insert rather than update).
    public var newKey: Bool

    /// Creates a write.
    public init(adds: Bool, sequence: Int64, userID: String, after: ReactionCount, ordinal: Int64, newKey: Bool) {
        self.adds = adds
        self.sequence = sequence
        self.userID = userID
        self.after = after
        self.ordinal = ordinal
        self.newKey = newKey
    }
}

/// What a reaction call decided: the key's count after it, and the write and event when it
/// changed something (an add of a reaction the user has, or a remove of one they do not have,
/// changes nothing: the call is idempotent).
public struct ReactionPlan: Sendable, Hashable {
    /// The key's count after the call.
    public var count: Int
    /// The rows to write (`nil`: nothing changed).
    public var write: ReactionWrite?
    /// The event (`nil`: nothing changed).
    public var event: GroupEvent.Draft?

    /// Creates a plan.
    public init(count: Int, write: ReactionWrite?, event: GroupEvent.Draft?) {
        self.count = count
        self.write = write
        self.event = event
    }
}

/// A `MESSAGE_REACTION_ADDED` / `MESSAGE_REACTION_REMOVED` detail.
public struct ReactionChange: Sendable, Hashable {
    /// The message.
    public var sequence: Int64
    /// The key.
    public var key: String
    /// How many users react with the key after the change.
    public var count: Int

    /// Creates a change.
    public init(sequence: Int64, key: String, count: Int) {
        self.sequence = sequence
        self.key = key
        self.count = count
    }

    /// The change as event changes: `sequence`, `reaction_key`, `count`.
    public var changes: [String: String] {
        ["sequence": String(sequence), "reaction_key": key, "count": String(count)]
    }

    /// The change an event's changes describe (``changes``), or `nil`.
    public init?(changes: [String: String]) {
        guard let sequence = changes["sequence"].flatMap({ Int64($0) }), let key = changes["reaction_key"],
            let count = changes["count"].flatMap({ Int($0) })
        else { return nil }
        self.init(sequence: sequence, key: key, count: count)
    }
}

extension GroupRules {
    /// The most characters (grapheme clusters) a reaction key holds, whatever its bytes.
    public static let reactionKeyMaxCharacters = 16
    /// The most messages one GetMessageReactions reads.
    public static let maxReactionMessagesPerRequest = 50
    /// The most users GetMessageReactions lists per key.
    public static let maxReactionUsersListed = 10

    /// Validate a reaction key: 1 to ``AppLimits/reactionKeyBytes`` UTF-8 bytes, at most
    /// ``reactionKeyMaxCharacters`` characters, and no control character (`Cc`), no space or
    /// line/paragraph separator (`Zs`, `Zl`, `Zp`) and no other format character (`Cf`) than the
    /// ones emoji sequences use (U+200D zero-width joiner, the tag characters of subdivision
    /// flags). Variation selectors (U+FE0E, U+FE0F) and skin-tone modifiers are not `Cf`.
    /// - Throws: `INVALID_REACTION_KEY` (`INVALID_ARGUMENT`) naming `field`, with `limit` when
    ///   too long.
    public static func validateReactionKey(_ key: String, limits: AppLimits, field: String = "reaction_key") throws {
        func invalid(_ message: String, limit: Int? = nil) -> GroupError {
            var metadata = ["field": field]
            if let limit { metadata["limit"] = String(limit) }
            return GroupError(code: .invalidArgument, reason: .invalidReactionKey, message: message, metadata: metadata)
        }
        if key.isEmpty { throw invalid("a reaction key is needed") }
        let bytes = key.utf8.count
        if bytes > limits.reactionKeyBytes {
            throw invalid(
                "a reaction key holds at most \(limits.reactionKeyBytes) bytes, this one \(bytes)", limit: limits.reactionKeyBytes)
        }
        if key.count > reactionKeyMaxCharacters {
            throw invalid("a reaction key holds at most \(reactionKeyMaxCharacters) characters", limit: reactionKeyMaxCharacters)
        }
        for scalar in key.unicodeScalars {
            switch scalar.properties.generalCategory {
            case .control, .spaceSeparator, .lineSeparator, .paragraphSeparator, .surrogate, .unassigned, .privateUse:
                throw invalid("a reaction key may not hold U+\(String(scalar.value, radix: 16, uppercase: true))")
            case .format where scalar.value != 0x200D && !(0xE0020...0xE007F).contains(scalar.value):
                throw invalid("a reaction key may not hold U+\(String(scalar.value, radix: 16, uppercase: true))")
            default:
                continue
            }
        }
    }

    /// The message a reaction call may act on: a stored message the operator's history shows
    /// (``historyFloor(in:by:)``), not recalled.
    /// - Throws: `HISTORY_NOT_KEPT`, `GROUP_NOT_FOUND` / `NOT_A_MEMBER` (``GroupAction/react``);
    ///   `OPERATOR_REQUIRED` for the backend when `needsUser`; `MESSAGE_NOT_FOUND`;
    ///   `MESSAGE_RECALLED` (`FAILED_PRECONDITION`).
    public static func checkReaction(
        on message: GroupMessage?, sequence: Int64, in group: Group, by op: GroupOperator, needsUser: Bool
    ) throws {
        try authorize(.react, in: group, by: op).get()
        if needsUser, op.isBackend { throw GroupError.operatorRequired("reacting to a message") }
        let floor = try historyFloor(in: group, by: op)
        guard let message, message.sequence == sequence, sequence > floor else { throw messageNotFound(sequence) }
        if message.recall != nil { throw recalledRefusal(sequence) }
    }

    /// Plan an `AddMessageReaction`: the operator reacts to message `sequence` with `key`.
    ///
    /// The order of checks: ``checkReaction(on:sequence:in:by:needsUser:)``; a reaction the
    /// operator has already (nothing changes, no event); the app's limits: the operator's keys on
    /// the message (`TOO_MANY_REACTIONS`, `limit_name` max_reactions_per_user_per_message), the
    /// message's distinct keys when `key` is new on it (`TOO_MANY_REACTION_KEYS`), all its
    /// reactions (`TOO_MANY_REACTIONS`, `limit_name` max_reactions_per_message).
    public static func planAddReaction(
        _ key: String, to message: GroupMessage?, sequence: Int64, in group: Group, by op: GroupOperator,
        state: ReactionState, limits: AppLimits
    ) throws -> ReactionPlan {
        try checkReaction(on: message, sequence: sequence, in: group, by: op, needsUser: true)
        guard let user = op.userID else { throw GroupError.operatorRequired("reacting to a message") }
        let current = state.counts[key]
        if state.userKeys.contains(key) { return ReactionPlan(count: current?.count ?? 0, write: nil, event: nil) }
        func full(_ reason: GroupError.Reason, _ name: String, _ limit: Int, _ message: String) -> GroupError {
            GroupError(
                code: .failedPrecondition, reason: reason, message: message,
                metadata: ["limit_name": name, "limit": String(limit)])
        }
        if state.userKeys.count >= limits.maxReactionsPerUserPerMessage {
            throw full(
                .tooManyReactions, "max_reactions_per_user_per_message", limits.maxReactionsPerUserPerMessage,
                "a user reacts with at most \(limits.maxReactionsPerUserPerMessage) keys on a message")
        }
        if current == nil, state.counts.count >= limits.maxReactionKeysPerMessage {
            throw full(
                .tooManyReactionKeys, "max_reaction_keys_per_message", limits.maxReactionKeysPerMessage,
                "a message holds at most \(limits.maxReactionKeysPerMessage) distinct reaction keys")
        }
        if state.total >= limits.maxReactionsPerMessage {
            throw full(
                .tooManyReactions, "max_reactions_per_message", limits.maxReactionsPerMessage,
                "a message holds at most \(limits.maxReactionsPerMessage) reactions")
        }
        let nextKeyOrdinal = (state.counts.values.map(\.keyOrdinal).max() ?? 0) + 1
        var after = current ?? ReactionCount(key: key, count: 0, nextOrdinal: 1, keyOrdinal: nextKeyOrdinal)
        let ordinal = after.nextOrdinal
        after.count += 1
        after.nextOrdinal += 1
        let change = ReactionChange(sequence: sequence, key: key, count: after.count)
        return ReactionPlan(
            count: after.count,
            write: ReactionWrite(adds: true, sequence: sequence, userID: user, after: after, ordinal: ordinal, newKey: current == nil),
            event: GroupEvent.Draft(kind: .messageReactionAdded, operatorID: user, changes: change.changes))
    }

    /// Plan a `RemoveMessageReaction`: the operator takes their reaction `key` on message
    /// `sequence` back. Checks as ``planAddReaction(_:to:sequence:in:by:state:limits:)`` without
    /// the limits; a reaction the operator does not have changes nothing.
    public static func planRemoveReaction(
        _ key: String, from message: GroupMessage?, sequence: Int64, in group: Group, by op: GroupOperator,
        state: ReactionState
    ) throws -> ReactionPlan {
        try checkReaction(on: message, sequence: sequence, in: group, by: op, needsUser: true)
        guard let user = op.userID else { throw GroupError.operatorRequired("reacting to a message") }
        guard state.userKeys.contains(key), var after = state.counts[key] else {
            return ReactionPlan(count: state.counts[key]?.count ?? 0, write: nil, event: nil)
        }
        after.count = max(0, after.count - 1)
        let change = ReactionChange(sequence: sequence, key: key, count: after.count)
        return ReactionPlan(
            count: after.count,
            write: ReactionWrite(adds: false, sequence: sequence, userID: user, after: after, ordinal: 0, newKey: false),
            event: GroupEvent.Draft(kind: .messageReactionRemoved, operatorID: user, changes: change.changes))
    }
}
