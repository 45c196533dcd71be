import Foundation
import GRDB
import GroupModel

/// Mapping between rows and domain values, and the inserts shared by several mutations.
enum Rows {
    static func placeholders(_ count: Int) -> String {
        Array(repeating: "?", count: count).joined(separator: ", ")
    }

    // MARK: Groups

    static func groupInsertValues(_ group: Group, nextJoinOrder: Int) -> [(any DatabaseValueConvertible)?] {
        let s = group.settings
        let (mode, roles) = encode(group.mute.mode)
        return [
            group.appID, group.id, group.type.rawValue, group.name, group.introduction,
            group.notification, group.faceURL, group.ownerID, group.maxMembers, group.memberCount,
            s.joinOption.rawValue, s.joinApprovers.rawValue, s.invitePermission.rawValue,
            s.inviteeMustAccept, s.invitationNeedsApproval, s.removeMembersPermission.rawValue,
            s.editProfilePermission.rawValue, s.editMemberInfoPermission.rawValue,
            mode, roles, group.mute.until?.millisecondsSince1970,
            group.createdAt.millisecondsSince1970, group.updatedAt.millisecondsSince1970,
            nextJoinOrder,
        ]
    }

    static func group(_ row: Row) throws -> Group {
        let settings = GroupSettings(
            joinOption: try parse(row["join_option"], JoinOption.init(rawValue:)),
            joinApprovers: try parse(row["join_approvers"], ApproverSet.init(rawValue:)),
            invitePermission: try parse(row["invite_permission"], OperationPermission.init(rawValue:)),
            inviteeMustAccept: row["invitee_must_accept"],
            invitationNeedsApproval: row["invitation_needs_approval"],
            removeMembersPermission: try parse(row["remove_members_permission"], OperationPermission.init(rawValue:)),
            editProfilePermission: try parse(row["edit_profile_permission"], OperationPermission.init(rawValue:)),
            editMemberInfoPermission: try parse(
                row["edit_member_info_permission"], MemberInfoEditPermission.init(rawValue:)))
        let muteUntil: Int64? = row["mute_until"]
        return Group(
            appID: row["app_id"], id: row["group_id"],
            type: try parse(row["type"], GroupType.init(rawValue:)),
            name: row["name"], introduction: row["introduction"], notification: row["notification"],
            faceURL: row["face_url"], settings: settings, ownerID: row["owner_id"],
            maxMembers: row["max_members"], memberCount: row["member_count"],
            createdAt: Timestamp(millisecondsSince1970: row["created_at"]),
            updatedAt: Timestamp(millisecondsSince1970: row["updated_at"]),
            custom: [:], latestSequence: row["latest_seq"],
            mute: GroupMuteState(
                mode: try decodeMuteMode(row["mute_mode"], roles: row["mute_roles"]),
                until: muteUntil.map(Timestamp.init(millisecondsSince1970:))))
    }

    static func encode(_ mode: GroupMuteMode) -> (mode: String, roles: String) {
        switch mode {
        case .none: ("none", "")
        case .all: ("all", "")
        case .ordinaryMembers: ("ordinary_members", "")
        case .roles(let roles):
            ("roles", MemberRole.allCases.filter(roles.contains).map(\.rawValue).joined(separator: ","))
        }
    }

