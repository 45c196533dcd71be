import GroupAPI
import GroupModel
import PolicyHost

/// The policy hook of sending a message. SendGroupMessage and EditGroupMessage call it once,
/// before anything is stored or delivered.
extension MessageServiceHandler {
    /// SendGroupMessage and EditGroupMessage: `before_send_group_message` on `message.text` and
    /// `message.payload` (payload bytes as UTF-8 text), for an edit `message.edit_of` (the
    /// edited message's sequence) and for a reply `message.reply_to` (the sequence it answers);
    /// a rewrite cannot change those two. A reject refuses the send or edit; a rewrite changes
    /// what is stored and delivered.
    /// - Parameters:
    ///   - content: The message's body: its text and payload are what the hook sees, and what a
    ///     rewrite changes.
    ///   - groupID: The group.
    ///   - groupType: The group's type, as the hook's `group_type`.
    ///   - editOf: The sequence of the message an edit replaces the body of (`nil`: a send).
    ///   - replyTo: The sequence of the message a reply answers (`nil`: not a reply).
    ///   - call: The call being checked.
    /// - Returns: `false` when a plugin discarded the message: answer success, store and deliver nothing.
    func checkMessagePolicy(
        _ content: inout MessageContent, groupID: String, groupType: GroupType, editOf: Int64? = nil, replyTo: Int64? = nil,
        _ call: CallContext
    ) async throws -> Bool {
        let type = GroupdService.hookGroupType(groupType)
        var fields: [HookField] = []
        if !content.text.isEmpty { fields.append(HookField("message.text", content.text)) }
        if !content.payload.isEmpty { fields.append(HookField("message.payload", String(decoding: content.payload, as: UTF8.self))) }
        if let editOf { fields.append(HookField("message.edit_of", String(editOf))) }
        if let replyTo { fields.append(HookField("message.reply_to", String(replyTo))) }
        let named = fields
        let verdict = try await service.checkPolicy(
            .beforeSendGroupMessage, call, allowDiscard: true,
            fieldPath: { $0 == "message.text" ? "text" : $0 == "message.payload" ? "payload" : $0 }
        ) {
            HookRequest(groupID: groupID, groupType: type, fields: named)
        }
        if verdict == .discard { return false }
        let changes = verdict.changes
        content.text = GroupdService.rewritten("message.text", content.text, changes)
        if let payload = changes["message.payload"] { content.payload = Array((payload ?? "").utf8) }
        return true
    }
}
