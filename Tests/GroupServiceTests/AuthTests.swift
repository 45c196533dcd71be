import Foundation
import GroupModel
@testable import GroupdConfig
@testable import GroupService
import GroupTestSupport
import Testing

private let start = Timestamp(secondsSince1970: 1_800_000_000)

private func base64URL(_ text: String) -> String {
    Data(text.utf8).base64EncodedString()
        .replacingOccurrences(of: "+", with: "-")
        .replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

/// Claims valid at `start` for `alice` of app-a.
private func claims(
    app: String? = TestApps.appA, sub: String? = "alice", role: String? = "user",
    exp: Int64? = start.secondsSince1970 + 3600, nbf: Int64? = nil
) -> TokenClaims {
    TokenClaims(app: app, sub: sub, role: role, exp: exp, nbf: nbf)
}

private func mint(_ claims: TokenClaims, secret: String = TestApps.secretA, kid: String? = "k1") async throws -> String {
    try await TokenMinter.mint(claims: claims, secret: secret, kid: kid)
}

private func authenticator(clock: ManualWallClock = ManualWallClock(start), cache: Int = 4096, skew: Int = 0) async -> Authenticator {
    await Authenticator(apps: TestApps.apps, clockSkewSeconds: skew, cacheCapacity: cache, clock: clock)
}

/// The `GroupError` thrown by authenticating `authorization`, or `nil`.
private func fault(_ auth: Authenticator, _ authorization: String?, operatorID: String? = nil) -> GroupError? {
    do {
        _ = try auth.authenticate(authorization: authorization, operatorID: operatorID)
        return nil
    } catch let error as GroupError {
        return error
    } catch {
        return nil
    }
}

@Suite("Authentication")
struct AuthTests {
    @Test("a good user token")
    func userToken() async throws {
        let auth = await authenticator()
        let token = try await mint(claims())
        let caller = try auth.authenticate(authorization: "Bearer " + token)
        #expect(caller == Caller(appID: "app-a", userID: "alice", isAdmin: false))
        #expect(caller.operatorID == "alice")
        #expect(!caller.isBackend)
        #expect(caller.actingRole(membership: .admin) == .admin)
        #expect(caller.actingRole(membership: nil) == .nonMember)
        // The scheme is case-insensitive.
        #expect(try auth.authenticate(authorization: "bearer " + token) == caller)
    }

    @Test("a good admin token is the backend")
    func adminToken() async throws {
        let auth = await authenticator()
        let caller = try auth.authenticate(authorization: "Bearer " + (try await mint(claims(sub: "backend", role: "admin"))))
        #expect(caller.isAdmin)
        #expect(caller.isBackend)
        #expect(caller.operatorID == nil)
        #expect(caller.actingRole(membership: nil) == .backend)
    }

    @Test("an admin token with x-operator-id acts as that user; a user token may not")
    func operatorOverride() async throws {
        let auth = await authenticator()
        let admin = "Bearer " + (try await mint(claims(sub: "backend", role: "admin")))
        let acting = try auth.authenticate(authorization: admin, operatorID: "bob")
        #expect(acting.isAdmin)
        #expect(acting.userID == "backend")
        #expect(acting.actingUserID == "bob")
        #expect(acting.operatorID == "bob")
        #expect(!acting.isBackend)
        #expect(acting.actingRole(membership: .member) == .member)
        #expect(try auth.authenticate(authorization: admin, operatorID: "").isBackend)
        #expect(fault(auth, admin, operatorID: String(repeating: "x", count: 65))?.metadata["field"] == "x-operator-id")

        let user = "Bearer " + (try await mint(claims()))
        let refused = try #require(fault(auth, user, operatorID: "bob"))
        #expect(refused.code == .permissionDenied)
        #expect(refused.reason == .operatorOverrideForbidden)
        #expect(try auth.authenticate(authorization: user, operatorID: "alice").actingUserID == nil)
    }

    @Test("missing token", arguments: [nil, "", "   "] as [String?])
    func missing(_ header: String?) async throws {
        let error = try #require(fault(await authenticator(), header))
        #expect(error.code == .unauthenticated)
        #expect(error.reason == .tokenMissing)
    }

    @Test("malformed tokens", arguments: [
        "Basic dXNlcjpwYXNz", "Bearer", "Bearer a.b", "Bearer not-a-jwt", "Bearer a.b.c.d", "Bearer %%%.%%%.%%%",
        "Bearer x y",
    ])
    func malformed(_ header: String) async throws {
        let error = try #require(fault(await authenticator(), header))
        #expect(error.code == .unauthenticated)
        #expect(error.reason == .tokenMalformed)
    }

    @Test("tokens of another algorithm are malformed", arguments: ["none", "HS512", "RS256"])
    func otherAlgorithm(_ alg: String) async throws {
        let payload = #"{"app":"app-a","sub":"alice","role":"user","exp":\#(start.secondsSince1970 + 60)}"#
        let token = base64URL(#"{"alg":"\#(alg)","typ":"JWT"}"#) + "." + base64URL(payload) + "."
        let error = try #require(fault(await authenticator(), "Bearer " + token))
        #expect(error.reason == .tokenMalformed)
    }

    @Test("a token signed with another secret has a bad signature")
    func badSignature() async throws {
        let auth = await authenticator()
        let forged = try await mint(claims(), secret: "an-attacker-secret-of-32-bytes-or-more!")
        #expect(fault(auth, "Bearer " + forged)?.reason == .tokenBadSignature)
        // App B's secret does not sign app A's tokens.
        let crossApp = try await mint(claims(), secret: TestApps.secretB)
        #expect(fault(auth, "Bearer " + crossApp)?.reason == .tokenBadSignature)
        // Tampering with the payload breaks the signature.
        let good = try await mint(claims())
        let parts = good.split(separator: ".")
        let tampered = parts[0] + "." + base64URL(#"{"app":"app-a","sub":"root","role":"admin","exp":9999999999}"#)
            + "." + parts[2]
        #expect(fault(auth, "Bearer " + tampered)?.reason == .tokenBadSignature)
    }

    @Test("kid picks the secret; without kid every secret of the app is tried; unknown kid is refused")
    func keyIDs() async throws {
        let auth = await authenticator()
        let second = try await mint(claims(), secret: TestApps.secretA2, kid: "k2")
        #expect(try auth.authenticate(authorization: "Bearer " + second).userID == "alice")
        let noKid = try await mint(claims(), secret: TestApps.secretA2, kid: nil)
        #expect(try auth.authenticate(authorization: "Bearer " + noKid).userID == "alice")
        let wrongKid = try await mint(claims(), secret: TestApps.secretA2, kid: "k1")
        #expect(fault(auth, "Bearer " + wrongKid)?.reason == .tokenBadSignature)
        let unknown = try await mint(claims(), secret: TestApps.secretA, kid: "retired")
        let error = try #require(fault(auth, "Bearer " + unknown))
        #expect(error.reason == .unknownKeyID)
        #expect(error.code == .unauthenticated)
    }

    @Test("a member named twice, a member name with an escape, or crit makes a token malformed")
    func oneMeaningPerToken() async throws {
        let auth = await authenticator()
        // A canonical signature that matches nothing: without the fault under test, the token
        // reaches the signature check and is TOKEN_BAD_SIGNATURE.
        let signature = base64URL(String(repeating: "s", count: 32))
        func reason(_ header: String, _ payload: String) -> GroupError.Reason? {
            fault(auth, "Bearer " + base64URL(header) + "." + base64URL(payload) + "." + signature)?.reason
        }
        let header = #"{"alg":"HS256"}"#
        let payload = #"{"app":"app-a","sub":"alice","role":"user","exp":\#(start.secondsSince1970 + 60)}"#
        #expect(reason(header, payload) == .tokenBadSignature)
        #expect(reason(header, #"{"app":"app-a","sub":"alice","role":"user","role":"admin","exp":1}"#) == .tokenMalformed)
        #expect(reason(#"{"alg":"HS256","alg":"HS256"}"#, payload) == .tokenMalformed)
        #expect(reason(header, #"{"app":"app-a","sub":"alice","r\u006fle":"user","exp":1}"#) == .tokenMalformed)
        #expect(reason(#"{"alg":"HS256","crit":["exp"]}"#, payload) == .tokenMalformed)
        // The same name in different objects, and escapes in values, are fine.
        let nested = #"{"app":"app-a","sub":"alice","role":"user","exp":\#(start.secondsSince1970 + 60),"# +
            #""x":{"app":1,"y":[{"app":2},{"app":"a\"b"}]}}"#
        #expect(reason(header, nested) == .tokenBadSignature)
        #expect(Authenticator.hasPlainUniqueMemberNames(Array(nested.utf8)))
        #expect(!Authenticator.hasPlainUniqueMemberNames(Array(#"[{"a":1},{"b":{"c":1,"c":2}}]"#.utf8)))
    }

    @Test("unknown app")
    func unknownApp() async throws {
        let token = try await mint(claims(app: "app-z"))
        let error = try #require(fault(await authenticator(), "Bearer " + token))
        #expect(error.reason == .unknownApp)
        #expect(error.metadata["app"] == "app-z")
        let b = try await mint(claims(app: TestApps.appB), secret: TestApps.secretB)
        #expect(try (await authenticator()).authenticate(authorization: "Bearer " + b).appID == "app-b")
    }

    @Test("each missing claim is named", arguments: ["app", "sub", "role", "exp"])
    func claimMissing(_ claim: String) async throws {
        var c = claims()
        switch claim {
        case "app": c.app = nil
        case "sub": c.sub = nil
        case "role": c.role = nil
        default: c.exp = nil
        }
        let error = try #require(fault(await authenticator(), "Bearer " + (try await mint(c))))
        #expect(error.code == .unauthenticated)
        #expect(error.reason == .claimMissing)
        #expect(error.metadata["claim"] == claim)
    }

    @Test("a role other than user or admin", arguments: ["root", "", "ADMIN"])
    func badRole(_ role: String) async throws {
        let error = try #require(fault(await authenticator(), "Bearer " + (try await mint(claims(role: role)))))
        #expect(error.reason == .badRole)
    }

    @Test("expired and not-yet-valid tokens, with and without skew")
    func time() async throws {
        let clock = ManualWallClock(start)
        let auth = await authenticator(clock: clock)
        let expired = try await mint(claims(exp: start.secondsSince1970 - 1))
        #expect(fault(auth, "Bearer " + expired)?.reason == .tokenExpired)
        let atNow = try await mint(claims(exp: start.secondsSince1970))
        #expect(fault(auth, "Bearer " + atNow)?.reason == .tokenExpired)
        let early = try await mint(claims(nbf: start.secondsSince1970 + 10))
        #expect(fault(auth, "Bearer " + early)?.reason == .tokenNotYetValid)
        clock.advance(seconds: 10)
        #expect(fault(auth, "Bearer " + early) == nil)

        let lenient = await authenticator(clock: ManualWallClock(start), skew: 30)
        #expect(fault(lenient, "Bearer " + expired) == nil)
        #expect(fault(lenient, "Bearer " + (try await mint(claims(exp: start.secondsSince1970 - 31))))?.reason
            == .tokenExpired)
    }

    @Test("the minter signs valid tokens")
    func minter() async throws {
        let token = try await TokenMinter.mint(
            app: TestApps.appA, secret: TestApps.secretA, kid: "k1", user: "carol", admin: true,
            ttl: .seconds(60), now: start)
        let caller = try (await authenticator()).authenticate(authorization: "Bearer " + token)
        #expect(caller.userID == "carol")
        #expect(caller.isAdmin)
        let stale = try await TokenMinter.mint(
            app: TestApps.appA, secret: TestApps.secretA, kid: "k1", user: "carol", ttl: .seconds(-1), now: start)
        #expect(fault(await authenticator(), "Bearer " + stale)?.reason == .tokenExpired)
        await #expect(throws: GroupError.self) {
            _ = try await TokenMinter.mint(app: "a", secret: "short", kid: nil, user: "u")
        }
    }

    @Test("the cache remembers verified tokens but never accepts one past its exp")
    func cacheHonoursExpiry() async throws {
        let clock = ManualWallClock(start)
        let auth = await authenticator(clock: clock)
        let token = "Bearer " + (try await mint(claims(exp: start.secondsSince1970 + 60)))
        #expect(try auth.authenticate(authorization: token).userID == "alice")
        #expect(auth.cachedTokenCount == 1)
        #expect(try auth.authenticate(authorization: token).userID == "alice")
        #expect(auth.cachedTokenCount == 1)
        clock.advance(seconds: 60)
        #expect(fault(auth, token)?.reason == .tokenExpired)
        #expect(auth.cachedTokenCount == 0)
        #expect(fault(auth, token)?.reason == .tokenExpired)
    }

    @Test("failed verifications are not cached")
    func failuresNotCached() async throws {
        let auth = await authenticator()
        let forged = "Bearer " + (try await mint(claims(), secret: "an-attacker-secret-of-32-bytes-or-more!"))
        #expect(fault(auth, forged)?.reason == .tokenBadSignature)
        #expect(fault(auth, forged)?.reason == .tokenBadSignature)
        #expect(auth.cachedTokenCount == 0)
    }

    @Test("the cache stays within its capacity; 0 turns it off")
    func cacheBounded() async throws {
        let auth = await authenticator(cache: 8)
        for i in 0..<50 {
            let token = "Bearer " + (try await mint(claims(sub: "user\(i)")))
            #expect(try auth.authenticate(authorization: token).userID == "user\(i)")
            #expect(auth.cachedTokenCount <= 8)
        }
        #expect(auth.cachedTokenCount > 0)
        let off = await authenticator(cache: 0)
        _ = try off.authenticate(authorization: "Bearer " + (try await mint(claims())))
        #expect(off.cachedTokenCount == 0)
    }

    @Test("an authenticator built from a configuration uses its apps")
    func fromConfiguration() async throws {
        let auth = await Authenticator(configuration: TestApps.configuration(), clock: ManualWallClock(start))
        #expect(try auth.authenticate(authorization: "Bearer " + (try await mint(claims()))).appID == "app-a")
    }
}
