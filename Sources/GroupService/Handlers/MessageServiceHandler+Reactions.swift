import GroupAPI
import GroupModel
import GroupStore

/// MessageService: AddMessageReaction, RemoveMessageReaction, GetMessageReactions,
/// ListMessageReactionUsers. A reaction is a `(message, key, user)` row beside a per-`(message,
/// key)` count row (`Store.react`), so a call's cost does not grow with the message's reactions.
extension MessageServiceHandler {
    /// AddMessageReaction: validates the key, then in one transaction the rule of
    /// `GroupRules.planAddReaction(_:to:sequence:in:by:state:limits:)` on the message and its
    /// reaction state as they are then; the `MESSAGE_REACTION_ADDED` event commits with the rows.
    /// A reaction the operator has already answers `changed` false and writes nothing.
    func addMessageReaction(
        _ request: Groupd_V1_AddMessageReactionRequest, _ call: CallContext
    ) async throws -> Groupd_V1_AddMessageReactionResponse {
        let key = request.reactionKey
        let limits = call.limits
        let committed = try await react(groupID: request.groupID, sequence: request.sequence, key: key, call) {
            group, op, message, sequence, state in
            try GroupRules.planAddReaction(key, to: message, sequence: sequence, in: group, by: op, state: state, limits: limits)
        }
        return .with {
            $0.reaction = Self.reactionView(key: key, committed.value, caller: true)
            $0.changed = committed.value.write != nil
        }
    }

    /// RemoveMessageReaction: as AddMessageReaction, with
    /// `GroupRules.planRemoveReaction(_:from:sequence:in:by:state:)`; the operator's reaction
    /// taken back emits `MESSAGE_REACTION_REMOVED`, one they do not have answers `changed` false.
    func removeMessageReaction(
        _ request: Groupd_V1_RemoveMessageReactionRequest, _ call: CallContext
    ) async throws -> Groupd_V1_RemoveMessageReactionResponse {
        let key = request.reactionKey
        let committed = try await react(groupID: request.groupID, sequence: request.sequence, key: key, call) {
            group, op, message, sequence, state in
            try GroupRules.planRemoveReaction(key, from: message, sequence: sequence, in: group, by: op, state: state)
        }
        return .with {
            $0.reaction = Self.reactionView(key: key, committed.value, caller: false)
            $0.changed = committed.value.write != nil
        }
    }

    /// GetMessageReactions: the reactions of up to `GroupRules.maxReactionMessagesPerRequest`
    /// messages the caller's history shows, in the order asked.
    func getMessageReactions(
        _ request: Groupd_V1_GetMessageReactionsRequest, _ call: CallContext
    ) async throws -> Groupd_V1_GetMessageReactionsResponse {
        try GroupdService.requireGroupID(request.groupID)
        let limit = GroupRules.maxReactionMessagesPerRequest
        if request.sequences.isEmpty {
            throw GroupError.invalidArgument(field: "sequences", "sequences must name at least one message", limit: limit)
        }
        if request.sequences.count > limit {
            throw GroupError.invalidArgument(field: "sequences", "at most \(limit) messages at a time", limit: limit)
        }
        var sequences: [Int64] = []
        var seen = Set<Int64>()
        for (index, value) in request.sequences.enumerated() {
            let sequence = try GroupRules.messageSequence(value, field: "sequences[\(index)]")
            if !seen.insert(sequence).inserted {
                throw GroupError.invalidArgument(field: "sequences[\(index)]", "message \(sequence) is listed twice")
            }
            sequences.append(sequence)
        }
        if request.maxUsersPerReaction < 0 {
            throw GroupError.invalidArgument(
                field: "max_users_per_reaction", "max_users_per_reaction must not be negative",
                limit: GroupRules.maxReactionUsersListed)
        }
        let usersPerKey = min(Int(request.maxUsersPerReaction), GroupRules.maxReactionUsersListed)
        let (group, membership) = try await service.loadGroup(call, groupID: request.groupID)
        let op = GroupdService.groupOperator(call.caller, membership: membership)
        try GroupRules.authorize(.react, in: group, by: op).get()
        let floor = try GroupRules.historyFloor(in: group, by: op)
        let visible = sequences.filter { $0 > floor }
        let found = try await store.reactions(
            app: call.caller.appID, groupID: group.id, sequences: visible, reader: op.userID, usersPerKey: usersPerKey)
        var response = Groupd_V1_GetMessageReactionsResponse()
        for sequence in visible {
            guard let summaries = found[sequence] else { continue }
            var entry = Groupd_V1_MessageReactions()
            entry.sequence = UInt64(sequence)
            entry.reactions = summaries.map { summary in
                var reaction = Groupd_V1_MessageReaction()
                reaction.reactionKey = summary.key
                reaction.count = UInt32(clamping: summary.count)
                reaction.reactedByCaller = summary.reactedByReader
                reaction.userIds = summary.firstUsers
                return reaction
            }
            response.messages.append(entry)
        }
        return response
    }

