import GroupModel
import Testing

@Suite("Group ids")
struct GroupIDTests {
    @Test("valid custom ids are accepted", arguments: [
        "a", "Z", "7", "team-1", String(repeating: "x", count: 48), "@group", "@TGS", "@TGS_1",
        "a#b", "!#$%&()+-:;<=.>?@[]^_{}|~", "UPPER_lower_123",
    ])
    func validIDs(id: String) {
        #expect(groupError { try GroupID.validateCustom(id) } == nil)
    }

    @Test("48 bytes is the limit; 49 is refused naming field and limit")
    func lengthLimit() throws {
        #expect(groupError { try GroupID.validateCustom(String(repeating: "a", count: 48)) } == nil)
        let error = try #require(groupError { try GroupID.validateCustom(String(repeating: "a", count: 49)) })
        #expect(error.code == .invalidArgument)
        #expect(error.reason == .invalidArgument)
        #expect(error.metadata["field"] == "group_id")
        #expect(error.metadata["limit"] == "48")
    }

    @Test("the empty id is refused")
    func empty() throws {
        let error = try #require(groupError { try GroupID.validateCustom("") })
        #expect(error.metadata["field"] == "group_id")
    }

    @Test("forbidden prefixes are refused", arguments: ["#", "#abc", "@TGS#", "@TGS#ABCDEFGHJKMN", "@TGS#x"])
    func forbiddenPrefixes(id: String) throws {
        let error = try #require(groupError { try GroupID.validateCustom(id) })
        #expect(error.code == .invalidArgument)
        #expect(error.message.contains("must not start with"))
    }

    @Test("characters outside the charset are refused", arguments: [
        "a b", "a*b", "a,b", "a/b", "a\\b", "a'b", "a\"b", "a`b", "a\tb", "a\nb", "é", "群组", "a😀",
    ])
    func charset(id: String) throws {
        let error = try #require(groupError { try GroupID.validateCustom(id) })
        #expect(error.code == .invalidArgument)
        #expect(error.metadata["field"] == "group_id")
    }

    @Test("each punctuation character of ZIM's set is allowed on its own after a letter")
    func everyPunctuation() {
        for byte in GroupID.allowedPunctuation {
            let id = "a" + String(Character(Unicode.Scalar(byte)))
            #expect(groupError { try GroupID.validateCustom(id) } == nil, "\(id)")
        }
        #expect(GroupID.allowedPunctuation.count == 25)
    }

    @Test("generated ids have the @TGS# prefix, 12 base-32 characters, and are not valid custom ids")
    func generated() throws {
        var seen: Set<String> = []
        for _ in 0..<1000 {
            let id = GroupID.generate()
            #expect(id.hasPrefix("@TGS#"))
            #expect(id.utf8.count == 17)
            #expect(GroupID.isGenerated(id))
            #expect(groupError { try GroupID.validateCustom(id) }?.message.contains("@TGS#") == true)
            seen.insert(id)
        }
        #expect(seen.count == 1000)
        #expect(!GroupID.isGenerated("@TGS#short"))
        #expect(!GroupID.isGenerated("team"))
    }

    @Test("generation follows the random number generator")
    func seeded() {
        var a = SplitMix(seed: 7)
        var b = SplitMix(seed: 7)
        #expect(GroupID.generate(using: &a) == GroupID.generate(using: &b))
    }
}

/// A deterministic generator for tests.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { self.state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
