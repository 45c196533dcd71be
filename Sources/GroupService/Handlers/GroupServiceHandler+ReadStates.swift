import GroupAPI
import GroupModel
import GroupStore

/// The caller's read position and unread count on group views.
extension GroupServiceHandler {
    /// Fills `read_sequence` and `last_message_time` on the views of groups the caller belongs to
    /// (those with `self_info`), and `unread_count` and `unread_mention` where the type counts
    /// unread messages (Work and Public).
    /// One read for all the views; the backend acting for no user gets nothing filled.
    func fillReadStates(_ views: inout [Groupd_V1_Group], call: CallContext) async throws {
        guard let user = call.caller.operatorID else { return }
        let joined = views.filter { $0.selfInfo != nil }.map(\.groupID)
        if joined.isEmpty { return }
        let reads = try await store.readStates(app: call.caller.appID, userID: user, groupIDs: joined)
        for index in views.indices {
            guard views[index].selfInfo != nil, let read = reads[views[index].groupID] else { continue }
            views[index].readSequence = UInt64(max(read.readSequence, 0))
            if let last = read.lastMessageAt { views[index].lastMessageTime = APIMapping.timestamp(last) }
            let type = try? APIMapping.groupType(views[index].type)
            if let type, GroupRules.showsUnreadCount(type) {
                views[index].unreadCount = UInt32(clamping: read.unreadCount)
                views[index].unreadMention = MessageMapping.unreadMention(read.unreadMention)
            }
        }
    }

    /// Fills `unread_mention` alone (GetGroupsInfo) on the views of Work and Public groups the
    /// caller belongs to: from `known` when the store read them with the groups, otherwise one
    /// indexed read for all of them, none when there is no such view.
    func fillUnreadMentions(
        _ views: inout [Groupd_V1_Group], known: [String: UnreadMention]? = nil, call: CallContext
    ) async throws {
        guard let user = call.caller.operatorID else { return }
        let counted = views.filter {
            $0.selfInfo != nil && (try? APIMapping.groupType($0.type)).map(GroupRules.showsUnreadCount) == true
        }.map(\.groupID)
        if counted.isEmpty { return }
        let mentions = if let known { known } else {
            try await store.unreadMentions(app: call.caller.appID, userID: user, groupIDs: counted)
        }
        let countedIDs = Set(counted)
        for index in views.indices where countedIDs.contains(views[index].groupID) {
            guard let mention = mentions[views[index].groupID] else { continue }
            views[index].unreadMention = MessageMapping.unreadMention(mention)
        }
    }
}
