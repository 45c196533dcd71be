import GroupService
import Testing

/// The smallest valid `apps` section, which the configuration suites extend with the keys they test.
let app = """
    apps:
      - id: demo
        secrets:
          - kid: k1
            secret: "0123456789abcdef0123456789abcdef"
    """

/// The `ConfigurationError` thrown by parsing `yaml`, or `nil`.
func configError(_ yaml: String, file: String = "groupd.yaml") -> ConfigurationError? {
    do {
        _ = try GroupdConfiguration.parse(yaml: yaml, file: file)
        return nil
    } catch let error as ConfigurationError {
        return error
    } catch {
        return nil
    }
}

/// A configuration mistake a suite provokes: the YAML, the key path the error must name and a part
/// of its message (`ConfigurationConsoleTests`; older suites keep a copy of their own).
struct ConfigurationMistake: Sendable, CustomTestStringConvertible {
    var name: String
    var yaml: String
    var keyPath: String
    var expected: String
    var testDescription: String { name }

    /// Parses the YAML and expects the error to name the file, the key path and the message part.
    func check(sourceLocation: SourceLocation = #_sourceLocation) throws {
        let error = try #require(configError(yaml), sourceLocation: sourceLocation)
        #expect(error.file == "groupd.yaml", sourceLocation: sourceLocation)
        #expect(error.keyPath == keyPath, "\(error)", sourceLocation: sourceLocation)
        #expect(error.message.contains(expected), "\(error)", sourceLocation: sourceLocation)
    }
}
