/// A partial member profile update: name card and member custom fields (`nil`/empty = keep).
public struct MemberInfoUpdate: Sendable, Hashable {
    /// New name card (empty clears it).
    public var nameCard: String?
    /// Member custom field changes: key → new value; an empty value removes the key.
    public var custom: [String: [UInt8]]

    /// Create an update.
    public init(nameCard: String? = nil, custom: [String: [UInt8]] = [:]) {
        self.nameCard = nameCard
        self.custom = custom
    }

    /// Whether the update addresses nothing.
    public var isEmpty: Bool { self.nameCard == nil && self.custom.isEmpty }
}

/// The plan of a `SetGroupRemark` call: the caller's private alias of the group (RongCloud).
public struct RemarkPlan: Sendable, Hashable {
    /// The user whose remark it is.
    public var userID: String
    /// The new remark; `nil` removes it.
    public var remark: String?
    /// `REMARK_CHANGED` to the user's own devices.
    public var events: [GroupEvent.Draft]

    /// Create a remark plan.
    public init(userID: String, remark: String?, events: [GroupEvent.Draft]) {
        self.userID = userID
        self.remark = remark
        self.events = events
    }
}

extension GroupRules {
    /// The longest group remark, in bytes (the API's documented limit).
    public static let groupRemarkBytes = 64

    /// Check an `UpdateMemberInfo` call and plan it.
    ///
    /// - Who edits whose profile is ``GroupSettings/editMemberInfoPermission`` (RongCloud: self;
    ///   owner + self; owner + admins + self, the default), through
    ///   ``authorize(_:type:settings:actor:)``; the backend edits anyone's. Each custom key also
    ///   needs its own write permission from `schema`.
    /// - Name card ≤ ``AppLimits/nameCardBytes``; custom keys as `schema` defines them.
    /// - Events: one `MEMBER_INFO_CHANGED` (targets: the member; changes `name_card`,
    ///   `custom.<key>` in Base64, empty = removed); none when nothing changed.
    /// - Parameters:
    ///   - update: The requested changes: name card and custom fields (`nil`/empty: keep).
    ///   - userID: The member to change; `nil` means the operator (the backend must name one).
    ///   - group: The group as stored.
    ///   - op: The editing user and their membership, or the app's backend.
    ///   - target: That member's membership (`nil`: not a member).
    ///   - limits: The app's limits (the name card's ``AppLimits/nameCardBytes``).
    ///   - schema: The app's member custom field definitions, or `nil` for any non-empty key.
    ///   - now: The time of the update (not used: a member row keeps no update time).
    /// - Throws: `GroupError`: the refusal of ``authorize(_:type:settings:actor:)``,
    ///   `MEMBER_NOT_FOUND`, `INVALID_ARGUMENT` naming the field.
    public static func planMemberInfoUpdate(
        _ update: MemberInfoUpdate, of userID: String?, in group: Group, by op: GroupOperator, target: Member?,
        limits: AppLimits, customFields schema: CustomFieldSchema? = nil, now: Timestamp
    ) throws -> GroupChange {
        let targetID = userID ?? op.userID
        let isOwn = targetID != nil && targetID == op.userID
        guard let targetID else {
            throw GroupError.invalidArgument(field: "user_id", "the app's backend must name the member to change")
        }
        let subject: MemberInfoTarget = isOwn ? .own : .other(target?.role ?? .member)
        try authorize(.editMemberInfo(subject), in: group, by: op).get()
        guard var member = isOwn ? op.membership : target, member.userID == targetID else {
            try FieldValidation.checkUserID(targetID, field: "user_id", limit: limits.userIDBytes)
            throw GroupError.memberNotFound(targetID, field: "user_id")
        }
        if update.isEmpty {
            throw GroupError.invalidArgument(field: "update_mask", "name at least one field to change")
        }
        if let card = update.nameCard {
            try FieldValidation.checkBytes(card, field: "name_card", limit: limits.nameCardBytes)
        }
        let custom = try applyCustom(update.custom, to: member.custom, scope: .member, schema: schema, actor: op.role)

        var changes: [String: String] = [:]
        if let card = update.nameCard, card != member.nameCard {
            member.nameCard = card
            changes["name_card"] = card
        }
        member.custom = custom.values
        customChanges(custom.changed, values: custom.values, into: &changes)
        if changes.isEmpty { return .unchanged(group) }
        return GroupChange(group: group, updatedMembers: [member], events: [
            GroupEvent.Draft(kind: .memberInfoChanged, operatorID: op.userID, targets: [targetID], changes: changes),
        ])
    }

    /// Check a `SetReceiveMessageOption` call and plan it: a member's own choice (Tencent
    /// `recvOpt`: receive, not receive, receive without push).
    ///
    /// - Only the member themselves (the backend must act for a user: `OPERATOR_REQUIRED`).
    /// - Events: `RECEIVE_OPTION_CHANGED` to the user's own devices (changes `option`); none if
    ///   unchanged.
    public static func planReceiveOption(
        _ option: ReceiveOption, in group: Group, by op: GroupOperator
    ) throws -> GroupChange {
        try authorize(.setOwnPreferences, in: group, by: op).get()
        guard let userID = op.userID, var member = op.membership else {
            throw GroupError.operatorRequired("setting the receive option")
        }
        if member.receiveOption == option { return .unchanged(group) }
        member.receiveOption = option
        return GroupChange(group: group, updatedMembers: [member], events: [
            GroupEvent.Draft(kind: .receiveOptionChanged, operatorID: userID, targets: [userID],
                             changes: ["option": option.rawValue], recipient: .user(userID)),
        ])
    }

    /// Check a `SetGroupRemark` call and plan it: the caller's private alias of the group,
    /// visible only to them (RongCloud group remark).
    ///
    /// - Only a member, for themselves (the backend must act for a user: `OPERATOR_REQUIRED`).
    /// - ≤ ``groupRemarkBytes`` bytes; an empty remark removes it.
    /// - Events: `REMARK_CHANGED` to the user's own devices (RongCloud multi-device sync; changes
    ///   `remark`), never to the group.
    public static func planRemark(
        _ remark: String, in group: Group, by op: GroupOperator, current: String? = nil
    ) throws -> RemarkPlan {
        try authorize(.setOwnPreferences, in: group, by: op).get()
        guard let userID = op.userID else { throw GroupError.operatorRequired("setting a group remark") }
        try FieldValidation.checkBytes(remark, field: "remark", limit: groupRemarkBytes)
        let new = remark.isEmpty ? nil : remark
        if new == current { return RemarkPlan(userID: userID, remark: new, events: []) }
        return RemarkPlan(userID: userID, remark: new, events: [
            GroupEvent.Draft(kind: .remarkChanged, operatorID: userID, targets: [userID],
                             changes: ["remark": remark], recipient: .user(userID)),
        ])
    }
}
