import GroupModel
import Testing

@Suite("Byte limits (Tencent's defaults)")
struct FieldLimitTests {
    /// A field of a creation request, how to set it, and its default limit.
    struct Case: Sendable, CustomStringConvertible {
        var field: String
        var limit: Int
        var set: @Sendable (inout GroupCreationRequest, String) -> Void
        var description: String { self.field }
    }

    static let cases: [Case] = [
        Case(field: "name", limit: 30) { $0.name = $1 },
        Case(field: "introduction", limit: 120) { $0.introduction = $1 },
        Case(field: "notification", limit: 150) { $0.notification = $1 },
        Case(field: "face_url", limit: 100) { $0.faceURL = $1 },
        Case(field: "members[0].name_card", limit: 50) {
            $0.members = [InitialMember(userID: "bob", nameCard: $1)]
        },
    ]

    @Test("exactly the limit is accepted", arguments: cases)
    func atLimit(_ c: Case) throws {
        var r = request(.public)
        c.set(&r, String(repeating: "a", count: c.limit))
        #expect(groupError { _ = try plan(r) } == nil)
    }

    @Test("one byte over is refused naming the field and the limit", arguments: cases)
    func overLimit(_ c: Case) throws {
        var r = request(.public)
        c.set(&r, String(repeating: "a", count: c.limit + 1))
        let error = try #require(groupError { _ = try plan(r) })
        #expect(error.code == .invalidArgument)
        #expect(error.reason == .invalidArgument)
        #expect(error.metadata["field"] == c.field)
        #expect(error.metadata["limit"] == String(c.limit))
    }

    @Test("limits count UTF-8 bytes, not characters")
    func bytesNotCharacters() throws {
        #expect(groupError { _ = try plan(request(.work, name: String(repeating: "群", count: 10))) } == nil)
        let error = try #require(groupError { _ = try plan(request(.work, name: String(repeating: "群", count: 11))) })
        #expect(error.metadata["field"] == "name")
        #expect(error.message.contains("33 bytes"))
    }

    @Test("the app's own limits apply")
    func perAppLimits() throws {
        var limits = AppLimits.defaults
        limits.groupNameBytes = 5
        #expect(groupError { _ = try plan(request(.work, name: "abcde"), limits: limits) } == nil)
        let error = try #require(groupError { _ = try plan(request(.work, name: "abcdef"), limits: limits) })
        #expect(error.metadata["limit"] == "5")
    }

    @Test("the application message limit (100) via FieldValidation")
    func applicationMessage() throws {
        let limit = AppLimits.defaults.applicationMessageBytes
        #expect(limit == 100)
        #expect(groupError {
            try FieldValidation.checkBytes(String(repeating: "m", count: 100), field: "message", limit: limit)
        } == nil)
        let error = try #require(groupError {
            try FieldValidation.checkBytes(String(repeating: "m", count: 101), field: "message", limit: limit)
        })
        #expect(error.metadata == ["field": "message", "limit": "100"])
    }

    @Test("the default limits are the documented ones")
    func defaults() {
        let d = AppLimits.defaults
        #expect(d.groupNameBytes == 30)
        #expect(d.introductionBytes == 120)
        #expect(d.notificationBytes == 150)
        #expect(d.faceURLBytes == 100)
        #expect(d.nameCardBytes == 50)
        #expect(d.applicationMessageBytes == 100)
        #expect(d.maxMembers(for: .work) == 200)
        #expect(d.maxMembers(for: .public) == 2000)
        #expect(d.maxMembers(for: .meeting) == 6000)
        #expect(d.maxMembers(for: .avChatRoom) == nil)
        #expect(d.maxPageSize == 50)
    }

    @Test("an empty name is refused")
    func emptyName() throws {
        let error = try #require(groupError { _ = try plan(request(.work, name: "")) })
        #expect(error.metadata["field"] == "name")
    }
}
