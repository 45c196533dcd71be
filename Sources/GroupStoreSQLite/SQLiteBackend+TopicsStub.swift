public import GroupModel

/// Stub for compile (the lead's SQLite topics replace it).
extension SQLiteBackend {
    public func topics(app: String, communities: [String]) async throws -> [String: [Group]] {
        throw GroupError.internal("SQLite topics: not implemented in this branch")
    }
}
