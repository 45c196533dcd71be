public import GroupModel
public import GroupService

/// Apps, secrets and tokens for tests.
public enum TestApps {
    /// A 40-byte secret for app ``appA`` (kid `k1`).
    public static let secretA = "test-secret-for-app-a-0123456789abcdefgh"
    /// A second secret for app ``appA`` (kid `k2`), for rotation tests.
    public static let secretA2 = "test-secret-two-for-app-a-0123456789abcd"
    /// A 40-byte secret for app ``appB`` (kid `k1`).
    public static let secretB = "test-secret-for-app-b-0123456789abcdefgh"
    /// The first test app's id.
    public static let appA = "app-a"
    /// The second test app's id.
    public static let appB = "app-b"

    /// Two apps: `app-a` with secrets `k1`, `k2`; `app-b` with `k1`; default limits.
    public static var apps: [GroupdConfiguration.App] {
        [
            GroupdConfiguration.App(id: appA, secrets: [
                .init(kid: "k1", secret: secretA), .init(kid: "k2", secret: secretA2),
            ]),
            GroupdConfiguration.App(id: appB, secrets: [.init(kid: "k1", secret: secretB)]),
        ]
    }

    /// A valid configuration serving ``apps``, listening on port 0, data in `dataDir`.
    public static func configuration(dataDir: String = "./data") -> GroupdConfiguration {
        var configuration = GroupdConfiguration.defaults
        configuration.listen.port = 0
        configuration.dataDir = dataDir
        configuration.apps = apps
        return configuration
    }

    /// A token of `app-a` (kid `k1`) for `user`, valid for an hour from `now`.
    public static func token(
        user: String, admin: Bool = false, app: String = appA, now: Timestamp = SystemWallClock().now()
    ) async throws -> String {
        let secret = app == appB ? secretB : secretA
        return try await TokenMinter.mint(app: app, secret: secret, kid: "k1", user: user, admin: admin, now: now)
    }
}

extension TestApps {
    /// App-a's custom fields in ``customFieldsConfiguration(dataDir:)``: group keys `level`
    /// (8 bytes, read by anyone, written by the owner and admins) and `secret` (8 bytes, read and
    /// written by the owner only); member keys `title` (8 bytes, anyone in the group) and `score`
    /// (8 bytes, read by owner and admins, written by the owner).
    public static var customFields: CustomFieldSchema {
        CustomFieldSchema(
            groupFields: [
                CustomFieldDefinition(key: "level", maxValueBytes: 8, readers: .anyone, writers: .ownerAndAdmins),
                CustomFieldDefinition(key: "secret", maxValueBytes: 8, readers: .owner, writers: .owner),
            ],
            memberFields: [
                CustomFieldDefinition(key: "title", maxValueBytes: 8, readers: .members, writers: .everyone),
                CustomFieldDefinition(key: "score", maxValueBytes: 8, readers: .ownerAndAdmins, writers: .owner),
            ])
    }

    /// ``configuration(dataDir:)`` with ``customFields`` defined for app-a.
    public static func customFieldsConfiguration(dataDir: String = "./data") -> GroupdConfiguration {
        var configuration = configuration(dataDir: dataDir)
        configuration.apps[0].customFields = customFields
        return configuration
    }
}
