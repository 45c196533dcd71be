import GroupModel
import Testing

private func group(_ type: GroupType = .public) -> Group {
    Group(
        appID: "app", id: "g", type: type, name: "g", settings: type.preset.defaultSettings, ownerID: "owner",
        maxMembers: 200, memberCount: 3, createdAt: now, updatedAt: now)
}

private func message(_ sequence: Int64 = 7, recalled: Bool = false) -> GroupMessage {
    GroupMessage(
        appID: "app", groupID: "g", sequence: sequence, messageID: "m", senderID: "owner",
        content: MessageContent(type: "text", text: "hi", payload: [], priority: .normal, clientMessageID: nil), time: now,
        recall: recalled ? MessageRecall(by: "owner", time: now) : nil)
}

private let mia = GroupOperator.user("mia", membership: Member(userID: "mia", role: .member, joinedAt: now))
private let late = GroupOperator.user("late", membership: Member(userID: "late", role: .member, joinedAt: now, joinSequence: 9))

private func state(_ counts: [(String, Int)], mine: Set<String> = []) -> ReactionState {
    var state = ReactionState(userKeys: mine)
    for (index, (key, count)) in counts.enumerated() {
        state.counts[key] = ReactionCount(key: key, count: count, nextOrdinal: Int64(count + 1), keyOrdinal: Int64(index + 1))
    }
    return state
}

@Suite("Reactions: the rules of AddMessageReaction and RemoveMessageReaction")
struct ReactionRuleTests {
    @Test("an add writes the user's row with the next ordinal and the key's count, with MESSAGE_REACTION_ADDED")
    func add() throws {
        let plan = try GroupRules.planAddReaction(
            "👍", to: message(), sequence: 7, in: group(), by: mia, state: state([("👍", 2), ("🎉", 1)]), limits: .defaults)
        let write = try #require(plan.write)
        #expect(plan.count == 3 && write.adds && !write.newKey && write.ordinal == 3)
        #expect(write.after == ReactionCount(key: "👍", count: 3, nextOrdinal: 4, keyOrdinal: 1))
        let event = try #require(plan.event)
        #expect(event.kind == .messageReactionAdded && event.operatorID == "mia" && event.recipient == .group)
        #expect(ReactionChange(changes: event.changes) == ReactionChange(sequence: 7, key: "👍", count: 3))
        let new = try GroupRules.planAddReaction(
            "❤️", to: message(), sequence: 7, in: group(), by: mia, state: state([("👍", 2), ("🎉", 1)]), limits: .defaults)
        #expect(new.write?.newKey == true && new.write?.after.keyOrdinal == 3 && new.write?.ordinal == 1 && new.count == 1)
    }

    @Test("adding a reaction the user has, or removing one they do not have, changes nothing")
    func idempotent() throws {
        let again = try GroupRules.planAddReaction(
            "👍", to: message(), sequence: 7, in: group(), by: mia, state: state([("👍", 2)], mine: ["👍"]), limits: .defaults)
        #expect(again.write == nil && again.event == nil && again.count == 2)
        let absent = try GroupRules.planRemoveReaction("👍", from: message(), sequence: 7, in: group(), by: mia, state: state([("👍", 2)]))
        #expect(absent.write == nil && absent.event == nil && absent.count == 2)
        let removed = try GroupRules.planRemoveReaction(
            "👍", from: message(), sequence: 7, in: group(), by: mia, state: state([("👍", 1)], mine: ["👍"]))
        #expect(removed.count == 0 && removed.write?.adds == false && removed.write?.after.count == 0)
        #expect(removed.event?.kind == .messageReactionRemoved)
    }

