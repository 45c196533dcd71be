import Foundation
import GRPCProtocol
import GroupAPI
import Testing

@testable import GroupService

/// Server reflection's answers, from the descriptors embedded at build time.
@Suite struct ReflectionServiceTests {
    let service = ReflectionService()

    private func ask(
        _ request: Grpc_Reflection_V1_ServerReflectionRequest.OneOf_MessageRequest, sent: inout Set<String>
    ) throws -> Grpc_Reflection_V1_ServerReflectionResponse {
        let request = Grpc_Reflection_V1_ServerReflectionRequest.with {
            $0.host = "localhost"
            $0.messageRequest = request
        }
        let response = try service.answer(request, sent: &sent)
        #expect(response.originalRequest == request)
        #expect(response.validHost == "localhost")
        return response
    }

    /// The `name` (field 1) of each serialized FileDescriptorProto.
    private func names(_ response: Grpc_Reflection_V1_ServerReflectionResponse) throws -> [String] {
        guard case .fileDescriptorResponse(let files)? = response.messageResponse else {
            Issue.record("expected files, got \(String(describing: response.messageResponse))")
            return []
        }
        return try files.fileDescriptorProto.map { bytes in
            var reader = WireReader(bytes[...])
            while let (field, value) = try reader.next() {
                if field == 1 { return try value.string() }
            }
            return ""
        }
    }

    @Test("the embedded set holds every file of Protos/ and its imports, dependencies first")
    func embeddedFiles() throws {
        let index = ReflectionService.embeddedIndex
        let protos = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Protos")
        let enumerator = try #require(FileManager.default.enumerator(atPath: protos.path))
        let ours = enumerator.compactMap { $0 as? String }.filter { $0.hasSuffix(".proto") }
        #expect(!ours.isEmpty)
        for name in ours { #expect(index.files[name] != nil, "\(name)") }
        for wellKnown in ["google/protobuf/timestamp.proto", "google/protobuf/field_mask.proto", "google/protobuf/any.proto"] {
            #expect(index.files[wellKnown] != nil, "\(wellKnown)")
        }
        for (position, name) in index.fileNames.enumerated() {
            for dependency in try #require(index.files[name]).dependencies {
                #expect(index.fileNames.firstIndex(of: dependency).map { $0 < position } == true, "\(name) -> \(dependency)")
            }
        }
        #expect(index.services == index.services.filter { !$0.isEmpty })
        #expect(Set(index.services) == Set(GroupAPI.allServiceNames))
    }

    @Test("list_services names every service groupd serves, reflection included")
    func listServices() throws {
        var sent: Set<String> = []
        let response = try ask(.listServices("*"), sent: &sent)
        guard case .listServicesResponse(let list)? = response.messageResponse else {
            Issue.record("expected a service list")
            return
        }
        let names = list.service.map(\.name)
        #expect(names == GroupAPI.allServiceNames.sorted())
        #expect(names.contains("groupd.v1.GroupService"))
        #expect(names.contains("grpc.health.v1.Health"))
        #expect(names.contains("grpc.reflection.v1.ServerReflection"))
        #expect(names.contains("grpc.reflection.v1alpha.ServerReflection"))
    }

