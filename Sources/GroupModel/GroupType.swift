/// The group types of Tencent Cloud IM V2: the four classic ones and Community. Each is a preset
/// of ``GroupSettings`` plus fixed behaviours; see ``GroupTypePreset`` for the table.
public enum GroupType: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// A work group, like an ordinary WeChat group: join by invitation only. Legacy name `Private`.
    case work = "Work"
    /// A social group, like a QQ group: join by application, approved by owner or admins.
    case `public` = "Public"
    /// A temporary meeting group: join and leave freely, history visible from before joining.
    /// Legacy name `ChatRoom`.
    case meeting = "Meeting"
    /// A live-streaming room: free join, unlimited members kept in memory, no history.
    case avChatRoom = "AVChatRoom"
    /// A community: a large group (100,000 members by default) that keeps history, with admins;
    /// anyone joins without approval by default (its `joinOption` may ask for approval instead).
    case community = "Community"

    /// Parse a type name as clients send it: the V2 names (`Work`, `Public`, `Meeting`,
    /// `AVChatRoom`, `Community`) and the legacy ones (`Private` → ``work``, `ChatRoom` → ``meeting``),
    /// ignoring ASCII case.
    /// - Returns: `nil` for any other name (including `BChatRoom`, which groupd does not offer).
    public init?(name: String) {
        switch name.lowercased() {
        case "work", "private": self = .work
        case "public": self = .public
        case "meeting", "chatroom": self = .meeting
        case "avchatroom": self = .avChatRoom
        case "community": self = .community
        default: return nil
        }
    }

    /// The canonical V2 name: `Work`, `Public`, `Meeting`, `AVChatRoom` or `Community`.
    public var name: String { self.rawValue }

    /// The canonical V2 name.
    public var description: String { self.rawValue }

    /// The type's preset: default settings, settings the type fixes, fixed behaviours.
    public var preset: GroupTypePreset { GroupTypePreset.of(self) }
}

/// The role of a member inside one group.
public enum MemberRole: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// The one owner of the group (groups created by the backend of type AVChatRoom may have none).
    case owner
    /// An administrator appointed by the owner (Public and Meeting only).
    case admin
    /// An ordinary member.
    case member

    /// Higher ranks may act on lower ones: owner 2, admin 1, member 0.
    public var rank: Int {
        switch self {
        case .owner: 2
        case .admin: 1
        case .member: 0
        }
    }

    /// `owner`, `admin` or `member`.
    public var description: String { self.rawValue }
}
