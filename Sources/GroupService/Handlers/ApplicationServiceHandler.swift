import GroupAPI
import GroupModel
import GroupStore

/// The handler of `groupd.v1.ApplicationService` (application.proto): ListApplications,
/// ReportApplicationsRead, AcceptApplication, RefuseApplication, WithdrawApplication. Items are
/// created by JoinGroup and InviteMembers (``MemberServiceHandler/joinGroup(_:_:)``,
/// ``MemberServiceHandler/inviteMembers(_:_:)``).
struct ApplicationServiceHandler: GroupdHandler {
    let service: GroupdService

    /// Registers every ApplicationService method, in the order of application.proto.
    func register(in routes: inout Routes) {
        routes.unary(Groupd_V1_ApplicationService.Method.listApplications, listApplications)
        routes.unary(Groupd_V1_ApplicationService.Method.reportApplicationsRead, reportApplicationsRead)
        routes.unary(Groupd_V1_ApplicationService.Method.acceptApplication, acceptApplication)
        routes.unary(Groupd_V1_ApplicationService.Method.refuseApplication, refuseApplication)
        routes.unary(Groupd_V1_ApplicationService.Method.withdrawApplication, withdrawApplication)
    }

    /// Default and maximum page sizes of ListApplications (application.proto).
    static let applicationPageSize = (fallback: 20, max: 100)

    func listApplications(
        _ request: Groupd_V1_ListApplicationsRequest, _ call: CallContext
    ) async throws -> Groupd_V1_ListApplicationsResponse {
        let size = try GroupdService.pageSize(
            request.pageSize, fallback: Self.applicationPageSize.fallback, max: Self.applicationPageSize.max)
        if let community = GroupID.communityID(ofTopic: request.groupID) {
            // Applications are to join the community.
            throw GroupError.notAllowedOnTopic(request.groupID, community: community)
        }
        let now = clock.now()
        let query = ApplicationQuery(
            userID: call.caller.operatorID, kinds: try Self.kinds(request.kind), states: try Self.states(request.states),
            groupID: request.groupID.isEmpty ? nil : request.groupID, roles: try Self.roles(request.roles), now: now)
        // Items past their expiry read as EXPIRED either way; marking them stores their events.
        _ = try await store.expireApplications(app: call.caller.appID, now: now, limit: GroupdService.expiryBatch)
        let listing = try await store.listApplications(
            app: call.caller.appID, query: query, after: request.pageToken.isEmpty ? nil : request.pageToken, limit: size)
        return .with {
            $0.applications = listing.page.items.map {
                GroupdService.applicationView($0.application, groupName: $0.groupName, roles: $0.roles, caller: call.caller, now: now)
            }
            $0.nextPageToken = listing.page.next ?? ""
            $0.unreadCount = UInt32(clamping: listing.unreadCount)
            $0.readTime = listing.readTime.map(APIMapping.timestamp)
        }
    }

    func reportApplicationsRead(
        _ request: Groupd_V1_ReportApplicationsReadRequest, _ call: CallContext
    ) async throws -> Groupd_V1_ReportApplicationsReadResponse {
        guard let user = call.caller.operatorID else {
            throw GroupError.operatorRequired("reporting applications read")
        }
        let now = clock.now()
        // A time in the future would mark items not yet sent as read: it counts as now.
        let time = min(request.readTime.map(Self.time) ?? now, now)
        let (readTime, unread) = try await store.markApplicationsRead(
            app: call.caller.appID, userID: user, upTo: time, now: now)
        return .with {
            $0.readTime = APIMapping.timestamp(readTime)
            $0.unreadCount = UInt32(clamping: unread)
        }
    }

    func acceptApplication(
        _ request: Groupd_V1_AcceptApplicationRequest, _ call: CallContext
    ) async throws -> Groupd_V1_AcceptApplicationResponse {
        let message = request.message
        let limits = call.limits
        let now = clock.now()
        let decided = try await decide(call, id: request.applicationID) { context in
            try GroupRules.planAcceptApplication(context, message: message, limits: limits, now: now)
        }
        let actor = call.caller.actingRole(membership: decided.membership?.role)
        return .with {
            $0.application = decided.view
            $0.member = decided.plan.member.map { GroupdService.memberView($0, actor: actor, call: call) }
        }
    }

