/// The range of strings that start with a prefix, in byte order (SQLite's `BINARY` collation,
/// PostgreSQL's `COLLATE "C"`): `lower <= s < upper`, so a prefix search reads one index range
/// and treats every character literally (no `LIKE` metacharacters).
package struct PrefixRange: Sendable, Hashable {
    /// The prefix itself: the smallest string that starts with it.
    package var lower: String
    /// The smallest string greater than every string that starts with the prefix, or `nil` when
    /// there is none (a prefix made only of U+10FFFF).
    package var upper: String?

    /// The range of the strings starting with `prefix`.
    ///
    /// UTF-8 byte order is code point order, so the upper bound is the prefix with its last
    /// scalar replaced by the next one (skipping the surrogates), dropping trailing U+10FFFF.
    package init(prefix: String) {
        self.lower = prefix
        var scalars = Array(prefix.unicodeScalars)
        while let last = scalars.popLast() {
            var next = last.value + 1
            if next == 0xD800 { next = 0xE000 }
            if let scalar = Unicode.Scalar(next) {
                scalars.append(scalar)
                var upper = String.UnicodeScalarView()
                upper.append(contentsOf: scalars)
                self.upper = String(upper)
                return
            }
        }
        self.upper = nil
    }
}
