/// `console`: the operator console (docs/CONSOLE.md), a web page served on a port of its own that
/// calls the API through Connect JSON on that same port. Absent: nothing listens.
///
/// ```yaml
/// console:
///   host: 127.0.0.1   # default; the console has no login of its own: keep it on loopback
///   port: 8080        # required; 0 picks a free port, logged as `console listening`
/// ```
public typealias ConsoleSettings = EndpointSettings

extension GroupdConfiguration {
    /// Checks `console`: an address, a port in range, and a port that neither the gRPC listener
    /// nor the metrics endpoint takes on an overlapping address.
    func validateConsole(_ problems: inout ConfigurationProblems) {
        guard let console else { return }
        validateEndpoint("console", host: console.host, port: console.port, &problems)
        if let metrics, console.port != 0, console.port == metrics.port, Self.addressesOverlap(console.host, metrics.host) {
            problems.add(
                "console.port",
                "expected a port other than metrics.port (\(metrics.port)): \(console.host) and \(metrics.host) share it")
        }
    }

    /// Checks an HTTP endpoint of its own (`metrics`, `console`): `<name>.host` not empty,
    /// `<name>.port` from 0 to 65535 and not the gRPC listener's port on an address it covers.
    func validateEndpoint(_ name: String, host: String, port: Int, _ problems: inout ConfigurationProblems) {
        problems.require(!host.isEmpty, "\(name).host", "expected an address, found an empty string")
        problems.inRange(port, 0...65535, "\(name).port")
        if port != 0, port == listen.port, Self.addressesOverlap(host, listen.host) {
            problems.add(
                "\(name).port",
                "expected a port other than listen.port (\(listen.port)): \(host) and \(listen.host) share it")
        }
    }
}
