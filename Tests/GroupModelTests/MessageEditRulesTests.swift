import GroupModel
import Testing

/// A group of `type` with the type's default settings (or `settings`), owned by `owner`.
private func group(_ type: GroupType, settings: GroupSettings? = nil, mute: GroupMuteState = .unmuted) -> Group {
    var group = Group(
        appID: "app", id: "g1", type: type, name: "room", settings: settings ?? type.preset.defaultSettings,
        ownerID: "owner", maxMembers: nil, createdAt: now, updatedAt: now, latestSequence: 10)
    group.mute = mute
    return group
}

private func member(_ id: String, _ role: MemberRole, joinSequence: Int64 = 0, mutedUntil: Timestamp? = nil) -> Member {
    Member(userID: id, role: role, joinedAt: now, joinSequence: joinSequence, nameCard: "", mutedUntil: mutedUntil)
}

/// The operator of `actor`, as user `id`.
private func op(_ actor: ActingRole, id: String = "actor") -> GroupOperator {
    switch actor {
    case .backend: .backend
    case .nonMember: .user(id, membership: nil)
    case .owner: .user(id, membership: member(id, .owner))
    case .admin: .user(id, membership: member(id, .admin))
    case .member: .user(id, membership: member(id, .member))
    }
}

private func message(seq: Int64 = 5, sender: String = "actor", edit: MessageEdit? = nil, recall: MessageRecall? = nil) -> GroupMessage {
    GroupMessage(
        appID: "app", groupID: "g1", sequence: seq, messageID: "m\(seq)", senderID: sender,
        content: MessageContent(type: "text", text: "hi", mentionedUserIDs: ["a"]), time: now, recall: recall, edit: edit)
}

/// One cell: a type, an acting role, whose message, and the outcome (`ok` or the refusal's reason).
struct EditCell: Sendable, CustomTestStringConvertible {
    var type: GroupType
    var actor: ActingRole
    var own: Bool
    var outcome: String
    var testDescription: String { "\(type) \(actor) \(own ? "own" : "another's") → \(outcome)" }
}

@Suite("Message edits: permission cells and rules")
struct MessageEditRuleTests {
    static let limits = AppLimits.defaults

    /// Every type × acting role × own or another's message, through the whole rule: members edit
    /// their own messages only; the owner, admins and the backend any; AVChatRoom keeps no history.
    static let cells: [EditCell] = {
        var cells: [EditCell] = []
        let kept: [ActingRole: (own: String, other: String)] = [
            .owner: ("ok", "ok"), .admin: ("ok", "ok"), .member: ("ok", "PERMISSION_DENIED"), .backend: ("ok", "ok"),
        ]
        for type in [GroupType.work, .public, .meeting] {
            for (actor, outcome) in kept {
                cells.append(EditCell(type: type, actor: actor, own: true, outcome: actor == .backend ? "ok" : outcome.own))
                cells.append(EditCell(type: type, actor: actor, own: false, outcome: outcome.other))
            }
            cells.append(EditCell(
                type: type, actor: .nonMember, own: false, outcome: type == .work ? "GROUP_NOT_FOUND" : "NOT_A_MEMBER"))
        }
        for actor in [ActingRole.owner, .admin, .member, .nonMember, .backend] {
            cells.append(EditCell(type: .avChatRoom, actor: actor, own: false, outcome: "HISTORY_NOT_KEPT"))
        }
        return cells.sorted { $0.testDescription < $1.testDescription }
    }()

    @Test("who may edit: each cell", arguments: cells)
    func cell(_ cell: EditCell) {
        let sender = cell.own && cell.actor != .backend ? "actor" : "someone"
        let outcome: String
        do {
            _ = try GroupRules.planEdit(
                message(sender: sender), sequence: 5, text: "new", payload: [], in: group(cell.type), by: op(cell.actor),
                now: now, limits: Self.limits)
            outcome = "ok"
        } catch let error as GroupError {
            outcome = error.reason.rawValue
        } catch {
            outcome = "\(error)"
        }
        #expect(outcome == cell.outcome)
    }

    @Test("an edit: the new body, the count, and MESSAGE_EDITED to the group with the body")
    func edit() throws {
        let plan = try GroupRules.planEdit(
            message(edit: MessageEdit(by: "actor", time: now, count: 2)), sequence: 5, text: "new", payload: [1, 2],
            in: group(.public), by: op(.member), now: now, limits: Self.limits)
        guard case .edit(let edit, let event) = plan else {
            Issue.record("expected an edit, got \(plan)")
            return
        }
        #expect(edit == MessageEdit(by: "actor", time: now, count: 3))
        #expect(event.kind == .messageEdited && event.recipient == .group && event.targets == ["actor"] && event.operatorID == "actor")
        #expect(event.changes == ["sequence": "5", "message_id": "m5", "edit_count": "3", "text": "new", "payload_hex": "0102"])
        #expect(CustomNotification(changes: event.changes) == CustomNotification(text: "new", payload: [1, 2]))
        let backend = try GroupRules.planEdit(
            message(), sequence: 5, text: "x", payload: [], in: group(.public), by: .backend, now: now, limits: Self.limits)
        guard case .edit(let byBackend, let backendEvent) = backend else {
            Issue.record("expected an edit, got \(backend)")
            return
        }
        #expect(byBackend.by == nil && byBackend.count == 1 && backendEvent.operatorID == nil)
    }

