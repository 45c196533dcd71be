import GroupModel
import Testing

/// A group of `type` with the type's default settings (or `settings`), owned by `owner`.
private func group(_ type: GroupType, settings: GroupSettings? = nil) -> Group {
    Group(
        appID: "app", id: "g1", type: type, name: "room", settings: settings ?? type.preset.defaultSettings,
        ownerID: "owner", maxMembers: nil, createdAt: now, updatedAt: now, latestSequence: 10)
}

private func member(_ id: String, _ role: MemberRole, joinSequence: Int64 = 0) -> Member {
    Member(userID: id, role: role, joinedAt: now, joinSequence: joinSequence, nameCard: "")
}

/// The operator of `actor`, as user `id` (ignored for the backend and non-members' membership).
private func op(_ actor: ActingRole, id: String = "actor") -> GroupOperator {
    switch actor {
    case .backend: .backend
    case .nonMember: .user(id, membership: nil)
    case .owner: .user(id, membership: member(id, .owner))
    case .admin: .user(id, membership: member(id, .admin))
    case .member: .user(id, membership: member(id, .member))
    }
}

private func message(seq: Int64 = 5, sender: String = "sender", sentAt: Timestamp = now) -> GroupMessage {
    GroupMessage(
        appID: "app", groupID: "g1", sequence: seq, messageID: "m\(seq)", senderID: sender,
        content: MessageContent(text: "hi", mentionedUserIDs: ["a"], mentionAll: true), time: sentAt)
}

/// One cell: a type, an acting role, and the outcome (`ok` or the refusal's reason).
struct MentionCell: Sendable, CustomTestStringConvertible {
    var type: GroupType
    var actor: ActingRole
    var outcome: String
    var testDescription: String { "\(type) \(actor) → \(outcome)" }
}

private func cells(_ rows: [GroupType: [ActingRole: String]]) -> [MentionCell] {
    rows.flatMap { type, row in row.map { MentionCell(type: type, actor: $0.key, outcome: $0.value) } }
        .sorted { $0.testDescription < $1.testDescription }
}

private func decisionOutcome(_ decision: PermissionDecision) -> String {
    decision.error?.reason.rawValue ?? "ok"
}

@Suite("Mention, recall and slow mode: permission cells")
struct MentionRecallPermissionTests {
    /// @all with each type's default mention_all_scope: Work everyone, Public and Meeting owner
    /// and admins, AVChatRoom the owner.
    static let mentionAllCells = cells([
        .work: [.owner: "ok", .admin: "ok", .member: "ok", .nonMember: "GROUP_NOT_FOUND", .backend: "ok"],
        .public: [.owner: "ok", .admin: "ok", .member: "PERMISSION_DENIED", .nonMember: "NOT_A_MEMBER", .backend: "ok"],
        .meeting: [.owner: "ok", .admin: "ok", .member: "PERMISSION_DENIED", .nonMember: "NOT_A_MEMBER", .backend: "ok"],
        .avChatRoom: [
            .owner: "ok", .admin: "PERMISSION_DENIED", .member: "PERMISSION_DENIED", .nonMember: "NOT_A_MEMBER",
            .backend: "ok",
        ],
    ])

    @Test("@all: each cell with the type's default scope", arguments: mentionAllCells)
    func mentionAll(_ cell: MentionCell) {
        let g = group(cell.type)
        let decision = GroupRules.authorize(.mentionAll, type: cell.type, settings: g.settings, actor: cell.actor)
        #expect(decisionOutcome(decision) == cell.outcome)
        if cell.outcome == "PERMISSION_DENIED" {
            #expect(decision.error?.metadata["setting"] == GroupSettingKey.mentionAllPermission.rawValue)
            #expect(GroupSettingKey.mentionAllPermission.apiName == "mention_all_scope")
        }
    }

    @Test("@all follows the group's mention_all_scope", arguments: OperationPermission.allCases)
    func mentionAllSetting(_ scope: OperationPermission) {
        var settings = GroupType.public.preset.defaultSettings
        settings.mentionAllPermission = scope
        for role in [MemberRole.owner, .admin, .member] {
            let decision = GroupRules.authorize(.mentionAll, type: .public, settings: settings, actor: ActingRole(role: role))
            #expect(decision.isAllowed == scope.grants(role), "\(scope) \(role)")
        }
    }

