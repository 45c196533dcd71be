import GroupAPI
import GroupModel
import GroupStore

/// The API's permissions and permission groups as the model's.
enum PermissionMapping {
    /// The model's permission of an API value; `nil` for UNSPECIFIED and unknown values.
    static func permission(_ value: Groupd_V1_Permission) -> Permission? {
        guard value.rawValue > 0 else { return nil }
        return Permission(rawValue: Int(value.rawValue) - 1)
    }

    /// The API value of a permission.
    static func value(_ permission: Permission) -> Groupd_V1_Permission {
        Groupd_V1_Permission(rawValue: Int32(permission.rawValue + 1)) ?? .unspecified
    }

    /// The API values of a set, in declaration order.
    static func values(_ set: PermissionSet) -> [Groupd_V1_Permission] { set.members.map(value) }

    /// A set of API values, or `INVALID_ARGUMENT` naming `field[index]` for UNSPECIFIED or an
    /// unknown value.
    static func set(_ values: [Groupd_V1_Permission], field: String) throws -> PermissionSet {
        var set: PermissionSet = []
        for (index, value) in values.enumerated() {
            guard let permission = permission(value) else {
                throw GroupError.invalidArgument(field: "\(field)[\(index)]", "\(value.rawValue) is not a permission")
            }
            set.insert(PermissionSet(permission))
        }
        return set
    }

    /// Topic values by topic id, or `INVALID_ARGUMENT` naming the entry at fault (an empty or
    /// repeated topic id, a bad permission).
    static func topicValues(_ entries: [Groupd_V1_TopicPermissions], field: String) throws -> [String: PermissionSet] {
        var values: [String: PermissionSet] = [:]
        for (index, entry) in entries.enumerated() {
            if entry.topicID.isEmpty {
                throw GroupError.invalidArgument(field: "\(field)[\(index)].topic_id", "topic_id must not be empty")
            }
            if values[entry.topicID] != nil {
                throw GroupError.invalidArgument(field: "\(field)[\(index)].topic_id", "\(entry.topicID) is named twice")
            }
            values[entry.topicID] = try set(entry.permissions, field: "\(field)[\(index)].permissions")
        }
        return values
    }

    /// The API values of permission names as events store them (`Permission.name`).
    static func permissions(named text: String, separator: Character) -> [Groupd_V1_Permission] {
        let byName = Dictionary(uniqueKeysWithValues: Permission.allCases.map { ($0.name, $0) })
        return text.split(separator: separator).compactMap { byName[String($0)].map(value) }
    }
}

/// GroupService permission groups of Community groups: CreatePermissionGroup,
/// UpdatePermissionGroup, DeletePermissionGroup, ListPermissionGroups,
/// AddPermissionGroupMembers, RemovePermissionGroupMembers, ListPermissionGroupMembers and
/// GetMemberPermissions.
extension GroupServiceHandler {
    func createPermissionGroup(
        _ request: Groupd_V1_CreatePermissionGroupRequest, _ call: CallContext
    ) async throws -> Groupd_V1_CreatePermissionGroupResponse {
        try GroupdService.requireGroupID(request.groupID)
        let create = PermissionGroupUpdate(
            name: request.name, customData: request.customData.isEmpty ? nil : request.customData,
            permissions: try PermissionMapping.set(request.permissions, field: "permissions"),
            topicPermissions: try PermissionMapping.topicValues(request.topicPermissions, field: "topic_permissions")
                .mapValues { Optional($0) })
        let liveTopics = try await topicIDs(of: request.groupID, named: !create.topicPermissions.isEmpty, call)
        let (limits, now, id) = (call.limits, clock.now(), PermissionGroup.generateID())
        let result = try await service.mutate(call, groupID: request.groupID) { snapshot, op in
            let plan = try GroupRules.planPermissionGroupCreation(
                create, id: id, in: snapshot.group, by: op, liveTopics: liveTopics, limits: limits, now: now)
            return (plan.change, plan.group)
        }
        return .with { $0.permissionGroup = Self.permissionGroupView(result.value, in: request.groupID, members: 0) }
    }

