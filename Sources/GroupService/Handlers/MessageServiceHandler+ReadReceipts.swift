import GroupAPI
import GroupModel
import GroupStore

/// MessageService: GetMessageReadReceipts, and what MarkGroupRead adds to the senders' batches of
/// `MESSAGE_READ_RECEIPT` events (``GroupdService/flushReadReceipts()`` reports them). Receipts are
/// derived from the members' read positions (`MarkGroupRead`): a member read message `s` when
/// their position is at or past `s`; no row is kept per reader.
extension MessageServiceHandler {
    /// The most messages a single `MarkGroupRead` reports receipts for: the latest ones it
    /// covers (a reader catching up on a long backlog reports the recent end of it).
    static let readReceiptScanLimit = 100

    /// GetMessageReadReceipts: who read message `sequence` and who has not, paged by user id.
    func getMessageReadReceipts(
        _ request: Groupd_V1_GetMessageReadReceiptsRequest, _ call: CallContext
    ) async throws -> Groupd_V1_GetMessageReadReceiptsResponse {
        try GroupdService.requireGroupID(request.groupID)
        let sequence = try GroupRules.messageSequence(request.sequence)
        let unread: Bool
        switch request.filter {
        case .unspecified, .read: unread = false
        case .unread: unread = true
        case .UNRECOGNIZED(let value): throw GroupError.invalidArgument(field: "filter", "unknown filter \(value)")
        }
        let limits = call.limits
        let size = try GroupdService.pageSize(request.pageSize, fallback: min(50, limits.maxPageSize), max: limits.maxPageSize)
        let after = request.pageToken.isEmpty ? nil : try ReceiptToken.decode(request.pageToken, unread: unread)
        let (group, membership) = try await service.loadGroup(call, groupID: request.groupID)
        let op = GroupdService.groupOperator(call.caller, membership: membership)
        try GroupRules.checkReadReceipts(in: group, by: op, limits: limits)
        let message = try await readableMessage(sequence, in: group, by: op, call: call)
        let positions = try await store.readPositions(app: call.caller.appID, groupID: group.id)
        let readers = GroupRules.readers(of: sequence, sentBy: message.senderID, positions: positions)
        let listed = unread ? readers.unread : readers.read
        let start = after.map { last in listed.firstIndex { $0 > last } ?? listed.count } ?? 0
        let page = Array(listed[start..<min(listed.count, start + size)])
        return .with {
            $0.userIds = page
            $0.readCount = UInt32(clamping: readers.read.count)
            $0.unreadCount = UInt32(clamping: readers.unread.count)
            if start + size < listed.count, let last = page.last {
                $0.nextPageToken = ReceiptToken.encode(last, unread: unread)
            }
        }
    }

    /// After a reader's position moved from `from` to `to`: adds the messages it covers (the
    /// latest ``readReceiptScanLimit``, from after the reader's join, not their own) to their
    /// senders' receipt batches.
    func noteReadReceipts(
        app: String, group: Group, reader: String, from: Int64, to: Int64, limits: AppLimits
    ) async throws {
        let page = try await store.messages(
            app: app, groupID: group.id, range: MessageRange(direction: .older, anchor: to + 1, floor: from),
            limit: Self.readReceiptScanLimit)
        var bySender: [String: [Int64]] = [:]
        for message in page.messages where message.senderID != reader {
            bySender[message.senderID, default: []].append(message.sequence)
        }
        let now = clock.now()
        for (sender, sequences) in bySender {
            readReceipts.note(
                app: app, groupID: group.id, sender: sender, sequences: sequences, now: now,
                intervalMilliseconds: limits.readReceiptIntervalMilliseconds)
        }
    }
}

/// The page token of GetMessageReadReceipts: the filter and the last listed user id, as
/// `r.<hex>` (read) or `u.<hex>` (unread) (`UserIDToken`).
enum ReceiptToken {
    static func encode(_ user: String, unread: Bool) -> String {
        (unread ? "u." : "r.") + UserIDToken.hex(user)
    }

    /// - Throws: `INVALID_ARGUMENT` naming `page_token` for anything `encode` did not make for
    ///   the same filter.
    static func decode(_ token: String, unread: Bool) throws -> String {
        guard token.hasPrefix(unread ? "u." : "r.") else { throw UserIDToken.invalid }
        return try UserIDToken.userID(hex: token.dropFirst(2))
    }
}
