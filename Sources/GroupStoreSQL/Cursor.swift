import GroupModel

/// Opaque page cursors: numbers in base 36 joined by `.`.
package enum Cursor {
    package static func encode(_ values: [Int64]) -> String {
        values.map { String($0, radix: 36) }.joined(separator: ".")
    }

    /// - Throws: `INVALID_ARGUMENT` naming `page_token` unless `text` holds exactly `count` numbers.
    package static func decode(_ text: String, count: Int) throws -> [Int64] {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        let values = parts.compactMap { $0.count <= 14 ? Int64($0, radix: 36) : nil }
        guard parts.count == count, values.count == count else {
            throw GroupError.invalidArgument(field: "page_token", "the page token is not valid")
        }
        return values
    }
}