    /// Recalling one's own message (the window is checked apart) and another's.
    static let recallOwnCells = cells([
        .work: [.owner: "ok", .admin: "ok", .member: "ok", .nonMember: "GROUP_NOT_FOUND", .backend: "ok"],
        .public: [.owner: "ok", .admin: "ok", .member: "ok", .nonMember: "NOT_A_MEMBER", .backend: "ok"],
        .meeting: [.owner: "ok", .admin: "ok", .member: "ok", .nonMember: "NOT_A_MEMBER", .backend: "ok"],
        .avChatRoom: [
            .owner: "HISTORY_NOT_KEPT", .admin: "HISTORY_NOT_KEPT", .member: "HISTORY_NOT_KEPT",
            .nonMember: "HISTORY_NOT_KEPT", .backend: "HISTORY_NOT_KEPT",
        ],
    ])
    static let recallOtherCells = cells([
        .work: [.owner: "ok", .admin: "ok", .member: "PERMISSION_DENIED", .nonMember: "GROUP_NOT_FOUND", .backend: "ok"],
        .public: [.owner: "ok", .admin: "ok", .member: "PERMISSION_DENIED", .nonMember: "NOT_A_MEMBER", .backend: "ok"],
        .meeting: [.owner: "ok", .admin: "ok", .member: "PERMISSION_DENIED", .nonMember: "NOT_A_MEMBER", .backend: "ok"],
        .avChatRoom: [
            .owner: "HISTORY_NOT_KEPT", .admin: "HISTORY_NOT_KEPT", .member: "HISTORY_NOT_KEPT",
            .nonMember: "HISTORY_NOT_KEPT", .backend: "HISTORY_NOT_KEPT",
        ],
    ])

    @Test("recall of one's own message: each cell", arguments: recallOwnCells)
    func recallOwn(_ cell: MentionCell) {
        let g = group(cell.type)
        #expect(decisionOutcome(GroupRules.authorize(.recallMessage(own: true), type: cell.type, settings: g.settings, actor: cell.actor))
            == cell.outcome)
    }

    @Test("recall of another's message: each cell", arguments: recallOtherCells)
    func recallOther(_ cell: MentionCell) {
        let g = group(cell.type)
        #expect(decisionOutcome(GroupRules.authorize(.recallMessage(own: false), type: cell.type, settings: g.settings, actor: cell.actor))
            == cell.outcome)
    }

    @Test("slow mode is fixed off for AVChatRoom and changeable elsewhere", arguments: GroupType.allCases)
    func slowModeFixed(_ type: GroupType) {
        #expect(type.preset.defaultSettings.slowModeIntervalSeconds == 0)
        #expect(type.preset.fixedSettings.contains(.slowModeInterval) == (type == .avChatRoom))
    }
}

@Suite("Mention, recall and slow mode: rules")
struct MentionRecallRuleTests {
    static let limits = AppLimits.defaults

    @Test("mentions: at most the app's limit, each a valid id listed once")
    func mentions() throws {
        try GroupRules.validateMentions(MessageContent(text: "x", mentionedUserIDs: (0..<30).map { "u\($0)" }), limits: Self.limits)
        let over = groupError {
            try GroupRules.validateMentions(MessageContent(text: "x", mentionedUserIDs: (0..<31).map { "u\($0)" }), limits: Self.limits)
        }
        #expect(over?.metadata["field"] == "mentioned_user_ids" && over?.metadata["limit"] == "30")
        let twice = groupError { try GroupRules.validateMentions(MessageContent(text: "x", mentionedUserIDs: ["a", "a"]), limits: Self.limits) }
        #expect(twice?.metadata["field"] == "mentioned_user_ids[1]")
        let empty = groupError { try GroupRules.validateMentions(MessageContent(text: "x", mentionedUserIDs: [""]), limits: Self.limits) }
        #expect(empty?.code == .invalidArgument && empty?.metadata["field"] == "mentioned_user_ids[0]")
    }

    @Test("@all is checked on send; plain mentions need no grant")
    func sendWithMentions() throws {
        let g = group(.public)
        let plain = MessageContent(text: "x", mentionedUserIDs: ["owner"])
        _ = try GroupRules.checkSend(plain, in: g, by: op(.member), now: now, lastSent: nil)
        let all = MessageContent(text: "x", mentionAll: true)
        let refused = groupError { _ = try GroupRules.checkSend(all, in: g, by: op(.member), now: now, lastSent: nil) }
        #expect(refused?.reason == .permissionDenied)
        _ = try GroupRules.checkSend(all, in: g, by: op(.admin), now: now, lastSent: nil)
    }

