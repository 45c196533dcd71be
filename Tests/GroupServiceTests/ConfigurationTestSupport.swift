import GroupService

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
