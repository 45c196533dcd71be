import FuzzSupport
import GroupdConfig
import JWTKit

/// The bearer-token check (`Authenticator`) of an app with fixed secrets, fed arbitrary
/// `authorization` and `x-operator-id` values.
///
/// Input: byte 0 picks the mode. Even: the rest is the `authorization` value, then optionally a
/// NUL and the `x-operator-id` value. Odd: the rest is a JWT header's JSON, a newline and a
/// payload's JSON (then optionally a NUL and `x-operator-id`), which the target encodes and signs
/// with the app's secret `k1`, so that what follows the signature check is reached too.
///
/// What is accepted must be a token of the app with a user id within the app's limit, spelt as
/// RFC 7515 requires; asking twice (the second answer from the cache) answers the same.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzToken(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let input = fuzzInput(start, count)
    guard input.count >= 1 else { return 0 }
    let rest = Array(input[1...])
    let (main, operatorBytes) = split(rest, at: 0)
    let operatorID = operatorBytes.map { String(decoding: $0, as: UTF8.self) }
    let authorization: String
    if input[0] % 2 == 0 {
        authorization = String(decoding: main, as: UTF8.self)
    } else {
        let (header, payload) = split(main, at: UInt8(ascii: "\n"))
        let signingInput = Base64URL.encode(header) + "." + Base64URL.encode(payload ?? [])
        let signature = try! signer.sign(Array(signingInput.utf8))
        authorization = "Bearer " + signingInput + "." + Base64URL.encode(signature)
    }
    let first = answer(authorization, operatorID)
    let second = answer(authorization, operatorID)
    precondition(first == second, "a second check of the same token answered differently: \(first) vs \(second)")
    if case .success(let caller) = first {
        precondition(caller.appID == "fuzz", "accepted a token of app \(caller.appID)")
        precondition(!caller.userID.isEmpty && caller.userID.utf8.count <= 64, "accepted a user id of \(caller.userID.utf8.count) bytes")
        let token = authorization.split(separator: " ", omittingEmptySubsequences: true).last.map(String.init) ?? ""
        precondition(isRFC7515CompactJWS(token), "accepted a token spelt outside RFC 7515: \(token)")
    }
    return 0
}

enum Answer: Equatable {
    case success(Caller)
    case failure(String)
}

func answer(_ authorization: String, _ operatorID: String?) -> Answer {
    do {
        return .success(try authenticator.authenticate(authorization: authorization, operatorID: operatorID))
    } catch {
        return .failure(String(describing: error))
    }
}

func split(_ bytes: [UInt8], at separator: UInt8) -> ([UInt8], [UInt8]?) {
    guard let index = bytes.firstIndex(of: separator) else { return (bytes, nil) }
    return (Array(bytes[..<index]), Array(bytes[(index + 1)...]))
}

/// Three non-empty base64url segments without padding.
func isRFC7515CompactJWS(_ token: String) -> Bool {
    let segments = token.split(separator: ".", omittingEmptySubsequences: false)
    let alphabet = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    return segments.count == 3 && segments.allSatisfy { !$0.isEmpty && $0.utf8.allSatisfy(alphabet.contains) && $0.utf8.count % 4 != 1 }
}

enum Base64URL {
    static func encode(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        var out: [UInt8] = []
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            let value = chunk.enumerated().reduce(0) { $0 | Int($1.element) << (16 - 8 * $1.offset) }
            for position in 0...chunk.count { out.append(alphabet[value >> (18 - 6 * position) & 63]) }
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }
}

let secret1 = "fuzz-secret-one-0123456789abcdef-0123456789"
let secret2 = "fuzz-secret-two-0123456789abcdef-0123456789"

let authenticator: Authenticator = runBlocking {
    await Authenticator(
        apps: [GroupdConfiguration.App(id: "fuzz", secrets: [.init(kid: "k1", secret: secret1), .init(kid: "k2", secret: secret2)])],
        cacheCapacity: 16)
}

let signer: any JWTAlgorithm = runBlocking {
    let keys = JWTKeyCollection()
    await keys.add(hmac: HMACKey(from: secret1), digestAlgorithm: .sha256)
    return try! await keys.getKey()
}

/// Prepares the keys before the first input, so that their one-time allocations are not counted
/// against an input by libFuzzer's leak check.
@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: UnsafeMutablePointer<CInt>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> CInt {
    _ = authenticator
    _ = signer
    return 0
}