    static func decodeMuteMode(_ mode: String, roles: String) throws -> GroupMuteMode {
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

    static func insert(_ member: Member, groupKey: Int64, appID: String, db: Database) throws {
        try db.execute(
            sql: """
                INSERT INTO members (
                    group_key, user_id, app_id, role, join_order, join_seq, joined_at, name_card,
                    muted_until, receive_option)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                groupKey, member.userID, appID, member.role.rawValue, member.joinOrder,
                member.joinSequence, member.joinedAt.millisecondsSince1970, member.nameCard,
                member.mutedUntil?.millisecondsSince1970, member.receiveOption.rawValue,
            ])
        for (key, value) in member.custom {
            try db.execute(
                sql: "INSERT INTO member_custom (group_key, user_id, key, value) VALUES (?, ?, ?, ?)",
                arguments: [groupKey, member.userID, key, Data(value)])
        }
    }

    static func member(_ row: Row) throws -> Member {
        let mutedUntil: Int64? = row["muted_until"]
        return Member(
            userID: row["user_id"], role: try parse(row["role"], MemberRole.init(rawValue:)),
            joinedAt: Timestamp(millisecondsSince1970: row["joined_at"]), joinOrder: row["join_order"],
            joinSequence: row["join_seq"], nameCard: row["name_card"],
            mutedUntil: mutedUntil.map(Timestamp.init(millisecondsSince1970:)), custom: [:],
            receiveOption: try parse(row["receive_option"], ReceiveOption.init(rawValue:)))
    }

    // MARK: Events

    /// Number `drafts` after `sequence`, insert them and move the group's `latest_seq`.
    /// Must run inside the mutation's write transaction.
    static func appendEvents(
        _ drafts: [GroupEvent.Draft], groupKey: Int64, appID: String, groupID: String, after sequence: Int64,
        time: Timestamp, db: Database
    ) throws -> [GroupEvent] {
        var events: [GroupEvent] = []
        events.reserveCapacity(drafts.count)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        for (offset, draft) in drafts.enumerated() {
            let event = GroupEvent(
                draft: draft, appID: appID, groupID: groupID, sequence: sequence + Int64(offset) + 1, time: time)
            let (recipientKind, recipientUser): (String, String?) =
                switch event.recipient {
                case .group: ("group", nil)
                case .user(let user): ("user", user)
                case .approvers: ("approvers", nil)
                }
            try db.execute(
                sql: """
                    INSERT INTO group_events (
                        app_id, group_key, group_id, seq, kind, time, operator_id, targets, changes,
                        recipient_kind, recipient_user)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    appID, groupKey, groupID, event.sequence, event.kind.rawValue,
                    time.millisecondsSince1970, event.operatorID,
                    String(decoding: try encoder.encode(event.targets), as: UTF8.self),
                    String(decoding: try encoder.encode(event.changes), as: UTF8.self),
                    recipientKind, recipientUser,
                ])
            events.append(event)
        }
        if let last = events.last {
            try db.execute(
                sql: "UPDATE groups SET latest_seq = ? WHERE group_key = ?", arguments: [last.sequence, groupKey])
        }
        return events
    }

    static func event(_ row: Row) throws -> GroupEvent {
        let decoder = JSONDecoder()
        let targets: String = row["targets"]
        let changes: String = row["changes"]
        let recipient: GroupEvent.Recipient
        switch row["recipient_kind"] as String {
        case "group": recipient = .group
        case "approvers": recipient = .approvers
        case "user": recipient = .user(row["recipient_user"] ?? "")
        case let other: throw corrupt("recipient_kind", other)
        }
        return GroupEvent(
            appID: row["app_id"], groupID: row["group_id"], sequence: row["seq"],
            kind: try parse(row["kind"], GroupEvent.Kind.init(rawValue:)),
            time: Timestamp(millisecondsSince1970: row["time"]), operatorID: row["operator_id"],
            targets: try decoder.decode([String].self, from: Data(targets.utf8)),
            changes: try decoder.decode([String: String].self, from: Data(changes.utf8)),
            recipient: recipient)
    }

    // MARK: Helpers

    static func parse<T>(_ text: String, _ make: (String) -> T?) throws -> T {
        guard let value = make(text) else { throw corrupt(String(describing: T.self), text) }
        return value
    }

    static func corrupt(_ what: String, _ value: String) -> GroupError {
        GroupError(code: .dataLoss, reason: .internal, message: "stored \(what) has an unknown value '\(value)'")
    }
}
