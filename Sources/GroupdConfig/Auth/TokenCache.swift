import Synchronization

/// A bounded memory of verified tokens, so that a client repeating the same token skips the HMAC.
///
/// Two generations of at most `capacity / 2` entries each: lookups hit either, a hit in the old
/// generation moves the entry to the new one, and when the new one fills it replaces the old.
/// That approximates least-recently-used in O(1) per call and never holds more than `capacity`.
/// Entries keep their `exp`: the ``Authenticator`` checks it on every hit.
final class TokenCache: Sendable {
    /// What a verified token proved.
    struct Entry: Sendable, Hashable {
        var appID: String
        var userID: String
        var isAdmin: Bool
        /// `exp` in milliseconds since the epoch.
        var expiresAt: Int64
        /// `nbf` in milliseconds since the epoch, if present.
        var notBefore: Int64?
    }

    private struct Generations {
        var current: [String: Entry] = [:]
        var previous: [String: Entry] = [:]
    }

    private let generationCapacity: Int
    // The mutex confines the dictionaries: every access is inside `withLock`.
    private let state = Mutex(Generations())

    /// Create a cache of at most `capacity` tokens (`0`: caches nothing).
    init(capacity: Int) {
        self.generationCapacity = max(0, capacity / 2)
    }

    /// The entry for `token`, if cached.
    func entry(for token: String) -> Entry? {
        guard self.generationCapacity > 0 else { return nil }
        return self.state.withLock { state in
            if let entry = state.current[token] { return entry }
            guard let entry = state.previous.removeValue(forKey: token) else { return nil }
            Self.insert(token, entry, into: &state, capacity: self.generationCapacity)
            return entry
        }
    }

    /// Remember `entry` for `token`.
    func store(_ entry: Entry, for token: String) {
        guard self.generationCapacity > 0 else { return }
        self.state.withLock { state in
            Self.insert(token, entry, into: &state, capacity: self.generationCapacity)
        }
    }

    /// Forget `token`.
    func remove(_ token: String) {
        self.state.withLock { state in
            state.current.removeValue(forKey: token)
            state.previous.removeValue(forKey: token)
        }
    }

    /// How many tokens are held.
    var count: Int {
        self.state.withLock { $0.current.count + $0.previous.count }
    }

    private static func insert(_ token: String, _ entry: Entry, into state: inout Generations, capacity: Int) {
        state.current[token] = entry
        if state.current.count >= capacity {
            state.previous = state.current
            state.current = [:]
        }
    }
}
