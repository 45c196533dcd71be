import GroupModel
import Testing

private func group(_ type: GroupType) -> Group {
    Group(
        appID: "app", id: "g1", type: type, name: "room", settings: type.preset.defaultSettings, ownerID: "owner",
        maxMembers: nil, createdAt: now, updatedAt: now, latestSequence: 10)
}

private func sender(joinSequence: Int64 = 0) -> GroupOperator {
    .user("carol", membership: Member(userID: "carol", role: .member, joinedAt: now, joinSequence: joinSequence, nameCard: ""))
}

private func original(seq: Int64 = 5, text: String = "the plan", recall: MessageRecall? = nil) -> GroupMessage {
    GroupMessage(
        appID: "app", groupID: "g1", sequence: seq, messageID: "m\(seq)", senderID: "bob",
        content: MessageContent(type: "text", text: text), time: now, recall: recall)
}

/// The refusal `body` throws: its reason and its `field` metadata.
private func refusal(_ body: () throws -> MessageReference) -> (reason: String, field: String?) {
    do {
        _ = try body()
        return ("ok", nil)
    } catch let error as GroupError {
        return (error.reason.rawValue, error.metadata["field"])
    } catch {
        return ("\(error)", nil)
    }
}

@Suite("Message replies: the reference and its refusals")
struct MessageReplyRuleTests {
    @Test("a reply to a message the sender may read holds its snapshot: sender, type, the start of its text")
    func reference() throws {
        for type in [GroupType.work, .public, .meeting] {
            let reference = try GroupRules.planReply(to: original(), sequence: 5, in: group(type), by: sender())
            #expect(reference == MessageReference(sequence: 5, messageID: "m5", senderID: "bob", type: "text", preview: "the plan"))
        }
        // A Meeting member sees history from before joining.
        let late = try GroupRules.planReply(to: original(), sequence: 5, in: group(.meeting), by: sender(joinSequence: 8))
        #expect(late.sequence == 5)
    }

    @Test("the preview keeps the first 100 characters (grapheme clusters), whatever their bytes")
    func preview() {
        #expect(GroupRules.replyPreview(of: "") == "")
        let exact = String(repeating: "a", count: 100)
        #expect(GroupRules.replyPreview(of: exact) == exact)
        #expect(GroupRules.replyPreview(of: exact + "b") == exact)
        let family = "👨‍👩‍👧"
        let long = String(repeating: family, count: 150)
        #expect(GroupRules.replyPreview(of: long) == String(repeating: family, count: 100))
        #expect(GroupRules.replyPreview(of: long).count == GroupRules.replyPreviewCharacters)
    }

    @Test("refusals name reply_to_sequence: no such message, one from before a Work or Public member joined, a recalled one; AVChatRoom keeps no history; non-members are refused by membership")
    func refusals() {
        let recalled = original(recall: MessageRecall(by: "bob", time: now))
        #expect(refusal { try GroupRules.planReply(to: nil, sequence: 5, in: group(.public), by: sender()) }
            == ("MESSAGE_NOT_FOUND", "reply_to_sequence"))
        for type in [GroupType.work, .public] {
            #expect(refusal { try GroupRules.planReply(to: original(), sequence: 5, in: group(type), by: sender(joinSequence: 8)) }
                == ("MESSAGE_NOT_FOUND", "reply_to_sequence"))
        }
        #expect(refusal { try GroupRules.planReply(to: recalled, sequence: 5, in: group(.work), by: sender()) }
            == ("MESSAGE_RECALLED", "reply_to_sequence"))
        #expect(refusal { try GroupRules.planReply(to: original(), sequence: 5, in: group(.avChatRoom), by: sender()) }.reason
            == "HISTORY_NOT_KEPT")
        #expect(refusal {
            try GroupRules.planReply(to: original(), sequence: 5, in: group(.public), by: .user("dave", membership: nil))
        }.reason == "NOT_A_MEMBER")
    }
}
