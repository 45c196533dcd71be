import Foundation
import GroupModel
import GRPCProtocol
import JWTKit

/// Verifies the bearer token of every call and says who is calling.
///
/// Tokens are HS256 JWTs signed with one of the app's secrets, with claims `app`, `sub`, `role`
/// (`user` | `admin`) and `exp` (required), `nbf` (honoured if present). A `kid` header picks the
/// app's secret with that key id; without one every secret of the app is tried (rotation).
/// Verified tokens are cached (bounded, see ``TokenCache``), so repeated calls with the same token
/// skip the HMAC; `exp` and `nbf` are still checked on every call.
///
/// A token has one spelling (RFC 7515): three base64url segments without padding, the signature
/// in canonical form; `kid`, when present, is a string; `sub` obeys the app's user-id rules.
/// And one meaning: its header and claims name each member once, spelt without escapes, and
/// its header has no `crit` (no extension is understood here). A call carries one
/// `authorization` header.
///
/// Faults are `GroupError`s with code `unauthenticated` and a distinct reason: `TOKEN_MISSING`,
/// `TOKEN_MALFORMED`, `TOKEN_BAD_SIGNATURE`, `UNKNOWN_KID`, `TOKEN_EXPIRED`,
/// `TOKEN_NOT_YET_VALID`, `UNKNOWN_APP`, `CLAIM_MISSING` (`metadata["claim"]`), `BAD_ROLE`.
public final class Authenticator: Sendable {
    private struct AppKeys: Sendable {
        var limits: AppLimits
        var keys: [(kid: String, algorithm: any JWTAlgorithm)]
    }

    private let apps: [String: AppKeys]
    private let clock: any WallClock
    private let skewMilliseconds: Int64
    private let cache: TokenCache
    private let parser = DefaultJWTParser()

    /// Prepare the HS256 keys of `apps`.
    /// - Parameters:
    ///   - apps: The configured apps and their secrets (validated: at least 32 bytes each).
    ///   - clockSkewSeconds: Leeway on `exp` and `nbf`.
    ///   - cacheCapacity: Verified tokens remembered (`0`: none).
    ///   - clock: The time source for `exp` and `nbf`.
    public init(
        apps: [GroupdConfiguration.App], clockSkewSeconds: Int = 0, cacheCapacity: Int = 4096,
        clock: any WallClock = SystemWallClock()
    ) async {
        var prepared: [String: AppKeys] = [:]
        for app in apps {
            var keys: [(kid: String, algorithm: any JWTAlgorithm)] = []
            for secret in app.secrets {
                // One collection per secret, used only to build jwt-kit's HMAC-SHA256 algorithm,
                // which verification then calls directly (no actor hop per call).
                let collection = JWTKeyCollection()
                await collection.add(hmac: HMACKey(from: secret.secret), digestAlgorithm: .sha256)
                if let algorithm = try? await collection.getKey() {
                    keys.append((secret.kid, algorithm))
                }
            }
            prepared[app.id] = AppKeys(limits: app.limits, keys: keys)
        }
        self.apps = prepared
        self.clock = clock
        self.skewMilliseconds = Int64(clockSkewSeconds) * 1000
        self.cache = TokenCache(capacity: cacheCapacity)
    }

    /// Prepare the keys of every app of `configuration`, with its `auth` settings.
    public convenience init(configuration: GroupdConfiguration, clock: any WallClock = SystemWallClock()) async {
        await self.init(
            apps: configuration.apps, clockSkewSeconds: configuration.auth.clockSkewSeconds,
            cacheCapacity: configuration.auth.tokenCacheEntries, clock: clock)
    }

    /// How many verified tokens the cache holds.
    public var cachedTokenCount: Int { self.cache.count }

