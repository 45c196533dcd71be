import GroupModel
import JWTKit

/// Mints HS256 tokens for groupd: for tests, scripts and `make run` (`groupd token`).
public enum TokenMinter {
    /// Mint a token for `user` of `app`.
    /// - Parameters:
    ///   - app: The `app` claim.
    ///   - secret: The app's secret (at least 32 bytes).
    ///   - kid: The `kid` header naming the secret, or `nil` for none.
    ///   - user: The `sub` claim.
    ///   - admin: `true` for `role: admin` (the app's backend), else `role: user`.
    ///   - ttl: How long the token is valid from `now` (negative: already expired).
    ///   - now: The issuing time (`iat`); default the system clock.
    /// - Returns: The compact JWT.
    /// - Throws: `INVALID_ARGUMENT` for a secret shorter than 32 bytes.
    public static func mint(
        app: String, secret: String, kid: String?, user: String, admin: Bool = false,
        ttl: Duration = .seconds(3600), now: Timestamp = SystemWallClock().now()
    ) async throws -> String {
        let claims = TokenClaims(
            app: app, sub: user, role: admin ? "admin" : "user",
            exp: now.secondsSince1970 + ttl.components.seconds, iat: now.secondsSince1970)
        return try await mint(claims: claims, secret: secret, kid: kid)
    }

    /// Mint a token with exactly `claims` (tests use this to leave a claim out).
    /// - Parameters:
    ///   - claims: The payload.
    ///   - secret: The HS256 secret (at least 32 bytes).
    ///   - kid: The `kid` header, or `nil` for none.
    /// - Throws: `INVALID_ARGUMENT` for a secret shorter than 32 bytes.
    public static func mint(claims: TokenClaims, secret: String, kid: String?) async throws -> String {
        // jwt-kit asserts (and so crashes debug builds) on HMAC keys shorter than the hash.
        guard secret.utf8.count >= 32 else {
            throw GroupError.invalidArgument(field: "secret", "an HS256 secret needs at least 32 bytes", limit: 32)
        }
        let keys = JWTKeyCollection()
        let identifier = kid.map { JWKIdentifier(string: $0) }
        await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256, kid: identifier)
        var header = JWTHeader()
        header.typ = "JWT"
        return try await keys.sign(claims, kid: identifier, header: header)
    }
}
