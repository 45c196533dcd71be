import GRPCProtocol
import GroupAPI
import GroupModel
import GroupService
import GroupTestSupport
import Testing

/// `apps[].custom_fields`: decoding into the model's `CustomFieldSchema`, and its mistakes.
@Suite("Configuration: custom fields")
struct CustomFieldConfigurationTests {
    static func yaml(_ customFields: String) -> String {
        """
        apps:
          - id: app-a
            secrets: [{kid: k1, secret: "test-secret-for-app-a-0123456789abcdefgh"}]
            custom_fields:
        \(customFields.split(separator: "\n").map { "      " + $0 }.joined(separator: "\n"))
        """
    }

    @Test("group and member keys with byte limits and cumulative read/write roles")
    func decodes() throws {
        let c = try GroupdConfiguration.parse(yaml: Self.yaml("""
            max_member_keys: 4
            group:
              - {key: level, max_bytes: 64, read_roles: [owner, admin, member, non_member], write_roles: [owner, admin]}
              - {key: secret, max_bytes: 8, read_roles: [owner], write_roles: [owner]}
            member:
              - {key: title, max_bytes: 32}
              - {key: frozen, max_bytes: 4, write_roles: []}
            """))
        let schema = try #require(c.apps[0].customFields)
        #expect(schema.groupFields["level"] == CustomFieldDefinition(key: "level", maxValueBytes: 64, readers: .anyone, writers: .ownerAndAdmins))
        #expect(schema.groupFields["secret"] == CustomFieldDefinition(key: "secret", maxValueBytes: 8, readers: .owner, writers: .owner))
        #expect(schema.memberFields["title"] == CustomFieldDefinition(key: "title", maxValueBytes: 32, readers: .members, writers: .everyone))
        #expect(schema.memberFields["frozen"]?.writers == .nobody)
        #expect(schema.maxMemberKeys == 4)
        #expect(schema.maxGroupKeys == 16)
    }

    @Test("absent: no schema (any non-empty key)")
    func absent() throws {
        let c = try GroupdConfiguration.parse(yaml: """
            apps:
              - id: app-a
                secrets: [{kid: k1, secret: "test-secret-for-app-a-0123456789abcdefgh"}]
            """)
        #expect(c.apps[0].customFields == nil)
    }

    @Test("mistakes name the key path", arguments: [
        ("group: [{key: a, max_bytes: 8, read_roles: [admin]}]", "apps[0].custom_fields.group[0].read_roles"),
        ("group: [{key: a, max_bytes: 8, write_roles: [boss]}]", "apps[0].custom_fields.group[0].write_roles"),
        ("member: [{key: a, max_bytes: 0}]", "apps[0].custom_fields.member[0].max_bytes"),
        ("member: [{key: a, max_bytes: 8}, {key: a, max_bytes: 8}]", "apps[0].custom_fields.member[1].key"),
        ("group: [{key: a, max_bytes: 8, colour: red}]", "apps[0].custom_fields.group[0].colour"),
    ])
    func mistakes(_ text: String, _ path: String) {
        do {
            _ = try GroupdConfiguration.parse(yaml: Self.yaml(text))
            Issue.record("accepted: \(text)")
        } catch let error as ConfigurationError {
            #expect(error.keyPath == path, "\(error)")
        } catch {
            Issue.record("unexpected \(error)")
        }
    }
}

/// CreateGroup checks initial custom values against the app's definitions.
@Suite("CreateGroup custom fields, in process")
struct CreateGroupCustomFieldTests {
    @Test("known keys are kept; an unknown key or an oversize value names the key")
    func initialValues() async throws {
        let h = try await ServiceHarness(configuration: TestApps.customFieldsConfiguration())
        var request = createRequest(.public, id: "c-1", owner: "owner")
        request.custom = ["level": [1]]
        request.members = [.with { $0.userID = "mia"; $0.custom = ["title": [2]] }]
        let created = try await h.call(Methods.createGroup, request, as: .admin).get()
        #expect(created.group?.custom == ["level": [1]])
        request.groupID = "c-2"
        request.custom = ["colour": [1]]
        expectFailure(try await h.call(Methods.createGroup, request, as: .admin), .invalidArgument, reason: "INVALID_ARGUMENT", field: "custom.colour")
        request.custom = [:]
        request.members = [.with { $0.userID = "mia"; $0.custom = ["title": Array(repeating: 0, count: 9)] }]
        expectFailure(try await h.call(Methods.createGroup, request, as: .admin), .invalidArgument, reason: "INVALID_ARGUMENT",
                      field: "members[0].custom.title", limit: 8)
    }
}
