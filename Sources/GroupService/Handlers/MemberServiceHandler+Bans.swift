import GroupAPI
import GroupModel
import GroupStore

/// MemberService methods of the ban list: BanMembers, UnbanMembers, ListBannedMembers.
extension MemberServiceHandler {
    /// The snapshot parts a ban or unban reads: the usual ones, the group's ban count and its
    /// owner and admins (the recipients of the notices).
    static let banSnapshotParts: SnapshotRequest.Parts = Store.groupSnapshotParts.union([.banCount, .managers])

    func banMembers(_ request: Groupd_V1_BanMembersRequest, _ call: CallContext) async throws -> Groupd_V1_BanMembersResponse {
        let users = request.userIds
        let seconds = Int64(request.durationSeconds)
        let reason = request.reason
        let options = GroupdService.quitOptions(request.options)
        let limits = call.limits
        let now = clock.now()
        let result = try await service.mutate(
            call, groupID: request.groupID, targets: GroupdService.distinctTargets(users, limits: limits), parts: Self.banSnapshotParts
        ) { snapshot, op in
            let plan = try GroupRules.planBan(
                of: users, for: seconds, reason: reason, in: snapshot.group, by: op, memberships: snapshot.targets,
                bans: snapshot.bans, banCount: snapshot.banCount, managers: snapshot.managers, options: options,
                limits: limits, now: now)
            return (plan.change, plan.results)
        }
        return .with { $0.results = result.value.map { Self.banResult($0, now: now) } }
    }

    func unbanMembers(_ request: Groupd_V1_UnbanMembersRequest, _ call: CallContext) async throws -> Groupd_V1_UnbanMembersResponse {
        let users = request.userIds
        let limits = call.limits
        let now = clock.now()
        let result = try await service.mutate(
            call, groupID: request.groupID, targets: GroupdService.distinctTargets(users, limits: limits), parts: Self.banSnapshotParts
        ) { snapshot, op in
            let plan = try GroupRules.planUnban(
                of: users, in: snapshot.group, by: op, bans: snapshot.bans, managers: snapshot.managers, limits: limits,
                now: now)
            return (plan.change, plan.results)
        }
        return .with { $0.results = result.value.map { Self.banResult($0, now: now) } }
    }

    func listBannedMembers(
        _ request: Groupd_V1_ListBannedMembersRequest, _ call: CallContext
    ) async throws -> Groupd_V1_ListBannedMembersResponse {
        let size = try GroupdService.pageSize(request.pageSize, fallback: call.limits.maxPageSize, max: call.limits.maxPageSize)
        let (group, membership) = try await service.loadGroup(call, groupID: request.groupID)
        let op = GroupdService.groupOperator(call.caller, membership: membership)
        try GroupRules.authorize(.manageBans, in: group, by: op).get()
        let page = try await store.bans(
            app: call.caller.appID, groupID: group.id, after: request.pageToken.isEmpty ? nil : request.pageToken,
            limit: size, now: clock.now())
        return .with {
            $0.bans = page.items.map(Self.bannedMember)
            $0.nextPageToken = page.next ?? ""
        }
    }

    // MARK: Views

    static func bannedMember(_ ban: GroupBan) -> Groupd_V1_BannedMember {
        .with {
            $0.userID = ban.userID
            if let until = ban.until { $0.until = APIMapping.timestamp(until) }
            $0.reason = ban.reason
            $0.operatorUserID = ban.operatorID ?? ""
            $0.banTime = APIMapping.timestamp(ban.bannedAt)
        }
    }

    static func banResult(_ result: BanResult, now: Timestamp) -> Groupd_V1_BanResult {
        .with {
            $0.userID = result.userID
            switch result.outcome {
            case .banned(let ban, let removed):
                $0.result = .success
                $0.ban = bannedMember(ban)
                $0.removed = removed != nil
            case .lifted(let ban):
                $0.result = .success
                $0.ban = bannedMember(ban)
            case .notBanned:
                $0.result = .failed
                $0.reason = GroupError.Reason.notBanned.rawValue
            case .notMember:
                $0.result = .notMember
                $0.reason = GroupError.Reason.notAMember.rawValue
            case .failed(let error):
                $0.result = .failed
                $0.reason = error.reason.rawValue
            case .invalid(let error):
                $0.result = .invalid
                $0.reason = error.reason.rawValue
            }
        }
    }
}
