import FuzzSupport
import Logging
import PolicyHost

#if canImport(Glibc)
import Glibc
#endif

/// The policy host's side of the plugin ABI fed whatever a plugin may answer: a chain of one to
/// three instances of a scripted plugin (`FuzzPolicyPlugin`, loaded with dlopen as groupd loads
/// plugins) whose `instance_new` and `on_hook` call the host back with fuzzer-chosen strings,
/// lengths, NULL pointers, error codes and log levels, and return any decision.
///
/// Input: byte 0 picks the hook, byte 1 the chain's length (bits 0–1) and each link's failure
/// mode (bits 2–4: fail closed when set). Then length-prefixed segments (a length byte and
/// that many bytes): each link's `instance_new` script, then each link's `on_hook` script; what
/// is left becomes a field of the request.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPolicyHost(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let input = fuzzInput(start, count)
    guard input.count >= 2 else { return 0 }
    let hook = hooks[Int(input[0]) % hooks.count]
    let links = 1 + Int(input[1] & 3) % 3
    var offset = 2
    func segment() -> String {
        guard offset < input.count else { return "" }
        let length = min(Int(input[offset]), input.count - offset - 1)
        defer { offset += 1 + length }
        return String(decoding: UnsafeRawBufferPointer(rebasing: input[offset + 1..<offset + 1 + length]), as: UTF8.self)
    }
    let plugins = (0..<links).map { link in
        PluginConfiguration(
            path: pluginPath, config: "\(link)" + segment(), hooks: PolicyHook.allCases,
            failureMode: input[1] & (4 << link) != 0 ? .failClosed : .failOpen)
    }
    var fields = (0..<links).map { HookField("script\($0)", segment()) }
    fields.append(HookField("name", "fuzz group"))
    if offset < input.count {
        fields.append(HookField("message.text", String(decoding: UnsafeRawBufferPointer(rebasing: input[offset...]), as: UTF8.self)))
    }
    do throws(PolicyLoadError) {
        try host.apply(app: "fuzz", AppPolicyConfiguration(plugins: plugins, budget: .seconds(30)))
    } catch {
        precondition(error.code == .instanceFailed, "the scripted plugin failed to load: \(error)")
        return 0
    }
    let request = HookRequest(
        operatorID: "alice", groupID: "g1", groupType: "work", readerRole: "member", fields: fields, users: ["bob", "carol"])
    let outcome = runBlocking { await host.run(hook, app: "fuzz", request: request) }
    switch outcome {
    case .allow, .discard:
        break
    case .reject(let rejection):
        precondition(rejection.plugin == "fuzz-policy", "a rejection names plugin \(rejection.plugin)")
    case .rewrite(let changes):
        precondition(!changes.isEmpty, "a rewrite without changes")
    case .error(let failure):
        precondition(failure.plugin == "fuzz-policy", "a failure names plugin \(failure.plugin)")
    }
    return 0
}

let hooks = PolicyHook.allCases.filter { $0 != .afterEvent }

/// `GROUPD_FUZZ_PLUGIN`, else `libFuzzPolicyPlugin.so` beside this executable.
let pluginPath: String = {
    if let path = getenv("GROUPD_FUZZ_PLUGIN") { return String(cString: path) }
    var buffer = [CChar](repeating: 0, count: 4096)
    let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    precondition(length > 0, "cannot find this executable's directory")
    let executable = String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return String(executable[..<(executable.lastIndex(of: "/") ?? executable.startIndex)]) + "/libFuzzPolicyPlugin.so"
}()

let host = PolicyHost(
    configuration: PolicyHostConfiguration(threads: 2, breakerThreshold: 1_000_000, breakerCooldown: .seconds(1)),
    logger: Logger(label: "fuzz", factory: { _ in SwiftLogNoOpLogHandler() }))

/// Starts the host (its thread pool) before the first input, so that its one-time allocations
/// are not counted against an input by libFuzzer's leak check.
@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: UnsafeMutablePointer<CInt>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> CInt {
    _ = host
    _ = pluginPath
    return 0
}
