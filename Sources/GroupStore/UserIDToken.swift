public import GroupModel

/// A user id in a page token: the hex of its UTF-8 (`Hex`; opaque, and free of the token's
/// separators).
public enum UserIDToken {
    /// The hex of `userID`'s UTF-8.
    public static func hex(_ userID: String) -> String {
        Hex.encode(userID.utf8)
    }

    /// The user id whose ``hex(_:)`` `text` is.
    /// - Throws: `INVALID_ARGUMENT` naming `page_token` unless `text` is the hex of 1…256 bytes
    ///   of UTF-8.
    public static func userID(hex text: Substring) throws -> String {
        guard !text.isEmpty, text.utf8.count <= 2 * 256, let bytes = Hex.decode(text),
              let user = String(validating: bytes, as: UTF8.self)
        else { throw invalid }
        return user
    }

    /// The error of a malformed page token.
    public static var invalid: GroupError {
        GroupError.invalidArgument(field: "page_token", "the page token is not valid")
    }
}