    /// Authenticate a call from its `authorization` and `x-operator-id` header values.
    ///
    /// Synchronous and non-blocking (an HMAC-SHA256 at most), so it may run on an event loop.
    /// - Parameters:
    ///   - authorization: The `authorization` header value (`Bearer <JWT>`), or `nil` if absent.
    ///   - operatorID: The `x-operator-id` header value, or `nil`/empty if absent. With an admin
    ///     token the caller acts for that user; with a user token it must be absent or the
    ///     token's own subject.
    /// - Returns: The caller.
    /// - Throws: `GroupError`: `UNAUTHENTICATED` with a reason for token faults;
    ///   `PERMISSION_DENIED` / `OPERATOR_OVERRIDE_FORBIDDEN` for `x-operator-id` on a user token;
    ///   `INVALID_ARGUMENT` for a malformed `x-operator-id`.
    public func authenticate(authorization: String?, operatorID: String? = nil) throws -> Caller {
        let token = try Self.bearerToken(authorization)
        let now = self.clock.now().millisecondsSince1970
        let entry: TokenCache.Entry
        if let cached = self.cache.entry(for: token) {
            do {
                try self.checkTime(cached, now: now)
            } catch {
                self.cache.remove(token)
                throw error
            }
            entry = cached
        } else {
            entry = try self.verify(token)
            try self.checkTime(entry, now: now)
            self.cache.store(entry, for: token)
        }
        return try self.caller(entry, operatorID: operatorID)
    }

    // MARK: Steps

    private static func bearerToken(_ authorization: String?) throws -> String {
        // Scanned as UTF-8 bytes in place: this runs on every call, and Character iteration
        // (grapheme breaking), lowercasing or even stepping a `String.UTF8View` index byte by byte
        // (about 30 instructions a byte) cost more than the cached verification behind it.
        guard var authorization else { throw missingToken() }
        return try authorization.withUTF8 { bytes in
            let space = UInt8(ascii: " ")
            var index = 0
            func skip(_ matches: (UInt8) -> Bool) {
                while index < bytes.count, matches(bytes[index]) { index += 1 }
            }
            skip { $0 == space || $0 == UInt8(ascii: "\t") }
            guard index < bytes.count else { throw missingToken() }
            let schemeStart = index
            skip { $0 != space }
            let isBearer = bytes[schemeStart..<index].elementsEqual("bearer".utf8) { ($0 | 0x20) == $1 }
            skip { $0 == space }
            let tokenStart = index
            skip { $0 != space }
            let tokenEnd = index
            skip { $0 == space }
            guard isBearer, tokenStart != tokenEnd, index == bytes.count else {
                throw fault(.tokenMalformed, "the authorization header must be 'Bearer <token>'")
            }
            return String(decoding: UnsafeBufferPointer(rebasing: bytes[tokenStart..<tokenEnd]), as: UTF8.self)
        }
    }

    private static func missingToken() -> GroupError {
        fault(.tokenMissing, "the authorization header is missing; send 'Bearer <token>'")
    }

