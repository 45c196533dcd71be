import GroupAPI
import GroupModel
@testable import GroupService
import Testing

@Suite("Group type names at the edges: the API's enum and the plugins' names")
struct GroupTypeNameTests {
    @Test("every type maps to its API value and back, and has its plugin name")
    func names() throws {
        let expected: [GroupType: (api: Groupd_V1_GroupType, plugin: String)] = [
            .work: (.work, "work"), .public: (.public, "public"), .meeting: (.meeting, "meeting"),
            .avChatRoom: (.avChatRoom, "av_chat_room"), .community: (.community, "community"),
        ]
        #expect(Set(expected.keys) == Set(GroupType.allCases))
        for (type, names) in expected {
            #expect(APIMapping.groupType(type) == names.api)
            #expect(try APIMapping.groupType(names.api) == type)
            #expect(GroupdService.hookGroupType(type) == names.plugin)
        }
        #expect {
            _ = try APIMapping.groupType(.unspecified)
        } throws: { error in
            guard let refused = error as? GroupError else { return false }
            return refused.code == .invalidArgument && refused.metadata["field"] == "type" && refused.message.contains("COMMUNITY")
        }
    }
}
