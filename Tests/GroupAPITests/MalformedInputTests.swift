import GroupAPI
import Testing

@Suite("Unknown fields, unknown enum values and malformed input")
struct MalformedInputTests {
    @Test("unknown fields of every wire type are skipped", arguments: Examples.all)
    func unknownFieldsIgnored(_ example: Example) throws {
        let bytes = example.message.serializedBytes()
        #expect(try decodedEquals(example.message, bytes + Wire.unknownFields))
        #expect(try decodedEquals(example.message, Wire.unknownFields + bytes))
    }

    @Test("unknown fields inside a nested message are skipped too")
    func nestedUnknownFields() throws {
        let profile = Wire.bytesField(1, Array("team".utf8)) + Wire.unknownFields
        let bytes = Wire.bytesField(1, Array("g1".utf8)) + Wire.bytesField(3, profile)
        let group = try Groupd_V1_Group(serializedBytes: bytes)
        #expect(group.groupID == "g1")
        #expect(group.profile?.name == "team")
        // Re-encoding drops them: the Swift value does not keep unknown fields.
        #expect(group.serializedBytes() == Wire.bytesField(1, Array("g1".utf8))
            + Wire.bytesField(3, Wire.bytesField(1, Array("team".utf8))))
    }

    @Test("enum values outside the known set survive as UNRECOGNIZED", arguments: [Int32(99), 7, -7, Int32.max, Int32.min])
    func unrecognizedEnum(_ value: Int32) throws {
        let bytes = Wire.varintField(2, UInt64(bitPattern: Int64(value)))  // groupd.v1.Group.type
        let group = try Groupd_V1_Group(serializedBytes: bytes)
        #expect(group.type == .UNRECOGNIZED(value))
        #expect(group.type.rawValue == value)
        #expect(group.serializedBytes() == bytes)
    }

    @Test("unknown values in repeated enums and nested enums survive too")
    func unrecognizedRepeatedEnum() throws {
        var request = Groupd_V1_ListJoinedGroupsRequest()
        request.types = [.work, .UNRECOGNIZED(42), .UNRECOGNIZED(-1)]
        let decoded = try Groupd_V1_ListJoinedGroupsRequest(serializedBytes: request.serializedBytes())
        #expect(decoded.types == [.work, .UNRECOGNIZED(42), .UNRECOGNIZED(-1)])
        let health = try Grpc_Health_V1_HealthCheckResponse(serializedBytes: Wire.varintField(1, 9))
        #expect(health.status == .UNRECOGNIZED(9))
    }

    @Test("known values decode to their cases, never UNRECOGNIZED")
    func knownEnumValues() {
        for value in Groupd_V1_EventKind.allCases {
            #expect(Groupd_V1_EventKind(rawValue: value.rawValue) == value)
        }
        #expect(Groupd_V1_GroupType(rawValue: 1) == .work)
        #expect(Groupd_V1_GroupType(rawValue: 5) == .UNRECOGNIZED(5))
    }

    static let malformed: [(String, [UInt8])] = [
        ("truncated varint", [0x08, 0x80]),
        ("truncated 10-byte varint", [0x08] + Array(repeating: 0xFF, count: 9)),
        ("varint longer than 10 bytes", [0x08] + Array(repeating: 0xFF, count: 10) + [0x01]),
        ("wrong wire type for a varint field", Wire.bytesField(1, [0x00])),
        ("length past the end", [0x0A, 0x05, 0x61]),
        ("huge length", [0x0A] + Wire.varint(UInt64(Int32.max))),
        ("field number 0", [0x00, 0x01]),
        ("wire type 7", [0x0F]),
        ("start-group wire type", [0x0B]),
        ("truncated fixed64", Wire.tag(1001, 1) + [1, 2, 3]),
        ("truncated fixed32", Wire.tag(1003, 5) + [1]),
        ("lone tag", [0x08]),
    ]

    @Test("malformed input throws .malformed", arguments: malformed)
    func malformedThrows(_ name: String, _ bytes: [UInt8]) throws {
        // GroupSettings: field 1 is a varint (join_option).
        let error = try #require(decodeError(Groupd_V1_GroupSettings.self, bytes), "\(name) decoded")
        #expect(error.code == .malformed)
        #expect(error.subject == "groupd.v1.GroupSettings")
    }

    @Test("a string field sent as a varint, and garbage inside a nested message, throw")
    func wrongWireTypeAndNestedGarbage() throws {
        let wrongType = try #require(decodeError(Groupd_V1_Group.self, Wire.varintField(1, 1)))
        #expect(wrongType.code == .malformed)
        let nested = Wire.bytesField(3, [0x08, 0x80])  // Group.profile holding a truncated varint
        #expect(decodeError(Groupd_V1_Group.self, nested)?.code == .malformed)
        let badLength = Wire.bytesField(14, [0x0A, 0x09, 0x61])  // Group.self_info.user_id past its end
        #expect(decodeError(Groupd_V1_Group.self, badLength)?.code == .malformed)
    }

    @Test("every example cut short by one byte throws", arguments: Examples.all.filter { $0.fieldCount > 0 })
    func truncatedExamples(_ example: Example) {
        func check<M: ProtoMessage>(_ message: M) -> Bool {
            let bytes = message.serializedBytes()
            return decodeError(M.self, Array(bytes.dropLast()))?.code == .malformed
        }
        let ok = check(example.message)
        #expect(ok)
    }

    @Test("strings that are not UTF-8 throw .invalidUTF8 naming the field")
    func invalidUTF8() throws {
        let bad: [UInt8] = [0xC3, 0x28]
        let single = try #require(decodeError(Groupd_V1_Group.self, Wire.bytesField(1, bad)))
        #expect(single.code == .invalidUTF8)
        #expect(single.subject == "groupd.v1.Group.group_id")
        let repeated = try #require(decodeError(Groupd_V1_GetGroupsInfoRequest.self, Wire.bytesField(1, bad)))
        #expect(repeated.subject == "groupd.v1.GetGroupsInfoRequest.group_ids")
        let mapKey = Wire.bytesField(13, Wire.bytesField(1, bad) + Wire.bytesField(2, [1]))
        #expect(decodeError(Groupd_V1_Group.self, mapKey)?.code == .invalidUTF8)
        let nested = Wire.bytesField(3, Wire.bytesField(2, [0xFF]))
        #expect(decodeError(Groupd_V1_Group.self, nested)?.subject == "groupd.v1.GroupProfile.introduction")
    }

    @Test("random bytes never crash the decoder", arguments: Examples.all.filter { $0.variant == 0 })
    func randomBytes(_ example: Example) {
        func fuzz<M: ProtoMessage>(_ type: M.Type) -> (decoded: Int, refused: Int) {
            var rng = SplitMix64(state: UInt64(truncatingIfNeeded: M.protoMessageName.utf8.count) &* 7919)
            var decoded = 0
            var refused = 0
            for _ in 0..<300 {
                let count = Int.random(in: 1...64, using: &rng)
                let bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
                if decodeError(M.self, bytes) == nil { decoded += 1 } else { refused += 1 }
            }
            return (decoded, refused)
        }
        func run<M: ProtoMessage>(_ message: M) -> (decoded: Int, refused: Int) { fuzz(M.self) }
        let result = run(example.message)
        #expect(result.decoded + result.refused == 300)
        #expect(result.refused > 0)
    }
}