    func refuseApplication(
        _ request: Groupd_V1_RefuseApplicationRequest, _ call: CallContext
    ) async throws -> Groupd_V1_RefuseApplicationResponse {
        let message = request.message
        let limits = call.limits
        let now = clock.now()
        let decided = try await decide(call, id: request.applicationID) { context in
            try GroupRules.planRefuseApplication(context, message: message, limits: limits, now: now)
        }
        return .with { $0.application = decided.view }
    }

    func withdrawApplication(
        _ request: Groupd_V1_WithdrawApplicationRequest, _ call: CallContext
    ) async throws -> Groupd_V1_WithdrawApplicationResponse {
        let now = clock.now()
        let decided = try await decide(call, id: request.applicationID) { context in
            try GroupRules.planWithdrawApplication(context, now: now)
        }
        return .with { $0.application = decided.view }
    }

    /// A committed decision: the plan, the caller's membership and the item as the caller sees it.
    struct DecidedApplication: Sendable {
        var plan: ApplicationDecisionPlan
        var membership: Member?
        var view: Groupd_V1_Application
    }

    /// Runs a decision plan on item `id` in one store transaction (permission rule included).
    func decide(
        _ call: CallContext, id: String,
        _ plan: @escaping @Sendable (ApplicationContext) throws -> ApplicationDecisionPlan
    ) async throws -> DecidedApplication {
        if id.isEmpty { throw GroupError.invalidArgument(field: "application_id", "application_id must not be empty") }
        let caller = call.caller
        let now = clock.now()
        let committed = try await store.decideApplication(
            app: caller.appID, id: id, operatorID: caller.operatorID, at: now
        ) { snapshot in
            guard let application = snapshot.application else { throw GroupError.applicationNotFound(id) }
            let subject = application.subjectID
            let op = GroupdService.groupOperator(caller, membership: snapshot.group.operatorMembership)
            let context = ApplicationContext(
                application: application, group: snapshot.group.group, op: op,
                subjectMembership: snapshot.group.targets[subject],
                subjectJoinedGroupCount: snapshot.group.joinedGroupCounts[subject] ?? 0,
                subjectRetainedMute: snapshot.group.retainedMutes[subject], subjectBan: snapshot.group.bans[subject])
            let decided = try plan(context)
            let roles = GroupRules.relations(of: decided.application, in: decided.change.group, for: op)
            return (ApplicationChange(group: decided.change, applications: [decided.application]),
                    (plan: decided, membership: op.membership, roles: roles))
        }
        let value = committed.value.value
        let view = GroupdService.applicationView(
            value.plan.application, groupName: committed.group.name, roles: value.roles, caller: caller, now: now)
        return DecidedApplication(plan: value.plan, membership: value.membership, view: view)
    }

    // MARK: Request conversions

    /// The kind filter (UNSPECIFIED: both).
    static func kinds(_ kind: Groupd_V1_ApplicationKind) throws -> Set<ApplicationKind> {
        switch kind {
        case .unspecified: return []
        case .join: return [.join]
        case .invitation: return [.invitation]
        case .UNRECOGNIZED(let value): throw GroupError.invalidArgument(field: "kind", "unknown kind \(value)")
        }
    }

    /// The state filter (empty: all); UNSPECIFIED or unknown entries are `INVALID_ARGUMENT`.
    static func states(_ states: [Groupd_V1_ApplicationState]) throws -> Set<ApplicationState> {
        var result: Set<ApplicationState> = []
        for (index, state) in states.enumerated() {
            switch state {
            case .pending: result.insert(.pending)
            case .accepted: result.insert(.accepted)
            case .refused: result.insert(.refused)
            case .expired: result.insert(.expired)
            case .withdrawn: result.insert(.withdrawn)
            default: throw GroupError.invalidArgument(field: "states[\(index)]", "unknown or unspecified state")
            }
        }
        return result
    }

    /// The relation filter (empty: any); UNSPECIFIED or unknown entries are `INVALID_ARGUMENT`.
    static func roles(_ roles: [Groupd_V1_ApplicationRole]) throws -> Set<ApplicationRole> {
        var result: Set<ApplicationRole> = []
        for (index, role) in roles.enumerated() {
            switch role {
            case .approver: result.insert(.approver)
            case .invitee: result.insert(.invitee)
            case .sender: result.insert(.sender)
            default: throw GroupError.invalidArgument(field: "roles[\(index)]", "unknown or unspecified role")
            }
        }
        return result
    }

    /// A protobuf timestamp as the domain's milliseconds.
    static func time(_ time: Google_Protobuf_Timestamp) -> Timestamp {
        Timestamp(millisecondsSince1970: time.seconds * 1000 + Int64(time.nanos) / 1_000_000)
    }
}
