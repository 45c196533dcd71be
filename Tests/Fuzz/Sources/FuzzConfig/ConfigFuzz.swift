import FuzzSupport
import GroupdConfig

/// The YAML configuration loader (`GroupdConfiguration.parse`: YAML, decoding, validation) fed
/// arbitrary text. It must answer a configuration or a `ConfigurationError`, never crash; what
/// it accepts must pass its own validation again.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzConfig(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let input = fuzzInput(start, count)
    let text = String(decoding: input, as: UTF8.self)
    guard let configuration = try? GroupdConfiguration.parse(yaml: text, file: "fuzz.yaml") else { return 0 }
    do {
        try configuration.validate(file: "fuzz.yaml")
    } catch {
        preconditionFailure("an accepted configuration fails its own validation: \(error)")
    }
    return 0
}