    @Test("slow mode: members wait the interval, to the millisecond; owner and admins are exempt")
    func slowMode() throws {
        var settings = GroupType.public.preset.defaultSettings
        settings.slowModeIntervalSeconds = 30
        let g = group(.public, settings: settings)
        let content = MessageContent(text: "x")
        let last = now.adding(seconds: -10)
        let refused = groupError { _ = try GroupRules.checkSend(content, in: g, by: op(.member), now: now, lastSent: last) }
        #expect(refused?.code == .resourceExhausted && refused?.reason == .slowMode)
        #expect(refused?.metadata["retry_delay_ms"] == "20000" && refused?.metadata["interval_seconds"] == "30")
        _ = try GroupRules.checkSend(content, in: g, by: op(.member), now: now, lastSent: now.adding(seconds: -30))
        _ = try GroupRules.checkSend(content, in: g, by: op(.member), now: now, lastSent: nil)
        _ = try GroupRules.checkSend(content, in: g, by: op(.owner), now: now, lastSent: now)
        _ = try GroupRules.checkSend(content, in: g, by: op(.admin), now: now, lastSent: now)
        // Off: no refusal. A mute is reported before slow mode.
        #expect(GroupRules.slowModeRefusal(in: group(.public), role: .member, lastSent: now, now: now) == nil)
        let muted = GroupOperator.user(
            "actor", membership: Member(userID: "actor", role: .member, joinedAt: now, mutedUntil: now.adding(seconds: 60)))
        let mutedError = groupError { _ = try GroupRules.checkSend(content, in: g, by: muted, now: now, lastSent: last) }
        #expect(mutedError?.reason == .memberMuted)
    }

    @Test("slow mode intervals: 0 to the app's maximum")
    func slowModeValues() throws {
        try GroupRules.validateSlowModeInterval(0, field: "f", limits: Self.limits)
        try GroupRules.validateSlowModeInterval(21_600, field: "f", limits: Self.limits)
        let over = groupError { try GroupRules.validateSlowModeInterval(21_601, field: "f", limits: Self.limits) }
        #expect(over?.metadata["field"] == "f" && over?.metadata["limit"] == "21600")
        let negative = groupError { try GroupRules.validateSlowModeInterval(-1, field: "f", limits: Self.limits) }
        #expect(negative?.code == .invalidArgument)
    }

    @Test("recall: the sender within the window (its end included), then RECALL_WINDOW_PASSED")
    func recallWindow() throws {
        let g = group(.public)
        let sent = message(sender: "actor")
        let atEnd = now.adding(seconds: 120)
        let plan = try GroupRules.planRecall(sent, sequence: 5, in: g, by: op(.member), now: atEnd, limits: Self.limits)
        #expect(plan.recall == MessageRecall(by: "actor", time: atEnd))
        #expect(plan.event.kind == .messageRecalled && plan.event.targets == ["actor"])
        #expect(plan.event.changes == ["sequence": "5", "message_id": "m5"])
        let late = groupError {
            _ = try GroupRules.planRecall(sent, sequence: 5, in: g, by: op(.member), now: atEnd.adding(milliseconds: 1), limits: Self.limits)
        }
        #expect(late?.reason == .recallWindowPassed && late?.metadata["window_seconds"] == "120")
        // Owner and admins: their own too, at any time.
        let later = now.adding(seconds: 86_400)
        _ = try GroupRules.planRecall(sent, sequence: 5, in: g, by: op(.admin), now: later, limits: Self.limits)
        _ = try GroupRules.planRecall(message(), sequence: 5, in: g, by: op(.owner), now: later, limits: Self.limits)
        let backend = try GroupRules.planRecall(message(), sequence: 5, in: g, by: .backend, now: later, limits: Self.limits)
        #expect(backend.recall.by == nil && backend.event.operatorID == nil)
    }

    @Test("recall: missing, hidden by the join floor, or recalled already")
    func recallRefusals() throws {
        let g = group(.public)
        let missing = groupError { _ = try GroupRules.planRecall(nil, sequence: 9, in: g, by: op(.owner), now: now, limits: Self.limits) }
        #expect(missing?.code == .notFound && missing?.reason == .messageNotFound && missing?.metadata["field"] == "sequence")
        let joinedLater = GroupOperator.user("late", membership: member("late", .admin, joinSequence: 7))
        let hidden = groupError {
            _ = try GroupRules.planRecall(message(seq: 5), sequence: 5, in: g, by: joinedLater, now: now, limits: Self.limits)
        }
        #expect(hidden?.reason == .messageNotFound)
        var recalled = message()
        recalled.recall = MessageRecall(by: "owner", time: now)
        let twice = groupError { _ = try GroupRules.planRecall(recalled, sequence: 5, in: g, by: op(.owner), now: now, limits: Self.limits) }
        #expect(twice?.reason == .messageAlreadyRecalled && twice?.metadata["recalled_by"] == "owner")
        let other = groupError { _ = try GroupRules.planRecall(message(), sequence: 5, in: g, by: op(.member), now: now, limits: Self.limits) }
        #expect(other?.reason == .permissionDenied)
    }

    @Test("unread mention kinds")
    func kinds() {
        #expect(UnreadMention(me: false, all: false) == .none)
        #expect(UnreadMention(me: true, all: false) == .me)
        #expect(UnreadMention(me: false, all: true) == .all)
        #expect(UnreadMention(me: true, all: true) == .allAndMe)
    }
}
