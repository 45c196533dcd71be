import Foundation
import GroupAPI
import Testing

/// Swift against python's google.protobuf, an implementation nobody here wrote.
@Suite("Cross-check with python's google.protobuf")
struct CrossCheckTests {
    @Test("python's bytes decode to the same value, field by field", arguments: Examples.all)
    func decodesPythonBytes(_ example: Example) throws {
        #expect(try decodedEquals(example.message, example.pythonBytes()))
    }

    @Test("Swift encodes exactly the bytes python does", arguments: Examples.all)
    func encodesLikePython(_ example: Example) throws {
        #expect(Hex.encode(example.message.serializedBytes()) == Hex.encode(try example.pythonBytes()))
    }

    @Test("every example has a python fixture and no fixture is orphaned")
    func fixturesCoverExamples() {
        let names = Set(Examples.all.map(\.testDescription))
        #expect(names == Set(PythonFixtures.hex.keys))
        #expect(names.count == Examples.all.count)
    }

    /// Writes Swift's encodings for tests/test_protos_interop.py, which parses them with python.
    /// Runs only when GROUPAPI_EXPORT_ENCODINGS names the output file.
    @Test("export Swift encodings for python",
          .enabled(if: ProcessInfo.processInfo.environment["GROUPAPI_EXPORT_ENCODINGS"] != nil))
    func exportEncodings() throws {
        let path = try #require(ProcessInfo.processInfo.environment["GROUPAPI_EXPORT_ENCODINGS"])
        var lines: [String] = []
        for example in Examples.all {
            lines.append("\(example.name) \(example.variant) \(Hex.encode(example.message.serializedBytes()))")
        }
        try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        #expect(FileManager.default.fileExists(atPath: path))
    }
}
