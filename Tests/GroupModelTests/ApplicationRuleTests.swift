import GroupModel
import Testing

/// A pending join application by `Cast.newbie` to `memory`'s group, planned at `now`.
private func joinApplication(_ memory: MemoryGroup, message: String = "hi", at time: Timestamp = now) throws -> Application {
    let plan = try GroupRules.planJoinApplication(
        memory.group, by: memory.op(Cast.newbie), joinedGroupCount: 0, message: message, limits: fixtureLimits,
        now: time, retainedMute: nil, pending: nil, newID: "ap1")
    return try #require(plan.application)
}

/// A decision context for `user` on `application` in `memory`.
private func context(_ memory: MemoryGroup, _ application: Application, by user: String?) -> ApplicationContext {
    ApplicationContext(
        application: application, group: memory.group, op: memory.op(user),
        subjectMembership: memory.members[application.subjectID])
}

/// The pure rules of applications and invitations.
@Suite("Application rules")
struct ApplicationRuleTests {
    @Test("A join application: approval needed, expiry per app, event carries its id; a repeat refreshes it in place")
    func joinApplicationAndRefresh() throws {
        let memory = try fixture(.public)
        let first = try joinApplication(memory)
        #expect(first.kind == .join && first.storedState == .pending)
        #expect(first.approval.state == .pending && first.consent.state == .notNeeded)
        #expect(first.expiresAt == now.adding(seconds: Int64(fixtureLimits.applicationExpirySeconds)))
        let later = now.adding(seconds: 60)
        let again = try GroupRules.planJoinApplication(
            memory.group, by: memory.op(Cast.newbie), joinedGroupCount: 0, message: "again", limits: fixtureLimits,
            now: later, retainedMute: nil, pending: first, newID: "ap2")
        #expect(again.refreshed)
        #expect(again.application?.id == "ap1")
        #expect(again.application?.createdAt == now)
        #expect(again.application?.updatedAt == later)
        #expect(again.application?.message == "again")
        #expect(again.join.change.events.map(\.changes["application_id"]) == ["ap1"])
        // An expired pending item is not refreshed: a new one is made.
        let expiredLater = first.expiresAt
        let fresh = try GroupRules.planJoinApplication(
            memory.group, by: memory.op(Cast.newbie), joinedGroupCount: 0, message: "", limits: fixtureLimits,
            now: expiredLater, retainedMute: nil, pending: first, newID: "ap3")
        #expect(fresh.application?.id == "ap3" && !fresh.refreshed)
        // Join option any: no application.
        let meeting = try fixture(.meeting)
        let open = try GroupRules.planJoinApplication(
            meeting.group, by: meeting.op(Cast.newbie), joinedGroupCount: 0, message: "", limits: fixtureLimits,
            now: now, retainedMute: nil, pending: nil, newID: "ap4")
        #expect(open.application == nil)
    }

    @Test("Relations: sender, invitee once asked, approvers per the group's setting, the backend")
    func relations() throws {
        var memory = try fixture(.public, settings: .init(invitePermission: .everyone))
        let plan = try GroupRules.planInvitationApplications(
            of: [Cast.newbie], to: memory.group, by: memory.op(Cast.member), memberships: memory.members,
            joinedGroupCounts: [:], message: "", limits: fixtureLimits, now: now, retainedMutes: [:], pending: [:],
            newID: { "inv1" })
        var invitation = try #require(plan.invitations[Cast.newbie])
        #expect(invitation.needsApproval && invitation.needsConsent)
        #expect(GroupRules.relations(of: invitation, in: memory.group, for: memory.op(Cast.member)) == [.sender])
        #expect(GroupRules.relations(of: invitation, in: memory.group, for: memory.op(Cast.newbie)).isEmpty)
        #expect(GroupRules.relations(of: invitation, in: memory.group, for: memory.op(Cast.admin)) == [.approver])
        #expect(GroupRules.relations(of: invitation, in: memory.group, for: memory.op(Cast.owner)) == [.approver])
        #expect(GroupRules.relations(of: invitation, in: memory.group, for: .backend) == [.approver])
        invitation.approval = ApplicationDecision(state: .accepted, decidedBy: Cast.admin, decidedAt: now)
        #expect(GroupRules.relations(of: invitation, in: memory.group, for: memory.op(Cast.newbie)) == [.invitee])
        #expect(GroupRules.handleStatus(of: invitation, roles: [.approver], for: Cast.owner, now: now) == .handledByOther)
        #expect(GroupRules.handleStatus(of: invitation, roles: [.approver], for: Cast.admin, now: now) == .handledBySelf)
        #expect(GroupRules.handleStatus(of: invitation, roles: [.invitee], for: Cast.newbie, now: now) == .notHandled)
        memory.group.settings.joinApprovers = .owner
        #expect(GroupRules.relations(of: invitation, in: memory.group, for: memory.op(Cast.admin)).isEmpty)
    }

