import GroupAPI
import GroupModel
import GroupStore

/// ListMessageReplies. A reply is a stored message whose reference names an earlier message of its
/// group (SendGroupMessage's `reply_to_sequence`); `group_messages_by_reply` lists them in order.
extension MessageServiceHandler {
    /// ListMessageReplies: the replies to one message that the caller's history shows (sequences
    /// above their history floor), oldest first, paged. The original need not exist any more (a
    /// recalled or purged original keeps its replies).
    func listMessageReplies(
        _ request: Groupd_V1_ListMessageRepliesRequest, _ call: CallContext
    ) async throws -> Groupd_V1_ListMessageRepliesResponse {
        try GroupdService.requireGroupID(request.groupID)
        let sequence = try GroupRules.messageSequence(request.sequence)
        let size = try GroupdService.pageSize(request.pageSize, fallback: 20, max: 100)
        let after = request.pageToken.isEmpty ? 0 : try RepliesToken.decode(request.pageToken, sequence: sequence)
        let (group, membership) = try await service.loadGroup(call, groupID: request.groupID)
        try GroupRules.checkHistoryKept(group.type)
        let floor = try GroupRules.historyFloor(in: group, by: GroupdService.groupOperator(call.caller, membership: membership))
        let page = try await store.replies(
            app: call.caller.appID, groupID: group.id, to: sequence, after: max(after, floor), limit: size)
        return .with {
            $0.replies = page.messages.map { MessageMapping.message($0) }
            if page.hasMore, let last = page.messages.last {
                $0.nextPageToken = RepliesToken.encode(sequence: sequence, after: last.sequence)
            }
        }
    }
}

/// The page token of ListMessageReplies: the original's sequence and the last listed reply's, as
/// `<sequence base36>.<after base36>`; a token of another message is refused.
enum RepliesToken {
    static func encode(sequence: Int64, after: Int64) -> String {
        String(sequence, radix: 36) + "." + String(after, radix: 36)
    }

    /// - Throws: `INVALID_ARGUMENT` naming `page_token` for anything `encode` did not make for
    ///   the same message.
    static func decode(_ token: String, sequence: Int64) throws -> Int64 {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].count <= 13, parts[1].count <= 13,
            Int64(parts[0], radix: 36) == sequence, let after = Int64(parts[1], radix: 36), after > sequence
        else { throw GroupError.invalidArgument(field: "page_token", "the page token is not valid") }
        return after
    }
}
