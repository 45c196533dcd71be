public import JWTKit

/// The claims of a groupd token, as minted: `app`, `sub`, `role`, `exp`, and optionally `nbf` and
/// `iat` (NumericDates: whole seconds since the Unix epoch).
///
/// Every claim is optional here so that tests can mint tokens that lack one; the
/// ``Authenticator`` requires `app`, `sub`, `role` and `exp`.
public struct TokenClaims: JWTPayload, Hashable {
    /// The app id.
    public var app: String?
    /// The operator's user id (for admin tokens, the backend's account name).
    public var sub: String?
    /// `user` or `admin`.
    public var role: String?
    /// Expiry, seconds since the epoch.
    public var exp: Int64?
    /// Not before, seconds since the epoch.
    public var nbf: Int64?
    /// Issued at, seconds since the epoch.
    public var iat: Int64?

    /// Create claims.
    public init(
        app: String?, sub: String?, role: String?, exp: Int64?, nbf: Int64? = nil, iat: Int64? = nil
    ) {
        self.app = app
        self.sub = sub
        self.role = role
        self.exp = exp
        self.nbf = nbf
        self.iat = iat
    }

    /// No checks here: the ``Authenticator`` checks the claims against its own clock.
    public func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// The claims as read from a token: NumericDates may carry fractions (RFC 7519 §2).
struct ReceivedClaims: JWTPayload {
    var app: String?
    var sub: String?
    var role: String?
    var exp: Double?
    var nbf: Double?

    func verify(using algorithm: some JWTAlgorithm) async throws {}
}
