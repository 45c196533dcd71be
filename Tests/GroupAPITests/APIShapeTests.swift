import GroupAPI
import Testing

@Suite("The generated API's names and service descriptions")
struct APIShapeTests {
    @Test("names follow swift-protobuf")
    func names() {
        var request = Groupd_V1_CreateGroupRequest()
        request.groupID = "@TGS#1"
        request.profile = .with { $0.faceURL = "u"; $0.notification = "n" }
        request.members = [.with { $0.userID = "a" }]
        #expect(request.groupID == "@TGS#1")
        #expect(Groupd_V1_GroupType.avChatRoom.rawValue == 4)
        #expect(Groupd_V1_GroupType.private == .work)
        #expect(Groupd_V1_GroupType.chatRoom == .meeting)
        #expect(Groupd_V1_GroupType.public.rawValue == 2)
        #expect(Groupd_V1_GroupType() == .unspecified)
        #expect(Groupd_V1_GroupType.allCases.count == 6)
        #expect(Groupd_V1_MemberEditScope.ownerAdminsAndSelf.rawValue == 3)
        #expect(Grpc_Health_V1_HealthCheckResponse.ServingStatus.serviceUnknown.rawValue == 3)
        #expect(Google_Rpc_Code.invalidArgument.rawValue == 3)
        var violation = Google_Rpc_BadRequest.FieldViolation()
        violation.description_p = "too long"
        violation.localizedMessage = .with { $0.locale = "en-US" }
        #expect(violation.description_p == "too long")
        let timestamp = Google_Protobuf_Timestamp.with { $0.seconds = 1; $0.nanos = 2 }
        #expect(timestamp.seconds == 1 && timestamp.nanos == 2)
    }

    @Test("every method of every service is listed once, with its path and streaming kind")
    func allMethodsListed() throws {
        let paths = GroupAPI.allMethods.map(\.path)
        #expect(Set(paths).count == paths.count)
        #expect(paths.contains("/groupd.v1.GroupService/CreateGroup"))
        #expect(paths.contains("/groupd.v1.GroupService/GetGroupsInfo"))
        #expect(paths.contains("/groupd.v1.GroupService/DismissGroup"))
        #expect(paths.contains("/grpc.health.v1.Health/Check"))
        let reflection = [
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        ]
        let streaming = Set(GroupAPI.allMethods.filter(\.isServerStreaming).map(\.path))
        #expect(streaming == Set(["/grpc.health.v1.Health/Watch", "/groupd.v1.EventService/Subscribe"] + reflection))
        // Only reflection streams requests (bidirectionally).
        #expect(Set(GroupAPI.allMethods.filter(\.isClientStreaming).map(\.path)) == Set(reflection))
        #expect(Set(GroupAPI.allServiceNames) == [
            "groupd.v1.ApplicationService", "groupd.v1.EventService", "groupd.v1.GroupService",
            "groupd.v1.MemberService", "groupd.v1.MessageService", "grpc.health.v1.Health",
            "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection",
        ])
        for method in GroupAPI.allMethods {
            #expect(method.path == "/\(method.serviceName)/\(method.methodName)")
        }
    }

    @Test("typed method descriptions carry their message types")
    func typedMethods() {
        let create = Groupd_V1_GroupService.Method.createGroup
        #expect(create.path == "/groupd.v1.GroupService/CreateGroup")
        #expect(!create.isServerStreaming)
        #expect(ObjectIdentifier(create.erased.requestType) == ObjectIdentifier(Groupd_V1_CreateGroupRequest.self))
        #expect(ObjectIdentifier(create.erased.responseType) == ObjectIdentifier(Groupd_V1_CreateGroupResponse.self))
        #expect(create.erased.requestType.protoMessageName == "groupd.v1.CreateGroupRequest")
        let watch = Grpc_Health_V1_Health.Method.watch
        #expect(watch.isServerStreaming)
        #expect(Grpc_Health_V1_Health.name == "grpc.health.v1.Health")
        #expect(Groupd_V1_EventService.Method.subscribe.isServerStreaming)
        #expect(Groupd_V1_GroupService.allMethods.count == 30)
        #expect(Groupd_V1_MemberService.allMethods.count == 21)
        #expect(Groupd_V1_MessageService.allMethods.count == 14)
    }

    @Test("google.rpc.Status carries ErrorInfo and RetryInfo details through Any")
    func statusDetails() throws {
        let info = Google_Rpc_ErrorInfo.with {
            $0.reason = "GROUP_NOT_FOUND"
            $0.domain = "groupd"
            $0.metadata = ["group_id": "@TGS#2"]
        }
        let retry = Google_Rpc_RetryInfo.with { $0.retryDelay = .with { $0.seconds = 3 } }
        let status = Google_Rpc_Status.with {
            $0.code = Google_Rpc_Code.notFound.rawValue
            $0.message = "no such group"
            $0.details = [Google_Protobuf_Any(packing: info), Google_Protobuf_Any(packing: retry)]
        }
        let decoded = try Google_Rpc_Status(serializedBytes: status.serializedBytes())
        #expect(decoded.details[0].typeURL == "type.googleapis.com/google.rpc.ErrorInfo")
        #expect(try decoded.details[0].unpack(Google_Rpc_ErrorInfo.self) == info)
        #expect(try decoded.details[0].unpack(Google_Rpc_RetryInfo.self) == nil)
        #expect(try decoded.details[1].unpack(Google_Rpc_RetryInfo.self)?.retryDelay?.seconds == 3)
    }

    @Test("a NUL inside a string ends it (protobuf-c char* limit)")
    func nulInString() throws {
        let profile = Groupd_V1_GroupProfile.with { $0.name = "ab\u{0}cd" }
        #expect(try Groupd_V1_GroupProfile(serializedBytes: profile.serializedBytes()).name == "ab")
    }
}
