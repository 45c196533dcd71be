import GroupModel
import Synchronization

/// What the group cache of a store holds and has served (for tests and metrics).
public struct GroupCacheStatistics: Sendable, Hashable {
    /// The most records the cache holds (0: the cache is off).
    public var capacity: Int
    /// The records it holds now.
    public var count: Int
    /// Reads answered from the cache alone.
    public var hits: UInt64
    /// Reads that went to the database.
    public var misses: UInt64
    /// Read results not kept because a write committed while they were read.
    public var discardedFills: UInt64
}

/// A per-node, in-memory cache of group records, keyed by app and group id, for
/// ``Store/groups(app:ids:)``.
///
/// **Exact for one node that is the database's only writer.** Every mutation goes through this
/// process's ``Store`` (one commit queue), so the cache sees every commit and a read never
/// returns a record older than the last write that *returned* (nor one older than a record
/// another read already returned). It is not valid if anything else writes the database: a
/// backend shared by several nodes needs each node's cache invalidated from the shared event
/// log (every group change appends an event with the group's id), or no such cache at all.
///
/// How it stays exact:
/// - **Writes.** A mutation that changes a group row declares the key (``beginWrite(_:)``)
///   *before* its transaction commits. From then on the key is *pending*: lookups of it miss
///   (go to the database, which is exact by itself) and read results for it are not kept. When
///   the batch holding the mutation commits (after `COMMIT` has executed and before any write of
///   the batch returns), ``commitWrite(_:records:)`` puts the group as the mutation left it in
///   place of the record (or drops it: a dismissed group), clears the pending mark and bumps the
///   generation. When the mutation's changes are discarded (it failed, or its batch did not
///   commit), ``rollbackWrite(_:)`` only clears the pending mark: the record stays as it was.
/// - **Read misses.** A read that misses notes the generation *before* it starts its database
///   read, and keeps its result (``fill(app:groups:generation:)``) only if no write committed
///   in the meantime and none of the keys is pending. A result read from a snapshot older than
///   a commit can thus never be kept after that commit replaced the key.
/// - **Batches.** A lookup answers from the cache only if every id hits, under one lock, so a
///   batch is one instant, as the single-snapshot database read is.
/// - Ids that are missing (never created, or dismissed) are not cached: reads of them always go
///   to the database (a created group enters the cache when its creation commits).
/// - **Bound.** At most `capacity` records; a new one replaces the least recently used
///   approximately (CLOCK: a hit marks a record, eviction skips and clears marked ones).
final class GroupCache: Sendable {
    /// The key of one record: app and group id.
    struct Key: Hashable, Sendable {
        var app: String
        var id: String
    }

    /// The answer of ``lookup(app:ids:)``.
    enum Lookup {
        /// Every id was cached: the records (ids deduplicated by the caller).
        case hit([String: Group])
        /// Read the database, then ``fill(app:groups:generation:)`` with this generation.
        case miss(generation: UInt64)
    }

    private struct Slot {
        var key: Key
        var group: Group
        var referenced: Bool
    }

    private struct State {
        var index: [Key: Int] = [:]
        var slots: [Slot?] = []
        var free: [Int] = []
        var hand = 0
        /// Bumped on every committed write.
        var generation: UInt64 = 0
        /// Keys changed by a write transaction not yet committed or rolled back (with a count,
        /// should two transactions ever overlap).
        var pending: [Key: Int] = [:]
        var closed = false
        var hits: UInt64 = 0
        var misses: UInt64 = 0
        var discardedFills: UInt64 = 0

        mutating func endPending(_ key: Key) {
            if let count = pending[key] {
                pending[key] = count > 1 ? count - 1 : nil
            }
        }

        mutating func remove(_ key: Key) {
            if let slot = index.removeValue(forKey: key) {
                slots[slot] = nil
                free.append(slot)
            }
        }

        mutating func insert(_ key: Key, _ group: Group, capacity: Int) {
            if let slot = index[key] {
                slots[slot]?.group = group
                return
            }
            let slot: Int
            if let reused = free.popLast() {
                slot = reused
            } else if slots.count < capacity {
                slots.append(nil)
                slot = slots.count - 1
            } else {
                slot = evict()
            }
            slots[slot] = Slot(key: key, group: group, referenced: false)
            index[key] = slot
        }

