/// A permission group's fields as a create or update names them (`nil`: not given, kept).
public struct PermissionGroupUpdate: Sendable, Hashable {
    /// The name.
    public var name: String?
    /// Opaque data of the app.
    public var customData: [UInt8]?
    /// The community value.
    public var permissions: PermissionSet?
    /// Topic values to set (topic id → permissions; `nil` removes the topic's value). An empty
    /// set removes it too, except in the ``PermissionGroup/everyoneID`` group, where it is a
    /// topic whose defaults hold nothing (read-only for ordinary members).
    public var topicPermissions: [String: PermissionSet?]
    /// Whether the given ``topicPermissions`` replace every topic value (else they are merged).
    public var replacesTopicPermissions: Bool

    /// Creates an update.
    public init(
        name: String? = nil, customData: [UInt8]? = nil, permissions: PermissionSet? = nil,
        topicPermissions: [String: PermissionSet?] = [:], replacesTopicPermissions: Bool = false
    ) {
        self.name = name
        self.customData = customData
        self.permissions = permissions
        self.topicPermissions = topicPermissions
        self.replacesTopicPermissions = replacesTopicPermissions
    }

    /// Whether the update names nothing.
    public var isEmpty: Bool {
        name == nil && customData == nil && permissions == nil && topicPermissions.isEmpty && !replacesTopicPermissions
    }
}

extension GroupEvent.Draft {
    /// The `changes` key naming a permission group.
    public static let permissionGroupIDKey = "permission_group_id"

    /// A permission group event of a community (`PERMISSION_GROUP_CREATED`, `_UPDATED`,
    /// `_DELETED`): `changes` hold ``permissionGroupIDKey`` and, for a creation or an update,
    /// the fields as they are after it (`name`, `permissions`: comma-separated names, `topics`:
    /// `<topic id>=<names separated by '|'>` lines) among `fields`.
    static func permissionGroupEvent(
        _ kind: GroupEvent.Kind, _ group: PermissionGroup, fields: Set<String>, operatorID: String?
    ) -> GroupEvent.Draft {
        var changes = [permissionGroupIDKey: group.id]
        if fields.contains("name") { changes["name"] = group.name }
        if fields.contains("custom_data") { changes["custom_data"] = "" }
        if fields.contains("permissions") { changes["permissions"] = group.permissions.members.map(\.name).joined(separator: ",") }
        if fields.contains("topic_permissions") {
            changes["topic_permissions"] = group.topicPermissions.keys.sorted().map { topic in
                "\(topic)=" + group.topicPermissions[topic]!.members.map(\.name).joined(separator: "|")
            }.joined(separator: "\n")
        }
        return GroupEvent.Draft(kind: kind, operatorID: operatorID, changes: changes, recipient: .group)
    }
}

extension GroupRules {
    /// The action whose decision shows whether a role holds `permission` in a group: what the
    /// permission grants, acting on an ordinary member.
    public static func representativeAction(of permission: Permission) -> GroupAction {
        switch permission {
        case .manageProfile: .updateProfile([.name])
        case .manageMembers: .handleApplication
        case .managePermissionGroups: .managePermissionGroups
        case .manageTopics: .manageTopics
        case .muteMembers: .muteMember(target: .member)
        case .banMembers: .ban(target: .member)
        case .invite: .invite
        case .sendMessage: .sendMessage
        case .mentionAll: .mentionAll
        case .manageMessages: .recallMessage(own: false)
        case .pinMessages: .pinMessage
        case .viewTopic: .viewProfile
        }
    }

