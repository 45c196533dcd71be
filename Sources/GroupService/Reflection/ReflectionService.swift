import GRPCProtocol
import GroupAPI
import NIOCore

/// gRPC server reflection, `grpc.reflection.v1.ServerReflection` and its predecessor
/// `grpc.reflection.v1alpha.ServerReflection` (the same messages, the one grpcio-reflection's
/// client calls): `ServerReflectionInfo`, a bidirectional stream on which each request gets one
/// response, in order.
///
/// It answers from the descriptors embedded at build time (`EmbeddedDescriptors`) and needs no
/// token: discovery (grpcurl, grpcio-reflection) runs before a client picks one. Unknown files and
/// symbols get an `error_response` with NOT_FOUND and the stream stays open; groupd defines no
/// extensions, so `file_containing_extension` is NOT_FOUND and `all_extension_numbers_of_type`
/// of a known message is an empty list (as grpc-go answers).
public struct ReflectionService: Sendable {
    /// The index of the embedded descriptors, built once.
    static let embeddedIndex: DescriptorIndex = {
        do {
            return try DescriptorIndex(descriptorSet: EmbeddedDescriptors.fileDescriptorSet)
        } catch {
            fatalError("the embedded descriptor set is malformed (regenerate with make protos): \(error)")
        }
    }()

    /// The paths of both versions' method.
    public static let paths = [
        Grpc_Reflection_V1_ServerReflection.Method.serverReflectionInfo.path,
        Grpc_Reflection_V1alpha_ServerReflection.Method.serverReflectionInfo.path,
    ]

    let index: DescriptorIndex
    /// What `list_services` answers, sorted.
    let services: [String]

    /// Creates the service over the embedded descriptors.
    /// - Parameter services: The services the server exposes (every service in `Protos/`, the
    ///   reflection services included).
    public init(services: [String] = GroupAPI.allServiceNames) {
        self.index = Self.embeddedIndex
        self.services = services.sorted()
    }

    /// Serves both versions in `router`; when `enabled` is false (`reflection: false`), both
    /// answer UNIMPLEMENTED.
    public func register(in router: inout ServerRouter, enabled: Bool = true) {
        for path in Self.paths {
            if enabled {
                router.register(path, .bidirectionalStreaming { [self] requests, _, writer in
                    try await serve(requests, writer: writer)
                }, needsToken: false)
            } else {
                router.register(path, .bidirectionalStreaming { _, _, _ in
                    throw GRPCStatus(.unimplemented, "server reflection is turned off (reflection: false)")
                }, needsToken: false)
            }
        }
    }

    /// Answers each request of the stream in order until the client half-closes.
    func serve(_ requests: ServerRequestStream, writer: ServerStreamWriter) async throws {
        // The files sent on this stream: a dependency goes once, as grpc-go does.
        var sent: Set<String> = []
        for try await bytes in requests {
            // v1alpha's messages are v1's under another package: the same bytes on the wire.
            let request = try MessageCoding.decode(Grpc_Reflection_V1_ServerReflectionRequest.self, from: bytes)
            let response = try answer(request, sent: &sent)
            try await writer.write(MessageCoding.encode(response))
        }
    }

    /// The response to one request.
    /// - Throws: `INVALID_ARGUMENT` when the request asks nothing (the call ends, as in grpc-go).
    func answer(
        _ request: Grpc_Reflection_V1_ServerReflectionRequest, sent: inout Set<String>
    ) throws(GRPCStatus) -> Grpc_Reflection_V1_ServerReflectionResponse {
        var response = Grpc_Reflection_V1_ServerReflectionResponse()
        response.validHost = request.host
        response.originalRequest = request
        switch request.messageRequest {
        case .fileByFilename(let name):
            response.messageResponse = files(index.fileWithDependencies(name, sent: &sent), notFound: "file not found: \(name)")
        case .fileContainingSymbol(let symbol):
            let name = symbol.hasPrefix(".") ? String(symbol.dropFirst()) : symbol
            let files = index.fileOfSymbol[name].flatMap { index.fileWithDependencies($0, sent: &sent) }
            response.messageResponse = self.files(files, notFound: "symbol not found: \(symbol)")
        case .fileContainingExtension(let request):
            let file = index.extensions[request.containingType]?[request.extensionNumber]
            response.messageResponse = files(
                file.flatMap { index.fileWithDependencies($0, sent: &sent) },
                notFound: "extension not found: \(request.containingType) number \(request.extensionNumber)")
        case .allExtensionNumbersOfType(let type):
            if index.messageTypes.contains(type) {
                response.messageResponse = .allExtensionNumbersResponse(.with {
                    $0.baseTypeName = type
                    $0.extensionNumber = (index.extensions[type]?.keys.sorted()) ?? []
                })
            } else {
                response.messageResponse = Self.notFound("message type not found: \(type)")
            }
        case .listServices:
            response.messageResponse = .listServicesResponse(.with { list in
                list.service = services.map { name in .with { $0.name = name } }
            })
        case nil:
            throw GRPCStatus(.invalidArgument, "invalid MessageRequest: no request set")
        }
        return response
    }

    private func files(_ files: [[UInt8]]?, notFound: String) -> Grpc_Reflection_V1_ServerReflectionResponse.OneOf_MessageResponse {
        guard let files else { return Self.notFound(notFound) }
        return .fileDescriptorResponse(.with { $0.fileDescriptorProto = files })
    }

    private static func notFound(_ message: String) -> Grpc_Reflection_V1_ServerReflectionResponse.OneOf_MessageResponse {
        .errorResponse(.with {
            $0.errorCode = Int32(GRPCStatus.Code.notFound.rawValue)
            $0.errorMessage = message
        })
    }
}
