import Foundation
import GroupModel

/// Mapping between rows and domain values, and the column lists of groups, members and events
/// (the backends' statements extend it: `Rows+SQLite.swift`, the PostgreSQL transaction).
public enum Rows {
    package static func placeholders(_ count: Int) -> String {
        Array(repeating: "?", count: count).joined(separator: ", ")
    }

    /// The size an `IN (?, …)` list of `count` values is padded to (by repeating a value), so
    /// that a handful of statement texts, each prepared once per connection, serve every size:
    /// 1, 2, 4 … 64, then multiples of 64.
    @inlinable
    public static func paddedCount(_ count: Int) -> Int {
        if count <= 1 { return 1 }
        if count > 64 { return (count + 63) / 64 * 64 }
        var size = 2
        while size < count { size *= 2 }
        return size
    }

    /// `values` padded to ``paddedCount(_:)`` by repeating its first value (an `IN` list
    /// ignores duplicates). `values` must not be empty.
    @inlinable
    public static func padded<T>(_ values: [T]) -> [T] {
        let size = paddedCount(values.count)
        if size == values.count { return values }
        return values + Array(repeating: values[0], count: size - values.count)
    }

    /// `values` as a JSON array, the one parameter of an `IN (SELECT value FROM json_each(?))`
    /// list of any length (one statement text for every size).
    @inlinable
    public static func jsonArray<T: Encodable>(_ values: [T]) throws -> String {
        String(decoding: try JSONEncoder().encode(values), as: UTF8.self)
    }

    // MARK: Groups

    package static func groupInsertValues(_ group: Group, nextJoinOrder: Int) -> [SQLArgument] {
        let s = group.settings
        let (mode, roles) = encode(group.mute.mode)
        return [
            .text(group.appID), .text(group.id), .text(group.type.rawValue), .text(group.name), .text(group.introduction),
            .text(group.notification), .text(group.faceURL), .text(group.ownerID),
            .integer(group.maxMembers.map { Int64($0) }), .int(group.memberCount),
            .text(s.joinOption.rawValue), .text(s.joinApprovers.rawValue), .text(s.invitePermission.rawValue),
            .bool(s.inviteeMustAccept), .bool(s.invitationNeedsApproval), .text(s.removeMembersPermission.rawValue),
            .text(s.editProfilePermission.rawValue), .text(s.editMemberInfoPermission.rawValue),
            .text(mode), .text(roles), .integer(group.mute.until?.millisecondsSince1970),
            .integer(group.createdAt.millisecondsSince1970), .integer(group.updatedAt.millisecondsSince1970),
            .int(nextJoinOrder), .text(s.editSettingsPermission.rawValue), .text(s.ownerQuit.rawValue),
            .text(s.mentionAllPermission.rawValue), .int(s.slowModeIntervalSeconds),
        ]
    }

    /// The columns ``group(_:)`` decodes, in `SELECT` order: rows are decoded by index (a
    /// lookup by name lowercases and hashes the name for every column of every row).
    public enum GroupColumn: Int, CaseIterable {
        case groupKey, appID, groupID, type, name, introduction, notification, faceURL, ownerID
        case maxMembers, memberCount, joinOption, joinApprovers, invitePermission, inviteeMustAccept
        case invitationNeedsApproval, removeMembersPermission, editProfilePermission
        case editMemberInfoPermission, muteMode, muteRoles, muteUntil, createdAt, updatedAt
        case latestSequence, hasCustom, editSettingsPermission, ownerQuit, muteOperator, muteBypass, memberVersion
        case mentionAllPermission, slowModeInterval, inviteLinkPermission, pinPermission, pins, permissionGroups
        case isPrivate

        package var name: String {
            switch self {
            case .groupKey: "group_key"
            case .appID: "app_id"
            case .groupID: "group_id"
            case .type: "type"
            case .name: "name"
            case .introduction: "introduction"
            case .notification: "notification"
            case .faceURL: "face_url"
            case .ownerID: "owner_id"
            case .maxMembers: "max_members"
            case .memberCount: "member_count"
            case .joinOption: "join_option"
            case .joinApprovers: "join_approvers"
            case .invitePermission: "invite_permission"
            case .inviteeMustAccept: "invitee_must_accept"
            case .invitationNeedsApproval: "invitation_needs_approval"
            case .removeMembersPermission: "remove_members_permission"
            case .editProfilePermission: "edit_profile_permission"
            case .editMemberInfoPermission: "edit_member_info_permission"
            case .muteMode: "mute_mode"
            case .muteRoles: "mute_roles"
            case .muteUntil: "mute_until"
            case .createdAt: "created_at"
            case .updatedAt: "updated_at"
            case .latestSequence: "latest_seq"
            case .hasCustom: "has_custom"
            case .editSettingsPermission: "edit_settings_permission"
            case .ownerQuit: "owner_quit"
            case .muteOperator: "mute_operator"
            case .muteBypass: "mute_bypass"
            case .mentionAllPermission: "mention_all_permission"
            case .slowModeInterval: "slow_mode_interval"
            case .inviteLinkPermission: "invite_link_permission"
            case .pinPermission: "pin_permission"
            case .pins: "pins"
            case .memberVersion: "member_version"
            case .permissionGroups: "permission_groups"
            case .isPrivate: "is_private"
            }
        }

