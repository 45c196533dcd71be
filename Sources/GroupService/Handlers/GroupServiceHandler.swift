import GroupAPI
import GroupModel
import GroupStore

/// The handler of `groupd.v1.GroupService` (group.proto): groups, their settings, listings,
/// attributes and counters, and the backend's revoke and import. This file holds CreateGroup,
/// GetGroupsInfo and DismissGroup; the others are in the extensions named after this type
/// (`+Updates`, `+Listings`, `+Lifecycle`, `+Attributes`).
struct GroupServiceHandler: GroupdHandler {
    let service: GroupdService

    /// Registers every GroupService method, in the order of group.proto.
    func register(in routes: inout Routes) {
        routes.unary(Groupd_V1_GroupService.Method.createGroup, createGroup)
        routes.unary(Groupd_V1_GroupService.Method.getGroupsInfo, getGroupsInfo)
        routes.unary(Groupd_V1_GroupService.Method.updateGroupProfile, updateGroupProfile)
        routes.unary(Groupd_V1_GroupService.Method.updateGroupSettings, updateGroupSettings)
        routes.unary(Groupd_V1_GroupService.Method.dismissGroup, dismissGroup)
        routes.unary(Groupd_V1_GroupService.Method.revokeGroup, revokeGroup)
        routes.unary(Groupd_V1_GroupService.Method.transferOwnership, transferOwnership)
        routes.unary(Groupd_V1_GroupService.Method.setGroupMute, setGroupMute)
        routes.unary(Groupd_V1_GroupService.Method.updateMuteBypassList, updateMuteBypassList)
        routes.unary(Groupd_V1_GroupService.Method.listJoinedGroups, listJoinedGroups)
        routes.unary(Groupd_V1_GroupService.Method.searchGroups, searchGroups)
        routes.unary(Groupd_V1_GroupService.Method.importGroup, importGroup)
        routes.unary(Groupd_V1_GroupService.Method.setGroupAttributes, setGroupAttributes)
        routes.unary(Groupd_V1_GroupService.Method.deleteGroupAttributes, deleteGroupAttributes)
        routes.unary(Groupd_V1_GroupService.Method.getGroupAttributes, getGroupAttributes)
        routes.unary(Groupd_V1_GroupService.Method.incrementGroupCounters, incrementGroupCounters)
        routes.unary(Groupd_V1_GroupService.Method.getGroupCounters, getGroupCounters)
        routes.unary(Groupd_V1_GroupService.Method.syncJoinedGroups, syncJoinedGroups)
        routes.unary(Groupd_V1_GroupService.Method.createTopic, createTopic)
        routes.unary(Groupd_V1_GroupService.Method.updateTopic, updateTopic)
        routes.unary(Groupd_V1_GroupService.Method.deleteTopic, deleteTopic)
        routes.unary(Groupd_V1_GroupService.Method.listTopics, listTopics)
        routes.unary(Groupd_V1_GroupService.Method.createPermissionGroup, createPermissionGroup)
        routes.unary(Groupd_V1_GroupService.Method.updatePermissionGroup, updatePermissionGroup)
        routes.unary(Groupd_V1_GroupService.Method.deletePermissionGroup, deletePermissionGroup)
        routes.unary(Groupd_V1_GroupService.Method.listPermissionGroups, listPermissionGroups)
        routes.unary(Groupd_V1_GroupService.Method.addPermissionGroupMembers, addPermissionGroupMembers)
        routes.unary(Groupd_V1_GroupService.Method.removePermissionGroupMembers, removePermissionGroupMembers)
        routes.unary(Groupd_V1_GroupService.Method.listPermissionGroupMembers, listPermissionGroupMembers)
        routes.unary(Groupd_V1_GroupService.Method.getMemberPermissions, getMemberPermissions)
    }

