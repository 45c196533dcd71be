extension GroupRules {
    /// A message sequence from a request: 1 or more.
    /// - Throws: `INVALID_ARGUMENT` naming `field` for 0 or a value past `Int64.max`.
    public static func messageSequence(_ value: UInt64, field: String = "sequence") throws -> Int64 {
        guard value > 0, value <= UInt64(Int64.max) else {
            throw GroupError.invalidArgument(field: field, "\(field) must name a message (1 or more)")
        }
        return Int64(value)
    }

    /// The refusal of a sequence that names no stored message the caller may read
    /// (`MESSAGE_NOT_FOUND`, `NOT_FOUND`, metadata `field` and `sequence`).
    public static func messageNotFound(_ sequence: Int64, field: String = "sequence") -> GroupError {
        GroupError(
            code: .notFound, reason: .messageNotFound, message: "no message \(sequence) in the group",
            metadata: ["field": field, "sequence": String(sequence)])
    }

    /// Plan a `PinGroupMessage`: append a pin of message `sequence` (checked to exist by the
    /// caller) to the group's pins, with a `MESSAGE_PINNED` tip.
    ///
    /// The order of checks: the permission (``authorize(_:type:settings:actor:)`` with
    /// ``GroupAction/pinMessage``: `HISTORY_NOT_KEPT`, `NOT_A_MEMBER`, `PERMISSION_DENIED` with
    /// `setting` `pin_permission`), a pin of the same message (`MESSAGE_ALREADY_PINNED`), the
    /// app's limit (`TOO_MANY_PINNED_MESSAGES` with `limit`).
    public static func planPin(
        sequence: Int64, in group: Group, by op: GroupOperator, limits: AppLimits, now: Timestamp
    ) throws -> GroupChange {
        try authorize(.pinMessage, in: group, by: op).get()
        if group.pins.contains(where: { $0.sequence == sequence }) {
            throw GroupError(
                code: .alreadyExists, reason: .messageAlreadyPinned, message: "message \(sequence) is pinned already",
                metadata: ["field": "sequence", "sequence": String(sequence)])
        }
        if group.pins.count >= limits.maxPinnedMessages {
            throw GroupError(
                code: .failedPrecondition, reason: .tooManyPinnedMessages,
                message: "the group holds \(group.pins.count) pinned messages, the limit is \(limits.maxPinnedMessages)",
                metadata: ["limit": String(limits.maxPinnedMessages)])
        }
        var after = group
        let pin = PinnedMessage(sequence: sequence, pinnedBy: op.userID, pinnedAt: now)
        after.pins.append(pin)
        return GroupChange(group: after, events: [
            GroupEvent.Draft(kind: .messagePinned, operatorID: op.userID, changes: pin.changes),
        ])
    }

    /// Plan an `UnpinGroupMessage`: remove the pin of message `sequence`, with a
    /// `MESSAGE_UNPINNED` tip carrying the removed pin.
    /// - Throws: As ``planPin(sequence:in:by:limits:now:)`` for the permission;
    ///   `MESSAGE_NOT_PINNED` (`NOT_FOUND`) when the message is not pinned.
    public static func planUnpin(sequence: Int64, in group: Group, by op: GroupOperator) throws -> GroupChange {
        try authorize(.pinMessage, in: group, by: op).get()
        guard let index = group.pins.firstIndex(where: { $0.sequence == sequence }) else {
            throw GroupError(
                code: .notFound, reason: .messageNotPinned, message: "message \(sequence) is not pinned",
                metadata: ["field": "sequence", "sequence": String(sequence)])
        }
        var after = group
        let removed = after.pins.remove(at: index)
        return GroupChange(group: after, events: [
            GroupEvent.Draft(kind: .messageUnpinned, operatorID: op.userID, changes: removed.changes),
        ])
    }
}

/// How stored pins are written in one text column: `sequence:pinned_at_ms:pinned_by` entries
/// separated by newlines (`pinned_by` empty for the backend; user ids hold no newline).
public enum PinnedMessageCoding {
    /// The pins as stored text ("" for none).
    public static func encode(_ pins: [PinnedMessage]) -> String {
        pins.map { "\($0.sequence):\($0.pinnedAt.millisecondsSince1970):\($0.pinnedBy ?? "")" }.joined(separator: "\n")
    }

    /// The pins stored as `text`, or `nil` when it is malformed.
    public static func decode(_ text: String) -> [PinnedMessage]? {
        if text.isEmpty { return [] }
        var pins: [PinnedMessage] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let parts = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3, let sequence = Int64(parts[0]), let at = Int64(parts[1]) else { return nil }
            pins.append(PinnedMessage(
                sequence: sequence, pinnedBy: parts[2].isEmpty ? nil : String(parts[2]),
                pinnedAt: Timestamp(millisecondsSince1970: at)))
        }
        return pins
    }
}
