import GroupService
import Testing
import Yams

@Suite("Configuration: testing (the manual clock is for tests only)")
struct TestingConfigurationTests {
    private let allowed = ["GROUPD_TEST_CLOCK": "1"]

    private func error(_ yaml: String, environment: [String: String]) -> ConfigurationError? {
        do {
            _ = try GroupdConfiguration.parse(yaml: yaml, file: "groupd.yaml", environment: environment)
            return nil
        } catch {
            return error as? ConfigurationError
        }
    }

    @Test("absent: the system clock and no endpoint")
    func defaults() throws {
        let c = try GroupdConfiguration.parse(yaml: app, environment: [:])
        #expect(c.testing == .defaults)
        #expect(c.testing.clock == .system && c.testing.clockPort == nil)
    }

    @Test("clock: manual loads with GROUPD_TEST_CLOCK=1 and survives an encode round trip")
    func manualWithTheVariable() throws {
        let c = try GroupdConfiguration.parse(yaml: "testing: {clock: manual, clock_port: 0}\n" + app, environment: allowed)
        #expect(c.testing == TestingSettings(clock: .manual, clockPort: 0))
        let again = try GroupdConfiguration.parse(yaml: try YAMLEncoder().encode(c), environment: allowed)
        #expect(again.testing == c.testing)
    }

    @Test("clock: manual is refused without GROUPD_TEST_CLOCK=1, naming the key and the variable",
          arguments: [[:], ["GROUPD_TEST_CLOCK": "0"], ["GROUPD_TEST_CLOCK": "yes"], ["GROUPD_TEST_CLOCK": ""]])
    func manualWithoutTheVariable(environment: [String: String]) throws {
        let failure = try #require(error("testing: {clock: manual, clock_port: 9000}\n" + app, environment: environment))
        #expect(failure.keyPath == "testing.clock")
        #expect(failure.message.contains("GROUPD_TEST_CLOCK=1"))
    }

    @Test("a bad clock, a missing, misplaced or out-of-range clock_port and unknown keys are refused",
          arguments: [
            ("testing: {clock: frozen}\n", "testing.clock", "expected system or manual"),
            ("testing: {clock: manual}\n", "testing.clock_port", "required"),
            ("testing: {clock: manual, clock_port: 65536}\n", "testing.clock_port", "0 to 65535"),
            ("testing: {clock: manual, clock_port: -1}\n", "testing.clock_port", "0 to 65535"),
            ("testing: {clock_port: 9000}\n", "testing.clock_port", "only with testing.clock: manual"),
            ("testing: {clock: manual, clock_port: 9000, speed: 2}\n", "testing.speed", "unknown key"),
          ])
    func invalid(yaml: String, keyPath: String, expected: String) throws {
        let failure = try #require(error(yaml + app, environment: allowed))
        #expect(failure.keyPath == keyPath)
        #expect(failure.message.contains(expected), "\(failure)")
    }

    @Test("testing is restart-only: a reload keeps the running value")
    func restartOnly() throws {
        let running = try GroupdConfiguration.parse(yaml: app, environment: [:])
        let requested = try GroupdConfiguration.parse(yaml: "testing: {clock: manual, clock_port: 0}\n" + app, environment: allowed)
        let (kept, changes) = requested.keepingRestartOnlyKeys(of: running)
        #expect(kept.testing == .defaults)
        #expect(changes.map(\.key) == ["testing"])
    }
}