    /// What `op` may do in `group` (a community or one of its topics), permission by
    /// permission: each ``representativeAction(of:)`` decided by ``authorize(_:in:by:)`` (on a
    /// topic, ``Permission/manageTopics`` as `UpdateTopic` decides it; ``Permission/viewTopic``
    /// as ``sees(privateTopicsOf:by:)`` decides it; mutes of the member are not counted: they are
    /// checked with the time). Nothing in a private topic `op` does not see.
    public static func effectivePermissions(in group: Group, by op: GroupOperator) -> PermissionSet {
        // A private topic the member does not see does not exist for them.
        if !group.isVisible(to: op) { return [] }
        var held: PermissionSet = []
        for permission in Permission.allCases {
            let action = representativeAction(of: permission)
            let allowed: Bool
            if permission == .viewTopic {
                allowed = sees(privateTopicsOf: group, by: op)
            } else if group.isTopic, permission == .manageTopics {
                allowed = (try? authorizeTopicManagement(group.id, in: group.asCommunity, by: op)) != nil
            } else if group.isTopic, !action.appliesToTopic {
                allowed = authorize(action, in: group.asCommunity, by: op).isAllowed
            } else {
                allowed = authorize(action, in: group, by: op).isAllowed
            }
            if allowed { held.insert(PermissionSet(permission)) }
        }
        return held
    }

    /// ``Permission/viewTopic`` held in `group`: on a topic, whether `op` sees it
    /// (``Group/isVisible(to:)``, members only); on a community, whether `op` sees every private
    /// topic (the owner, the admins, the backend, and a member granted it as a community value).
    static func sees(privateTopicsOf group: Group, by op: GroupOperator) -> Bool {
        switch op.role {
        case .owner, .admin, .backend: return true
        case .nonMember: return false
        case .member:
            if group.isTopic { return group.isVisible(to: op) }
            return group.grantedPermissions(to: op.membership).contains(.viewTopic)
        }
    }

    /// Check a `CreatePermissionGroup` call and plan it.
    ///
    /// - Permission: ``GroupAction/managePermissionGroups`` on the community (its owner and
    ///   admins, a member granted ``Permission/managePermissionGroups``, the backend;
    ///   `PERMISSION_GROUPS_NOT_SUPPORTED` for a type without them).
    /// - Fields (``checkPermissionGroupFields(_:in:by:liveTopics:limits:)``): a name, custom data
    ///   within the limit, topic values of live topics holding only topic permissions, and no
    ///   permission the operator does not hold themselves (the owner and the backend hold all).
    /// - Limit: fewer than ``AppLimits/maxPermissionGroupsPerCommunity`` groups
    ///   (`FAILED_PRECONDITION` / `TOO_MANY_PERMISSION_GROUPS`, metadata `limit`).
    /// - Returns: The community with the new group, and `PERMISSION_GROUP_CREATED`.
    public static func planPermissionGroupCreation(
        _ request: PermissionGroupUpdate, id: String, in community: Group, by op: GroupOperator,
        liveTopics: Set<String>, limits: AppLimits, now: Timestamp
    ) throws -> (change: GroupChange, group: PermissionGroup) {
        try authorize(.managePermissionGroups, in: community, by: op).get()
        guard let name = request.name, !name.isEmpty else {
            throw GroupError.invalidArgument(field: "name", "a permission group needs a name")
        }
        try checkPermissionGroupFields(request, in: community, by: op, liveTopics: liveTopics, limits: limits)
        let count = community.permissionGroups.filter { !$0.isEveryone }.count
        if count >= limits.maxPermissionGroupsPerCommunity {
            throw GroupError(
                code: .failedPrecondition, reason: .tooManyPermissionGroups,
                message: "the community holds \(count) permission groups, the limit is \(limits.maxPermissionGroupsPerCommunity)",
                metadata: ["limit": String(limits.maxPermissionGroupsPerCommunity)])
        }
        let group = PermissionGroup(
            id: id, name: name, customData: request.customData ?? [], permissions: request.permissions ?? [],
            topicPermissions: request.topicPermissions.compactMapValues { $0 }.filter { !$0.value.isEmpty },
            createdAt: now, updatedAt: now)
        var after = community
        after.permissionGroups.append(group)
        var fields: Set<String> = ["name", "permissions", "topic_permissions"]
        if !group.customData.isEmpty { fields.insert("custom_data") }
        return (
            GroupChange(group: after, events: [.permissionGroupEvent(.permissionGroupCreated, group, fields: fields, operatorID: op.userID)]),
            group
        )
    }

