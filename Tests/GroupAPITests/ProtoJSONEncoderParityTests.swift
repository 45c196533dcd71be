@testable import GroupAPI
import Testing

/// The byte encoder against the old `JSONValue` one (``ReferenceProtoJSON``): the same text, byte
/// for byte, compact and pretty, or the same failure.
@Suite("ProtoJSON byte encoder matches the old encoder")
struct ProtoJSONEncoderParityTests {
    /// Both encoders' output for the same bytes, compact and pretty.
    static func expectSame(_ bytes: [UInt8], _ name: String, sourceLocation: SourceLocation = #_sourceLocation) {
        for pretty in [false, true] {
            let old: Result<String?, ProtoDecodingError> = Result { () throws(ProtoDecodingError) in
                try ReferenceProtoJSON.encode(serializedBytes: bytes, messageName: name, pretty: pretty)
            }
            let new: Result<[UInt8]?, ProtoDecodingError> = Result { () throws(ProtoDecodingError) in
                try ProtoJSON.encodeBytes(serializedBytes: bytes, messageName: name, pretty: pretty)
            }
            switch (old, new) {
            case (.success(let old), .success(let new)):
                #expect(new.map { String(decoding: $0, as: UTF8.self) } == old, "\(name) pretty: \(pretty)", sourceLocation: sourceLocation)
                if let old, let new {
                    #expect(Array(old.utf8) == new, sourceLocation: sourceLocation)
                }
            case (.failure, .failure):
                break
            default:
                Issue.record("\(name): old \(old), new \(new)", sourceLocation: sourceLocation)
            }
        }
    }

    static func expectSame<M: ProtoMessage>(_ message: M, sourceLocation: SourceLocation = #_sourceLocation) {
        expectSame(message.serializedBytes(), M.protoMessageName, sourceLocation: sourceLocation)
    }

    @Test("every generated example", arguments: Examples.all)
    func examples(_ example: Example) {
        Self.expectSame(example.message.serializedBytes(), example.name)
    }

    @Test("every message of the registry at its default, and the handle per name")
    func registryDefaults() throws {
        for name in DescriptorRegistry.shared.descriptors.keys {
            Self.expectSame([], name)
            let handle = try #require(ProtoJSON.Message(named: name))
            #expect(handle.name == name)
            #expect(try handle.encode(serializedBytes: []) == ProtoJSON.encodeBytes(serializedBytes: [], messageName: name))
        }
        let group = try #require(ProtoJSON.Message(named: "groupd.v1.Group"))
        let json = Array(#"{"groupId":"g"}"#.utf8)
        #expect(try json.withUnsafeBytes { try group.decode(json: $0) } == [0x0A, 0x01, 0x67])
        #expect(ProtoJSON.Message(named: "no.such.Message") == nil)
        #expect(try ProtoJSON.encodeBytes(serializedBytes: [], messageName: "no.such.Message") == nil)
    }

    @Test("a full GetGroupsInfoResponse")
    func fullGroup() {
        Self.expectSame(ProtoJSONFixtures.groupsInfo())
    }

    @Test("strings: escapes, control characters, non-ASCII, U+2028/U+2029, empty")
    func strings() {
        let texts = [
            "", "plain", "quote \" backslash \\ slash /", "\n\r\t\u{08}\u{0C}", "\u{01}\u{1F}\u{7F}\u{80}",
            "é漢字😀", "a\u{2028}b\u{2029}c", "\u{2027}\u{202A}", "\u{FFFD}\u{10FFFF}", String(repeating: "x", count: 5000) + "\"",
        ]
        for text in texts {
            Self.expectSame(Groupd_V1_GroupProfile.with { $0.name = text; $0.faceURL = text + "!" })
            Self.expectSame(Groupd_V1_Group.with { $0.custom = [text: Array(text.utf8)]; $0.muteBypassUserIds = [text, "", text] })
        }
    }

    @Test("strings that are not UTF-8 are written as String(cString:) repairs them")
    func invalidUTF8() {
        let contents: [[UInt8]] = [
            [0xFF], [0xC3, 0x28], [0xE2, 0x80], [0xE2, 0x80, 0x41], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80],
            [0xC0, 0xAF], [0xE0, 0x80, 0xAF], [0xF0, 0x8F, 0xBF, 0xBF], [0x61, 0x80, 0x62], [0xF0, 0x9F, 0x98], [0xE2, 0x80, 0xA8, 0xFF],
        ]
        for content in contents {
            // GroupProfile.name (field 1), raw.
            Self.expectSame([0x0A, UInt8(content.count)] + content, "groupd.v1.GroupProfile")
        }
    }