        /// `group_key, app_id, …` (prefixed with `table.` if given), for a `SELECT`.
        /// - Parameters:
        ///   - table: The name or alias of the `groups` table the columns are qualified with (`nil`:
        ///     unqualified).
        ///   - ownerSettings: Whether the file has `edit_settings_permission` and
        ///     `owner_quit` (v8); if not (tests of older files), each type's default stands in, as
        ///     migration v8 writes it, no mute operator (`mute_operator`, v10), an empty mute
        ///     bypass list (`mute_bypass`, v11) and member version 0 (`member_version`, v15).
        package static func list(table: String? = nil, ownerSettings: Bool = true) -> String {
            allCases.map { column in
                let qualified = table.map { "\($0).\(column.name)" } ?? column.name
                guard !ownerSettings else { return qualified }
                let type = table.map { "\($0).type" } ?? "type"
                switch column {
                case .editSettingsPermission:
                    return "CASE WHEN \(type) IN ('Public', 'Meeting') THEN 'owner_and_admins' ELSE 'owner' END"
                case .ownerQuit:
                    return "CASE WHEN \(type) = 'Work' THEN 'to_longest_standing_member' ELSE 'refused' END"
                case .muteOperator, .pinPermission, .pins, .permissionGroups:
                    return "NULL"
                case .muteBypass:
                    return "'[]'"
                case .mentionAllPermission:
                    return "CASE \(type) WHEN 'Work' THEN 'everyone' WHEN 'AVChatRoom' THEN 'owner' ELSE 'owner_and_admins' END"
                case .slowModeInterval:
                    return "0"
                case .inviteLinkPermission:
                    return "CASE \(type) WHEN 'Work' THEN 'everyone' WHEN 'AVChatRoom' THEN 'nobody' ELSE 'owner_and_admins' END"
                case .memberVersion, .isPrivate:
                    return "0"
                default:
                    return qualified
                }
            }
            .joined(separator: ", ")
        }
    }

    /// A group row as read: its surrogate key, the group (without custom fields) and whether
    /// it has custom fields.
    public struct GroupRow {
        public var key: Int64
        public var group: Group
        public var hasCustom: Bool

        @inlinable
        public init(key: Int64, group: Group, hasCustom: Bool) {
            self.key = key
            self.group = group
            self.hasCustom = hasCustom
        }
    }

    /// Decode a row selected with ``GroupColumn/list(table:ownerSettings:)``, by index.
    @inlinable
    public static func group(_ row: some ColumnReader) throws -> GroupRow {
        func text(_ column: GroupColumn) throws -> String { try row.text(column.rawValue) }
        func int(_ column: GroupColumn) throws -> Int64 { try row.int64(column.rawValue) }
        let type = try parse(text(.type), GroupType.init(rawValue:))
        let pinPermission = try row.optionalText(GroupColumn.pinPermission.rawValue)
        let pinsText = try row.optionalText(GroupColumn.pins.rawValue)
        guard let pins = PinnedMessageCoding.decode(pinsText ?? "") else { throw corrupt("pins", pinsText ?? "") }
        let settings = GroupSettings(
            joinOption: try parse(text(.joinOption), JoinOption.init(rawValue:)),
            joinApprovers: try parse(text(.joinApprovers), ApproverSet.init(rawValue:)),
            invitePermission: try parse(text(.invitePermission), OperationPermission.init(rawValue:)),
            inviteeMustAccept: try row.bool(GroupColumn.inviteeMustAccept.rawValue),
            invitationNeedsApproval: try row.bool(GroupColumn.invitationNeedsApproval.rawValue),
            removeMembersPermission: try parse(text(.removeMembersPermission), OperationPermission.init(rawValue:)),
            editProfilePermission: try parse(text(.editProfilePermission), OperationPermission.init(rawValue:)),
            editMemberInfoPermission: try parse(text(.editMemberInfoPermission), MemberInfoEditPermission.init(rawValue:)),
            editSettingsPermission: try parse(text(.editSettingsPermission), OperationPermission.init(rawValue:)),
            ownerQuit: try parse(text(.ownerQuit), OwnerQuitRule.init(rawValue:)),
            mentionAllPermission: try parse(text(.mentionAllPermission), OperationPermission.init(rawValue:)),
            slowModeIntervalSeconds: Int(try int(.slowModeInterval)),
            inviteLinkPermission: try parse(text(.inviteLinkPermission), OperationPermission.init(rawValue:)),
            pinPermission: try pinPermission.map { try parse($0, OperationPermission.init(rawValue:)) }
                ?? type.preset.defaultSettings.pinPermission)
        let muteUntil = try row.optionalInt64(GroupColumn.muteUntil.rawValue)
        let group = Group(
            appID: try text(.appID), id: try text(.groupID),
            type: type,
            name: try text(.name), introduction: try text(.introduction),
            notification: try text(.notification), faceURL: try text(.faceURL), settings: settings,
            ownerID: try row.optionalText(GroupColumn.ownerID.rawValue),
            maxMembers: try row.optionalInt64(GroupColumn.maxMembers.rawValue).map { Int($0) },
            memberCount: Int(try int(.memberCount)),
            createdAt: Timestamp(millisecondsSince1970: try int(.createdAt)),
            updatedAt: Timestamp(millisecondsSince1970: try int(.updatedAt)),
            custom: [:], latestSequence: try int(.latestSequence),
            mute: GroupMuteState(
                mode: try decodeMuteMode(text(.muteMode), roles: text(.muteRoles)),
                until: muteUntil.map(Timestamp.init(millisecondsSince1970:)),
                operatorID: try row.optionalText(GroupColumn.muteOperator.rawValue)),
            pins: pins)
        var stored = group
        stored.muteBypass = try EventJSON.strings(row.text(GroupColumn.muteBypass.rawValue))
        stored.memberVersion = try int(.memberVersion)
        stored.permissionGroups = try permissionGroups(row.optionalText(GroupColumn.permissionGroups.rawValue))
        stored.isPrivate = try row.bool(GroupColumn.isPrivate.rawValue)
        return GroupRow(key: try int(.groupKey), group: stored, hasCustom: try row.bool(GroupColumn.hasCustom.rawValue))
    }

