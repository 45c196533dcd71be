import GroupModel
import GroupStore

/// The cursors of versioned sync and member search, shared by the backends: ``Cursor`` numbers
/// that carry the client's version (a cursor of another version is refused), and a user id as hex.
package enum SyncCursor {
    /// A member sync position: the version synced from, the version the pages describe, the phase
    /// (0: member rows, 1: removals) and the last row's two keys.
    package struct Member {
        package var target: Int64
        package var phase: Int64
        package var a: Int64
        package var b: Int64
    }

    /// A joined-group sync position.
    package struct Joined {
        package var target: Int64
        package var groupKey: Int64
    }

    package static func encode(from: Int64, target: Int64, phase: Int64, _ a: Int64, _ b: Int64) -> String {
        Cursor.encode([from, target, phase, a, b])
    }

    /// - Throws: `INVALID_ARGUMENT` naming `page_token` for a malformed token or one of another version.
    package static func member(_ text: String, from: Int64) throws -> Member {
        let values = try Cursor.decode(text, count: 5)
        guard values[0] == from, values[1] >= from, values[2] == 0 || values[2] == 1 else { throw invalid }
        return Member(target: values[1], phase: values[2], a: values[3], b: values[4])
    }

    /// - Throws: `INVALID_ARGUMENT` naming `page_token` for a malformed token or one of another version.
    package static func joined(_ text: String, from: Int64) throws -> Joined {
        let values = try Cursor.decode(text, count: 3)
        guard values[0] == from, values[1] >= from else { throw invalid }
        return Joined(target: values[1], groupKey: values[2])
    }

    package static func encode(userID: String) -> String {
        "u" + UserIDToken.hex(userID)
    }

    /// - Throws: `INVALID_ARGUMENT` naming `page_token` unless `text` is `u` and hex of UTF-8.
    package static func userID(_ text: String) throws -> String {
        guard text.first == "u" else { throw UserIDToken.invalid }
        return try UserIDToken.userID(hex: text.dropFirst())
    }

    private static var invalid: GroupError { UserIDToken.invalid }
}