    @Test("random strings, timestamps and durations")
    func random() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let count = Int.random(in: 0..<24, using: &generator)
            let alphabet: [UInt8] = [0x00, 0x01, 0x0A, 0x1F, 0x20, 0x22, 0x41, 0x5C, 0x7F, 0x80, 0xA8, 0xBF, 0xC3, 0xA9, 0xE2, 0xED, 0xF0, 0xF4, 0x9F, 0xFF]
            let content = (0..<count).map { _ in
                Bool.random(using: &generator) ? alphabet.randomElement(using: &generator)! : UInt8.random(in: 0...255, using: &generator)
            }
            Self.expectSame([0x0A, UInt8(count)] + content, "groupd.v1.GroupProfile")
            let seconds = Int64.random(in: -62_135_596_800...253_402_300_799, using: &generator)
            let nanos = [0, 1_000_000, 1_000, 1].randomElement(using: &generator)! * Int32.random(in: 0..<1_000, using: &generator)
            Self.expectSame(Google_Protobuf_Timestamp.with { $0.seconds = seconds; $0.nanos = nanos })
            let sign: Int64 = Bool.random(using: &generator) ? 1 : -1
            let durationSeconds = sign * Int64.random(in: 0...315_576_000_000, using: &generator)
            let durationNanos = Int32(sign) * Int32.random(in: 0..<1_000_000_000, using: &generator)
            Self.expectSame(Google_Protobuf_Duration.with { $0.seconds = durationSeconds; $0.nanos = durationNanos })
        }
    }

    @Test("integer extremes, unknown enum values, maps of int64, repeated enums")
    func numbers() {
        for value in [Int64.min, -1, 0, 1, Int64.max] {
            Self.expectSame(Groupd_V1_IncrementGroupCountersRequest.with { $0.groupID = "g"; $0.deltas = ["a": value, "b": ~value] })
            Self.expectSame(Groupd_V1_AttributeWrite.with { $0.expectedVersion = value })
        }
        for value in [UInt64.max, 1, 0] {
            Self.expectSame(Groupd_V1_Group.with { $0.latestSequence = value; $0.readSequence = value; $0.memberCount = UInt32(truncatingIfNeeded: value) })
        }
        for raw: Int32 in [-2_147_483_648, -1, 0, 1, 77, 1023, 1024, 2_147_483_647] {
            Self.expectSame(Groupd_V1_Group.with { $0.type = Groupd_V1_GroupType(rawValue: raw)! })
            Self.expectSame(Groupd_V1_GroupMuteState.with { $0.roles = [Groupd_V1_MemberRole(rawValue: raw)!, .owner] })
        }
    }

    @Test("oneofs, empty nested messages, Any of known, google.protobuf and unknown types")
    func oneofsAndAny() {
        Self.expectSame(Groupd_V1_SubscribeResponse.with { $0.item = .caughtUp(Groupd_V1_CaughtUp()); $0.cursor = "c1" })
        Self.expectSame(Groupd_V1_Group.with { $0.profile = Groupd_V1_GroupProfile(); $0.settings = Groupd_V1_GroupSettings() })
        var info = Google_Rpc_ErrorInfo()
        info.reason = "GROUP_NOT_FOUND"
        info.metadata = ["field": "group_id", "quote\"": "\u{2028}"]
        let timestamp = Google_Protobuf_Timestamp.with { $0.seconds = 1; $0.nanos = 5 }
        var status = Google_Rpc_Status()
        status.code = 5
        status.message = "no such group"
        status.details = [
            Google_Protobuf_Any(packing: info),
            Google_Protobuf_Any(packing: timestamp),
            Google_Protobuf_Any(packing: Google_Rpc_ErrorInfo()),
            Google_Protobuf_Any.with { $0.typeURL = "type.googleapis.com/no.such.Type"; $0.value = [1, 2, 3] },
            Google_Protobuf_Any.with { $0.typeURL = "type.googleapis.com/google.rpc.ErrorInfo"; $0.value = [0x0A, 0x05, 0x61] },
            Google_Protobuf_Any.with { $0.typeURL = "" },
            Google_Protobuf_Any.with { $0.typeURL = "google.rpc.ErrorInfo/"; $0.value = info.serializedBytes() },
        ]
        Self.expectSame(status)
        Self.expectSame(Google_Protobuf_Any(packing: status))
        Self.expectSame(Google_Protobuf_FieldMask.with { $0.paths = ["user_id", "profile.face_url", "", "a..b_c", "\"x\""] })
    }

    @Test("bytes that are not the message throw in both")
    func malformed() {
        Self.expectSame([0x0A, 0x05, 0x61], "groupd.v1.Group")
        Self.expectSame([0xFF], "groupd.v1.GetGroupsInfoResponse")
    }
}

