import Foundation
@testable import GroupService
import Testing

@Suite("Invite link tokens: CSPRNG, base64url, SHA-256 at rest")
struct InviteLinkTokenTests {
    @Test("SHA-256 gives the FIPS 180-4 test vectors")
    func sha256() {
        #expect(InviteLinkToken.hash("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(InviteLinkToken.hash("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(InviteLinkToken.hash("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")
            == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(InviteLinkToken.hash(String(repeating: "a", count: 1000)).count == 64)
    }

    @Test("a token is 128 random bits in base64url without padding; tokens and ids do not repeat")
    func tokens() throws {
        var seen: Set<String> = []
        for _ in 0..<200 {
            let token = InviteLinkToken.make()
            #expect(token.count == 22)
            #expect(token.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
            let padded = token.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/") + "=="
            #expect(try #require(Data(base64Encoded: padded)).count == 16)
            #expect(seen.insert(token).inserted)
            let id = InviteLinkToken.makeID()
            #expect(id.hasPrefix("lnk_") && id.count == 28)
        }
        #expect(InviteLinkToken.base64url([0xFB, 0xFF]) == "-_8")
    }
}
