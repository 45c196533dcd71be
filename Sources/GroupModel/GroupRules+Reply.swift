extension GroupRules {
    /// How many characters (extended grapheme clusters) of an original's text a reply's snapshot
    /// keeps (``MessageReference/preview``).
    public static let replyPreviewCharacters = 100

    /// The preview of a text a reply's snapshot keeps: its first ``replyPreviewCharacters``
    /// characters.
    public static func replyPreview(of text: String) -> String {
        text.count <= replyPreviewCharacters ? text : String(text.prefix(replyPreviewCharacters))
    }

    /// The reference a message sent by `op` to `group` holds when it replies to the stored message
    /// `sequence`, checked after the send rule (``checkSend(_:in:by:now:lastSent:)``).
    ///
    /// The original is a message the sender may read (``readableMessage(_:sequence:in:by:field:)``:
    /// `HISTORY_NOT_KEPT`, `MESSAGE_NOT_FOUND` naming `reply_to_sequence`) and not recalled
    /// (`MESSAGE_RECALLED` naming `reply_to_sequence`).
    /// - Parameters:
    ///   - original: The stored message with that sequence (`nil`: none).
    ///   - sequence: The request's `reply_to_sequence`.
    ///   - group: The group as stored.
    ///   - op: The sender and their membership.
    /// - Returns: The reference, its snapshot taken from `original`.
    public static func planReply(
        to original: GroupMessage?, sequence: Int64, in group: Group, by op: GroupOperator
    ) throws -> MessageReference {
        let field = "reply_to_sequence"
        let message = try readableMessage(original, sequence: sequence, in: group, by: op, field: field)
        if message.recall != nil { throw recalledRefusal(sequence, field: field) }
        return MessageReference(to: message)
    }
}