    func createGroup(_ request: Groupd_V1_CreateGroupRequest, _ call: CallContext) async throws -> Groupd_V1_CreateGroupResponse {
        let type = try APIMapping.groupType(request.type)
        var members: [InitialMember] = []
        for (index, member) in request.members.enumerated() {
            members.append(InitialMember(
                userID: member.userID,
                role: try APIMapping.role(member.role, field: "members[\(index)].role") ?? .member,
                nameCard: member.nameCard, custom: member.custom))
        }
        if let schema = call.customFields {
            // The model's creation rule knows no schema: the initial values are checked here, the
            // creator writing as the owner (the backend writes every key).
            let backend = call.caller.isBackend
            try Self.checkInitialCustom(request.custom, fields: schema.groupFields, maxKeys: schema.maxGroupKeys,
                                        field: "custom", backend: backend)
            for (index, member) in request.members.enumerated() {
                try Self.checkInitialCustom(member.custom, fields: schema.memberFields, maxKeys: schema.maxMemberKeys,
                                            field: "members[\(index)].custom", backend: backend)
            }
        }
        var profile = request.profile ?? Groupd_V1_GroupProfile()
        var custom = request.custom
        try await checkCreationPolicy(type: type, groupID: request.groupID, profile: &profile, custom: &custom, members: &members, call)
        let creation = GroupCreationRequest(
            type: type, groupID: request.groupID, name: profile.name, introduction: profile.introduction,
            notification: profile.notification, faceURL: profile.faceURL,
            maxMembers: request.maxMemberCount == 0 ? nil : Int(request.maxMemberCount),
            settings: try APIMapping.settingsChanges(request.settings, type: type, field: "settings"),
            ownerID: request.ownerUserID.isEmpty ? nil : request.ownerUserID,
            members: members, custom: custom)
        // A generated id that collides (1 in 32^12 per pair) is planned again with a fresh one;
        // a custom id that is taken is the caller's error.
        var attempt = 0
        while true {
            attempt += 1
            let plan: GroupCreationPlan
            do {
                plan = try GroupRules.planCreation(
                    creation, appID: call.caller.appID, creatorID: call.caller.operatorID, limits: call.limits, now: clock.now())
            } catch var error as GroupError {
                // The model names fields as the domain does; the client knows the request's paths.
                if let field = error.metadata["field"] { error.metadata["field"] = Self.createRequestField(field) }
                throw error
            }
            do {
                let created = try await commitCreation(plan, call)
                return .with {
                    $0.group = created.group
                    $0.memberResults = created.memberResults
                }
            } catch let error as GroupError where error.reason == .groupIDTaken && plan.idWasGenerated && attempt < 5 {
                continue
            }
        }
    }

    /// What a committed creation (or import) answers.
    struct CreatedGroup: Sendable {
        /// The group as the owner sees it (own membership when the operator is the owner).
        var group: Groupd_V1_Group
        /// SUCCESS per stored member but the owner (and the owner too when `includeOwner`),
        /// FAILED / TOO_MANY_GROUPS per member left out, in plan order.
        var memberResults: [Groupd_V1_MemberResult]
    }

    /// Writes a creation plan with the app's joined-groups limit checked in the same write
    /// transaction (`GroupRules.applyGroupLimit(to:joinedGroupCounts:limits:)`): an owner over
    /// the limit refuses the request with `TOO_MANY_GROUPS`; other members over it are left out
    /// and answered FAILED with reason `TOO_MANY_GROUPS`.
    func commitCreation(_ plan: GroupCreationPlan, _ call: CallContext, includeOwner: Bool = false) async throws -> CreatedGroup {
        let limits = call.limits
        let committed = try await store.createGroup(plan) { counts in
            let (revised, refused) = try GroupRules.applyGroupLimit(to: plan, joinedGroupCounts: counts, limits: limits)
            return (revised, (members: revised.members, refused: refused))
        }
        let group = committed.group
        let stored = committed.value.members
        let refused = Set(committed.value.refused)
        let owner = stored.first { $0.role == .owner }
        var byUser: [String: Member] = [:]
        for member in stored { byUser[member.userID] = member }
        var results: [Groupd_V1_MemberResult] = []
        for member in plan.members where includeOwner || member.role != .owner {
            if refused.contains(member.userID) {
                results.append(.with {
                    $0.userID = member.userID
                    $0.result = .failed
                    $0.reason = GroupError.Reason.tooManyGroups.rawValue
                })
            } else if let stored = byUser[member.userID] {
                results.append(.with {
                    $0.userID = stored.userID
                    $0.result = .success
                    $0.member = APIMapping.member(stored, now: call.now)
                    $0.member?.receiveMessageOption = GroupdService.receiveOptionView(stored, call: call)
                })
            }
        }
        return CreatedGroup(
            group: APIMapping.group(
                group, visibility: .full, selfInfo: owner.flatMap { $0.userID == call.caller.operatorID ? $0 : nil },
                now: call.now),
            memberResults: results)
    }

    /// Initial custom values against the app's definitions: known keys, within their byte limits
    /// and the key count, writable by the owner (the creator) unless the backend creates.
    static func checkInitialCustom(
        _ values: [String: [UInt8]], fields: [String: CustomFieldDefinition], maxKeys: Int, field: String, backend: Bool
    ) throws {
        for key in values.keys.sorted() {
            let path = "\(field).\(key)"
            guard let definition = fields[key] else {
                throw GroupError.invalidArgument(field: path, "\(key) is not a custom field of this app")
            }
            let size = values[key]!.count
            if size > definition.maxValueBytes {
                throw GroupError.invalidArgument(
                    field: path, "\(path) is \(size) bytes; at most \(definition.maxValueBytes) allowed",
                    limit: definition.maxValueBytes)
            }
            if !backend, !definition.writers.grants(.owner) {
                throw GroupError(code: .permissionDenied, reason: .permissionDenied,
                                 message: "\(path) is written by the app's backend only", metadata: ["field": path])
            }
        }
        if values.count > maxKeys {
            throw GroupError.invalidArgument(field: field, "\(values.count) custom fields exceed the limit of \(maxKeys)", limit: maxKeys)
        }
    }

