#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// `testing`: settings that exist for groupd's own tests. A production configuration has no
/// `testing` section; the one setting that changes behaviour, `clock: manual`, is refused unless
/// the process runs with `GROUPD_TEST_CLOCK=1` in its environment.
///
/// ```yaml
/// testing:
///   clock: manual     # system (default) or manual; manual needs GROUPD_TEST_CLOCK=1
///   clock_port: 0     # the clock's control endpoint on 127.0.0.1 (manual only); 0 picks a free port
/// ```
public struct TestingSettings: Sendable, Hashable {
    /// `testing.clock`: where the server's time comes from.
    public enum Clock: String, Sendable, Hashable, CaseIterable {
        /// The operating system's clocks.
        case system
        /// A clock that stands still from the time the server started until it is advanced
        /// through the control endpoint (`POST /clock/advance?ms=N` on `clock_port`).
        case manual
    }

    /// The environment variable that must be `1` for `testing.clock: manual` to load.
    public static let manualClockVariable = "GROUPD_TEST_CLOCK"

    /// `testing.clock`: `system` (default) or `manual`.
    public var clock: Clock
    /// `testing.clock_port`: the TCP port of the manual clock's control endpoint, which binds
    /// 127.0.0.1 only (`0` picks a free port, logged at start-up). Required with `clock: manual`,
    /// refused otherwise.
    public var clockPort: Int?

    /// The system clock, no endpoint.
    public static var defaults: TestingSettings { TestingSettings(clock: .system, clockPort: nil) }

    /// Create testing settings.
    public init(clock: Clock, clockPort: Int?) {
        self.clock = clock
        self.clockPort = clockPort
    }
}

extension TestingSettings: Codable {
    /// Decode, taking the default for every absent key and refusing unknown keys and values.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.configMapping(allowing: ["clock", "clock_port"])
        let clock = try decoder.member(
            "clock", c.value("clock", or: Self.defaults.clock.rawValue), expected: "system or manual",
            fallback: Self.defaults.clock, Clock.init(rawValue:))
        self.init(clock: clock, clockPort: try c.decodeIfPresent(Int.self, forKey: ConfigKey("clock_port")))
    }

    /// Encode both keys (the port when set).
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: ConfigKey.self)
        try c.encode(clock.rawValue, forKey: ConfigKey("clock"))
        try c.encodeIfPresent(clockPort, forKey: ConfigKey("clock_port"))
    }
}

extension GroupdConfiguration {
    /// Checks `testing`: `clock: manual` only with `GROUPD_TEST_CLOCK=1` in `environment` (the
    /// process's when `nil`) and with a `clock_port` from 0 to 65535; `clock_port` only with it.
    func validateTesting(_ problems: inout ConfigurationProblems, environment: [String: String]?) {
        switch testing.clock {
        case .system:
            if testing.clockPort != nil {
                problems.add("testing.clock_port", "only with testing.clock: manual")
            }
        case .manual:
            let variable = TestingSettings.manualClockVariable
            let value = environment.map { $0[variable] } ?? getenv(variable).map { String(cString: $0) }
            if value != "1" {
                problems.add("testing.clock", "manual is for groupd's tests only and needs \(variable)=1 in the environment")
            }
            if let port = testing.clockPort {
                problems.inRange(port, 0...65535, "testing.clock_port")
            } else {
                problems.add("testing.clock_port", "required with testing.clock: manual")
            }
        }
    }
}