    func updatePermissionGroup(
        _ request: Groupd_V1_UpdatePermissionGroupRequest, _ call: CallContext
    ) async throws -> Groupd_V1_UpdatePermissionGroupResponse {
        try GroupdService.requireGroupID(request.groupID)
        let update = try Self.permissionGroupUpdate(request)
        // Every update drops the values of deleted topics: the live topics are read each time.
        let liveTopics = try await topicIDs(of: request.groupID, named: true, call)
        let (limits, now, id) = (call.limits, clock.now(), request.permissionGroupID)
        let result = try await service.mutate(call, groupID: request.groupID) { snapshot, op in
            let plan = try GroupRules.planPermissionGroupUpdate(
                update, id: id, in: snapshot.group, by: op, liveTopics: liveTopics, limits: limits, now: now)
            return (plan.change, plan.group)
        }
        let members = try await memberCount(of: id, in: request.groupID, call)
        return .with { $0.permissionGroup = Self.permissionGroupView(result.value, in: request.groupID, members: members) }
    }

    func deletePermissionGroup(
        _ request: Groupd_V1_DeletePermissionGroupRequest, _ call: CallContext
    ) async throws -> Groupd_V1_DeletePermissionGroupResponse {
        try GroupdService.requireGroupID(request.groupID)
        let id = request.permissionGroupID
        _ = try await service.mutate(call, groupID: request.groupID) { snapshot, op in
            (try GroupRules.planPermissionGroupDeletion(id, in: snapshot.group, by: op), ())
        }
        return Groupd_V1_DeletePermissionGroupResponse()
    }

    func listPermissionGroups(
        _ request: Groupd_V1_ListPermissionGroupsRequest, _ call: CallContext
    ) async throws -> Groupd_V1_ListPermissionGroupsResponse {
        if request.permissionGroupIds.count > call.limits.maxGroupsPerRequest {
            throw GroupError.invalidArgument(
                field: "permission_group_ids",
                "\(request.permissionGroupIds.count) ids exceed the limit of \(call.limits.maxGroupsPerRequest)",
                limit: call.limits.maxGroupsPerRequest)
        }
        let community = try await readableCommunity(request.groupID, call)
        var groups = [try GroupRules.permissionGroup(
            PermissionGroup.everyoneID, in: community, field: "permission_group_id", allowEveryone: true)]
        groups += community.permissionGroups.filter { !$0.isEveryone }
        if !request.permissionGroupIds.isEmpty {
            let wanted = Set(request.permissionGroupIds)
            groups = groups.filter { wanted.contains($0.id) }
        }
        let assignments = try await store.permissionAssignments(app: call.caller.appID, groupID: community.id)
        if !request.userID.isEmpty {
            let member = try await store.memberships(app: call.caller.appID, userID: request.userID, groupIDs: [community.id])
            guard let member = member[community.id] else { throw GroupError.memberNotFound(request.userID, field: "user_id") }
            groups = groups.filter { $0.isEveryone || member.permissionGroups.contains($0.id) }
        }
        let counts = Self.memberCounts(assignments)
        let topics = try await topicIDs(of: community.id, named: true, call)
        return .with {
            $0.permissionGroups = groups.map { group in
                var group = group
                group.topicPermissions = group.topicPermissions.filter { topics.contains($0.key) }
                let members = group.isEveryone ? community.memberCount : counts[group.id] ?? 0
                return Self.permissionGroupView(group, in: community.id, members: members)
            }
        }
    }

    func addPermissionGroupMembers(
        _ request: Groupd_V1_AddPermissionGroupMembersRequest, _ call: CallContext
    ) async throws -> Groupd_V1_AddPermissionGroupMembersResponse {
        let results = try await changePermissionGroupMembers(
            request.groupID, request.permissionGroupID, request.userIds, adding: true, call)
        return .with { $0.results = results }
    }

    func removePermissionGroupMembers(
        _ request: Groupd_V1_RemovePermissionGroupMembersRequest, _ call: CallContext
    ) async throws -> Groupd_V1_RemovePermissionGroupMembersResponse {
        let results = try await changePermissionGroupMembers(
            request.groupID, request.permissionGroupID, request.userIds, adding: false, call)
        return .with { $0.results = results }
    }

