import GRPCProtocol
import GroupAPI
import GroupModel
@testable import GroupService
import GroupTestSupport
import Testing

/// One handler per proto service: each handler type registers exactly the methods of its service
/// in Protos/groupd/v1 (none of another service's, none missing), and the five of them together
/// serve every groupd method.
@Suite("Handlers: one per proto service")
struct HandlerRegistrationTests {
    /// A handler type and the generated description of the service it serves.
    enum Handler: String, CaseIterable, CustomStringConvertible {
        case group = "GroupServiceHandler"
        case member = "MemberServiceHandler"
        case application = "ApplicationServiceHandler"
        case message = "MessageServiceHandler"
        case event = "EventServiceHandler"

        var description: String { rawValue }

        func make(_ service: GroupdService) -> any GroupdHandler {
            switch self {
            case .group: GroupServiceHandler(service: service)
            case .member: MemberServiceHandler(service: service)
            case .application: ApplicationServiceHandler(service: service)
            case .message: MessageServiceHandler(service: service)
            case .event: EventServiceHandler(service: service)
            }
        }

        /// The methods of the proto service, as generated from its .proto file.
        var methods: [AnyProtoMethod] {
            switch self {
            case .group: Groupd_V1_GroupService.allMethods
            case .member: Groupd_V1_MemberService.allMethods
            case .application: Groupd_V1_ApplicationService.allMethods
            case .message: Groupd_V1_MessageService.allMethods
            case .event: Groupd_V1_EventService.allMethods
            }
        }
    }

    /// The paths `handler` registers into a fresh router (its own, and nothing else).
    private static func registered(by handler: any GroupdHandler) -> (implemented: Set<String>, routed: [String]) {
        var routes = Routes(authenticate: { _ in
            throw GroupError(code: .unauthenticated, reason: .tokenMissing, message: "not called")
        })
        handler.register(in: &routes)
        return (routes.implemented, routes.router.paths)
    }

    @Test("a handler registers exactly its proto service's methods", arguments: Handler.allCases)
    func registersItsService(handler: Handler) async throws {
        let harness = try await ServiceHarness()
        let expected = Set(handler.methods.map(\.path))
        #expect(!expected.isEmpty)
        let (implemented, routed) = Self.registered(by: handler.make(harness.service))
        #expect(implemented == expected, "missing: \(expected.subtracting(implemented).sorted()), foreign: \(implemented.subtracting(expected).sorted())")
        #expect(routed == expected.sorted())
    }

    @Test("the five handlers together serve every groupd method, each once")
    func togetherEveryMethod() async throws {
        let harness = try await ServiceHarness()
        var counts: [String: Int] = [:]
        for handler in Handler.allCases {
            for path in Self.registered(by: handler.make(harness.service)).implemented { counts[path, default: 0] += 1 }
        }
        let groupd = GroupAPI.allMethods.filter { $0.serviceName.hasPrefix("groupd.") }.map(\.path)
        #expect(Set(counts.keys) == Set(groupd))
        #expect(counts.values.allSatisfy { $0 == 1 })
    }
}
