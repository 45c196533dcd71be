// policy-bench: the cost per call of the policy host, measured at the PolicyHost level.
//
//   policy-bench <plugin directory>
//
// Cases (each one hook call from an async task, as an RPC handler makes it):
//   - no chain: the app has no plugin on the hook (what every RPC pays when an app has no policy);
//   - empty chain: one plugin that allows without reading anything (the behaviours fixture);
//   - keyword 10k: the keyword plugin with 10,000 words, mode reject, on a 1 KiB message with no match;
//   - keyword 10k mask: the same with mode mask on a 1 KiB message with two matches.
// Sequential calls give the latency per call; 8 concurrent callers the throughput.
import PolicyHost

#if canImport(Glibc)
import Glibc
#endif

let directory = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : ".build/release"
let host = PolicyHost(configuration: PolicyHostConfiguration(threads: 4, breakerThreshold: 1_000_000, breakerCooldown: .seconds(1)))

/// 10,000 distinct words of 5–9 letters, none of which occurs in the message.
func words() -> [String] {
    var generator = SplitMix(seed: 42)
    var set: Set<String> = []
    while set.count < 10_000 {
        let length = 5 + Int(generator.next() % 5)
        set.insert(String((0..<length).map { _ in Character(UnicodeScalar(UInt8(97 + generator.next() % 26))) }))
    }
    return set.sorted()
}

/// A small deterministic generator.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

let wordList = words()
let wordsJSON = "[" + wordList.map { "\"\($0)\"" }.joined(separator: ",") + "]"
// 1 KiB of text in digits and spaces: no word of letters can match it.
let clean = String(String(repeating: "0123456 89 ", count: 100).prefix(1024))
let dirty = String((wordList[17] + " " + String(clean.dropFirst(wordList[17].count + wordList[4242].count + 2)) + " " + wordList[4242]).prefix(1024))

func plugin(_ name: String) -> String { "\(directory)/lib\(name).so" }

try host.apply([
    "empty": AppPolicyConfiguration(plugins: [
        PluginConfiguration(path: plugin("PolicyFixtureBehaviors"), config: "mode=allow;tag=bench", hooks: [.beforeSendGroupMessage]),
    ]),
    "keyword": AppPolicyConfiguration(plugins: [
        PluginConfiguration(path: plugin("KeywordPolicy"), config: #"{"mode": "reject", "words": \#(wordsJSON)}"#,
                            hooks: [.beforeSendGroupMessage]),
    ], budget: .seconds(5)),
    "mask": AppPolicyConfiguration(plugins: [
        PluginConfiguration(path: plugin("KeywordPolicy"), config: #"{"mode": "mask", "words": \#(wordsJSON)}"#,
                            hooks: [.beforeSendGroupMessage]),
    ], budget: .seconds(5)),
])

func now() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// Run `calls` sequential hook calls, then `calls` spread over 8 concurrent tasks.
func measure(_ label: String, app: String, text: String, calls: Int, expect: (HookOutcome) -> Bool) async {
    let request = HookRequest(operatorID: "u1", groupID: "g1", fields: [HookField("message.text", text)])
    for _ in 0..<min(200, calls) { _ = await host.run(.beforeSendGroupMessage, app: app, request: request) }
    var samples: [UInt64] = []
    samples.reserveCapacity(calls)
    for _ in 0..<calls {
        let start = now()
        let outcome = await host.run(.beforeSendGroupMessage, app: app, request: request)
        samples.append(now() - start)
        if !expect(outcome) { print("unexpected outcome \(outcome) for \(label)"); exit(1) }
    }
    samples.sort()
    let mean = Double(samples.reduce(0, +)) / Double(calls) / 1000
    let p50 = Double(samples[calls / 2]) / 1000
    let p99 = Double(samples[calls * 99 / 100]) / 1000
    let start = now()
    await withTaskGroup(of: Void.self) { group in
        for _ in 0..<8 {
            group.addTask {
                for _ in 0..<(calls / 8) { _ = await host.run(.beforeSendGroupMessage, app: app, request: request) }
            }
        }
    }
    let elapsed = Double(now() - start) / 1e9
    let rate = Double(calls / 8 * 8) / elapsed
    let padded = label + String(repeating: " ", count: max(0, 36 - label.count))
    print("\(padded) mean \(fixed(mean)) µs  p50 \(fixed(p50)) µs  p99 \(fixed(p99)) µs  | 8 callers: \(Int(rate)) calls/s")
}

/// `value` with two decimals.
func fixed(_ value: Double) -> String {
    let hundredths = Int((value * 100).rounded())
    let fraction = hundredths % 100
    return "\(hundredths / 100).\(fraction < 10 ? "0" : "")\(fraction)"
}

print("policy-bench: \(wordList.count) words, message \(clean.utf8.count) bytes, host threads 4")
await measure("no chain (app without plugins)", app: "none", text: clean, calls: 200_000) { $0 == .allow }
await measure("empty chain (1 plugin, allows)", app: "empty", text: clean, calls: 50_000) { $0 == .allow }
await measure("keyword 10k words, 1 KiB, no match", app: "keyword", text: clean, calls: 20_000) { $0 == .allow }
await measure("keyword 10k words, 1 KiB, masks 2", app: "mask", text: dirty, calls: 20_000) {
    if case .rewrite = $0 { true } else { false }
}
try await host.shutdown()
