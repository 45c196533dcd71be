/// What the backends spell differently in the parts of statements they share: each backend
/// builds those parts with its own dialect (``sqlite``, ``postgres``).
///
/// Both backends write parameters as `?` (the PostgreSQL session numbers them), `ON CONFLICT`
/// upserts, `LIMIT`, and store flags as integers, so most shared SQL (``Rows``,
/// ``ApplicationRows``, ``InviteLinkRows``, ``MessageRows``, ``BanRows``) needs no dialect at all.
package struct SQLDialect: Sendable {
    /// The operator of a pattern match that ignores case: SQLite's `LIKE` folds ASCII letters,
    /// PostgreSQL's `LIKE` does not (`ILIKE` does).
    package let caseInsensitiveLike: String

    package static let sqlite = SQLDialect(caseInsensitiveLike: "LIKE")
    package static let postgres = SQLDialect(caseInsensitiveLike: "ILIKE")

    /// The condition that `column` contains the text a ``containsPattern(_:)`` pattern, bound at
    /// `placeholder`, was made from, ignoring case.
    package func contains(_ column: String, _ placeholder: String = "?") -> String {
        "\(column) \(caseInsensitiveLike) \(placeholder) ESCAPE '\\'"
    }

    /// The pattern that matches every text containing `keyword`, for ``contains(_:_:)``: LIKE's
    /// wildcards (`%`, `_`) and its escape character (`\`) in `keyword` escaped.
    package static func containsPattern(_ keyword: String) -> String {
        var escaped = "%"
        for character in keyword {
            if character == "\\" || character == "%" || character == "_" { escaped.append("\\") }
            escaped.append(character)
        }
        escaped.append("%")
        return escaped
    }
}
