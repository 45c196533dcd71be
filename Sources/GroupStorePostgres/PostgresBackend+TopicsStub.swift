import GroupModel
import GroupStore

// Temporary until the PostgreSQL side of topics lands (branch topics-pg replaces this file).
extension PostgresBackend {
    public func topics(app: String, communities: [String]) async throws -> [String: [Group]] { [:] }
}
