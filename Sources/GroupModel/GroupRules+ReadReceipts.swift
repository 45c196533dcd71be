/// One member's read position in a group, as read receipts need it.
public struct MemberReadPosition: Sendable, Hashable {
    /// The member.
    public var userID: String
    /// The group's sequence at their join (``Member/joinSequence``).
    public var joinSequence: Int64
    /// Their read position (`MarkGroupRead`; 0 before any).
    public var readSequence: Int64

    /// Create a position.
    public init(userID: String, joinSequence: Int64, readSequence: Int64) {
        self.userID = userID
        self.joinSequence = joinSequence
        self.readSequence = readSequence
    }
}

/// The read count of one message, as a `MESSAGE_READ_RECEIPT` event lists it.
public struct ReadReceiptCount: Sendable, Hashable {
    /// The message's sequence.
    public var sequence: Int64
    /// Members who read it.
    public var readCount: Int
    /// Members who have not.
    public var unreadCount: Int

    /// Create a count.
    public init(sequence: Int64, readCount: Int, unreadCount: Int) {
        self.sequence = sequence
        self.readCount = readCount
        self.unreadCount = unreadCount
    }

    /// Counts as an event's `changes["receipts"]`: `sequence:read:unread` entries joined by `,`.
    public static func encode(_ counts: [ReadReceiptCount]) -> String {
        counts.map { "\($0.sequence):\($0.readCount):\($0.unreadCount)" }.joined(separator: ",")
    }

    /// The counts of ``encode(_:)`` (malformed entries are skipped).
    public static func decode(_ text: String) -> [ReadReceiptCount] {
        text.split(separator: ",").compactMap { entry in
            let parts = entry.split(separator: ":")
            guard parts.count == 3, let s = Int64(parts[0]), let r = Int(parts[1]), let u = Int(parts[2]) else { return nil }
            return ReadReceiptCount(sequence: s, readCount: r, unreadCount: u)
        }
    }
}

extension GroupRules {
    /// Check that the operator may read per-message receipts of `group`: members and the backend
    /// of Work and Public groups (``GroupAction/readReceipts``) of at most
    /// ``AppLimits/readReceiptMaxMembers`` members.
    /// - Throws: `HISTORY_NOT_KEPT` (AVChatRoom); `READ_RECEIPTS_NOT_SUPPORTED`
    ///   (`FAILED_PRECONDITION`, metadata `group_type`, and `limit` when over the member limit);
    ///   `GROUP_NOT_FOUND` / `NOT_A_MEMBER` for a non-member.
    public static func checkReadReceipts(in group: Group, by op: GroupOperator, limits: AppLimits) throws {
        try authorize(.readReceipts, in: group, by: op).get()
        if !readReceiptsKept(group, limits: limits) {
            throw GroupError(
                code: .failedPrecondition, reason: .readReceiptsNotSupported,
                message: "read receipts are kept for groups of at most \(limits.readReceiptMaxMembers) members",
                metadata: ["group_type": group.type.name, "limit": String(limits.readReceiptMaxMembers)])
        }
    }

    /// Whether `group` has per-message read receipts: Work and Public (the types that count
    /// unread messages) of at most ``AppLimits/readReceiptMaxMembers`` members.
    public static func readReceiptsKept(_ group: Group, limits: AppLimits) -> Bool {
        group.type.preset.behaviour.unreadCounting && group.memberCount <= limits.readReceiptMaxMembers
    }

    /// Who read message `sequence` sent by `senderID` and who has not, each ascending by user id.
    /// A member read it when their read position is at or past it; the sender and members who
    /// joined after it (join sequence at or past it) are in neither list.
    public static func readers(
        of sequence: Int64, sentBy senderID: String, positions: [MemberReadPosition]
    ) -> (read: [String], unread: [String]) {
        var read: [String] = []
        var unread: [String] = []
        for position in counted(of: sequence, sentBy: senderID, positions) {
            if position.readSequence >= sequence { read.append(position.userID) } else { unread.append(position.userID) }
        }
        return (read.sorted(), unread.sorted())
    }

    /// The read count of message `sequence` sent by `senderID` (``readers(of:sentBy:positions:)``).
    public static func readCount(
        of sequence: Int64, sentBy senderID: String, positions: [MemberReadPosition]
    ) -> ReadReceiptCount {
        var read = 0
        var unread = 0
        for position in counted(of: sequence, sentBy: senderID, positions) {
            if position.readSequence >= sequence { read += 1 } else { unread += 1 }
        }
        return ReadReceiptCount(sequence: sequence, readCount: read, unreadCount: unread)
    }

    /// The members a receipt of message `sequence` counts: not its sender, and joined before it.
    private static func counted(
        of sequence: Int64, sentBy senderID: String, _ positions: [MemberReadPosition]
    ) -> LazyFilterSequence<[MemberReadPosition]> {
        positions.lazy.filter { $0.userID != senderID && $0.joinSequence < sequence }
    }

    /// The `MESSAGE_READ_RECEIPT` to `senderID`: the current counts of their messages
    /// `sequences`, ascending (none when the sender is no longer a member or nothing is listed).
    public static func planReadReceipt(
        to senderID: String, sequences: [Int64], positions: [MemberReadPosition]
    ) -> GroupEvent.Draft? {
        guard !sequences.isEmpty, positions.contains(where: { $0.userID == senderID }) else { return nil }
        let counts = Set(sequences).sorted().map { readCount(of: $0, sentBy: senderID, positions: positions) }
        return GroupEvent.Draft(
            kind: .messageReadReceipt, operatorID: nil, changes: ["receipts": ReadReceiptCount.encode(counts)],
            recipient: .user(senderID))
    }
}
