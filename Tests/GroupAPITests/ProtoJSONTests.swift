@testable import GroupAPI
import Testing

@Suite("Messages as proto3 JSON")
struct ProtoJSONTests {
    @Test("fields in declaration order, lowerCamelCase, defaults left out, 64-bit integers as strings")
    func group() {
        let group = Groupd_V1_Group.with {
            $0.groupID = "@TGS#1"
            $0.type = .public
            $0.profile = .with { $0.name = "Book \"club\"\n"; $0.faceURL = "https://x/y.png" }
            $0.ownerUserID = "alice"
            $0.memberCount = 3
            $0.createTime = .with { $0.seconds = 1_700_000_000; $0.nanos = 5_000_000 }
            $0.latestSequence = 18_446_744_073_709_551_615
            $0.custom = ["level": [1, 2, 3]]
            $0.publicViewOnly = true
        }
        #expect(ProtoJSON.encode(group) == #"{"groupId":"@TGS#1","type":"GROUP_TYPE_PUBLIC","profile":{"name":"Book \"club\"\n","faceUrl":"https://x/y.png"},"ownerUserId":"alice","memberCount":3,"createTime":"2023-11-14T22:13:20.005Z","latestSequence":"18446744073709551615","custom":{"level":"AQID"},"publicViewOnly":true}"#)
        #expect(ProtoJSON.encode(Groupd_V1_Group()) == "{}")
    }

    @Test("a set oneof member is written even when empty; repeated fields are arrays")
    func oneofAndRepeated() {
        let caughtUp = Groupd_V1_SubscribeResponse.with { $0.item = .caughtUp(Groupd_V1_CaughtUp()); $0.cursor = "c1" }
        #expect(ProtoJSON.encode(caughtUp) == #"{"caughtUp":{},"cursor":"c1"}"#)
        let event = Groupd_V1_GroupEvent.with {
            $0.groupID = "g"
            $0.kind = .memberJoined
            $0.targetUserIds = ["a", "b"]
        }
        #expect(ProtoJSON.encode(event) == #"{"groupId":"g","kind":"EVENT_KIND_MEMBER_JOINED","targetUserIds":["a","b"]}"#)
    }

    @Test("pretty output is the same JSON over indented lines")
    func pretty() {
        let response = Groupd_V1_SubscribeResponse.with { $0.item = .caughtUp(Groupd_V1_CaughtUp()); $0.cursor = "c1" }
        #expect(ProtoJSON.encode(response, pretty: true) == "{\n  \"caughtUp\": {},\n  \"cursor\": \"c1\"\n}")
    }

    @Test("Any holds its type URL and the packed message's fields; map values that are strings stay strings")
    func anyAndStatus() {
        var info = Google_Rpc_ErrorInfo()
        info.reason = "GROUP_NOT_FOUND"
        info.domain = "groupd"
        info.metadata = ["field": "group_id"]
        var status = Google_Rpc_Status()
        status.code = 5
        status.message = "no such group"
        status.details = [Google_Protobuf_Any(packing: info)]
        #expect(ProtoJSON.encode(status) == #"{"code":5,"message":"no such group","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"GROUP_NOT_FOUND","domain":"groupd","metadata":{"field":"group_id"}}]}"#)
    }

    @Test("an enum value this build does not know is written as its number")
    func unknownEnum() {
        let group = Groupd_V1_Group.with { $0.type = .UNRECOGNIZED(77) }
        #expect(ProtoJSON.encode(group) == #"{"type":77}"#)
    }

    @Test("Timestamp text", arguments: [
        (Int64(0), Int32(0), "1970-01-01T00:00:00Z"),
        (-1, 0, "1969-12-31T23:59:59Z"),
        (951_782_400, 0, "2000-02-29T00:00:00Z"),
        (1_700_000_000, 120_000, "2023-11-14T22:13:20.000120Z"),
        (253_402_300_799, 999_999_999, "9999-12-31T23:59:59.999999999Z"),
    ])
    func timestamps(seconds: Int64, nanos: Int32, text: String) {
        #expect(ProtoJSON.rfc3339(seconds: seconds, nanos: nanos) == text)
    }

    @Test("Duration text, field names and control characters")
    func smallPieces() {
        #expect(ProtoJSON.durationText(seconds: 1, nanos: 500_000_000) == "1.500s")
        #expect(ProtoJSON.durationText(seconds: 0, nanos: 0) == "0s")
        #expect(ProtoJSON.jsonName("face_url") == "faceUrl")
        #expect(ProtoJSON.jsonName("x_y_z") == "xYZ")
        #expect(ProtoJSON.jsonName("name") == "name")
        let profile = Groupd_V1_GroupProfile.with { $0.name = "a\u{01}b\u{7F}é" }
        #expect(ProtoJSON.encode(profile) == "{\"name\":\"a\\u0001b\u{7F}é\"}")
    }

    @Test("bytes that are not a message of that name throw; an unknown name is nil")
    func serializedBytes() throws {
        #expect(throws: ProtoDecodingError.self) {
            _ = try ProtoJSON.encode(serializedBytes: [0x0A, 0x05, 0x61], messageName: "groupd.v1.Group")
        }
        #expect(try ProtoJSON.encode(serializedBytes: [], messageName: "no.such.Message") == nil)
        #expect(try ProtoJSON.encode(serializedBytes: [0x0A, 0x01, 0x67], messageName: "groupd.v1.Group") == #"{"groupId":"g"}"#)
    }
}
