import GroupAPI
import GroupModel
import GroupStore

/// GroupService methods of group attributes and counters: SetGroupAttributes,
/// DeleteGroupAttributes, GetGroupAttributes, IncrementGroupCounters, GetGroupCounters.
extension GroupServiceHandler {
    func setGroupAttributes(
        _ request: Groupd_V1_SetGroupAttributesRequest, _ call: CallContext
    ) async throws -> Groupd_V1_SetGroupAttributesResponse {
        try GroupdService.requireGroupID(request.groupID)
        let writes = try request.attributes.enumerated().map { index, write in
            AttributeWrite(
                key: write.key, value: Array(write.value),
                condition: try AttributeCondition(
                    expectedVersion: write.expectedVersion, field: "attributes[\(index)].expected_version"))
        }
        let limits = call.limits
        let now = clock.now()
        let committed = try await mutateAttributes(call, groupID: request.groupID) { snapshot, op, stored in
            let change = try GroupRules.planSetAttributes(
                snapshot.group, by: op, current: stored.attributes, writes: writes, limits: limits, now: now)
            return (change, change.upserts)
        }
        return .with { $0.attributes = committed.map(Self.attributeView) }
    }

    func deleteGroupAttributes(
        _ request: Groupd_V1_DeleteGroupAttributesRequest, _ call: CallContext
    ) async throws -> Groupd_V1_DeleteGroupAttributesResponse {
        try GroupdService.requireGroupID(request.groupID)
        let deletions = try request.keys.enumerated().map { index, key in
            AttributeDeletion(
                key: key.key,
                condition: try AttributeCondition(expectedVersion: key.expectedVersion, field: "keys[\(index)].expected_version"))
        }
        let limits = call.limits
        let committed = try await mutateAttributes(call, groupID: request.groupID) { snapshot, op, stored in
            let change = try GroupRules.planDeleteAttributes(
                snapshot.group, by: op, current: stored.attributes, deletions: deletions, limits: limits)
            return (change, change.deletions)
        }
        return .with { $0.deletedKeys = committed }
    }

    func getGroupAttributes(
        _ request: Groupd_V1_GetGroupAttributesRequest, _ call: CallContext
    ) async throws -> Groupd_V1_GetGroupAttributesResponse {
        let stored = try await readAttributes(
            call, groupID: request.groupID, keys: request.keys, maxKeys: call.limits.maxGroupAttributeKeys)
        let wanted = request.keys.isEmpty ? nil : Set(request.keys)
        let attributes = stored.attributes.values
            .filter { wanted?.contains($0.key) ?? true }
            .sorted { $0.key < $1.key }
        return .with { $0.attributes = attributes.map(Self.attributeView) }
    }

    func incrementGroupCounters(
        _ request: Groupd_V1_IncrementGroupCountersRequest, _ call: CallContext
    ) async throws -> Groupd_V1_IncrementGroupCountersResponse {
        try GroupdService.requireGroupID(request.groupID)
        let deltas = request.deltas
        let limits = call.limits
        let values = try await mutateAttributes(call, groupID: request.groupID) { snapshot, op, stored in
            let change = try GroupRules.planIncrementCounters(
                snapshot.group, by: op, current: stored.counters, deltas: deltas, limits: limits)
            return (change, change.counters)
        }
        return .with { $0.values = values }
    }

    func getGroupCounters(
        _ request: Groupd_V1_GetGroupCountersRequest, _ call: CallContext
    ) async throws -> Groupd_V1_GetGroupCountersResponse {
        let stored = try await readAttributes(
            call, groupID: request.groupID, keys: request.keys, maxKeys: call.limits.maxGroupCounters)
        var values = stored.counters
        if !request.keys.isEmpty {
            values = Dictionary(uniqueKeysWithValues: Set(request.keys).map { ($0, stored.counters[$0] ?? 0) })
        }
        return .with { $0.values = values }
    }

    // MARK: Helpers

    /// Runs an attribute or counter plan in one write transaction over the group, the operator's
    /// membership and the group's attributes and counters, and returns the plan's value. In an
    /// AVChatRoom a present viewer (not stored) acts as an ordinary member.
    private func mutateAttributes<Value: Sendable>(
        _ call: CallContext, groupID: String,
        _ plan: @escaping @Sendable (GroupSnapshot, GroupOperator, GroupAttributeSet) throws -> (AttributeChange, Value)
    ) async throws -> Value {
        let caller = call.caller
        try await rooms.sync(app: caller.appID, groupID: groupID)
        var viewer: Member?
        if let user = caller.operatorID, try await store.groupType(app: caller.appID, id: groupID) == .avChatRoom {
            viewer = try await rooms.presentMember(app: caller.appID, groupID: groupID, user: user)
        }
        let audienceMember = viewer
        let committed = try await store.mutateAttributes(
            app: caller.appID, groupID: groupID, operatorID: caller.operatorID, at: clock.now()
        ) { snapshot, stored in
            let membership = snapshot.operatorMembership ?? audienceMember
            return try plan(snapshot, GroupdService.groupOperator(caller, membership: membership), stored)
        }
        return committed.value
    }

    /// Reads the group's attributes and counters for a member (or the backend), after checking
    /// the keys a call names: at most `maxKeys` (the attribute or the counter limit), each valid.
    private func readAttributes(
        _ call: CallContext, groupID: String, keys: [String], maxKeys: Int
    ) async throws -> GroupAttributeSet {
        if !keys.isEmpty { try GroupRules.checkReadKeys(keys, maxKeys: maxKeys, limits: call.limits) }
        let (group, membership) = try await service.loadGroup(call, groupID: groupID)
        try GroupRules.authorize(
            .readAttributes, in: group,
            actor: call.caller.actingRole(membership: membership?.role)
        ).get()
        return try await store.attributes(app: call.caller.appID, groupID: groupID)
    }

    static func attributeView(_ attribute: GroupAttribute) -> Groupd_V1_GroupAttribute {
        .with {
            $0.key = attribute.key
            $0.value = attribute.value
            $0.version = UInt64(attribute.version)
            $0.updateTime = APIMapping.timestamp(attribute.updatedAt)
            $0.updatedByUserID = attribute.updatedBy ?? ""
        }
    }
}