    @Test("the same body again is unchanged, even out of the window or muted (a retry)")
    func unchanged() throws {
        let late = now.adding(seconds: 86_401)
        let muted = GroupOperator.user("actor", membership: member("actor", .member, mutedUntil: late.adding(seconds: 60)))
        let plan = try GroupRules.planEdit(
            message(), sequence: 5, text: "hi", payload: [], in: group(.public), by: muted, now: late, limits: Self.limits)
        #expect(plan == .unchanged)
        // A different payload is a change.
        let other = try GroupRules.planEdit(
            message(), sequence: 5, text: "hi", payload: [0], in: group(.public), by: op(.member), now: now, limits: Self.limits)
        #expect(other != .unchanged)
    }

    @Test("the sender's window, its end included, then EDIT_WINDOW_PASSED; owner and admins at any time")
    func window() throws {
        let g = group(.public)
        let atEnd = now.adding(seconds: 86_400)
        _ = try GroupRules.planEdit(message(), sequence: 5, text: "x", payload: [], in: g, by: op(.member), now: atEnd, limits: Self.limits)
        let late = groupError {
            _ = try GroupRules.planEdit(
                message(), sequence: 5, text: "x", payload: [], in: g, by: op(.member), now: atEnd.adding(milliseconds: 1),
                limits: Self.limits)
        }
        #expect(late?.code == .failedPrecondition && late?.reason == .editWindowPassed && late?.metadata["window_seconds"] == "86400")
        var short = Self.limits
        short.editWindowSeconds = 5
        let shortLate = groupError {
            _ = try GroupRules.planEdit(
                message(), sequence: 5, text: "x", payload: [], in: g, by: op(.member), now: now.adding(seconds: 6), limits: short)
        }
        #expect(shortLate?.metadata["window_seconds"] == "5")
        let much = now.adding(seconds: 10 * 86_400)
        _ = try GroupRules.planEdit(message(), sequence: 5, text: "x", payload: [], in: g, by: op(.admin), now: much, limits: Self.limits)
        _ = try GroupRules.planEdit(message(), sequence: 5, text: "x", payload: [], in: g, by: op(.owner), now: much, limits: Self.limits)
        _ = try GroupRules.planEdit(message(), sequence: 5, text: "x", payload: [], in: g, by: .backend, now: much, limits: Self.limits)
    }

    @Test("missing, hidden by the join floor, recalled; a muted member or a muted group edits nothing")
    func refusals() throws {
        let g = group(.public)
        let missing = groupError {
            _ = try GroupRules.planEdit(nil, sequence: 9, text: "x", payload: [], in: g, by: op(.owner), now: now, limits: Self.limits)
        }
        #expect(missing?.code == .notFound && missing?.reason == .messageNotFound && missing?.metadata["field"] == "sequence")
        let joinedLater = GroupOperator.user("late", membership: member("late", .admin, joinSequence: 7))
        let hidden = groupError {
            _ = try GroupRules.planEdit(message(), sequence: 5, text: "x", payload: [], in: g, by: joinedLater, now: now, limits: Self.limits)
        }
        #expect(hidden?.reason == .messageNotFound)
        let recalled = groupError {
            _ = try GroupRules.planEdit(
                message(recall: MessageRecall(by: nil, time: now)), sequence: 5, text: "x", payload: [], in: g, by: op(.owner),
                now: now, limits: Self.limits)
        }
        #expect(recalled?.code == .failedPrecondition && recalled?.reason == .messageRecalled
            && recalled?.metadata["field"] == "sequence" && recalled?.metadata["sequence"] == "5")
        let muted = GroupOperator.user("actor", membership: member("actor", .member, mutedUntil: now.adding(seconds: 60)))
        let mutedError = groupError {
            _ = try GroupRules.planEdit(message(), sequence: 5, text: "x", payload: [], in: g, by: muted, now: now, limits: Self.limits)
        }
        #expect(mutedError?.code == .permissionDenied && mutedError?.reason == .memberMuted)
        let silent = group(.public, mute: GroupMuteState(mode: .all, until: nil))
        let groupMuted = groupError {
            _ = try GroupRules.planEdit(message(), sequence: 5, text: "x", payload: [], in: silent, by: op(.member), now: now, limits: Self.limits)
        }
        #expect(groupMuted?.reason == .groupMuted)
        // The backend is never muted.
        _ = try GroupRules.planEdit(message(), sequence: 5, text: "x", payload: [], in: silent, by: .backend, now: now, limits: Self.limits)
    }

    @Test("the new body: text or payload, at most the send limit, the field named")
    func body() throws {
        try GroupRules.validateEdit(text: "x", payload: [])
        try GroupRules.validateEdit(text: "", payload: [1])
        let empty = groupError { try GroupRules.validateEdit(text: "", payload: []) }
        #expect(empty?.code == .invalidArgument && empty?.metadata["field"] == "text")
        let big = groupError { try GroupRules.validateEdit(text: "x", payload: Array(repeating: 0, count: GroupRules.messageBodyBytes)) }
        #expect(big?.metadata["field"] == "payload" && big?.metadata["limit"] == String(GroupRules.messageBodyBytes))
    }
}