    /// Check an `UpdatePermissionGroup` call and plan it: the permission and the fields as for a
    /// creation; the operator must also hold every permission the group holds before the update
    /// (nobody strips a group stronger than themselves). The ``PermissionGroup/everyoneID``
    /// group is created at its first update; its name is fixed.
    /// - Returns: The community after the change (empty when nothing changed; topic values of
    ///   deleted topics are dropped) and the group after it; `PERMISSION_GROUP_UPDATED` lists
    ///   the changed fields.
    public static func planPermissionGroupUpdate(
        _ update: PermissionGroupUpdate, id: String, in community: Group, by op: GroupOperator,
        liveTopics: Set<String>, limits: AppLimits, now: Timestamp
    ) throws -> (change: GroupChange, group: PermissionGroup) {
        try authorize(.managePermissionGroups, in: community, by: op).get()
        if update.isEmpty { throw GroupError.invalidArgument(field: "update_mask", "update_mask names no field") }
        var before = try permissionGroup(id, in: community, field: "permission_group_id", allowEveryone: true)
        if before.isEveryone, update.name != nil {
            throw GroupError.invalidArgument(field: "name", "the everyone group's name is fixed")
        }
        if let name = update.name, name.isEmpty {
            throw GroupError.invalidArgument(field: "name", "a permission group needs a name")
        }
        try checkHolds(before, in: community, by: op, field: "permission_group_id")
        try checkPermissionGroupFields(update, in: community, by: op, liveTopics: liveTopics, limits: limits)
        before.topicPermissions = before.topicPermissions.filter { liveTopics.contains($0.key) }
        var after = before
        if let name = update.name { after.name = name }
        if let data = update.customData { after.customData = data }
        if let permissions = update.permissions { after.permissions = permissions }
        if update.replacesTopicPermissions { after.topicPermissions = [:] }
        for (topic, value) in update.topicPermissions {
            after.topicPermissions[topic] = value.flatMap { $0.isEmpty && !after.isEveryone ? nil : $0 }
        }
        var fields: Set<String> = []
        if after.name != before.name { fields.insert("name") }
        if after.customData != before.customData { fields.insert("custom_data") }
        if after.permissions != before.permissions { fields.insert("permissions") }
        if after.topicPermissions != before.topicPermissions { fields.insert("topic_permissions") }
        let stored = community.permissionGroup(id)
        if fields.isEmpty, stored.map({ $0.topicPermissions == before.topicPermissions }) ?? true {
            return (.unchanged(community), stored ?? before)
        }
        if !fields.isEmpty { after.updatedAt = now }
        var group = community
        if let index = group.permissionGroups.firstIndex(where: { $0.id == id }) {
            group.permissionGroups[index] = after
        } else {
            group.permissionGroups.append(after)
        }
        let events = fields.isEmpty ? [] : [GroupEvent.Draft.permissionGroupEvent(.permissionGroupUpdated, after, fields: fields, operatorID: op.userID)]
        return (GroupChange(group: group, events: events), after)
    }

    /// Check a `DeletePermissionGroup` call and plan it: the permission, and the operator holds
    /// every permission of the group. Deleting the ``PermissionGroup/everyoneID`` group resets
    /// it (no permissions, no topic defaults). Member rows keep the id until their next
    /// assignment change; an id of a deleted group grants nothing.
    /// - Returns: The community without the group, with `PERMISSION_GROUP_DELETED` (empty when
    ///   `everyone` held nothing).
    public static func planPermissionGroupDeletion(
        _ id: String, in community: Group, by op: GroupOperator
    ) throws -> GroupChange {
        try authorize(.managePermissionGroups, in: community, by: op).get()
        let group = try permissionGroup(id, in: community, field: "permission_group_id", allowEveryone: true)
        try checkHolds(group, in: community, by: op, field: "permission_group_id")
        guard community.permissionGroup(id) != nil else { return .unchanged(community) }
        var after = community
        after.permissionGroups.removeAll { $0.id == id }
        return GroupChange(group: after, events: [
            .permissionGroupEvent(.permissionGroupDeleted, group, fields: [], operatorID: op.userID),
        ])
    }

