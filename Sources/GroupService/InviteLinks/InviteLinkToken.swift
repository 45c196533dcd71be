import Crypto
import GroupModel
import GRPCProtocol

/// Invite link tokens: made from the operating system's CSPRNG, kept only as their SHA-256.
enum InviteLinkToken {
    /// A new token: 16 random bytes (128 bits) from `SystemRandomNumberGenerator` (the operating
    /// system's CSPRNG: `getrandom` on Linux), base64url without padding (22 characters).
    static func make() -> String {
        var generator = SystemRandomNumberGenerator()
        var bytes: [UInt8] = []
        for _ in 0..<2 {
            var word = generator.next()
            for _ in 0..<8 {
                bytes.append(UInt8(truncatingIfNeeded: word))
                word >>= 8
            }
        }
        return base64url(bytes)
    }

    /// A new link id: `lnk_` and 12 random bytes in hex (not secret; unique within an app).
    static func makeID() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<12).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return "lnk_" + Hex.encode(bytes)
    }

    /// The lowercase hex SHA-256 of the token's UTF-8 bytes: what the store keeps and looks up.
    static func hash(_ token: String) -> String {
        Hex.encode(SHA256.hash(data: Array(token.utf8)))
    }

    /// `bytes` in base64url without padding (`Base64.encodeURL(_:)`).
    static func base64url(_ bytes: [UInt8]) -> String {
        String(decoding: Base64.encodeURL(bytes), as: UTF8.self)
    }
}