/// Messages with every field of a group set, shared by tests and the encoder benchmark.
enum ProtoJSONFixtures {
    /// A GetGroupsInfoResponse with one group: profile, all settings, mute, self info, custom
    /// fields, pinned messages.
    static func groupsInfo() -> Groupd_V1_GetGroupsInfoResponse {
        let time = Google_Protobuf_Timestamp.with { $0.seconds = 1_700_000_000; $0.nanos = 5_000_000 }
        let group = Groupd_V1_Group.with {
            $0.groupID = "@TGS#2J4SZEAEL"
            $0.type = .public
            $0.profile = .with {
                $0.name = "Book club"
                $0.introduction = "We read one book a month and talk about it on Sundays."
                $0.notification = "Next: \"The Left Hand of Darkness\", chapters 1-5.\nBring snacks."
                $0.faceURL = "https://cdn.example.com/groups/book-club/face.png"
            }
            $0.settings = .with {
                $0.joinOption = .approval
                $0.approverScope = Groupd_V1_ApproverScope(rawValue: 1)!
                $0.inviteScope = Groupd_V1_OperatorScope(rawValue: 2)!
                $0.inviteeConsent = Groupd_V1_Requirement(rawValue: 1)!
                $0.inviteApproval = Groupd_V1_Requirement(rawValue: 1)!
                $0.removeScope = Groupd_V1_OperatorScope(rawValue: 2)!
                $0.profileEditScope = Groupd_V1_OperatorScope(rawValue: 2)!
                $0.memberEditScope = Groupd_V1_MemberEditScope(rawValue: 1)!
                $0.muteScope = Groupd_V1_OperatorScope(rawValue: 2)!
                $0.settingsEditScope = Groupd_V1_OperatorScope(rawValue: 1)!
                $0.ownerQuit = Groupd_V1_OwnerQuitRule(rawValue: 1)!
                $0.mentionAllScope = Groupd_V1_OperatorScope(rawValue: 2)!
                $0.slowModeIntervalSeconds = 30
                $0.inviteLinkScope = Groupd_V1_OperatorScope(rawValue: 2)!
                $0.pinScope = Groupd_V1_OperatorScope(rawValue: 2)!
            }
            $0.ownerUserID = "alice"
            $0.memberCount = 1234
            $0.maxMemberCount = 2000
            $0.createTime = time
            $0.lastInfoTime = time
            $0.lastMessageTime = time
            $0.latestSequence = 987_654
            $0.mute = .with { $0.mode = .roles; $0.roles = [Groupd_V1_MemberRole(rawValue: 3)!]; $0.muteUntil = time; $0.operatorUserID = "alice" }
            $0.custom = ["level": [1, 2, 3], "topic": Array("science fiction".utf8), "city": Array("Zürich".utf8)]
            $0.selfInfo = .with {
                $0.userID = "bob"
                $0.role = Groupd_V1_MemberRole(rawValue: 2)!
                $0.joinTime = time
                $0.nameCard = "Bob the reader"
                $0.custom = ["shelf": [7]]
                $0.receiveMessageOption = Groupd_V1_ReceiveMessageOption(rawValue: 1)!
                $0.joinSource = Groupd_V1_JoinSource(rawValue: 1)!
                $0.inviterUserID = "alice"
                $0.joinSequence = 42
            }
            $0.remark = "my favourite"
            $0.unreadCount = 12
            $0.readSequence = 987_642
            $0.muteBypassUserIds = ["alice", "carol"]
            $0.unreadMention = Groupd_V1_UnreadMention(rawValue: 1)!
            $0.pinnedMessages = [.with { $0.sequence = 17; $0.pinnedByUserID = "alice"; $0.pinTime = time }]
            $0.memberVersion = 99
        }
        return .with { $0.groups = [group] }
    }
}
