// The settings themselves are plain values in GroupStoreSettings, which the configuration loader
// (GroupdConfig) shares without depending on the store; re-exported, so that `import GroupStore`
// sees `PostgresStoreSettings` and `Durability` as before.
@_exported public import GroupStoreSettings
import GroupStore
import GroupStoreSQL
import NIOCore
import NIOSSL
import PostgresNIO

extension PostgresStoreSettings {
    func connectionConfiguration() throws -> PostgresConnection.Configuration {
        let endpoint = try endpoint()
        let tls: PostgresConnection.Configuration.TLS
        switch self.tls {
        case .disable: tls = .disable
        case .prefer: tls = .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
        case .require: tls = .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
        }
        var configuration = PostgresConnection.Configuration(
            host: endpoint.host, port: endpoint.port, username: endpoint.user, password: endpoint.password,
            database: endpoint.database, tls: tls)
        configuration.options.connectTimeout = .milliseconds(Int64(connectTimeoutMilliseconds))
        configuration.options.additionalStartupParameters = [("application_name", "groupd")]
        return configuration
    }
}