    @Test("the app's limits: the user's keys, the message's keys, all its reactions")
    func limits() throws {
        var limits = AppLimits.defaults
        limits.maxReactionsPerUserPerMessage = 1
        limits.maxReactionKeysPerMessage = 2
        limits.maxReactionsPerMessage = 5
        let perUser = try #require(groupError {
            _ = try GroupRules.planAddReaction("🎉", to: message(), sequence: 7, in: group(), by: mia, state: state([("👍", 1)], mine: ["👍"]), limits: limits)
        })
        #expect(perUser.code == .failedPrecondition && perUser.reason == .tooManyReactions)
        #expect(perUser.metadata == ["limit_name": "max_reactions_per_user_per_message", "limit": "1"])
        let keys = try #require(groupError {
            _ = try GroupRules.planAddReaction("❤️", to: message(), sequence: 7, in: group(), by: mia, state: state([("👍", 1), ("🎉", 1)]), limits: limits)
        })
        #expect(keys.reason == .tooManyReactionKeys && keys.metadata["limit"] == "2")
        #expect(try GroupRules.planAddReaction("🎉", to: message(), sequence: 7, in: group(), by: mia, state: state([("👍", 1), ("🎉", 1)]), limits: limits).count == 2)
        let total = try #require(groupError {
            _ = try GroupRules.planAddReaction("👍", to: message(), sequence: 7, in: group(), by: mia, state: state([("👍", 3), ("🎉", 2)]), limits: limits)
        })
        #expect(total.reason == .tooManyReactions && total.metadata["limit_name"] == "max_reactions_per_message")
    }

    @Test("refusals: no such message, before the member joined, recalled, the backend alone, AVChatRoom, a non-member")
    func refusals() throws {
        let none = try #require(groupError {
            _ = try GroupRules.planAddReaction("👍", to: nil, sequence: 7, in: group(), by: mia, state: ReactionState(), limits: .defaults)
        })
        #expect(none.reason == .messageNotFound && none.code == .notFound && none.metadata["field"] == "sequence")
        let early = try #require(groupError {
            _ = try GroupRules.planAddReaction("👍", to: message(7), sequence: 7, in: group(), by: late, state: ReactionState(), limits: .defaults)
        })
        #expect(early.reason == .messageNotFound)
        // A Meeting shows history from before joining.
        #expect(try GroupRules.planAddReaction("👍", to: message(7), sequence: 7, in: group(.meeting), by: late, state: ReactionState(), limits: .defaults).count == 1)
        let recalled = try #require(groupError {
            _ = try GroupRules.planRemoveReaction("👍", from: message(recalled: true), sequence: 7, in: group(), by: mia, state: ReactionState())
        })
        #expect(recalled.reason == .messageRecalled && recalled.code == .failedPrecondition)
        let backend = try #require(groupError {
            _ = try GroupRules.planAddReaction("👍", to: message(), sequence: 7, in: group(), by: .backend, state: ReactionState(), limits: .defaults)
        })
        #expect(backend.reason == .operatorRequired)
        let room = try #require(groupError {
            _ = try GroupRules.planAddReaction("👍", to: nil, sequence: 7, in: group(.avChatRoom), by: mia, state: ReactionState(), limits: .defaults)
        })
        #expect(room.reason == .historyNotKept)
        let stranger = try #require(groupError {
            _ = try GroupRules.planAddReaction("👍", to: message(), sequence: 7, in: group(), by: .user("zed", membership: nil), state: ReactionState(), limits: .defaults)
        })
        #expect(stranger.reason == .notAMember)
    }

    @Test("keys: emoji sequences and short words pass", arguments: [
        "👍", "❤️", "👍🏽", "👨‍👩‍👧‍👦", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "🇫🇷", "+1", "thumbs_up", "ok!",
    ])
    func validKeys(_ key: String) throws {
        try GroupRules.validateReactionKey(key, limits: .defaults)
    }

    @Test("keys: empty, too long, control, whitespace, separators, invisible format characters, private use fail", arguments: [
        "", String(repeating: "a", count: 33), String(repeating: "a", count: 17), "a b", "a\tb", "a\n", "\u{07}", "\u{7F}",
        "a\u{2028}", "a\u{2029}", "\u{200B}", "\u{00A0}", "\u{FEFF}", "\u{E000}", "\u{202E}x",
    ])
    func invalidKeys(_ key: String) throws {
        let error = try #require(groupError { try GroupRules.validateReactionKey(key, limits: .defaults) })
        #expect(error.code == .invalidArgument && error.reason == .invalidReactionKey && error.metadata["field"] == "reaction_key")
    }

    @Test("keys: the byte limit is the app's; the character limit is 16")
    func keyLength() throws {
        var limits = AppLimits.defaults
        limits.reactionKeyBytes = 4
        let long = try #require(groupError { try GroupRules.validateReactionKey("👍👍", limits: limits) })
        #expect(long.metadata["limit"] == "4")
        try GroupRules.validateReactionKey("👍", limits: limits)
        let characters = try #require(groupError { try GroupRules.validateReactionKey(String(repeating: "b", count: 17), limits: .defaults) })
        #expect(characters.metadata["limit"] == "16")
    }
}
