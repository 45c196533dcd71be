import GroupAPI
import Testing

/// Decodes proto3 JSON as `M` through its wire bytes.
private func decode<M: ProtoMessage>(_ type: M.Type, _ json: String) throws -> M {
    try M(serializedBytes: ProtoJSON.decode(json: json, messageName: M.protoMessageName))
}

/// The error decoding `json` as the message `name` throws, nil when it decodes.
private func failure(_ json: String, as name: String) -> ProtoJSONError? {
    do {
        _ = try ProtoJSON.decode(json: json, messageName: name)
        return nil
    } catch {
        return error
    }
}

private func failure<M: ProtoMessage>(_ json: String, as type: M.Type) -> ProtoJSONError? {
    failure(json, as: M.protoMessageName)
}

/// `decode(encode(message)) == message`.
private func roundTrips<M: ProtoMessage>(_ message: M) throws -> Bool {
    try decode(M.self, ProtoJSON.encode(message)) == message
}

@Suite("Proto3 JSON decoded to the wire format")
struct ProtoJSONDecodingTests {
    static let createGroup = Groupd_V1_CreateGroupRequest.with {
        $0.groupID = "@TGS#team"
        $0.type = .public
        $0.profile = .with { $0.name = "Book \"club\"\n✓"; $0.faceURL = "https://x/y.png"; $0.introduction = String(repeating: "long ", count: 60) }
        $0.settings = .with { $0.joinOption = .approval; $0.slowModeIntervalSeconds = 30; $0.inviteLinkScope = .ownerAndAdmins }
        $0.members = [
            .with { $0.userID = "alice"; $0.role = .admin; $0.nameCard = "A"; $0.custom = ["tier": [0, 255, 7]] },
            .with { $0.userID = "bob" },
        ]
        $0.maxMemberCount = 4_294_967_295
        $0.custom = ["level": [1, 2, 3], "empty": [], "é群": Array(repeating: 0xAB, count: 200)]
        $0.ownerUserID = "owner"
    }

    @Test("rich messages round-trip through the encoder")
    func richRoundTrips() throws {
        #expect(try roundTrips(Self.createGroup))
        let group = Groupd_V1_Group.with {
            $0.groupID = "g"
            $0.type = .avChatRoom
            $0.createTime = .with { $0.seconds = 1_700_000_000; $0.nanos = 5_000_000 }
            $0.lastInfoTime = .with { $0.seconds = -62_135_596_800 }
            $0.latestSequence = .max
            $0.mute = .with { $0.mode = .roles; $0.roles = [.member, .admin]; $0.muteUntil = .with { $0.seconds = 253_402_300_799; $0.nanos = 999_999_999 } }
            $0.selfInfo = .with { $0.userID = "me"; $0.joinSource = .inviteLink; $0.joinSequence = 1 << 40; $0.custom = ["k": [9]] }
            $0.muteBypassUserIds = ["x", "", "y"]
            $0.pinnedMessages = [.with { $0.sequence = 3; $0.pinTime = .with { $0.nanos = 1 } }, .with { $0.pinnedByUserID = "p" }]
            $0.publicViewOnly = true
        }
        #expect(try roundTrips(group))
        let update = Groupd_V1_UpdateGroupProfileRequest.with {
            $0.groupID = "g"
            $0.updateMask = .with { $0.paths = ["name", "face_url", "profile.face_url"] }
            $0.profile = .with { $0.name = "n" }
        }
        #expect(try roundTrips(update))
        let counters = Groupd_V1_IncrementGroupCountersRequest.with { $0.deltas = ["down": .min, "up": .max, "zero": 0] }
        #expect(try roundTrips(counters))
    }

    @Test("oneof members round-trip; a member that is an empty message is still set", arguments: [
        Groupd_V1_SubscribeResponse.with {
            $0.item = .event(.with {
                $0.groupID = "g"
                $0.kind = .groupInfoChanged
                $0.time = .with { $0.seconds = 1_700_000_000 }
                $0.detail = .profileChange(.with { $0.changedFields = ["name"]; $0.profile = .with { $0.name = "n" }; $0.custom = ["c": [1]] })
            })
            $0.cursor = "c1"
        },
        .with { $0.item = .event(.with { $0.kind = .memberKicked; $0.detail = .kick(Groupd_V1_KickDetail()) }) },
        .with { $0.item = .message(.with { $0.groupID = "g"; $0.sequence = 7; $0.messageID = "m" }) },
        .with { $0.item = .caughtUp(Groupd_V1_CaughtUp()); $0.cursor = "c2" },
    ])
    func oneofRoundTrips(_ response: Groupd_V1_SubscribeResponse) throws {
        #expect(try roundTrips(response))
    }

