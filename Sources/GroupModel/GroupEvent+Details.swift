/// The `changes` texts that events carry, written by the rules and read back by the API mapping
/// (the store keeps them as they are).
extension GroupEvent {
    /// The settings keys a `GROUP_SETTINGS_CHANGED` event's `changes` may hold (with
    /// `max_members`).
    public static let settingsChangeKeys: Set<String> = Set(GroupSettingKey.allCases.map(\.rawValue) + ["max_members"])

    /// The kind the event is reported as. Settings changes stored before they had a kind of
    /// their own are `GROUP_INFO_CHANGED` events whose changes are all settings: they are
    /// reported as `GROUP_SETTINGS_CHANGED`.
    public var reportedKind: Kind {
        if kind == .groupInfoChanged, !changes.isEmpty, changes.keys.allSatisfy(Self.settingsChangeKeys.contains) {
            return .groupSettingsChanged
        }
        return kind
    }
}

extension JoinSource {
    /// The source's name in event changes (`join_source`).
    public var name: String {
        switch self {
        case .unknown: "unknown"
        case .creator: "creator"
        case .initialMember: "initial_member"
        case .freeJoin: "free_join"
        case .application: "application"
        case .invitation: "invitation"
        case .imported: "imported"
        case .inviteLink: "invite_link"
        }
    }

    /// The source named `name` (``name``), or `nil`.
    public init?(name: String) {
        guard let source = Self.allCases.first(where: { $0.name == name }) else { return nil }
        self = source
    }
}

extension GroupSettings {
    /// Set the setting `key` from its API text (``value(of:)``).
    /// - Returns: Whether `text` is a valid value of `key` (else nothing changes).
    @discardableResult
    public mutating func set(_ key: GroupSettingKey, text: String) -> Bool {
        switch key {
        case .joinOption:
            guard let v = JoinOption(rawValue: text) else { return false }
            self.joinOption = v
        case .joinApprovers:
            guard let v = ApproverSet(rawValue: text) else { return false }
            self.joinApprovers = v
        case .invitePermission:
            guard let v = OperationPermission(rawValue: text) else { return false }
            self.invitePermission = v
        case .inviteeMustAccept:
            guard let v = Bool(text) else { return false }
            self.inviteeMustAccept = v
        case .invitationNeedsApproval:
            guard let v = Bool(text) else { return false }
            self.invitationNeedsApproval = v
        case .removeMembersPermission:
            guard let v = OperationPermission(rawValue: text) else { return false }
            self.removeMembersPermission = v
        case .editProfilePermission:
            guard let v = OperationPermission(rawValue: text) else { return false }
            self.editProfilePermission = v
        case .editMemberInfoPermission:
            guard let v = MemberInfoEditPermission(rawValue: text) else { return false }
            self.editMemberInfoPermission = v
        case .editSettingsPermission:
            guard let v = OperationPermission(rawValue: text) else { return false }
            self.editSettingsPermission = v
        case .ownerQuit:
            guard let v = OwnerQuitRule(rawValue: text) else { return false }
            self.ownerQuit = v
        case .mentionAllPermission:
            guard let v = OperationPermission(rawValue: text) else { return false }
            self.mentionAllPermission = v
        case .slowModeInterval:
            guard let v = Int(text), v >= 0 else { return false }
            self.slowModeIntervalSeconds = v
        case .inviteLinkPermission:
            guard let v = OperationPermission(rawValue: text) else { return false }
            self.inviteLinkPermission = v
        case .pinPermission:
            guard let v = OperationPermission(rawValue: text) else { return false }
            self.pinPermission = v
        }
        return true
    }
}

extension GroupEvent.Draft {
    /// The `changes` key of `GROUP_CREATED` listing the initial members created as admins
    /// (newline-separated; absent when none): the event stream's routing keeps each member's role.
    public static let initialAdminsKey = "admins"
}

extension GroupRules {
    /// How `member` came in, as join event changes: `join_source` (``JoinSource/name``) and,
    /// when someone let them in, `inviter`.
    static func joinChanges(source: JoinSource, inviterID: String?, inviteLinkID: String? = nil) -> [String: String] {
        var changes = ["join_source": source.name]
        if let inviterID { changes["inviter"] = inviterID }
        if let inviteLinkID { changes["invite_link"] = inviteLinkID }
        return changes
    }

    /// A new group's values as `GROUP_CREATED` changes: its profile, every setting (by
    /// ``GroupSettingKey`` name), `max_members` when set, `member_count` and `created_at` (ms; an
    /// imported group's own creation time).
    static func creationChanges(_ group: Group, memberCount: Int) -> [String: String] {
        var changes = [
            "type": group.type.name, "name": group.name, "member_count": String(memberCount),
            "created_at": String(group.createdAt.millisecondsSince1970),
        ]
        if !group.introduction.isEmpty { changes["introduction"] = group.introduction }
        if !group.notification.isEmpty { changes["notification"] = group.notification }
        if !group.faceURL.isEmpty { changes["face_url"] = group.faceURL }
        if let ownerID = group.ownerID { changes["owner_id"] = ownerID }
        if let max = group.maxMembers { changes["max_members"] = String(max) }
        for key in GroupSettingKey.allCases { changes[key.rawValue] = group.settings.value(of: key) }
        return changes
    }
}
