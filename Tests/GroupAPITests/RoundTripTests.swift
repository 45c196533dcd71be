import GroupAPI
import Testing

@Suite("Round trip of every message")
struct RoundTripTests {
    @Test("decode(encode(x)) == x with every field set", arguments: Examples.all)
    func roundTrip(_ example: Example) throws {
        let bytes = example.message.serializedBytes()
        // Only a message without fields encodes to nothing.
        #expect(bytes.isEmpty == (example.fieldCount == 0))
        #expect(try decodedEquals(example.message, bytes))
    }

    @Test("the example is not the default message", arguments: Examples.all.filter { $0.fieldCount > 0 })
    func exampleIsFullySet(_ example: Example) {
        func check<M: ProtoMessage>(_ message: M) -> Bool { message != M() }
        let ok = check(example.message)
        #expect(ok)
    }

    @Test("withPackedBytes reports the size it packs", arguments: Examples.all)
    func packedSizeMatches(_ example: Example) {
        let (size, written, bytes) = example.message.withPackedBytes { size, pack in
            var buffer = [UInt8](repeating: 0xAA, count: size + 8)
            let written = buffer.withUnsafeMutableBytes { pack($0.baseAddress!) }
            return (size, written, Array(buffer[..<size]))
        }
        #expect(size == written)
        #expect(size == example.message.serializedSize)
        #expect(bytes == example.message.serializedBytes())
    }

    @Test("an empty input decodes to the default message", arguments: Examples.all)
    func emptyInputIsDefault(_ example: Example) throws {
        func check<M: ProtoMessage>(_ message: M) throws -> Bool {
            try M(serializedBytes: []) == M() && M().serializedBytes().isEmpty
        }
        let ok = try check(example.message)
        #expect(ok)
    }

    @Test("a message built with `with` round-trips through the [UInt8] API")
    func withBuilder() throws {
        let profile = Groupd_V1_GroupProfile.with {
            $0.name = "team"
            $0.faceURL = "https://example.com/a.png"
        }
        let request = Groupd_V1_CreateGroupRequest.with {
            $0.type = .public
            $0.profile = profile
            $0.custom = ["level": [1, 2, 3]]
            $0.members = [.with { $0.userID = "iOS_002"; $0.role = .admin }]
        }
        let decoded = try Groupd_V1_CreateGroupRequest(serializedBytes: request.serializedBytes())
        #expect(decoded.profile?.name == "team")
        #expect(decoded.profile?.faceURL == "https://example.com/a.png")
        #expect(decoded.type == .public)
        #expect(decoded.custom["level"] == [1, 2, 3])
        #expect(decoded.members.first?.role == .admin)
        #expect(decoded.groupID.isEmpty)
        #expect(decoded == request)
    }

    @Test("an absent sub-message stays nil; a present default one stays present")
    func messagePresence() throws {
        var group = Groupd_V1_Group()
        group.groupID = "g"
        #expect(try Groupd_V1_Group(serializedBytes: group.serializedBytes()).profile == nil)
        group.profile = Groupd_V1_GroupProfile()
        let decoded = try Groupd_V1_Group(serializedBytes: group.serializedBytes())
        #expect(decoded.profile == Groupd_V1_GroupProfile())
    }

    @Test("oneof accessors read the set member and default the others")
    func oneofAccessors() throws {
        var event = Groupd_V1_GroupEvent()
        #expect(event.detail == nil)
        event.kick = .with { $0.reason = "spam" }
        #expect(event.detail == .kick(.with { $0.reason = "spam" }))
        #expect(event.remark == Groupd_V1_RemarkChange())
        let decoded = try Groupd_V1_GroupEvent(serializedBytes: event.serializedBytes())
        #expect(decoded.kick.reason == "spam")
        // A oneof member set to its default value is still sent and comes back selected.
        var response = Groupd_V1_SubscribeResponse()
        response.caughtUp = Groupd_V1_CaughtUp()
        #expect(try Groupd_V1_SubscribeResponse(serializedBytes: response.serializedBytes()).detailIsCaughtUp)
    }

    @Test("large messages spill out of the scratch arena and still round-trip")
    func largeMessage() throws {
        var response = Groupd_V1_ListMembersResponse()
        response.members = (0..<2_000).map { index in
            .with {
                $0.userID = "user-\(index)"
                $0.nameCard = String(repeating: "n", count: index % 300)
                $0.custom = ["k\(index % 7)": Array(repeating: UInt8(index & 0xFF), count: index % 5000)]
            }
        }
        let bytes = response.serializedBytes()
        #expect(bytes.count > 1_000_000)
        #expect(try Groupd_V1_ListMembersResponse(serializedBytes: bytes) == response)
    }
}

extension Groupd_V1_SubscribeResponse {
    fileprivate var detailIsCaughtUp: Bool {
        if case .caughtUp? = item { return true }
        return false
    }
}