    func listPermissionGroupMembers(
        _ request: Groupd_V1_ListPermissionGroupMembersRequest, _ call: CallContext
    ) async throws -> Groupd_V1_ListPermissionGroupMembersResponse {
        let size = try GroupdService.pageSize(request.pageSize, fallback: call.limits.maxPageSize, max: call.limits.maxPageSize)
        let community = try await readableCommunity(request.groupID, call)
        let id = request.permissionGroupID
        _ = try GroupRules.permissionGroup(id, in: community, field: "permission_group_id", allowEveryone: false)
        let assignments = try await store.permissionAssignments(app: call.caller.appID, groupID: community.id)
        // The token is the last listed user id (UserIDToken): the store lists by user id in byte order.
        let after = request.pageToken.isEmpty ? nil : try UserIDToken.userID(hex: Substring(request.pageToken))
        let members = Array(assignments.lazy
            .filter { assignment in
                assignment.permissionGroups.contains(id)
                    && (after.map { $0.utf8.lexicographicallyPrecedes(assignment.userID.utf8) } ?? true)
            }
            .prefix(size + 1).map(\.userID))
        let page = Array(members.prefix(size))
        return .with {
            $0.userIds = page
            $0.nextPageToken = members.count > size ? page.last.map(UserIDToken.hex) ?? "" : ""
        }
    }

    func getMemberPermissions(
        _ request: Groupd_V1_GetMemberPermissionsRequest, _ call: CallContext
    ) async throws -> Groupd_V1_GetMemberPermissionsResponse {
        let (group, membership) = try await service.loadGroup(call, groupID: request.groupID)
        let caller = GroupdService.groupOperator(call.caller, membership: membership)
        // A private topic the caller does not see does not exist for them.
        if !group.isVisible(to: caller) { throw GroupError.groupNotFound(group.id) }
        // Members of the community (a topic's are its community's) and the backend.
        try GroupRules.authorize(.listMembers, in: group.asCommunity, by: caller).get()
        try GroupRules.checkPermissionGroupsSupported(group)
        let userID = request.userID.isEmpty ? call.caller.operatorID : request.userID
        guard let userID else { throw GroupError.invalidArgument(field: "user_id", "user_id names the member (the backend has none)") }
        let member: Member?
        if userID == call.caller.operatorID {
            member = membership
        } else {
            let communityID = group.parentID ?? group.id
            member = try await store.memberships(app: call.caller.appID, userID: userID, groupIDs: [communityID])[communityID]
        }
        guard let member else { throw GroupError.memberNotFound(userID, field: "user_id") }
        let op = GroupOperator.user(userID, membership: member)
        let live = Set(group.permissionGroups.map(\.id))
        return .with {
            $0.role = APIMapping.role(member.role)
            $0.permissions = PermissionMapping.values(GroupRules.effectivePermissions(in: group, by: op))
            $0.permissionGroupIds = member.permissionGroups.filter(live.contains)
        }
    }

    // MARK: Helpers

    private func changePermissionGroupMembers(
        _ groupID: String, _ id: String, _ users: [String], adding: Bool, _ call: CallContext
    ) async throws -> [Groupd_V1_MemberResult] {
        try GroupdService.requireGroupID(groupID)
        let limits = call.limits
        let result = try await service.mutate(
            call, groupID: groupID, targets: GroupdService.distinctTargets(users, limits: limits)
        ) { snapshot, op in
            let plan = try GroupRules.planPermissionGroupMembers(
                users, adding: adding, to: id, in: snapshot.group, by: op, memberships: snapshot.targets, limits: limits)
            return (plan.change, plan.results)
        }
        let actor = call.caller.actingRole(membership: result.membership?.role)
        return result.value.map { GroupdService.memberResult($0, actor: actor, call: call) }
    }

