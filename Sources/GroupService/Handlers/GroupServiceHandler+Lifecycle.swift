import GroupAPI
import GroupModel
import GroupStore

/// GroupService methods of the app's backend: RevokeGroup, ImportGroup.
extension GroupServiceHandler {
    /// `ADMIN_TOKEN_REQUIRED` unless the caller is the app's backend (an admin token acting for
    /// no user: with `x-operator-id` that user's permissions apply). Checked before the group is
    /// looked up, so a user learns nothing about which ids exist.
    static func requireBackend(_ call: CallContext, _ rpc: String) throws {
        guard call.caller.isBackend else {
            throw GroupError(
                code: .permissionDenied, reason: .adminTokenRequired,
                message: "\(rpc) is for the app's backend: an admin token without x-operator-id")
        }
    }

    /// RevokeGroup: the backend shuts a group down (Tencent's revoke). The group is dismissed as by
    /// DismissGroup, with one `GROUP_REVOKED` event (changes `reason` when given) instead of
    /// `GROUP_DISMISSED`; an AVChatRoom's audience on this node is dropped.
    func revokeGroup(_ request: Groupd_V1_RevokeGroupRequest, _ call: CallContext) async throws -> Groupd_V1_RevokeGroupResponse {
        try Self.requireBackend(call, "RevokeGroup")
        try GroupdService.requireGroupID(request.groupID)
        let caller = call.caller
        let limits = call.limits
        let reason = request.reason
        _ = try await store.dismissGroup(app: caller.appID, groupID: request.groupID, operatorID: nil, at: clock.now()) { group, _ in
            try GroupRules.planRevocation(of: group, by: caller.actingRole(membership: nil), reason: reason, limits: limits)
        }
        try await rooms.forget(app: caller.appID, groupID: request.groupID)
        return Groupd_V1_RevokeGroupResponse()
    }

    /// ImportGroup: a group from another system with its members, roles, join times, name cards
    /// and mutes (`GroupRules.planImport(_:appID:limits:now:)`), written with the app's
    /// joined-groups limit checked in the same transaction (see ``commitCreation(_:_:includeOwner:)``:
    /// the owner over the limit refuses the import, other members over it are left out and
    /// answered FAILED / TOO_MANY_GROUPS). One result per member listed in the request.
    func importGroup(_ request: Groupd_V1_ImportGroupRequest, _ call: CallContext) async throws -> Groupd_V1_ImportGroupResponse {
        try Self.requireBackend(call, "ImportGroup")
        let type = try APIMapping.groupType(request.type)
        var members: [ImportedMember] = []
        for (index, member) in request.members.enumerated() {
            members.append(ImportedMember(
                userID: member.userID,
                role: try APIMapping.role(member.role, field: "members[\(index)].role") ?? .member,
                joinedAt: member.joinTime.map(Self.timestamp), nameCard: member.nameCard,
                mutedUntil: member.muteUntil.map(Self.timestamp), custom: member.custom))
        }
        if let schema = call.customFields {
            try Self.checkInitialCustom(request.custom, fields: schema.groupFields, maxKeys: schema.maxGroupKeys,
                                        field: "custom", backend: true)
            for (index, member) in request.members.enumerated() {
                try Self.checkInitialCustom(member.custom, fields: schema.memberFields, maxKeys: schema.maxMemberKeys,
                                            field: "members[\(index)].custom", backend: true)
            }
        }
        let profile = request.profile ?? Groupd_V1_GroupProfile()
        let group = GroupCreationRequest(
            type: type, groupID: request.groupID, name: profile.name, introduction: profile.introduction,
            notification: profile.notification, faceURL: profile.faceURL,
            maxMembers: request.maxMemberCount == 0 ? nil : Int(request.maxMemberCount),
            settings: try APIMapping.settingsChanges(request.settings, type: type, field: "settings"),
            ownerID: request.ownerUserID.isEmpty ? nil : request.ownerUserID, members: [], custom: request.custom)
        let plan: GroupCreationPlan
        do {
            plan = try GroupRules.planImport(
                GroupImportRequest(group: group, createdAt: request.createTime.map(Self.timestamp), members: members),
                appID: call.caller.appID, limits: call.limits, now: clock.now())
        } catch var error as GroupError {
            if let field = error.metadata["field"] { error.metadata["field"] = Self.createRequestField(field) }
            throw error
        }
        let created = try await commitCreation(plan, call, includeOwner: true)
        let listed = Set(request.members.map(\.userID))
        return .with {
            $0.group = created.group
            $0.memberResults = created.memberResults.filter { listed.contains($0.userID) }
        }
    }

    /// A protobuf timestamp in milliseconds (sub-millisecond precision is dropped).
    static func timestamp(_ time: Google_Protobuf_Timestamp) -> Timestamp {
        Timestamp(millisecondsSince1970: time.seconds * 1000 + Int64(time.nanos) / 1_000_000)
    }
}
