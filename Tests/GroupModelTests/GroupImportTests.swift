import GroupModel
import Testing

private func seconds(_ value: Int64) -> Timestamp { Timestamp(secondsSince1970: value) }

private func importing(
    _ type: GroupType = .public, id: String? = "legacy", owner: String? = "olivia", members: [ImportedMember],
    createdAt: Timestamp? = nil
) throws -> GroupCreationPlan {
    try GroupRules.planImport(
        GroupImportRequest(group: request(type, id: id, ownerID: owner), createdAt: createdAt, members: members),
        appID: "app", limits: .defaults, now: now)
}

private func limits(maxGroupsPerUser: Int) -> AppLimits {
    var limits = AppLimits.defaults
    limits.maxGroupsPerUser = maxGroupsPerUser
    return limits
}

@Suite("ImportGroup, RevokeGroup and the joined-groups limit at creation: rules")
struct GroupImportTests {
    @Test("planImport: owner first, then by join time; times, cards and mutes kept; one GROUP_CREATED to the owner")
    func ordering() throws {
        let p = try importing(members: [
            ImportedMember(userID: "carl", joinedAt: seconds(300)),
            ImportedMember(userID: "olivia", role: .owner, joinedAt: seconds(100), nameCard: "Boss"),
            ImportedMember(userID: "bob", role: .admin, joinedAt: seconds(200), mutedUntil: seconds(9_000)),
            ImportedMember(userID: "dan"),
        ], createdAt: seconds(50))
        #expect(p.members.map(\.userID) == ["olivia", "bob", "carl", "dan"])
        #expect(p.members.map(\.joinOrder) == [1, 2, 3, 4])
        #expect(p.members.map(\.joinedAt) == [seconds(100), seconds(200), seconds(300), now])
        #expect(p.members[0].nameCard == "Boss")
        #expect(p.members[1].mutedUntil == seconds(9_000))
        #expect(p.group.createdAt == seconds(50))
        #expect(p.group.updatedAt == now)
        #expect(p.group.memberCount == 4)
        #expect(p.events.count == 1)
        #expect(p.events.first?.kind == .groupCreated)
        #expect(p.events.first?.recipient == .user("olivia"))
        #expect(p.events.first?.changes["imported"] == "true")
        #expect(!p.idWasGenerated)
    }

    @Test("planImport refusals name the request's fields")
    func refusals() {
        #expect(groupError { _ = try importing(id: nil, members: []) }?.metadata["field"] == "group_id")
        #expect(groupError { _ = try importing(members: [ImportedMember(userID: "x", role: .owner)]) }?.metadata["field"] == "members[0].role")
        #expect(groupError {
            _ = try importing(members: [ImportedMember(userID: "olivia", role: .owner), ImportedMember(userID: "b", role: .owner)])
        }?.metadata["field"] == "members[1].role")
        #expect(groupError {
            _ = try importing(members: [ImportedMember(userID: "olivia"), ImportedMember(userID: "a"), ImportedMember(userID: "a")])
        }?.metadata["field"] == "members[2].user_id")
        #expect(groupError { _ = try importing(members: [ImportedMember(userID: "a", joinedAt: now.adding(seconds: 1))]) }?
            .metadata["field"] == "members[0].join_time")
        #expect(groupError { _ = try importing(members: [], createdAt: now.adding(seconds: 1)) }?.metadata["field"] == "create_time")
        #expect(groupError { _ = try importing(.work, members: [ImportedMember(userID: "a", role: .admin)]) }?
            .metadata["field"] == "members[0].role")
    }

    @Test("applyGroupLimit: the owner at the limit refuses; members at it are dropped and renumbered; AVChatRoom passes")
    func groupLimit() throws {
        let p = try plan(request(.public, id: "g", members: [InitialMember(userID: "bob"), InitialMember(userID: "carl")]))
        let counts = ["alice": 1, "bob": 2, "carl": 1]
        let (revised, refused) = try GroupRules.applyGroupLimit(to: p, joinedGroupCounts: counts, limits: limits(maxGroupsPerUser: 2))
        #expect(refused == ["bob"])
        #expect(revised.members.map(\.userID) == ["alice", "carl"])
        #expect(revised.members.map(\.joinOrder) == [1, 2])
        #expect(revised.group.memberCount == 2)
        #expect(revised.events.first?.targets == ["alice", "carl"])
        let error = groupError {
            _ = try GroupRules.applyGroupLimit(to: p, joinedGroupCounts: ["alice": 2], limits: limits(maxGroupsPerUser: 2))
        }
        #expect(error?.reason == .tooManyGroups)
        #expect(error?.metadata["user_id"] == "alice")
        let unchanged = try GroupRules.applyGroupLimit(to: p, joinedGroupCounts: counts, limits: limits(maxGroupsPerUser: 3))
        #expect(unchanged.plan == p && unchanged.refused.isEmpty)
        let room = try plan(request(.avChatRoom, id: "r"))
        #expect(try GroupRules.applyGroupLimit(to: room, joinedGroupCounts: ["alice": 9], limits: limits(maxGroupsPerUser: 1)).plan == room)
    }

    @Test("planRevocation: the backend only, one GROUP_REVOKED with the reason", arguments: GroupType.allCases)
    func revocation(type: GroupType) throws {
        let group = try plan(request(type, id: "g")).group
        let drafts = try GroupRules.planRevocation(of: group, by: .backend, reason: "spam", limits: .defaults)
        #expect(drafts.map(\.kind) == [.groupRevoked])
        #expect(drafts.first?.changes == ["reason": "spam"])
        for actor in [ActingRole.owner, .admin, .member, .nonMember] {
            // As everywhere, a Work group does not exist for a non-member (the service answers
            // ADMIN_TOKEN_REQUIRED before looking the group up).
            let expected: GroupError.Reason = type == .work && actor == .nonMember ? .groupNotFound : .adminTokenRequired
            #expect(groupError { _ = try GroupRules.planRevocation(of: group, by: actor, reason: "", limits: .defaults) }?
                .reason == expected)
        }
    }
}