    @Test("Accept: the deciding part, GROUP_FULL and TOO_MANY_GROUPS at accept time, a member meanwhile is accepted without a second row")
    func accept() throws {
        var memory = try fixture(.public)
        let item = try joinApplication(memory)
        let accepted = try GroupRules.planAcceptApplication(
            context(memory, item, by: Cast.admin), message: "ok", limits: fixtureLimits, now: now)
        #expect(accepted.application.storedState == .accepted)
        #expect(accepted.change.insertedMembers.map(\.userID) == [Cast.newbie])
        #expect(accepted.change.group.memberCount == memory.group.memberCount + 1)
        #expect(accepted.change.events.map(\.kind) == [.memberJoined, .joinApplicationApproved])
        #expect(accepted.change.events[0].operatorID == Cast.admin)

        var full = memory
        full.group.maxMembers = full.group.memberCount
        #expect(throws: GroupError.self) {
            try GroupRules.planAcceptApplication(context(full, item, by: Cast.owner), message: "", limits: fixtureLimits, now: now)
        }
        var busy = context(memory, item, by: Cast.owner)
        busy.subjectJoinedGroupCount = fixtureLimits.maxGroupsPerUser
        let tooMany = #expect(throws: GroupError.self) {
            try GroupRules.planAcceptApplication(busy, message: "", limits: fixtureLimits, now: now)
        }
        #expect(tooMany?.reason == .tooManyGroups)

        memory.apply(accepted.change)
        let already = try GroupRules.planAcceptApplication(
            context(memory, item, by: Cast.owner), message: "", limits: fixtureLimits, now: now)
        #expect(already.change.insertedMembers.isEmpty)
        #expect(already.member?.userID == Cast.newbie)
        #expect(already.application.storedState == .accepted)

        let handled = #expect(throws: GroupError.self) {
            try GroupRules.planRefuseApplication(
                context(memory, accepted.application, by: Cast.owner), message: "", limits: fixtureLimits, now: now)
        }
        #expect(handled?.reason == .applicationAlreadyHandled)
        #expect(handled?.metadata["handled_by"] == Cast.admin)
        let denied = #expect(throws: GroupError.self) {
            try GroupRules.planAcceptApplication(context(memory, item, by: Cast.member), message: "", limits: fixtureLimits, now: now)
        }
        #expect(denied?.reason == .permissionDenied)
        let hidden = #expect(throws: GroupError.self) {
            try GroupRules.planAcceptApplication(context(memory, item, by: Cast.outsider), message: "", limits: fixtureLimits, now: now)
        }
        #expect(hidden?.reason == .applicationNotFound)
    }

    @Test("Expiry: due pending items only; events to the sender and, while outstanding, the approvers; EXPIRED is seen before it is stored")
    func expiry() throws {
        let memory = try fixture(.public)
        let item = try joinApplication(memory)
        #expect(item.state(at: item.expiresAt.adding(milliseconds: -1)) == .pending)
        #expect(item.state(at: item.expiresAt) == .expired)
        #expect(GroupRules.planExpiry(of: [item], now: item.expiresAt.adding(milliseconds: -1)).expired.isEmpty)
        let (expired, events) = GroupRules.planExpiry(of: [item], now: item.expiresAt)
        #expect(expired.map(\.storedState) == [.expired])
        #expect(events.map(\.recipient) == [.user(Cast.newbie), .approvers])
        #expect(events.allSatisfy { $0.kind == .applicationExpired && $0.changes["application_id"] == item.id })
        let late = #expect(throws: GroupError.self) {
            try GroupRules.planWithdrawApplication(context(memory, item, by: Cast.newbie), now: item.expiresAt)
        }
        #expect(late?.reason == .applicationExpired)
    }

    @Test("Withdraw: only the sender; the approvers are told while approval is outstanding")
    func withdraw() throws {
        let memory = try fixture(.public)
        let item = try joinApplication(memory)
        let denied = #expect(throws: GroupError.self) {
            try GroupRules.planWithdrawApplication(context(memory, item, by: Cast.owner), now: now)
        }
        #expect(denied?.reason == .permissionDenied)
        let withdrawn = try GroupRules.planWithdrawApplication(context(memory, item, by: Cast.newbie), now: now)
        #expect(withdrawn.application.storedState == .withdrawn)
        #expect(withdrawn.application.handledBy == Cast.newbie)
        #expect(withdrawn.change.events.map(\.recipient) == [.approvers])
        #expect(withdrawn.change.insertedMembers.isEmpty)
    }
}