    /// The columns ``topic(_:)`` decodes, of the table aliased `t`, in `SELECT` order.
    public static let topicColumns = """
        t.group_key, t.app_id, t.group_id, t.name, t.introduction, t.notification, t.face_url, t.mute_mode, \
        t.mute_roles, t.mute_until, t.mute_operator, t.created_at, t.updated_at, t.latest_seq, t.pins, t.has_custom, \
        t.is_private
        """

    /// How many columns ``topicColumns`` names (counted from it, so the two cannot drift apart).
    public static let topicColumnCount = topicColumns.split(separator: ",").count

    /// A community's `permission_groups` column (`NULL`: none), or a corrupt-row error.
    @usableFromInline package static func permissionGroups(_ text: String?) throws -> [PermissionGroup] {
        guard let text else { return [] }
        guard let groups = PermissionGroupCoding.decode(text) else { throw corrupt("permission_groups", text) }
        return groups
    }

    /// A topic's own row (``topicColumns``): what the community does not give it (profile, mute,
    /// times, sequence, pins, `Group.isPrivate`). The type is Community and the rest is the type's defaults, which
    /// `Group.topic(_:in:)` replaces with the community's. A member of many communities lists a
    /// thousand topics: the full group decoder read every settings column of each.
    public static func topic(_ row: some ColumnReader) throws -> GroupRow {
        let pinsText = try row.optionalText(14)
        guard let pins = PinnedMessageCoding.decode(pinsText ?? "") else { throw corrupt("pins", pinsText ?? "") }
        var topic = Group(
            appID: try row.text(1), id: try row.text(2), type: .community, name: try row.text(3),
            introduction: try row.text(4), notification: try row.text(5), faceURL: try row.text(6),
            settings: GroupType.community.preset.defaultSettings, ownerID: nil, maxMembers: nil,
            createdAt: Timestamp(millisecondsSince1970: try row.int64(11)),
            updatedAt: Timestamp(millisecondsSince1970: try row.int64(12)), latestSequence: try row.int64(13),
            mute: GroupMuteState(
                mode: try decodeMuteMode(row.text(7), roles: row.text(8)),
                until: try row.optionalInt64(9).map(Timestamp.init(millisecondsSince1970:)),
                operatorID: try row.optionalText(10)),
            pins: pins)
        topic.isPrivate = try row.bool(16)
        return GroupRow(key: try row.int64(0), group: topic, hasCustom: try row.bool(15))
    }

    package static func encode(_ mode: GroupMuteMode) -> (mode: String, roles: String) {
        switch mode {
        case .none: ("none", "")
        case .all: ("all", "")
        case .ordinaryMembers: ("ordinary_members", "")
        case .roles(let roles):
            ("roles", MemberRole.allCases.filter(roles.contains).map(\.rawValue).joined(separator: ","))
        }
    }