    /// ListMessageReactionUsers: who reacted to a message the caller may read with one key,
    /// earliest first, paged by the users' ordinals.
    func listMessageReactionUsers(
        _ request: Groupd_V1_ListMessageReactionUsersRequest, _ call: CallContext
    ) async throws -> Groupd_V1_ListMessageReactionUsersResponse {
        try GroupdService.requireGroupID(request.groupID)
        let sequence = try GroupRules.messageSequence(request.sequence)
        let limits = call.limits
        try GroupRules.validateReactionKey(request.reactionKey, limits: limits)
        let size = try GroupdService.pageSize(request.pageSize, fallback: min(50, limits.maxPageSize), max: limits.maxPageSize)
        let after = request.pageToken.isEmpty
            ? 0 : try ReactionUsersToken.decode(request.pageToken, sequence: sequence, key: request.reactionKey)
        let (group, membership) = try await service.loadGroup(call, groupID: request.groupID)
        let op = GroupdService.groupOperator(call.caller, membership: membership)
        try GroupRules.authorize(.react, in: group, by: op).get()
        let message = try await readableMessage(sequence, in: group, by: op, call: call)
        if message.recall != nil { return Groupd_V1_ListMessageReactionUsersResponse() }
        let page = try await store.reactionUsers(
            app: call.caller.appID, groupID: group.id, sequence: sequence, key: request.reactionKey, after: after, limit: size)
        return .with {
            $0.userIds = page.users.map(\.userID)
            $0.count = UInt32(clamping: page.count)
            if page.hasMore, let last = page.users.last {
                $0.nextPageToken = ReactionUsersToken.encode(sequence: sequence, key: request.reactionKey, after: last.ordinal)
            }
        }
    }

    /// The shared path of AddMessageReaction and RemoveMessageReaction: the request's checks
    /// (`INVALID_ARGUMENT` for the group id and the sequence, `INVALID_REACTION_KEY`), then
    /// `Store.react` with `plan` run on the state inside the transaction.
    private func react(
        groupID: String, sequence value: UInt64, key: String, _ call: CallContext,
        plan: @escaping @Sendable (Group, GroupOperator, GroupMessage?, Int64, ReactionState) throws -> ReactionPlan
    ) async throws -> Committed<ReactionPlan> {
        try GroupdService.requireGroupID(groupID)
        let sequence = try GroupRules.messageSequence(value)
        try GroupRules.validateReactionKey(key, limits: call.limits)
        let caller = call.caller
        return try await store.react(
            app: caller.appID, groupID: groupID, sequence: sequence, operatorID: caller.operatorID, at: clock.now()
        ) { group, member, message, state in
            try plan(group, GroupdService.groupOperator(caller, membership: member), message, sequence, state)
        }
    }

    /// A reaction call's answer: the key's count after it; `reacted_by_caller` is whether the
    /// caller has the reaction after an add (`caller` true) or a remove (false).
    static func reactionView(key: String, _ plan: ReactionPlan, caller: Bool) -> Groupd_V1_MessageReaction {
        .with {
            $0.reactionKey = key
            $0.count = UInt32(clamping: plan.count)
            $0.reactedByCaller = caller
        }
    }
}

/// The page token of ListMessageReactionUsers: the message, the key and the last listed user's
/// ordinal, as `<sequence base36>.<ordinal base36>.<key's UTF-8 in hex>`; a token of another
/// message or key is refused.
enum ReactionUsersToken {
    static func encode(sequence: Int64, key: String, after: Int64) -> String {
        String(sequence, radix: 36) + "." + String(after, radix: 36) + "." + Hex.encode(key.utf8)
    }

    /// - Throws: `INVALID_ARGUMENT` naming `page_token` for anything `encode` did not make for
    ///   the same message and key.
    static func decode(_ token: String, sequence: Int64, key: String) throws -> Int64 {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count <= 13, parts[1].count <= 13,
            Int64(parts[0], radix: 36) == sequence, let after = Int64(parts[1], radix: 36), after > 0,
            parts[2] == Hex.encode(key.utf8)
        else { throw UserIDToken.invalid }
        return after
    }
}