    static func createRequestField(_ field: String) -> String {
        switch field {
        case "name", "introduction", "notification", "face_url": "profile.\(field)"
        case "owner_id": "owner_user_id"
        case "max_members": "max_member_count"
        default: field
        }
    }

    func getGroupsInfo(_ request: Groupd_V1_GetGroupsInfoRequest, _ call: CallContext) async throws -> Groupd_V1_GetGroupsInfoResponse {
        guard !request.groupIds.isEmpty else {
            throw GroupError.invalidArgument(field: "group_ids", "group_ids must not be empty")
        }
        var ids: [String] = []
        var seen: Set<String> = []
        for id in request.groupIds where seen.insert(id).inserted { ids.append(id) }
        // A topic is read with ListTopics: here it is no group (not found, below).
        let topicIDs: Set<String> = ids.contains(where: GroupID.isTopic) ? Set(ids.filter(GroupID.isTopic)) : []
        guard ids.count <= call.limits.maxGroupsPerRequest else {
            throw GroupError.invalidArgument(
                field: "group_ids", "\(ids.count) group ids exceed the limit of \(call.limits.maxGroupsPerRequest)",
                limit: call.limits.maxGroupsPerRequest)
        }
        let app = call.caller.appID
        // For a user: their memberships and their own remarks too (RongCloud's getGroupsInfo),
        // where they may be a member (an AVChatRoom audience is held in memory, so its rooms are
        // asked too); one statement on a shared database, the unread mentions included.
        let asked = topicIDs.isEmpty ? ids : ids.filter { !topicIDs.contains($0) }
        let found = if let user = call.caller.operatorID {
            try await store.groupsForUser(app: app, userID: user, ids: asked)
        } else {
            GroupsForUser(groups: try await store.groups(app: app, ids: asked))
        }
        let (groups, memberships, remarks) = (found.groups, found.memberships, found.remarks)
        if store.isShared, groups.values.contains(where: { $0.type == .avChatRoom }) {
            try await store.catchUp(app: app)
        }
        var response = Groupd_V1_GetGroupsInfoResponse()
        for id in ids {
            guard Self.isWellFormedGroupID(id) else {
                response.failures.append(.with {
                    $0.groupID = id
                    $0.error = .invalidID
                    $0.reason = GroupError.Reason.invalidArgument.rawValue
                })
                continue
            }
            var membership = memberships[id]
            guard var group = groups[id] else {
                response.failures.append(.with {
                    $0.groupID = id
                    $0.error = .notFound
                    $0.reason = GroupError.Reason.groupNotFound.rawValue
                })
                continue
            }
            if !group.type.preset.behaviour.membershipStored {
                // AVChatRoom: the viewers online count, and the caller may be one of them.
                group.memberCount += try await rooms.onlineCounts(app: app, groupIDs: [id])[id] ?? 0
                if membership == nil, let user = call.caller.operatorID {
                    membership = try await rooms.presentMember(app: app, groupID: id, user: user)
                }
            }
            let visibility = GroupRules.visibility(of: group.type, for: call.caller.actingRole(membership: membership?.role))
            if visibility == .hidden {
                // A Work group does not exist for a non-member: the same answer as a missing id.
                response.failures.append(.with {
                    $0.groupID = id
                    $0.error = .notFound
                    $0.reason = GroupError.Reason.groupNotFound.rawValue
                })
                continue
            }
            let remark = membership == nil ? "" : remarks[id] ?? ""
            var view = GroupdService.groupView(group, membership: membership, call: call, remark: remark)
            await service.filterGroupView(&view, role: call.caller.actingRole(membership: membership?.role), call)
            response.groups.append(view)
        }
        try await fillUnreadMentions(&response.groups, known: found.unreadMentions, call: call)
        return response
    }

    /// Whether `id` could name a group: a valid custom id or a generated one.
    private static func isWellFormedGroupID(_ id: String) -> Bool {
        if GroupID.isGenerated(id) { return true }
        return (try? GroupID.validateCustom(id)) != nil
    }

    func dismissGroup(_ request: Groupd_V1_DismissGroupRequest, _ call: CallContext) async throws -> Groupd_V1_DismissGroupResponse {
        guard !request.groupID.isEmpty else {
            throw GroupError.invalidArgument(field: "group_id", "group_id must not be empty")
        }
        let caller = call.caller
        _ = try await store.dismissGroup(app: caller.appID, groupID: request.groupID, operatorID: caller.operatorID, at: clock.now()) { group, membership in
            let actor = caller.actingRole(membership: membership?.role)
            if GroupRules.visibility(of: group.type, for: actor) == .hidden {
                throw GroupError.groupNotFound(group.id)
            }
            return try GroupRules.planDismissal(of: group, by: actor, operatorID: caller.operatorID)
        }
        try await rooms.forget(app: caller.appID, groupID: request.groupID)
        return Groupd_V1_DismissGroupResponse()
    }
}