    /// The community `groupID` for a reading call: members and the backend (`NOT_A_MEMBER`,
    /// `GROUP_NOT_FOUND`), a type with permission groups, not a topic.
    private func readableCommunity(_ groupID: String, _ call: CallContext) async throws -> Group {
        let (community, membership) = try await service.loadGroup(call, groupID: groupID)
        let op = GroupdService.groupOperator(call.caller, membership: membership)
        if community.isTopic { throw GroupError.notAllowedOnTopic(community.id, community: community.parentID ?? "") }
        try GroupRules.authorize(.listMembers, in: community, by: op).get()
        try GroupRules.checkPermissionGroupsSupported(community)
        return community
    }

    /// The live topic ids of the community `groupID` (none read when `named` is false: the
    /// request names no topic). A topic id or an unknown group reads nothing here: the call's
    /// own checks refuse it.
    private func topicIDs(of groupID: String, named: Bool, _ call: CallContext) async throws -> Set<String> {
        guard named, !GroupID.isTopic(groupID) else { return [] }
        let topics = try await store.topics(app: call.caller.appID, communityIDs: [groupID])[groupID] ?? []
        return Set(topics.map(\.id))
    }

    /// How many members the permission group `id` of `groupID` has (`everyone`: the community's
    /// member count).
    private func memberCount(of id: String, in groupID: String, _ call: CallContext) async throws -> Int {
        if id == PermissionGroup.everyoneID {
            return try await store.groups(app: call.caller.appID, ids: [groupID])[groupID]?.memberCount ?? 0
        }
        return Self.memberCounts(try await store.permissionAssignments(app: call.caller.appID, groupID: groupID))[id] ?? 0
    }

    /// How many members each permission group has, from the community's assignments.
    static func memberCounts(_ assignments: [PermissionAssignment]) -> [String: Int] {
        var counts: [String: Int] = [:]
        for assignment in assignments {
            for id in Set(assignment.permissionGroups) { counts[id, default: 0] += 1 }
        }
        return counts
    }

    /// An UpdatePermissionGroup request as the model's update: the masked fields, or
    /// `INVALID_ARGUMENT` for an empty or unknown path.
    static func permissionGroupUpdate(_ request: Groupd_V1_UpdatePermissionGroupRequest) throws -> PermissionGroupUpdate {
        let paths = request.updateMask?.paths ?? []
        if paths.isEmpty { throw GroupError.invalidArgument(field: "update_mask", "update_mask names no field") }
        let given = try PermissionMapping.topicValues(request.topicPermissions, field: "topic_permissions")
        var update = PermissionGroupUpdate()
        let prefix = "topic_permissions."
        for path in paths {
            switch path {
            case "name": update.name = request.name
            case "custom_data": update.customData = request.customData
            case "permissions": update.permissions = try PermissionMapping.set(request.permissions, field: "permissions")
            case "topic_permissions":
                update.replacesTopicPermissions = true
                for (topic, value) in given { update.topicPermissions[topic] = value }
            case _ where path.hasPrefix(prefix) && path.count > prefix.count:
                let topic = String(path.dropFirst(prefix.count))
                // Masked without an entry: the topic's value is removed.
                update.topicPermissions[topic] = .some(given[topic])
            default:
                throw GroupError.invalidArgument(field: "update_mask", "unknown path \(path)")
            }
        }
        return update
    }

    /// A permission group as the API shows it.
    static func permissionGroupView(_ group: PermissionGroup, in communityID: String, members: Int) -> Groupd_V1_PermissionGroup {
        .with {
            $0.permissionGroupID = group.id
            $0.groupID = communityID
            $0.name = group.name
            $0.customData = group.customData
            $0.permissions = PermissionMapping.values(group.permissions)
            $0.topicPermissions = group.topicPermissions.keys.sorted().map { topic in
                .with {
                    $0.topicID = topic
                    $0.permissions = PermissionMapping.values(group.topicPermissions[topic]!)
                }
            }
            $0.memberCount = UInt32(clamping: members)
            $0.createTime = APIMapping.timestamp(group.createdAt)
            $0.updateTime = APIMapping.timestamp(group.updatedAt)
        }
    }
}