    @Test("a file comes with its transitive imports, each sent once per stream")
    func fileByFilename() throws {
        var sent: Set<String> = []
        let first = try names(try ask(.fileByFilename("groupd/v1/group.proto"), sent: &sent))
        #expect(first == [
            "groupd/v1/group.proto", "google/protobuf/field_mask.proto", "google/protobuf/timestamp.proto",
            "groupd/v1/common.proto",
        ])
        // Asked again on the same stream: the file itself, its imports already sent.
        #expect(try names(try ask(.fileByFilename("groupd/v1/group.proto"), sent: &sent)) == ["groupd/v1/group.proto"])
        #expect(try names(try ask(.fileByFilename("groupd/v1/member.proto"), sent: &sent)).first == "groupd/v1/member.proto")
        #expect(!(try names(try ask(.fileByFilename("groupd/v1/member.proto"), sent: &sent))).contains("groupd/v1/common.proto"))
    }

    @Test("symbols resolve to their file", arguments: [
        ("groupd.v1.GroupService", "groupd/v1/group.proto"),
        ("groupd.v1.GroupService.CreateGroup", "groupd/v1/group.proto"),
        (".groupd.v1.CreateGroupRequest", "groupd/v1/group.proto"),
        ("groupd.v1.CreateGroupRequest.group_id", "groupd/v1/group.proto"),
        ("groupd.v1.GroupType", "groupd/v1/common.proto"),
        ("groupd.v1.GROUP_TYPE_WORK", "groupd/v1/common.proto"),
        ("grpc.health.v1.HealthCheckResponse.ServingStatus", "grpc/health/v1/health.proto"),
        ("grpc.health.v1.HealthCheckResponse.SERVING", "grpc/health/v1/health.proto"),
        ("google.rpc.BadRequest.FieldViolation", "google/rpc/error_details.proto"),
        ("google.rpc.BadRequest.FieldViolation.field", "google/rpc/error_details.proto"),
        ("grpc.reflection.v1.ServerReflectionRequest.message_request", "grpc/reflection/v1/reflection.proto"),
        ("grpc.reflection.v1alpha.ServerReflection.ServerReflectionInfo", "grpc/reflection/v1alpha/reflection.proto"),
        ("google.protobuf.Timestamp", "google/protobuf/timestamp.proto"),
    ])
    func symbol(_ symbol: String, _ file: String) throws {
        var sent: Set<String> = []
        #expect(try names(try ask(.fileContainingSymbol(symbol), sent: &sent)).first == file)
    }

    @Test("unknown files, symbols and extensions are NOT_FOUND answers, not errors")
    func notFound() throws {
        var sent: Set<String> = []
        let requests: [Grpc_Reflection_V1_ServerReflectionRequest.OneOf_MessageRequest] = [
            .fileByFilename("groupd/v9/nothing.proto"),
            .fileContainingSymbol("groupd.v1.NoSuchThing"),
            .fileContainingSymbol("groupd.v1.GroupService.NoSuchMethod"),
            .fileContainingExtension(.with { $0.containingType = "groupd.v1.Group"; $0.extensionNumber = 100 }),
            .allExtensionNumbersOfType("groupd.v1.NoSuchMessage"),
        ]
        for request in requests {
            let response = try ask(request, sent: &sent)
            guard case .errorResponse(let error)? = response.messageResponse else {
                Issue.record("\(request): expected an error response")
                continue
            }
            #expect(error.errorCode == 5, "\(request)")
            #expect(!error.errorMessage.isEmpty)
        }
        #expect(sent.isEmpty)
    }

    @Test("a known message type has no extension numbers")
    func extensionNumbers() throws {
        var sent: Set<String> = []
        let response = try ask(.allExtensionNumbersOfType("groupd.v1.Group"), sent: &sent)
        guard case .allExtensionNumbersResponse(let numbers)? = response.messageResponse else {
            Issue.record("expected extension numbers")
            return
        }
        #expect(numbers.baseTypeName == "groupd.v1.Group")
        #expect(numbers.extensionNumber.isEmpty)
    }

    @Test("a request that asks nothing ends the stream with INVALID_ARGUMENT")
    func emptyRequest() throws {
        var sent: Set<String> = []
        #expect(throws: GRPCStatus.self) { try service.answer(Grpc_Reflection_V1_ServerReflectionRequest(), sent: &sent) }
        do {
            _ = try service.answer(Grpc_Reflection_V1_ServerReflectionRequest(), sent: &sent)
        } catch {
            #expect(error.code == .invalidArgument)
        }
    }

    @Test("a malformed descriptor set is refused")
    func malformed() {
        #expect(throws: DescriptorIndex.Malformed.self) { try DescriptorIndex(descriptorSet: [0x0A, 0x05, 0x0A]) }
        #expect(throws: DescriptorIndex.Malformed.self) { try DescriptorIndex(descriptorSet: [0x0A, 0x02, 0x12, 0x00]) }
    }
}
