#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import PolicyABI

/// The plugin's configuration (JSON):
/// `{"words": ["spam"], "words_file": "/etc/groupd/words.txt", "mode": "reject" | "mask",
///   "fields": ["name", "message.text", "custom.group."]}`.
/// `words_file` adds one word per line (blank lines and lines starting with `#` skipped).
/// `fields` lists keys, or prefixes ending in `.`, to check; absent means every field.
struct KeywordConfiguration: Decodable {
    var words: [String]?
    var wordsFile: String?
    var mode: Mode?
    var fields: [String]?

    enum CodingKeys: String, CodingKey {
        case words, mode, fields
        case wordsFile = "words_file"
    }

    /// The configured words plus those of `words_file`. - Throws: when the file cannot be read.
    func allWords() throws -> [String] {
        var all = words ?? []
        if let wordsFile {
            let text = String(decoding: try Data(contentsOf: URL(fileURLWithPath: wordsFile)), as: UTF8.self)
            for line in text.split(whereSeparator: \.isNewline) {
                let word = line.trimmingSpaces()
                if !word.isEmpty && !word.hasPrefix("#") { all.append(word) }
            }
        }
        return all
    }

    enum Mode: String, Decodable {
        case reject, mask
    }
}

/// One instance: the automaton for one app's word list. Immutable, so `on_hook` may run concurrently.
final class KeywordModerator: Sendable {
    let automaton: AhoCorasick
    let mask: Bool
    let fields: [String]?

    init(_ configuration: KeywordConfiguration) throws {
        automaton = AhoCorasick(words: try configuration.allWords().map(Folding.fold))
        mask = configuration.mode == .mask
        fields = configuration.fields
    }

    func checks(_ key: String) -> Bool {
        guard let fields else { return true }
        return fields.contains { $0.hasSuffix(".") ? key.hasPrefix($0) : key == $0 }
    }

    /// `nil` when clean; otherwise the masked text (or the unmasked text in reject mode).
    func moderate(_ text: String) -> String? {
        let scalars = Array(text.unicodeScalars)
        let matches = automaton.matches(in: scalars.map(Folding.fold))
        guard !matches.isEmpty else { return nil }
        guard mask else { return text }
        var out = String.UnicodeScalarView()
        var position = 0
        for match in matches {
            out.append(contentsOf: scalars[position..<match.lowerBound])
            out.append(contentsOf: "***".unicodeScalars)
            position = match.upperBound
        }
        out.append(contentsOf: scalars[position...])
        return String(out)
    }
}

/// Written by the entry before any instance exists; every write stores the same pointer.
nonisolated(unsafe) private var host: UnsafePointer<groupd_host_api>?

extension Substring {
    func trimmingSpaces() -> String {
        String(drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }
}

extension String {
    init(_ str: groupd_str) {
        guard let pointer = str.ptr, str.len > 0 else {
            self = ""
            return
        }
        self = String(decoding: UnsafeRawBufferPointer(start: pointer, count: str.len), as: UTF8.self)
    }

    /// Lend this string to C as a `groupd_str` (the host copies it).
    func withGroupdStr<R>(_ body: (groupd_str) -> R) -> R {
        var copy = self
        return copy.withUTF8 { bytes in
            body(groupd_str(ptr: UnsafeRawPointer(bytes.baseAddress)?.assumingMemoryBound(to: CChar.self), len: bytes.count))
        }
    }
}

private func setError(_ call: OpaquePointer?, _ message: String) {
    message.withGroupdStr { host?.pointee.set_error(call, 1, $0) }
}

/// Initialised once (Swift globals are lazily initialised exactly once) and only read afterwards.
nonisolated(unsafe) private let pluginTable: UnsafeMutablePointer<groupd_plugin_api> = {
    let table = UnsafeMutablePointer<groupd_plugin_api>.allocate(capacity: 1)
    table.initialize(to: groupd_plugin_api(
        struct_size: UInt32(MemoryLayout<groupd_plugin_api>.size),
        abi_major: UInt32(GROUPD_POLICY_ABI_MAJOR),
        abi_minor: UInt32(GROUPD_POLICY_ABI_MINOR),
        // A StaticString is NUL-terminated and lives as long as the library, which is never unloaded.
        name: UnsafeRawPointer(("keyword-moderation" as StaticString).utf8Start).assumingMemoryBound(to: CChar.self),
        instance_new: { call, _, config in
            // No Swift error may cross the C frame: every failure becomes set_error + NULL.
            do {
                let configuration = try JSONDecoder().decode(KeywordConfiguration.self, from: Data(String(config).utf8))
                return Unmanaged.passRetained(try KeywordModerator(configuration)).toOpaque()
            } catch {
                setError(call, "keyword-moderation: bad config: \(error)")
                return nil
            }
        },
        instance_destroy: { instance in
            guard let instance else { return }
            Unmanaged<KeywordModerator>.fromOpaque(instance).release()
        },
        on_hook: { instance, hook, request, call in
            guard let instance, let request, let host else { return Int32(GROUPD_DECISION_ERROR.rawValue) }
            if hook == Int32(GROUPD_HOOK_AFTER_EVENT.rawValue) || hook == Int32(GROUPD_HOOK_FILTER_CUSTOM_ON_READ.rawValue) {
                return Int32(GROUPD_DECISION_ALLOW.rawValue)
            }
            let moderator = Unmanaged<KeywordModerator>.fromOpaque(instance).takeUnretainedValue()
            var rejected = false, rewritten = false
            for index in 0..<request.pointee.field_count {
                let field = request.pointee.fields[index]
                let key = String(field.key)
                guard moderator.checks(key), let moderated = moderator.moderate(String(field.value)) else { continue }
                if moderator.mask {
                    moderated.withGroupdStr { value in host.pointee.rewrite(call, field.key, value) }
                    rewritten = true
                } else {
                    "contains a banned word".withGroupdStr { reason in host.pointee.reject_field(call, field.key, reason) }
                    rejected = true
                }
            }
            if rejected { return Int32(GROUPD_DECISION_REJECT.rawValue) }
            return Int32((rewritten ? GROUPD_DECISION_REWRITE : GROUPD_DECISION_ALLOW).rawValue)
        },
        after_event_position: nil  // keeps no after-events
    ))
    return table
}()

/// The plugin's entry: check the host, remember its table, return ours.
@_cdecl("groupd_policy_entry_v1")
public func groupdPolicyEntryV1(_ hostTable: UnsafePointer<groupd_host_api>?) -> UnsafePointer<groupd_plugin_api>? {
    guard let hostTable, hostTable.pointee.abi_major == UInt32(GROUPD_POLICY_ABI_MAJOR),
          Int(hostTable.pointee.struct_size) >= MemoryLayout<groupd_host_api>.size
    else { return nil }
    host = hostTable
    return UnsafePointer(pluginTable)
}