    private func verify(_ token: String) throws -> TokenCache.Entry {
        let bytes = Array(token.utf8)
        // One spelling per token (RFC 7515 §2, §7.1): three segments of base64url without padding,
        // and a signature in its canonical form (no bits set past the signature's length), so
        // that a token cannot be re-spelt into another string with the same meaning.
        guard Self.isCompactSerialization(bytes) else {
            throw Self.fault(.tokenMalformed, "the token must be three base64url segments without padding")
        }
        // One meaning per token (RFC 7515 §4, RFC 7519 §4): member names are unique, so no two
        // parsers can read different claims out of it; and spelt without escapes, so "role" has
        // one spelling and uniqueness is a comparison of bytes.
        guard Self.segments(of: bytes).prefix(2).allSatisfy({ Self.hasPlainUniqueMemberNames(Self.base64URLDecoded($0)) }) else {
            throw Self.fault(.tokenMalformed, "the token's header and claims must name each member once, without escapes")
        }
        let header: JWTHeader
        let claims: ReceivedClaims
        let signature: [UInt8]
        do {
            let parsed = try self.parser.parse(bytes, as: ReceivedClaims.self)
            (header, claims, signature) = (parsed.header, parsed.payload, Array(parsed.signature))
        } catch {
            throw Self.fault(.tokenMalformed, "the token is not a well-formed JWT")
        }
        guard header.alg == "HS256" else {
            throw Self.fault(.tokenMalformed, "the token's alg must be HS256, found \(header.alg ?? "none")")
        }
        if let kid = header[dynamicMember: "kid"], kid.asString == nil {
            throw Self.fault(.tokenMalformed, "the token's kid must be a string")
        }
        // crit lists extensions the recipient must understand or refuse the token (RFC 7515
        // §4.1.11); this server understands none.
        if header[dynamicMember: "crit"] != nil {
            throw Self.fault(.tokenMalformed, "the token's crit names extensions this server does not support")
        }
        guard Base64.encodeURL(signature).elementsEqual(Self.lastSegment(bytes)) else {
            throw Self.fault(.tokenMalformed, "the token's signature is not in canonical base64url")
        }

        guard let appID = claims.app, !appID.isEmpty else { throw Self.claimMissing("app") }
        guard let app = self.apps[appID] else {
            throw GroupError(
                code: .unauthenticated, reason: .unknownApp, message: "the token's app '\(appID)' is not served here",
                metadata: ["app": appID])
        }

        let candidates: [any JWTAlgorithm]
        if let kid = header.kid {
            guard let key = app.keys.first(where: { $0.kid == kid }) else {
                throw GroupError(
                    code: .unauthenticated, reason: .unknownKeyID,
                    message: "the token's kid '\(kid)' names no secret of app '\(appID)'", metadata: ["kid": kid])
            }
            candidates = [key.algorithm]
        } else {
            candidates = app.keys.map(\.algorithm)
        }
        // The signature covers `header.payload`: the token up to its second period.
        let periods = bytes.indices.filter { bytes[$0] == UInt8(ascii: ".") }
        let signingInput = bytes[..<periods[1]]
        let signed = candidates.contains { (try? $0.verify(signature, signs: signingInput)) == true }
        guard signed else {
            throw Self.fault(.tokenBadSignature, "the token's signature does not match the app's secrets")
        }

        guard let sub = claims.sub, !sub.isEmpty else { throw Self.claimMissing("sub") }
        do {
            try FieldValidation.checkUserID(sub, field: "sub", limit: app.limits.userIDBytes)
        } catch {
            // The user id a token names obeys the app's user-id rules, as every user id a call names does.
            throw GroupError(
                code: .unauthenticated, reason: .tokenMalformed,
                message: "the token's sub must be a user id of 1 to \(app.limits.userIDBytes) bytes without control characters",
                metadata: ["claim": "sub", "limit": "\(app.limits.userIDBytes)"])
        }
        guard let role = claims.role else { throw Self.claimMissing("role") }
        guard let exp = claims.exp else { throw Self.claimMissing("exp") }
        guard role == "user" || role == "admin" else {
            throw GroupError(
                code: .unauthenticated, reason: .badRole, message: "the token's role must be user or admin",
                metadata: ["role": role])
        }
        return TokenCache.Entry(
            appID: appID, userID: sub, isAdmin: role == "admin", expiresAt: Self.milliseconds(exp),
            notBefore: claims.nbf.map(Self.milliseconds))
    }

    private func checkTime(_ entry: TokenCache.Entry, now: Int64) throws {
        if now >= entry.expiresAt + self.skewMilliseconds {
            throw Self.fault(.tokenExpired, "the token expired")
        }
        if let notBefore = entry.notBefore, notBefore > now + self.skewMilliseconds {
            throw Self.fault(.tokenNotYetValid, "the token is not valid yet (nbf)")
        }
    }

    private func caller(_ entry: TokenCache.Entry, operatorID: String?) throws -> Caller {
        var caller = Caller(appID: entry.appID, userID: entry.userID, isAdmin: entry.isAdmin)
        guard let operatorID, !operatorID.isEmpty else { return caller }
        if !entry.isAdmin {
            if operatorID == entry.userID { return caller }
            throw GroupError(
                code: .permissionDenied, reason: .operatorOverrideForbidden,
                message: "only admin tokens may act for another user with x-operator-id")
        }
        let limit = self.apps[entry.appID]?.limits.userIDBytes ?? AppLimits.defaults.userIDBytes
        try FieldValidation.checkUserID(operatorID, field: "x-operator-id", limit: limit)
        caller.actingUserID = operatorID
        return caller
    }