    /// Check an `AddPermissionGroupMembers` or `RemovePermissionGroupMembers` call and plan it:
    /// one result per requested user.
    ///
    /// - The call as a whole: the permission, the group exists (not ``PermissionGroup/everyoneID``:
    ///   every member is in it, `INVALID_ARGUMENT`), the operator holds every permission of the
    ///   group, 1…``AppLimits/maxUsersPerBatch`` users.
    /// - Per user: malformed or repeated id → `invalid`; not a member → `notMember`; adding a
    ///   member already in ``AppLimits/maxPermissionGroupsPerMember`` groups → `failed`
    ///   `TOO_MANY_PERMISSION_GROUPS_PER_MEMBER`; otherwise `success` (already in, or already
    ///   out, changes nothing for them).
    /// - Events: one `MEMBER_PERMISSIONS_CHANGED` tip (targets: the members whose groups changed;
    ///   changes `permission_group_id`, `change` `added` or `removed`).
    public static func planPermissionGroupMembers(
        _ userIDs: [String], adding: Bool, to id: String, in community: Group, by op: GroupOperator,
        memberships: [String: Member], limits: AppLimits
    ) throws -> MemberBatchPlan {
        try authorize(.managePermissionGroups, in: community, by: op).get()
        let group = try permissionGroup(id, in: community, field: "permission_group_id", allowEveryone: false)
        try checkHolds(group, in: community, by: op, field: "permission_group_id")
        try checkBatch(userIDs, field: "user_ids", limits: limits)
        let live = Set(community.permissionGroups.map(\.id))
        var change = GroupChange(group: community)
        var results: [MemberResult] = []
        var seen: Set<String> = []
        var changed: [String] = []
        for (index, userID) in userIDs.enumerated() {
            if let error = batchEntryError(userID, index: index, field: "user_ids", seen: &seen, limits: limits) {
                results.append(MemberResult(userID: userID, outcome: .invalid(error)))
                continue
            }
            guard var member = memberships[userID] else {
                results.append(MemberResult(userID: userID, outcome: .notMember))
                continue
            }
            let current = member.permissionGroups.filter(live.contains)
            var next = current
            if adding, !current.contains(id) {
                if current.count >= limits.maxPermissionGroupsPerMember {
                    results.append(MemberResult(userID: userID, outcome: .failed(GroupError(
                        code: .failedPrecondition, reason: .tooManyPermissionGroupsPerMember,
                        message: "\(userID) is in \(current.count) permission groups, the limit is \(limits.maxPermissionGroupsPerMember)",
                        metadata: ["limit": String(limits.maxPermissionGroupsPerMember), "user_id": userID]))))
                    continue
                }
                next.append(id)
            } else if !adding {
                next.removeAll { $0 == id }
            }
            if next != current || member.permissionGroups != current {
                let moved = next != current
                member.permissionGroups = next
                change.updatedMembers.append(member)
                if moved { changed.append(userID) }
            }
            results.append(MemberResult(userID: userID, outcome: .success(member)))
        }
        if !changed.isEmpty {
            change.events.append(GroupEvent.Draft(
                kind: .memberPermissionsChanged, operatorID: op.userID, targets: changed,
                changes: [GroupEvent.Draft.permissionGroupIDKey: id, "change": adding ? "added" : "removed"]))
        }
        return MemberBatchPlan(results: results, change: change)
    }

    /// `FAILED_PRECONDITION` / `PERMISSION_GROUPS_NOT_SUPPORTED` unless `group`'s type has
    /// permission groups (Community).
    public static func checkPermissionGroupsSupported(_ group: Group) throws {
        if !group.type.preset.behaviour.topicsSupported {
            throw notSupported(.permissionGroupsNotSupported, "permission groups", group.type)
        }
    }

