import GroupStore
import GroupStoreSQL
import Synchronization

/// The statements one PostgreSQL connection has prepared, by statement text and parameter types:
/// which run as named prepared statements, under which name. Owned by a ``PostgresSession``
/// (which keeps the driver's handle of each name) and dropped with its connection (prepared
/// statements live as long as the server session that made them).
///
/// How a statement is run (``PostgresSession`` asks ``lookup(_:types:)`` before each query):
/// - A statement is *preparable* when it is a `SELECT`, `INSERT`, `UPDATE`, `DELETE`, `WITH` or
///   `VALUES` and has no parameter in a range comparison or a `LIMIT`/`OFFSET`
///   (``keepsCustomPlan(_:)``). Others (transaction control, session commands, DDL) run unnamed.
/// - The first use of a text runs unnamed, as before; the second prepares it (Parse once) and
///   every use from then on is Bind/Execute of the prepared statement. A text built with a
///   variable part (an `IN (…)` list, a `VALUES` list of n rows) seen once costs nothing here.
/// - At most `capacity` texts are remembered; a new one evicts the least recently used, which is
///   deallocated on the server (a protocol `Close`) before the session's next statement outside
///   a transaction when it had been prepared. Names (`g1`, `g2`…) are never reused on a connection.
struct PostgresStatementCache {
    /// How a statement runs.
    enum Plan: Equatable {
        /// An unnamed statement, parsed and planned for this call (as without the cache).
        case unnamed
        /// Prepare it under `name`, then execute it.
        case prepare(name: String)
        /// Execute the statement prepared under `name`.
        case execute(name: String)
    }

    private struct Entry {
        var name: String?
        var uses: Int
        var lastUse: UInt64
    }

    /// How many statement texts are remembered (prepared or not) at most.
    let capacity: Int
    /// Uses of a text after which it is prepared.
    static let prepareOnUse = 2

    /// A statement's text and its parameters' types (the types are part of the prepared
    /// statement, so a text bound once with a null and once with a value is two).
    struct Key: Hashable {
        var sql: String
        /// The parameters' types (``PGValue/typeCode``).
        var types: [UInt8]
    }

    private var entries: [Key: Entry] = [:]
    private var tick: UInt64 = 0
    private var nextName = 1
    /// How many statements were prepared (counting ones since evicted).
    private(set) var preparedCount = 0

    init(capacity: Int) {
        precondition(capacity > 0, "a statement cache holds at least one statement")
        self.capacity = capacity
    }

    /// The names prepared on the server now.
    var preparedNames: [String] { entries.values.compactMap(\.name) }

    /// How the statement `sql` with parameter types `types` (``PGValue/typeCode``) runs now;
    /// counts the use.
    mutating func lookup(_ sql: String, types: [UInt8]) -> Plan {
        let key = Key(sql: sql, types: types)
        // A known text is hashed once (found by index, updated in place): the texts are long.
        if let index = entries.index(forKey: key) {
            tick += 1
            entries.values[index].uses += 1
            entries.values[index].lastUse = tick
            let entry = entries.values[index]
            if let name = entry.name { return .execute(name: name) }
            guard entry.uses >= Self.prepareOnUse else { return .unnamed }
            // The entry gets its name once the server has it (`prepared(_:types:name:)`).
            defer { nextName += 1 }
            return .prepare(name: "g\(nextName)")
        }
        // Only preparable texts have entries: a known one skipped the (shared, locked) memo.
        guard Self.isPreparable(sql) else { return .unnamed }
        tick += 1
        if entries.count >= capacity, let evicted = evictLeastRecentlyUsed() {
            pendingDeallocations.append(evicted)
        }
        entries[key] = Entry(name: nil, uses: 1, lastUse: tick)
        return .unnamed
    }

    /// Prepared statements evicted but not yet deallocated on the server. The session
    /// deallocates them before its next statement outside a transaction (a deallocation that
    /// failed inside one must not end the caller's transaction).
    private(set) var pendingDeallocations: [String] = []

    /// Hands over the names to deallocate now.
    mutating func takePendingDeallocations() -> [String] {
        defer { pendingDeallocations = [] }
        return pendingDeallocations
    }

    /// Puts `names` back to deallocate before a later statement.
    mutating func deallocateLater(_ names: [String]) {
        pendingDeallocations = names + pendingDeallocations
    }

    /// The server now holds `name` for `sql` with `types`.
    mutating func prepared(_ sql: String, types: [UInt8], name: String) {
        let key = Key(sql: sql, types: types)
        guard entries[key] != nil else { return }
        entries[key]?.name = name
        preparedCount += 1
    }