    // MARK: Helpers

    /// Whether `token` is `header.payload.signature`, each segment non-empty base64url without
    /// padding (`A–Z a–z 0–9 - _`, a length that is not 1 more than a multiple of 4).
    static func isCompactSerialization(_ token: [UInt8]) -> Bool {
        var segments = 1
        var length = 0
        for byte in token {
            switch byte {
            case UInt8(ascii: "."):
                guard length > 0, length % 4 != 1 else { return false }
                segments += 1
                length = 0
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
                length += 1
            default:
                return false
            }
        }
        return segments == 3 && length > 0 && length % 4 != 1
    }

    /// The token's period-separated segments.
    private static func segments(of token: [UInt8]) -> [ArraySlice<UInt8>] {
        token.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
    }

    /// The bytes a base64url segment without padding spells (empty when it is not base64url;
    /// the JWT parser refuses such a segment after this).
    private static func base64URLDecoded(_ segment: ArraySlice<UInt8>) -> [UInt8] {
        var text = String(decoding: segment, as: UTF8.self)
            .replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        text += String(repeating: "=", count: (4 - text.utf8.count % 4) % 4)
        return Data(base64Encoded: text).map { Array($0) } ?? []
    }

    /// Whether every object in the JSON text `json` names each of its members once, and spells
    /// every member name without a backslash escape. A scan of the bytes, not a parse: it trusts
    /// the JWT parser to refuse text that is not JSON, and keeps its own stack (no recursion).
    static func hasPlainUniqueMemberNames(_ json: [UInt8]) -> Bool {
        var objects: [Set<ArraySlice<UInt8>>?] = []  // one entry per open object (a set) or array (nil)
        var expectingName = false
        var index = 0
        while index < json.count {
            switch json[index] {
            case UInt8(ascii: "{"):
                objects.append([])
                expectingName = true
            case UInt8(ascii: "["):
                objects.append(nil)
                expectingName = false
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                _ = objects.popLast()
                expectingName = false
            case UInt8(ascii: ","):
                expectingName = objects.last.map { $0 != nil } ?? false
            case UInt8(ascii: "\""):
                var end = index + 1
                var escaped = false
                while end < json.count, json[end] != UInt8(ascii: "\"") {
                    if json[end] == UInt8(ascii: "\\") {
                        escaped = true
                        end += 1  // the escaped character, a quote included
                    }
                    end += 1
                }
                if expectingName, let top = objects.indices.last, objects[top] != nil {
                    let name = json[min(index + 1, json.count)..<min(end, json.count)]
                    guard !escaped, objects[top]!.insert(name).inserted else { return false }
                    expectingName = false
                }
                index = end
            default:
                break
            }
            index += 1
        }
        return true
    }

    /// The bytes after the token's last period.
    private static func lastSegment(_ token: [UInt8]) -> ArraySlice<UInt8> {
        token[(token.lastIndex(of: UInt8(ascii: ".")).map { $0 + 1 } ?? 0)...]
    }

    private static func milliseconds(_ seconds: Double) -> Int64 {
        let value = (seconds * 1000).rounded(.down)
        if value >= Double(Int64.max) { return .max }
        if value <= Double(Int64.min) { return .min }
        return Int64(value)
    }

    private static func fault(_ reason: GroupError.Reason, _ message: String) -> GroupError {
        GroupError(code: .unauthenticated, reason: reason, message: message)
    }

    private static func claimMissing(_ claim: String) -> GroupError {
        GroupError(
            code: .unauthenticated, reason: .claimMissing, message: "the token has no \(claim) claim",
            metadata: ["claim": claim])
    }
}
