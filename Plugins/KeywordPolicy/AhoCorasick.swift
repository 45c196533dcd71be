/// An Aho–Corasick automaton over Unicode scalars: finds every word in one pass over the text.
struct AhoCorasick: Sendable {
    private var transitions: [[UInt32: Int32]] = [[:]]
    private var failure: [Int32] = [0]
    /// The length (in scalars) of the longest word ending at this state, through failure links.
    private var longest: [Int32] = [0]

    /// Build the automaton for `words` (already folded).
    init(words: [[UInt32]]) {
        for word in words where !word.isEmpty {
            var state = 0
            for scalar in word {
                if let next = transitions[state][scalar] {
                    state = Int(next)
                } else {
                    transitions.append([:])
                    failure.append(0)
                    longest.append(0)
                    transitions[state][scalar] = Int32(transitions.count - 1)
                    state = transitions.count - 1
                }
            }
            longest[state] = max(longest[state], Int32(word.count))
        }
        // Breadth-first: a state's failure link points to a shallower state.
        var queue: [Int] = transitions[0].values.map(Int.init)
        var head = 0
        while head < queue.count {
            let state = queue[head]
            head += 1
            for (scalar, next) in transitions[state] {
                let child = Int(next)
                var fallback = Int(failure[state])
                while fallback != 0 && transitions[fallback][scalar] == nil {
                    fallback = Int(failure[fallback])
                }
                let target = transitions[fallback][scalar].map(Int.init) ?? 0
                failure[child] = Int32(target == child ? 0 : target)
                longest[child] = max(longest[child], longest[Int(failure[child])])
                queue.append(child)
            }
        }
    }

    /// Whether the automaton has no words.
    var isEmpty: Bool { transitions[0].isEmpty }

    /// The matches as scalar ranges, leftmost first, longest at each start, not overlapping.
    func matches(in text: [UInt32]) -> [Range<Int>] {
        var found: [Range<Int>] = []
        var state = 0
        for (index, scalar) in text.enumerated() {
            while state != 0 && transitions[state][scalar] == nil {
                state = Int(failure[state])
            }
            state = transitions[state][scalar].map(Int.init) ?? 0
            let length = Int(longest[state])
            if length > 0 { found.append((index + 1 - length)..<(index + 1)) }
        }
        // Longest match per end position; choose greedily by start, longer first.
        found.sort { $0.lowerBound != $1.lowerBound ? $0.lowerBound < $1.lowerBound : $0.count > $1.count }
        var chosen: [Range<Int>] = []
        for range in found where range.lowerBound >= (chosen.last?.upperBound ?? 0) {
            chosen.append(range)
        }
        return chosen
    }
}

/// Case and width folding, one scalar in, one scalar out (so match positions map back):
/// fullwidth ASCII → ASCII, then the simple lowercase mapping, plus the one simple case
/// folding lowercasing misses (final sigma ς → σ). Full foldings that change the length
/// (ß → ss) are not applied.
enum Folding {
    static func fold(_ scalar: Unicode.Scalar) -> UInt32 {
        var value = scalar.value
        // ASCII, the common case: lowercase without asking the Unicode tables (which build a
        // string per scalar and dominated the cost of a 1 KiB message).
        if value < 0x80 {
            return (0x41...0x5A).contains(value) ? value + 0x20 : value
        }
        // Fullwidth ASCII variants (U+FF01–U+FF5E) and the ideographic space fold to ASCII.
        if (0xFF01...0xFF5E).contains(value) { value -= 0xFEE0 } else if value == 0x3000 { value = 0x20 }
        guard let folded = Unicode.Scalar(value) else { return value }
        let lower = folded.properties.lowercaseMapping.unicodeScalars
        let result = lower.count == 1 ? lower.first!.value : folded.value
        return result == 0x03C2 ? 0x03C3 : result
    }

    static func fold(_ text: String) -> [UInt32] {
        text.unicodeScalars.map(fold)
    }
}