    @Test("a oneof member at its default is written on the wire")
    func oneofPresence() throws {
        #expect(try ProtoJSON.decode(json: #"{"caughtUp":{}}"#, messageName: "groupd.v1.SubscribeResponse") == [0x1A, 0x00])
        let kick = try decode(Groupd_V1_GroupEvent.self, #"{"kick":{}}"#)
        #expect(kick.detail == .kick(Groupd_V1_KickDetail()))
    }

    /// The examples of messages in the JSON registry (not those of gRPC reflection, which has no JSON).
    static let registeredExamples = Examples.all.filter { failure("{}", as: $0.name)?.code != .unknownMessage }

    @Test("examples round-trip unless they hold a Timestamp, Duration or Any type URL proto3 JSON cannot carry", arguments: registeredExamples)
    func examplesRoundTrip(_ example: Example) throws {
        func check<M: ProtoMessage>(_ message: M) throws {
            let json = ProtoJSON.encode(message)
            do {
                #expect(try M(serializedBytes: ProtoJSON.decode(json: json, messageName: M.protoMessageName)) == message, "\(json)")
            } catch let error as ProtoJSONError {
                // The examples fill every Timestamp and Duration with -1000000000123 s and -2017 ns
                // (out of range: the encoder writes a negative year) and every Any with the type URL
                // "type_url-0-é群✓", which has no '/'. The decoder must refuse exactly those.
                let outOfRange = error.code == .wrongType && error.message.contains(#""-"#)
                    && (error.message.contains("RFC 3339 timestamp") || error.message.contains("is not a duration"))
                let badTypeURL = error.code == .wrongType && error.field.hasSuffix("@type") && error.message.contains("type_url-0-")
                #expect(outOfRange || badTypeURL, "\(error)")
            }
        }
        try check(example.message)
    }

    @Test("the examples without such values all round-trip")
    func enoughExamplesRoundTrip() throws {
        func decodes<M: ProtoMessage>(_ message: M) -> Bool {
            (try? M(serializedBytes: ProtoJSON.decode(json: ProtoJSON.encode(message), messageName: M.protoMessageName))) == message
        }
        let passing = Self.registeredExamples.filter { decodes($0.message) }
        #expect(passing.count >= Self.registeredExamples.count / 2)
        #expect(passing.contains { $0.name == "groupd.v1.CreateGroupRequest" })
        #expect(passing.contains { $0.name == "google.rpc.ErrorInfo" })
    }

    @Test("proto names and JSON names are both accepted, in any order")
    func bothNameStyles() throws {
        let camel = try decode(Groupd_V1_CreateGroupRequest.self, #"{"groupId":"g","ownerUserId":"o","maxMemberCount":5,"members":[{"userId":"u","nameCard":"n"}]}"#)
        let snake = try decode(Groupd_V1_CreateGroupRequest.self, #"{"members":[{"name_card":"n","user_id":"u"}],"max_member_count":5,"owner_user_id":"o","group_id":"g"}"#)
        #expect(camel == snake)
        #expect(camel.groupID == "g" && camel.ownerUserID == "o" && camel.maxMemberCount == 5)
        #expect(camel.members == [.with { $0.userID = "u"; $0.nameCard = "n" }])
    }

    @Test("null leaves a field at its default, empty arrays and objects too")
    func nulls() throws {
        let request = try decode(Groupd_V1_CreateGroupRequest.self, #"{"groupId":null,"profile":null,"members":null,"custom":null,"type":null,"ownerUserId":"o"}"#)
        #expect(request == .with { $0.ownerUserID = "o" })
        #expect(try ProtoJSON.decode(json: #" { "members" : [ ] , "custom" : { } } "#, messageName: "groupd.v1.CreateGroupRequest").isEmpty)
        // A oneof member that is null does not count as set.
        let response = try decode(Groupd_V1_SubscribeResponse.self, #"{"event":null,"caughtUp":{}}"#)
        #expect(response.item == .caughtUp(Groupd_V1_CaughtUp()))
        let element = try #require(failure(#"{"groupIds":["a",null]}"#, as: Groupd_V1_GetGroupsInfoRequest.self))
        #expect(element.code == .wrongType)
        #expect(element.field == "group_ids[1]")
        let mapValue = try #require(failure(#"{"custom":{"k":null}}"#, as: Groupd_V1_CreateGroupRequest.self))
        #expect(mapValue.code == .wrongType)
        #expect(mapValue.field == #"custom["k"]"#)
    }

    @Test("integers: numbers or strings, integral exponents and fractions, range-checked")
    func integers() throws {
        for json in [#"{"maxMemberCount":"7"}"#, #"{"maxMemberCount":7.0}"#, #"{"maxMemberCount":0.7e1}"#, #"{"maxMemberCount":"700e-2"}"#] {
            #expect(try decode(Groupd_V1_CreateGroupRequest.self, json).maxMemberCount == 7, "\(json)")
        }
        #expect(try decode(Groupd_V1_CreateGroupRequest.self, #"{"maxMemberCount":4294967295}"#).maxMemberCount == .max)
        let counters = try decode(Groupd_V1_IncrementGroupCountersRequest.self, #"{"deltas":{"a":"-9223372036854775808","b":9223372036854775807,"c":-1,"d":"1e18"}}"#)
        #expect(counters.deltas == ["a": .min, "b": .max, "c": -1, "d": 1_000_000_000_000_000_000])
        #expect(try decode(Groupd_V1_Group.self, #"{"latestSequence":"18446744073709551615"}"#).latestSequence == .max)

        let cases: [(String, String, String)] = [
            (#"{"maxMemberCount":1.5}"#, "max_member_count", "1.5 is not an integer"),
            (#"{"maxMemberCount":4294967296}"#, "max_member_count", "4294967296 is out of range for uint32"),
            (#"{"maxMemberCount":-1}"#, "max_member_count", "-1 is out of range for uint32"),
            (#"{"maxMemberCount":"12a"}"#, "max_member_count", #""12a" is not an integer"#),
            (#"{"maxMemberCount":" 1"}"#, "max_member_count", #"" 1" is not an integer"#),
            (#"{"maxMemberCount":true}"#, "max_member_count", "expected an integer, got a boolean"),
            (#"{"maxMemberCount":1e400}"#, "max_member_count", "1e400 is out of range for uint32"),
        ]
        for (json, field, message) in cases {
            let error = try #require(failure(json, as: Groupd_V1_CreateGroupRequest.self), "\(json)")
            #expect(error.code == .wrongType)
            #expect(error.field == field)
            #expect(error.message == "field \(field): \(message)")
        }
        let tooSmall = try #require(failure(#"{"deltas":{"a":"-9223372036854775809"}}"#, as: Groupd_V1_IncrementGroupCountersRequest.self))
        #expect(tooSmall.code == .wrongType)
        #expect(tooSmall.field == #"deltas["a"]"#)
        #expect(tooSmall.message.contains("out of range for int64"))
        let tooLarge = try #require(failure(#"{"latestSequence":"18446744073709551616"}"#, as: Groupd_V1_Group.self))
        #expect(tooLarge.message == "field latest_sequence: 18446744073709551616 is out of range for uint64")
    }

    @Test("repeated numbers are packed; enums by name, alias or number")
    func enumsAndPacking() throws {
        #expect(try ProtoJSON.decode(json: #"{"states":[1,"APPLICATION_STATE_ACCEPTED"]}"#, messageName: "groupd.v1.ListApplicationsRequest") == [0x12, 0x02, 0x01, 0x02])
        let request = try decode(Groupd_V1_CreateGroupRequest.self, #"{"type":"GROUP_TYPE_PRIVATE","members":[{"role":2},{"role":"MEMBER_ROLE_OWNER"}]}"#)
        #expect(request.type == .work)
        #expect(request.members.map(\.role) == [.admin, .owner])
        #expect(try decode(Groupd_V1_Group.self, #"{"type":77}"#).type == .UNRECOGNIZED(77))
        let unknown = try #require(failure(#"{"members":[{},{"role":"MEMBER_ROLE_KING"}]}"#, as: Groupd_V1_CreateGroupRequest.self))
        #expect(unknown.code == .wrongType)
        #expect(unknown.field == "members[1].role")
        #expect(unknown.message == #"field members[1].role: "MEMBER_ROLE_KING" is not a value of groupd.v1.MemberRole"#)
        let lowercase = try #require(failure(#"{"type":"group_type_public"}"#, as: Groupd_V1_CreateGroupRequest.self))
        #expect(lowercase.code == .wrongType)
        let wrongKind = try #require(failure(#"{"type":[]}"#, as: Groupd_V1_CreateGroupRequest.self))
        #expect(wrongKind.message == "field type: expected an enum value name or number, got an array")
    }

    @Test("strings, escapes, bools")
    func stringsAndBools() throws {
        let profile = try decode(Groupd_V1_GroupProfile.self, #"{"name":"a\"b\\c\/d\b\f\n\r\t\u00e9\u7FA4\uD83D\uDE00é"}"#)
        #expect(profile.name == "a\"b\\c/d\u{08}\u{0C}\n\r\té群😀é")
        let bool = try decode(Groupd_V1_Group.self, #"{"publicViewOnly":true}"#)
        #expect(bool.publicViewOnly)
        let quoted = try #require(failure(#"{"publicViewOnly":"true"}"#, as: Groupd_V1_Group.self))
        #expect(quoted.code == .wrongType)
        #expect(quoted.message == "field public_view_only: expected true or false, got a string")
        let number = try #require(failure(#"{"profile":{"name":5}}"#, as: Groupd_V1_CreateGroupRequest.self))
        #expect(number.code == .wrongType)
        #expect(number.field == "profile.name")
        #expect(number.message == "field profile.name: expected a string, got a number")
    }

    @Test("bytes in standard or URL-safe base64, padding optional")
    func base64() throws {
        let request = try decode(Groupd_V1_CreateGroupRequest.self, #"{"custom":{"a":"AQID","b":"-_8","c":"+/8=","d":"","e":"AA=="}}"#)
        #expect(request.custom == ["a": [1, 2, 3], "b": [0xFB, 0xFF], "c": [0xFB, 0xFF], "d": [], "e": [0]])
        for bad in ["A", "AQI*", "AQ=", "A===", "AQID="] {
            let error = try #require(failure(#"{"custom":{"k":"\#(bad)"}}"#, as: Groupd_V1_CreateGroupRequest.self), "\(bad)")
            #expect(error.code == .wrongType, "\(bad)")
            #expect(error.field == #"custom["k"]"#)
            #expect(error.message.contains("is not base64"), "\(error.message)")
        }
    }

    @Test("Timestamp: RFC 3339 with offsets and 0 to 9 fractional digits, within years 1 to 9999")
    func timestamps() throws {
        func readTime(_ text: String) throws -> Google_Protobuf_Timestamp? {
            try decode(Groupd_V1_ReportApplicationsReadRequest.self, #"{"readTime":"\#(text)"}"#).readTime
        }
        #expect(try readTime("1970-01-01T00:00:00Z") == Google_Protobuf_Timestamp())
        #expect(try readTime("2023-11-14T22:13:20.005Z") == .with { $0.seconds = 1_700_000_000; $0.nanos = 5_000_000 })
        #expect(try readTime("2023-11-15T06:13:20.1+08:00") == .with { $0.seconds = 1_700_000_000; $0.nanos = 100_000_000 })
        #expect(try readTime("2023-11-14T21:43:20.000000001-00:30") == .with { $0.seconds = 1_700_000_000; $0.nanos = 1 })
        #expect(try readTime("2000-02-29T00:00:00Z") == .with { $0.seconds = 951_782_400 })
        #expect(try readTime("0001-01-01T00:00:00Z") == .with { $0.seconds = -62_135_596_800 })
        for bad in ["2023-02-29T00:00:00Z", "2023-11-14T22:13:20", "2023-11-14 22:13:20Z", "2023-11-14T22:13:20.1234567891Z",
                    "2023-11-14T24:00:00Z", "0000-12-31T00:00:00Z", "9999-12-31T23:59:59-01:00", "2023-11-14T22:13:20.Z", "2023-11-14t22:13:20z"] {
            let error = try #require(failure(#"{"readTime":"\#(bad)"}"#, as: Groupd_V1_ReportApplicationsReadRequest.self), "\(bad)")
            #expect(error.code == .wrongType, "\(bad)")
            #expect(error.field == "read_time")
            #expect(error.message.hasPrefix(#"field read_time: "\#(bad)" is not an RFC 3339 timestamp"#), "\(error.message)")
        }
        let number = try #require(failure(#"{"readTime":0}"#, as: Groupd_V1_ReportApplicationsReadRequest.self))
        #expect(number.message == "field read_time: expected an RFC 3339 timestamp (google.protobuf.Timestamp) in a string, got a number")
        let topLevel = try ProtoJSON.decode(json: #""1970-01-01T00:00:01.5Z""#, messageName: "google.protobuf.Timestamp")
        #expect(try Google_Protobuf_Timestamp(serializedBytes: topLevel) == .with { $0.seconds = 1; $0.nanos = 500_000_000 })
    }

    @Test("Duration, FieldMask and Any in their JSON forms")
    func otherWellKnownTypes() throws {
        func delay(_ text: String) throws -> Google_Protobuf_Duration? {
            try decode(Google_Rpc_RetryInfo.self, #"{"retryDelay":"\#(text)"}"#).retryDelay
        }
        #expect(try delay("1.5s") == .with { $0.seconds = 1; $0.nanos = 500_000_000 })
        #expect(try delay("-0.000000001s") == .with { $0.nanos = -1 })
        #expect(try delay("-315576000000s") == .with { $0.seconds = -315_576_000_000 })
        for bad in ["1", "1.s", "315576000001s", "+1s", "1.0000000001s", "s", "1.5 s"] {
            let error = try #require(failure(#"{"retryDelay":"\#(bad)"}"#, as: Google_Rpc_RetryInfo.self), "\(bad)")
            #expect(error.code == .wrongType, "\(bad)")
            #expect(error.field == "retry_delay")
        }

        let mask = try decode(Groupd_V1_UpdateGroupSettingsRequest.self, #"{"updateMask":"settings.joinOption,maxMemberCount"}"#).updateMask
        #expect(mask?.paths == ["settings.join_option", "max_member_count"])
        #expect(try decode(Groupd_V1_UpdateGroupSettingsRequest.self, #"{"updateMask":""}"#).updateMask == Google_Protobuf_FieldMask())
        for bad in ["a,,b", "join_option", "a,"] {
            let error = try #require(failure(#"{"updateMask":"\#(bad)"}"#, as: Groupd_V1_UpdateGroupSettingsRequest.self), "\(bad)")
            #expect(error.code == .wrongType)
            #expect(error.field == "update_mask")
        }

        // "@type" may come after the fields; a well-known type inside an Any is under "value".
        let status = try decode(Google_Rpc_Status.self, #"""
            {"code":5,"details":[
              {"reason":"R","metadata":{"k":"v"},"@type":"type.googleapis.com/google.rpc.ErrorInfo"},
              {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"2s"},
              {"@type":"type.googleapis.com/google.protobuf.Duration","value":"3s"},
              {}
            ]}
            """#)
        #expect(status.details.count == 4)
        #expect(try status.details[0].unpack(Google_Rpc_ErrorInfo.self) == .with { $0.reason = "R"; $0.metadata = ["k": "v"] })
        #expect(try status.details[1].unpack(Google_Rpc_RetryInfo.self)?.retryDelay == .with { $0.seconds = 2 })
        #expect(try status.details[2].unpack(Google_Protobuf_Duration.self) == .with { $0.seconds = 3 })
        #expect(status.details[3] == Google_Protobuf_Any())

        let unknownType = try #require(failure(#"{"details":[{"@type":"type.googleapis.com/no.Such"}]}"#, as: Google_Rpc_Status.self))
        #expect(unknownType.code == .unknownMessage)
        #expect(unknownType.field == "details[0].@type")
        let missingType = try #require(failure(#"{"details":[{"reason":"R"}]}"#, as: Google_Rpc_Status.self))
        #expect(missingType.code == .wrongType)
        #expect(missingType.field == "details[0]")
        let unknownInside = try #require(failure(#"{"details":[{"@type":"x/google.rpc.ErrorInfo","reasn":"R"}]}"#, as: Google_Rpc_Status.self))
        #expect(unknownInside.code == .unknownField)
        #expect(unknownInside.field == "details[0].reasn")
    }

    @Test("an unknown key is refused, named with its path")
    func unknownFields() throws {
        let nested = try #require(failure(#"{"profile":{"nmae":"x"}}"#, as: Groupd_V1_CreateGroupRequest.self))
        #expect(nested.code == .unknownField)
        #expect(nested.field == "profile.nmae")
        #expect(nested.message == #"unknown field "nmae" in groupd.v1.GroupProfile"#)
        let inArray = try #require(failure(#"{"members":[{"userId":"a"},{"userId":"b","GroupId":"x"}]}"#, as: Groupd_V1_CreateGroupRequest.self))
        #expect(inArray.code == .unknownField)
        #expect(inArray.field == "members[1].GroupId")
        let top = try #require(failure(#"{"groupID":"g"}"#, as: Groupd_V1_CreateGroupRequest.self))
        #expect(top.field == "groupID")
    }

    @Test("a field given twice, a map key twice, or two members of a oneof are refused")
    func duplicates() throws {
        let twoNames = try #require(failure(#"{"groupId":"a","group_id":"b"}"#, as: Groupd_V1_CreateGroupRequest.self))
        #expect(twoNames.code == .duplicateField)
        #expect(twoNames.field == "group_id")
        #expect(twoNames.message.hasPrefix("field group_id: given more than once"))
        let sameKey = try #require(failure(#"{"profile":{"name":"a","name":null}}"#, as: Groupd_V1_CreateGroupRequest.self))
        #expect(sameKey.code == .duplicateField)
        #expect(sameKey.field == "profile.name")
        let oneof = try #require(failure(#"{"event":{},"cursor":"c","caughtUp":{}}"#, as: Groupd_V1_SubscribeResponse.self))
        #expect(oneof.code == .duplicateField)
        #expect(oneof.field == "caught_up")
        #expect(oneof.message == "field caught_up: event of the same oneof is already set; set at most one")
        let mapKey = try #require(failure(#"{"custom":{"k":"AQ==","j":"","k":""}}"#, as: Groupd_V1_CreateGroupRequest.self))
        #expect(mapKey.code == .duplicateField)
        #expect(mapKey.field == #"custom["k"]"#)
        // Past the first few keys duplicates are found by hashing.
        let many = (0..<40).map { #""k\#($0)":"""# }.joined(separator: ",")
        #expect(try decode(Groupd_V1_CreateGroupRequest.self, #"{"custom":{\#(many)}}"#).custom.count == 40)
        let lateDuplicate = try #require(failure(#"{"custom":{\#(many),"k3":""}}"#, as: Groupd_V1_CreateGroupRequest.self))
        #expect(lateDuplicate.field == #"custom["k3"]"#)
        let escapedSame = try #require(failure(#"{"custom":{"k":"","\u006B":""}}"#, as: Groupd_V1_CreateGroupRequest.self))
        #expect(escapedSame.code == .duplicateField)
    }

    @Test("JSON syntax errors: position, reason and the field being read", arguments: [
        (#"{"groupId" "g"}"#, "", "invalid JSON at byte 11: expected ':'"),
        (#"{"groupId":"g"} x"#, "", "invalid JSON at byte 16: unexpected data after the top-level value"),
        (#"{"groupId":"g",}"#, "", "invalid JSON at byte 15: expected a string key"),
        (#"{"maxMemberCount":01}"#, "", "invalid JSON at byte 19: expected ',' or '}'"),
        (#"{"groupId":"g""#, "", "invalid JSON at byte 14: expected ',' or '}'"),
        (#"[]"#, "", "invalid JSON at byte 0: expected an object at the top level"),
        ("  ", "", "invalid JSON at byte 2: expected an object, found the end of the input"),
        (#"{"groupId":"a\qb"}"#, "group_id", "invalid JSON at byte 13: invalid escape"),
        (#"{"groupId":"\uD800"}"#, "group_id", "invalid JSON at byte 12: lone surrogate in a \\u escape"),
        (#"{"groupId":"\uDC00\uD800"}"#, "group_id", "invalid JSON at byte 12: lone surrogate in a \\u escape"),
        ("{\"groupId\":\"a\tb\"}", "group_id", "invalid JSON at byte 13: control character in a string"),
        (#"{"groupId":}"#, "group_id", "invalid JSON at byte 11: expected a value"),
        (#"{"members":[{"userId":"a"} {}]}"#, "members", "invalid JSON at byte 27: expected ',' or ']'"),
        (#"{"maxMemberCount":-}"#, "max_member_count", "invalid JSON at byte 18: expected a value"),
        (#"{"maxMemberCount":1.}"#, "max_member_count", "invalid JSON at byte 18: expected a value"),
        (#"{"type":nul}"#, "type", "invalid JSON at byte 8: invalid literal"),
    ])
    func syntax(json: String, field: String, message: String) throws {
        let error = try #require(failure(json, as: Groupd_V1_CreateGroupRequest.self))
        #expect(error.code == .syntax)
        #expect(error.message == message)
        #expect(error.field == field)
    }

    @Test("invalid UTF-8 is a syntax error, valid multi-byte text passes", arguments: [
        [0xC3, 0x28], [0xE0, 0x80, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xFF], [0xC3],
    ] as [[UInt8]])
    func invalidUTF8(_ sequence: [UInt8]) throws {
        let json = Array(#"{"groupId":""#.utf8) + sequence + Array(#""}"#.utf8)
        #expect(throws: ProtoJSONError(code: .syntax, field: "group_id", message: "invalid JSON at byte 12: invalid UTF-8")) {
            _ = try ProtoJSON.decode(json: json, messageName: "groupd.v1.CreateGroupRequest")
        }
        let valid = Array(#"{"groupId":"é群😀"}"#.utf8)
        #expect(try Groupd_V1_CreateGroupRequest(serializedBytes: ProtoJSON.decode(json: valid, messageName: "groupd.v1.CreateGroupRequest")).groupID == "é群😀")
    }

    @Test("nesting is limited to 64 levels")
    func depth() throws {
        func status(arrays: Int) -> String {
            // The Any's first pass reads past the unknown member's value, checking it.
            #"{"details":[{"@type":"x/google.rpc.ErrorInfo","x":"# + String(repeating: "[", count: arrays) + String(repeating: "]", count: arrays) + "}]}"
        }
        let shallow = try #require(failure(status(arrays: 61), as: Google_Rpc_Status.self))
        #expect(shallow.code == .unknownField)
        let deep = try #require(failure(status(arrays: 62), as: Google_Rpc_Status.self))
        #expect(deep.code == .syntax)
        #expect(deep.message.hasSuffix("nested deeper than 64 levels"))
        #expect(deep.field == "details[0]")
        let objects = String(repeating: #"{"details":[{"@type":"x/google.rpc.Status","#, count: 40) + String(repeating: "}]}", count: 40)
        #expect(failure(objects, as: Google_Rpc_Status.self)?.code == .syntax)
    }

    @Test("an unknown message name is refused before reading")
    func unknownMessage() throws {
        let error = try #require(failure("not json", as: "groupd.v1.NoSuchRequest"))
        #expect(error == ProtoJSONError(code: .unknownMessage, field: "", message: #"no message named "groupd.v1.NoSuchRequest" is known"#))
        #expect(error.description == #"unknownMessage: no message named "groupd.v1.NoSuchRequest" is known"#)
    }

    @Test("long nested messages get multi-byte lengths")
    func longLengths() throws {
        let name = String(repeating: "n", count: 20_000)
        let request = Groupd_V1_CreateGroupRequest.with {
            $0.profile = .with { $0.name = name; $0.introduction = "i" }
            $0.members = (0..<300).map { index in .with { $0.userID = "user-\(index)"; $0.custom = ["k": Array(repeating: UInt8(index % 256), count: 100)] } }
        }
        let bytes = try ProtoJSON.decode(json: ProtoJSON.encode(request), messageName: "groupd.v1.CreateGroupRequest")
        #expect(try Groupd_V1_CreateGroupRequest(serializedBytes: bytes) == request)
        #expect(bytes.count == request.serializedSize)
    }
}