    public static func decodeMuteMode(_ mode: String, roles: String) throws -> GroupMuteMode {
        switch mode {
        case "none": return .none
        case "all": return .all
        case "ordinary_members": return .ordinaryMembers
        case "roles":
            let parsed = try roles.split(separator: ",").map { try parse(String($0), MemberRole.init(rawValue:)) }
            return .roles(Set(parsed))
        default: throw corrupt("mute_mode", mode)
        }
    }

    // MARK: Members

    /// A stored join-source code.
    public static func joinSource(_ code: Int) throws -> JoinSource {
        guard let source = JoinSource(rawValue: code) else { throw corrupt("join_source", String(code)) }
        return source
    }

    /// The columns ``member(_:at:)`` decodes, in `SELECT` order, from `m.`.
    package static let memberColumns =
        "m.group_key, m.user_id, m.role, m.joined_at, m.join_order, m.join_seq, m.name_card, m.muted_until, "
        + "m.receive_option, m.has_custom, m.join_source, m.inviter_id, m.invite_link_id, m.permission_groups"
    /// ``memberColumns`` for a file before v14 (tests of older files): no invite link.
    package static let memberColumnsBeforeV14 =
        "m.group_key, m.user_id, m.role, m.joined_at, m.join_order, m.join_seq, m.name_card, m.muted_until, "
        + "m.receive_option, m.has_custom, m.join_source, m.inviter_id, NULL, NULL"

    /// ``memberColumns``, or ``memberColumnsBeforeV14`` when the file has no invite links.
    package static func memberColumns(inviteLinks: Bool) -> String { inviteLinks ? memberColumns : memberColumnsBeforeV14 }

    /// How many columns ``memberColumns`` lists.
    package static let memberColumnCount = 14

    /// A member row as read: its group's surrogate key, the member (without custom fields) and
    /// whether it has custom fields.
    public struct MemberRow {
        public var groupKey: Int64
        public var member: Member
        public var hasCustom: Bool

        @inlinable
        public init(groupKey: Int64, member: Member, hasCustom: Bool) {
            self.groupKey = groupKey
            self.member = member
            self.hasCustom = hasCustom
        }
    }

    /// Decode the ``memberColumns`` of a row, starting at column `first`, by index.
    @inlinable
    public static func member(_ row: some ColumnReader, at first: Int = 0) throws -> MemberRow {
        let mutedUntil = try row.optionalInt64(first + 7)
        var member = Member(
            userID: try row.text(first + 1),
            role: try parse(row.text(first + 2), MemberRole.init(rawValue:)),
            joinedAt: Timestamp(millisecondsSince1970: try row.int64(first + 3)),
            joinOrder: try row.int64(first + 4),
            joinSequence: try row.int64(first + 5),
            nameCard: try row.text(first + 6),
            mutedUntil: mutedUntil.map(Timestamp.init(millisecondsSince1970:)), custom: [:],
            receiveOption: try parse(row.text(first + 8), ReceiveOption.init(rawValue:)),
            joinSource: try joinSource(Int(row.int64(first + 10))),
            inviterID: try row.optionalText(first + 11),
            inviteLinkID: try row.optionalText(first + 12))
        member.permissionGroups = PermissionGroupCoding.decodeAssignments(try row.optionalText(first + 13))
        return MemberRow(groupKey: try row.int64(first), member: member, hasCustom: try row.bool(first + 9))
    }

    // MARK: Events

    /// The columns ``event(_:)`` decodes, in `SELECT` order.
    package static let eventColumns =
        "app_id, group_id, seq, kind, time, operator_id, targets, changes, recipient_kind, recipient_user"

    /// Decode a row selected with ``eventColumns``, by index.
    @inlinable
    public static func event(_ row: some ColumnReader) throws -> GroupEvent {
        let recipient: GroupEvent.Recipient
        switch try row.text(8) {
        case "group": recipient = .group
        case "approvers": recipient = .approvers
        case "user": recipient = .user(try row.optionalText(9) ?? "")
        case let other: throw corrupt("recipient_kind", other)
        }
        return GroupEvent(
            appID: try row.text(0), groupID: try row.text(1), sequence: try row.int64(2),
            kind: try parse(row.text(3), GroupEvent.Kind.init(rawValue:)),
            time: Timestamp(millisecondsSince1970: try row.int64(4)), operatorID: try row.optionalText(5),
            targets: try EventJSON.strings(row.text(6)), changes: try EventJSON.object(row.text(7)),
            recipient: recipient)
    }

    // MARK: Helpers

    @inlinable
    public static func parse<T>(_ text: String, _ make: (String) -> T?) throws -> T {
        guard let value = make(text) else { throw corrupt(String(describing: T.self), text) }
        return value
    }

    public static func corrupt(_ what: String, _ value: String) -> GroupError {
        GroupError(code: .dataLoss, reason: .internal, message: "stored \(what) has an unknown value '\(value)'")
    }
}