        /// Free one slot (all are occupied): the first unreferenced one from the hand on.
        private mutating func evict() -> Int {
            while true {
                if hand >= slots.count { hand = 0 }
                let slot = hand
                hand += 1
                guard let occupant = slots[slot] else { return slot }
                if occupant.referenced {
                    slots[slot]?.referenced = false
                } else {
                    index.removeValue(forKey: occupant.key)
                    slots[slot] = nil
                    return slot
                }
            }
        }
    }

    /// The most records kept (0: off).
    let capacity: Int
    private let state = Mutex(State())

    /// Create an empty cache holding at most `capacity` records (0 or less: off).
    init(capacity: Int) {
        self.capacity = max(0, capacity)
    }

    /// Look `ids` (distinct) of `app` up: all cached, or a miss with the generation to fill with.
    func lookup(app: String, ids: [String]) -> Lookup {
        state.withLock { state in
            guard capacity > 0, !state.closed else {
                state.misses &+= 1
                return .miss(generation: state.generation)
            }
            var found: [String: Group] = [:]
            found.reserveCapacity(ids.count)
            for id in ids {
                let key = Key(app: app, id: id)
                guard state.pending[key] == nil, let slot = state.index[key] else {
                    state.misses &+= 1
                    return .miss(generation: state.generation)
                }
                state.slots[slot]!.referenced = true
                found[id] = state.slots[slot]!.group
            }
            state.hits &+= 1
            return .hit(found)
        }
    }

    /// The type of a cached group, even while a write to it is in flight (a group's type never
    /// changes); `nil` when the group is not cached.
    func type(app: String, id: String) -> GroupType? {
        state.withLock { state in
            guard capacity > 0, !state.closed, let slot = state.index[Key(app: app, id: id)] else { return nil }
            state.slots[slot]!.referenced = true
            return state.slots[slot]!.group.type
        }
    }

    /// Keep records read from the database, unless a write committed since `generation` was
    /// handed out or one of them is being written.
    func fill(app: String, groups: some Collection<Group>, generation: UInt64) {
        guard capacity > 0, !groups.isEmpty else { return }
        state.withLock { state in
            guard !state.closed else { return }
            guard state.generation == generation else {
                state.discardedFills &+= 1
                return
            }
            for group in groups {
                let key = Key(app: app, id: group.id)
                if state.pending[key] == nil {
                    state.insert(key, group, capacity: capacity)
                }
            }
        }
    }

    /// Mark `keys` as being changed by a write transaction (call inside it, before it commits).
    func beginWrite(_ keys: [Key]) {
        state.withLock { state in
            for key in keys { state.pending[key, default: 0] += 1 }
        }
    }

    /// The mutation that changed `keys` committed: their records become `records[key]` (the
    /// group as the mutation left it), or are dropped where `records` has none.
    func commitWrite(_ keys: [Key], records: [Key: Group] = [:]) {
        state.withLock { state in
            state.generation &+= 1
            for key in keys {
                if capacity > 0, !state.closed, let group = records[key] {
                    state.insert(key, group, capacity: capacity)
                } else {
                    state.remove(key)
                }
                state.endPending(key)
            }
        }
    }

    /// The write transaction that would have changed `keys` rolled back: the records stay.
    func rollbackWrite(_ keys: [Key]) {
        state.withLock { state in
            for key in keys { state.endPending(key) }
        }
    }

    /// Empty the cache and stop using it (the store is closing).
    func close() {
        state.withLock { state in
            state.closed = true
            state.index = [:]
            state.slots = []
            state.free = []
            state.hand = 0
        }
    }

    /// What the cache holds and has served.
    var statistics: GroupCacheStatistics {
        state.withLock { state in
            GroupCacheStatistics(
                capacity: capacity, count: state.index.count, hits: state.hits, misses: state.misses,
                discardedFills: state.discardedFills)
        }
    }
}
