import GroupModel

/// The cursors of versioned sync and member search, shared by the backends: ``Cursor`` numbers
/// that carry the client's version (a cursor of another version is refused), and a user id as hex.
enum SyncCursor {
    /// A member sync position: the version synced from, the version the pages describe, the phase
    /// (0: member rows, 1: removals) and the last row's two keys.
    struct Member {
        var target: Int64
        var phase: Int64
        var a: Int64
        var b: Int64
    }

    /// A joined-group sync position.
    struct Joined {
        var target: Int64
        var groupKey: Int64
    }

    static func encode(from: Int64, target: Int64, phase: Int64, _ a: Int64, _ b: Int64) -> String {
        Cursor.encode([from, target, phase, a, b])
    }

    /// - Throws: `INVALID_ARGUMENT` naming `page_token` for a malformed token or one of another version.
    static func member(_ text: String, from: Int64) throws -> Member {
        let values = try Cursor.decode(text, count: 5)
        guard values[0] == from, values[1] >= from, values[2] == 0 || values[2] == 1 else { throw invalid }
        return Member(target: values[1], phase: values[2], a: values[3], b: values[4])
    }

    /// - Throws: `INVALID_ARGUMENT` naming `page_token` for a malformed token or one of another version.
    static func joined(_ text: String, from: Int64) throws -> Joined {
        let values = try Cursor.decode(text, count: 3)
        guard values[0] == from, values[1] >= from else { throw invalid }
        return Joined(target: values[1], groupKey: values[2])
    }

    static func encode(userID: String) -> String {
        let digits = Array("0123456789abcdef")
        return "u" + String(userID.utf8.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] })
    }

    /// - Throws: `INVALID_ARGUMENT` naming `page_token` unless `text` is `u` and hex of UTF-8.
    static func userID(_ text: String) throws -> String {
        guard text.first == "u", text.count % 2 == 1, text.count <= 1 + 2 * 256 else { throw invalid }
        var bytes: [UInt8] = []
        var index = text.index(after: text.startIndex)
        while index < text.endIndex {
            let end = text.index(index, offsetBy: 2)
            guard let byte = UInt8(text[index..<end], radix: 16) else { throw invalid }
            bytes.append(byte)
            index = end
        }
        let user = String(decoding: bytes, as: UTF8.self)
        guard !user.isEmpty, Array(user.utf8) == bytes else { throw invalid }
        return user
    }

    private static var invalid: GroupError {
        GroupError.invalidArgument(field: "page_token", "the page token is not valid")
    }
}
