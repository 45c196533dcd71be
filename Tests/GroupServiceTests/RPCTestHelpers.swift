import GRPCProtocol
import GroupAPI
import GroupModel
import GroupService
import GroupStore
import GroupTestSupport
import Testing

typealias Methods = Groupd_V1_GroupService.Method

/// A string of exactly `count` UTF-8 bytes, mostly two-byte characters, so that a limit counted
/// in characters instead of bytes would let it through.
func bytes(_ count: Int) -> String {
    String(repeating: "é", count: count / 2) + (count % 2 == 1 ? "a" : "")
}

/// A CreateGroup request.
func createRequest(
    _ type: Groupd_V1_GroupType, id: String = "", name: String = "group",
    members: [(String, Groupd_V1_MemberRole)] = [], owner: String = "", maxMembers: UInt32 = 0,
    settings: Groupd_V1_GroupSettings? = nil, profile: ((inout Groupd_V1_GroupProfile) -> Void)? = nil
) -> Groupd_V1_CreateGroupRequest {
    .with {
        $0.type = type
        $0.groupID = id
        $0.profile = .with {
            $0.name = name
            profile?(&$0)
        }
        $0.members = members.map { member in .with { $0.userID = member.0; $0.role = member.1 } }
        $0.ownerUserID = owner
        $0.maxMemberCount = maxMembers
        $0.settings = settings
    }
}

extension ServiceHarness {
    /// Creates a group and returns it; fails the test (throws) when the call fails.
    @discardableResult
    func create(
        _ type: Groupd_V1_GroupType, id: String = "", name: String = "group",
        members: [(String, Groupd_V1_MemberRole)] = [], owner: String = "", as identity: TestIdentity
    ) async throws -> Groupd_V1_Group {
        let response = try await call(
            Methods.createGroup, createRequest(type, id: id, name: name, members: members, owner: owner), as: identity
        ).get()
        return try #require(response.group)
    }

    /// GetGroupsInfo for `ids` as `identity`; throws when the call fails as a whole.
    func info(_ ids: [String], as identity: TestIdentity) async throws -> Groupd_V1_GetGroupsInfoResponse {
        try await call(Methods.getGroupsInfo, .with { $0.groupIds = ids }, as: identity).get()
    }

    /// The one group `id` as `identity` sees it, or nil when it comes back as a failure.
    func read(_ id: String, as identity: TestIdentity) async throws -> Groupd_V1_Group? {
        let response = try await info([id], as: identity)
        return response.groups.first { $0.groupID == id }
    }

    /// DismissGroup `id` as `identity`.
    func dismiss(_ id: String, as identity: TestIdentity) async throws -> RPCOutcome<Groupd_V1_DismissGroupResponse> {
        try await call(Methods.dismissGroup, .with { $0.groupID = id }, as: identity)
    }

    /// Every stored event of group `id` of app-a (or `app`).
    func events(_ id: String, app: String = TestApps.appA) async throws -> [GroupEvent] {
        try await store.events(app: app, groupID: id, after: 0, limit: 1000)
    }
}

/// Checks that a call failed with `code` and that its details are a `google.rpc.Status` (same
/// code and message) carrying an `ErrorInfo` with `reason`, domain "groupd" and, when given, the
/// `field` and `limit` metadata; for INVALID_ARGUMENT naming a field, also a `BadRequest` naming it.
@discardableResult
func expectFailure<Response>(
    _ outcome: RPCOutcome<Response>, _ code: GRPCStatus.Code, reason: String, field: String? = nil,
    limit: Int? = nil, sourceLocation: SourceLocation = #_sourceLocation
) -> Google_Rpc_ErrorInfo? {
    guard let status = outcome.status else {
        Issue.record("expected \(code)/\(reason), the call succeeded", sourceLocation: sourceLocation)
        return nil
    }
    #expect(status.code == code, "\(status)", sourceLocation: sourceLocation)
    return expectDetails(status, reason: reason, field: field, limit: limit, sourceLocation: sourceLocation)
}

/// The details half of ``expectFailure(_:_:reason:field:limit:sourceLocation:)``.
@discardableResult
func expectDetails(
    _ status: GRPCStatus, reason: String, field: String? = nil, limit: Int? = nil,
    sourceLocation: SourceLocation = #_sourceLocation
) -> Google_Rpc_ErrorInfo? {
    let decoded: Google_Rpc_Status?
    do {
        decoded = try status.decodedDetails()
    } catch {
        Issue.record("details do not decode as google.rpc.Status: \(error)", sourceLocation: sourceLocation)
        return nil
    }
    guard let decoded else {
        Issue.record("\(status) carries no details", sourceLocation: sourceLocation)
        return nil
    }
    #expect(decoded.code == Int32(status.code.rawValue), sourceLocation: sourceLocation)
    #expect(decoded.message == status.message, sourceLocation: sourceLocation)
    guard let info = decoded.details.lazy.compactMap({ try? $0.unpack(Google_Rpc_ErrorInfo.self) }).first else {
        Issue.record("details carry no google.rpc.ErrorInfo", sourceLocation: sourceLocation)
        return nil
    }
    #expect(info.reason == reason, "\(status)", sourceLocation: sourceLocation)
    #expect(info.domain == "groupd", sourceLocation: sourceLocation)
    if let field {
        #expect(info.metadata["field"] == field, "\(status) \(info.metadata)", sourceLocation: sourceLocation)
        if status.code == .invalidArgument {
            let violations = decoded.details.compactMap { try? $0.unpack(Google_Rpc_BadRequest.self) }
                .flatMap(\.fieldViolations)
            #expect(violations.map(\.field) == [field], sourceLocation: sourceLocation)
        }
    }
    if let limit {
        #expect(info.metadata["limit"] == String(limit), "\(status) \(info.metadata)", sourceLocation: sourceLocation)
    }
    return info
}

/// Checks that `response` reports `id` as a lookup failure with `error` (reason GROUP_NOT_FOUND
/// for not-found) and does not return it as a group.
func expectLookupFailure(
    _ response: Groupd_V1_GetGroupsInfoResponse, _ id: String, _ error: Groupd_V1_GroupLookupError = .notFound,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(!response.groups.contains { $0.groupID == id }, sourceLocation: sourceLocation)
    let failures = response.failures.filter { $0.groupID == id }
    #expect(failures.count == 1, "\(response.failures)", sourceLocation: sourceLocation)
    #expect(failures.first?.error == error, sourceLocation: sourceLocation)
    if error == .notFound {
        #expect(failures.first?.reason == "GROUP_NOT_FOUND", sourceLocation: sourceLocation)
    }
}

/// Checks that group `id` of app-a does not exist (for the backend, which sees everything).
func expectNoGroup(_ h: ServiceHarness, _ id: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
    let response = try await h.info([id], as: .admin)
    // An id that could never name a group reads as INVALID_ID; a well-formed one as NOT_FOUND.
    let wellFormed = GroupID.isGenerated(id) || (try? GroupID.validateCustom(id)) != nil
    expectLookupFailure(response, id, wellFormed ? .notFound : .invalidID, sourceLocation: sourceLocation)
}
