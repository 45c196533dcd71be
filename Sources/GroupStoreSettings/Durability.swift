/// How hard the store pushes each commit to disk (SQLite's `synchronous` pragma in WAL mode).
public enum Durability: String, Sendable, Hashable, CaseIterable, Codable {
    /// `synchronous=FULL`: the WAL is fsynced at every commit; an acknowledged commit survives a
    /// process crash and also an OS crash or power loss.
    case full
    /// `synchronous=NORMAL`: the WAL is fsynced only at checkpoints; an acknowledged commit
    /// survives a process crash, but the latest commits may be lost on OS crash or power loss.
    case normal
}
