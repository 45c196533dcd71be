import GroupModel

/// The `GroupError` thrown by `body`, or `nil` if it returned (or threw something else).
func groupError(_ body: () throws -> Void) -> GroupError? {
    do {
        try body()
        return nil
    } catch let error as GroupError {
        return error
    } catch {
        return nil
    }
}

/// A creation request with a valid name and everything else defaulted.
func request(
    _ type: GroupType, id: String? = nil, name: String = "team", members: [InitialMember] = [],
    maxMembers: Int? = nil, settings: GroupSettings.Changes = .init(), ownerID: String? = nil
) -> GroupCreationRequest {
    GroupCreationRequest(
        type: type, groupID: id, name: name, maxMembers: maxMembers, settings: settings, ownerID: ownerID,
        members: members)
}

let now = Timestamp(millisecondsSince1970: 1_700_000_000_000)

/// Plan a creation by user `alice` (or the backend) in app `app`.
func plan(
    _ request: GroupCreationRequest, by creator: String? = "alice", limits: AppLimits = .defaults
) throws -> GroupCreationPlan {
    try GroupRules.planCreation(request, appID: "app", creatorID: creator, limits: limits, now: now)
}