    /// Stops using `name`: the next use of its text prepares it again. `deallocate`: the server
    /// may still hold it (it is deallocated with the evicted ones).
    mutating func forget(name: String, deallocate: Bool) {
        guard let key = entries.first(where: { $0.value.name == name })?.key else { return }
        entries[key]?.name = nil
        if deallocate { pendingDeallocations.append(name) }
    }

    /// Forgets every statement (the connection, and with it every prepared statement, is gone).
    mutating func reset() {
        entries = [:]
        pendingDeallocations = []
        nextName = 1
    }

    /// Removes the least recently used entry; returns its name when it was prepared.
    private mutating func evictLeastRecentlyUsed() -> String? {
        guard let oldest = entries.min(by: { $0.value.lastUse < $1.value.lastUse }) else { return nil }
        entries[oldest.key] = nil
        return oldest.value.name
    }

    // MARK: Which statements are prepared

    /// Whether `sql` is prepared on its second use: a query or a data change (transaction
    /// control, session commands and DDL gain nothing), without a parameter whose value decides
    /// the plan (``keepsCustomPlan(_:)``).
    static func isPreparable(_ sql: String) -> Bool {
        if let known = preparable.withLock({ $0[sql] }) { return known }
        let answer = classify(sql)
        preparable.withLock { known in
            // Texts with a variable part (a list of n values) are bounded by the batch sizes;
            // a bound all the same.
            if known.count >= 10_000 { known.removeAll(keepingCapacity: true) }
            known[sql] = answer
        }
        return answer
    }

    /// ``isPreparable(_:)`` by statement text, worked out once per text.
    private static let preparable = Mutex<[String: Bool]>([:])

    private static func classify(_ sql: String) -> Bool {
        let start = sql.drop(while: \.isWhitespace)
        guard ["SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "VALUES"].contains(where: { start.hasPrefix($0) }) else {
            return false
        }
        return !keepsCustomPlan(sql)
    }

    /// Whether `sql` has a parameter in a range comparison (`<`, `<=`, `>`, `>=`, either side) or
    /// in `LIMIT`/`OFFSET`. A prepared statement may switch to a generic plan after its fifth
    /// execution (`plan_cache_mode = auto`), one made without the parameters' values: fine for the
    /// equality lookups and keyed writes that most statements are, risky where a value decides
    /// how many rows qualify (`event_id > $1 … LIMIT $2`: the event-log and follower range
    /// reads, history pages, sync ranges). Such statements stay unnamed and are planned with
    /// their values on every call, as before. (`plan_cache_mode` is a session setting, so it
    /// cannot keep one prepared statement on custom plans and let the others go generic.)
    static func keepsCustomPlan(_ sql: String) -> Bool {
        let bytes = Array(sql.utf8)
        let question = UInt8(ascii: "?"), less = UInt8(ascii: "<"), greater = UInt8(ascii: ">")
        let equals = UInt8(ascii: "=")
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x0A || byte == 0x09 || byte == 0x0D }
        for (index, byte) in bytes.enumerated() where byte == question {
            // Before the `?`: skip blanks, `(` (a row comparison: `(a, b) > (?, ?)`) and `=`, then
            // `<` or `>` is a range comparison (`<>` is not).
            var before = index - 1
            while before >= 0, isSpace(bytes[before]) || bytes[before] == UInt8(ascii: "(") { before -= 1 }
            if before >= 0, bytes[before] == equals { before -= 1 }
            if before >= 0, bytes[before] == less || bytes[before] == greater {
                let isNotEqual = bytes[before] == greater && before >= 1 && bytes[before - 1] == less
                if !isNotEqual { return true }
            }
            // After the `?` (a cast like `?::bigint` skipped): `<` or `>` is a range comparison.
            var after = index + 1
            if after + 1 < bytes.count, bytes[after] == UInt8(ascii: ":"), bytes[after + 1] == UInt8(ascii: ":") {
                after += 2
                while after < bytes.count, !isSpace(bytes[after]), bytes[after] != UInt8(ascii: ")") { after += 1 }
            }
            while after < bytes.count, isSpace(bytes[after]) { after += 1 }
            if after < bytes.count, bytes[after] == less || bytes[after] == greater {
                let isNotEqual = bytes[after] == less && after + 1 < bytes.count && bytes[after + 1] == greater
                if !isNotEqual { return true }
            }
            // `LIMIT ?` / `OFFSET ?`.
            var end = index
            while end > 0, isSpace(bytes[end - 1]) { end -= 1 }
            let word = String(decoding: bytes[max(0, end - 6)..<end], as: UTF8.self).uppercased()
            if word.hasSuffix("LIMIT") || word.hasSuffix("OFFSET") { return true }
        }
        return false
    }
}