    /// The permission group `id` of `community`: the stored one, or an empty
    /// ``PermissionGroup/everyoneID`` group when `allowEveryone` and it was never set.
    /// - Throws: `NOT_FOUND` / `PERMISSION_GROUP_NOT_FOUND` naming `field`; `INVALID_ARGUMENT`
    ///   for `everyone` when not `allowEveryone`.
    public static func permissionGroup(
        _ id: String, in community: Group, field: String, allowEveryone: Bool
    ) throws -> PermissionGroup {
        if id.isEmpty { throw GroupError.invalidArgument(field: field, "\(field) must not be empty") }
        if id == PermissionGroup.everyoneID {
            guard allowEveryone else {
                throw GroupError.invalidArgument(
                    field: field, "every member is in the everyone group; its members are not added or removed")
            }
            return community.permissionGroup(id) ?? PermissionGroup(
                id: id, name: PermissionGroup.everyoneID, createdAt: community.createdAt, updatedAt: community.createdAt)
        }
        guard let group = community.permissionGroup(id) else {
            throw GroupError(
                code: .notFound, reason: .permissionGroupNotFound,
                message: "the community has no permission group \(id)", metadata: ["field": field])
        }
        return group
    }

    /// The fields of a create or update: custom data within
    /// ``AppLimits/permissionGroupCustomDataBytes``, a name within ``AppLimits/groupNameBytes``,
    /// topic values naming live topics of the community with topic permissions only, and every
    /// permission given held by `op` (`PERMISSION_DENIED`, metadata `permission`).
    static func checkPermissionGroupFields(
        _ request: PermissionGroupUpdate, in community: Group, by op: GroupOperator, liveTopics: Set<String>,
        limits: AppLimits
    ) throws {
        if let name = request.name { try FieldValidation.checkBytes(name, field: "name", limit: limits.groupNameBytes) }
        if let data = request.customData, data.count > limits.permissionGroupCustomDataBytes {
            throw GroupError.invalidArgument(
                field: "custom_data", "custom_data holds \(data.count) bytes, the limit is \(limits.permissionGroupCustomDataBytes)",
                limit: limits.permissionGroupCustomDataBytes)
        }
        var given = request.permissions ?? []
        for topic in request.topicPermissions.keys.sorted() {
            guard let value = request.topicPermissions[topic]! else { continue }
            if !liveTopics.contains(topic) {
                throw GroupError(
                    code: .notFound, reason: .groupNotFound, message: "the community has no topic \(topic)",
                    metadata: ["field": "topic_permissions", "topic_id": topic])
            }
            if let outside = value.subtracting(Permission.topicPermissions).members.first {
                throw GroupError.invalidArgument(
                    field: "topic_permissions", "\(outside) is not a topic permission (topic \(topic))")
            }
            given.formUnion(value)
        }
        try checkHolds(given, in: community, by: op)
    }

    /// `PERMISSION_DENIED` unless `op` holds every permission of `group` (its community value
    /// and its topic values).
    static func checkHolds(_ group: PermissionGroup, in community: Group, by op: GroupOperator, field: String) throws {
        try checkHolds(group.topicPermissions.values.reduce(group.permissions) { $0.union($1) }, in: community, by: op)
    }

    /// `PERMISSION_DENIED` (metadata `permission`) unless `op` holds every one of `permissions`
    /// in `community`: the owner and the backend hold all; others what
    /// ``effectivePermissions(in:by:)`` gives them.
    static func checkHolds(_ permissions: PermissionSet, in community: Group, by op: GroupOperator) throws {
        if op.role == .owner || op.role == .backend || permissions.isEmpty { return }
        let held = effectivePermissions(in: community, by: op)
        if let missing = permissions.subtracting(held).members.first {
            throw GroupError(
                code: .permissionDenied, reason: .permissionDenied,
                message: "a permission group manager grants only permissions they hold; \(missing) is not theirs",
                metadata: ["permission": missing.name, "role": op.role.description])
        }
    }
}
