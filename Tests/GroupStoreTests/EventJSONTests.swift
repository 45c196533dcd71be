import Foundation
@testable import GroupStore
@testable import GroupStorePostgres
@testable import GroupStoreSQL
@testable import GroupStoreSQLite
import Testing

@Suite("Event JSON: targets and changes as stored")
struct EventJSONTests {
    static let samples: [[String]] = [
        [], ["alice"], ["a\"b", "back\\slash", "sl/ash", "new\nline", "tab\t", "bell\u{07}", "é", "😀", ""],
    ]

    @Test("targets are written as JSONEncoder writes them and read back", arguments: samples)
    func strings(_ strings: [String]) throws {
        let written = EventJSON.encode(strings)
        #expect(written == String(decoding: try JSONEncoder().encode(strings), as: UTF8.self))
        #expect(try EventJSON.strings(written) == strings)
    }

    @Test("changes are written with sorted keys as JSONEncoder writes them and read back")
    func object() throws {
        let changes = ["name": "a/b \"c\"", "application_id": "ap1", "zeta": "😀\u{01}", "": ""]
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let written = EventJSON.encode(changes)
        #expect(written == String(decoding: try encoder.encode(changes), as: UTF8.self))
        #expect(try EventJSON.object(written) == changes)
        #expect(EventJSON.encode([String: String]()) == "{}")
    }

    @Test("whatever escapes a stored row holds are read", arguments: [
        (#"[ "a\u00e9\ud83d\ude00" , "\/\b\f\r" ]"#, ["aé😀", "/\u{08}\u{0C}\r"]),
        (#"["A\u0041"]"#, ["AA"]),
    ])
    func escapes(_ text: String, _ expected: [String]) throws {
        #expect(try EventJSON.strings(text) == expected)
    }

    @Test("malformed text is refused", arguments: [
        "", "[", "[\"a\"", "[\"a\",]", "[1]", "{\"a\":1}", "[\"\\x\"]", "[\"\\ud83d\"]", "[\"a\"] x", "{\"a\" \"b\"}",
    ])
    func malformed(_ text: String) {
        #expect(throws: EventJSON.Malformed.self) {
            if text.hasPrefix("{") { _ = try EventJSON.object(text) } else { _ = try EventJSON.strings(text) }
        }
    }
}
