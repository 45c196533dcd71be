import GroupModel
import Testing

/// Outcomes per actor, in the order owner, admin, member, non-member, backend; `nil` = allowed.
private let banActors: [ActingRole] = [.owner, .admin, .member, .nonMember, .backend]
private let allowed: GroupError.Reason? = nil

private func checkCells(_ action: GroupAction, _ type: GroupType, _ expected: [GroupError.Reason?]) {
    let settings = type.preset.defaultSettings
    for (actor, reason) in zip(banActors, expected) {
        let decision = GroupRules.authorize(action, type: type, settings: settings, actor: actor)
        #expect(decision.error?.reason == reason, "\(action) on \(type) by \(actor)")
    }
}

@Suite("Permissions: bans and the mute bypass list, cell by cell")
struct BanPermissionTests {
    /// Who bans an ordinary member (or a non-member, ranked as one): who removes members, and in
    /// an AVChatRoom, which removes nobody, who mutes (the owner).
    static let banMember: [(GroupType, [GroupError.Reason?])] = [
        (.work, [allowed, .permissionDenied, .permissionDenied, .groupNotFound, allowed]),
        (.public, [allowed, allowed, .permissionDenied, .notAMember, allowed]),
        (.meeting, [allowed, allowed, .permissionDenied, .notAMember, allowed]),
        (.avChatRoom, [allowed, .permissionDenied, .permissionDenied, .notAMember, allowed]),
    ]

    @Test("ban an ordinary member or a non-member")
    func banMemberCells() {
        for (type, expected) in Self.banMember {
            checkCells(.ban(target: .member), type, expected)
            checkCells(.ban(target: nil), type, expected)
        }
    }

    @Test("an admin is banned by the owner only; the owner by nobody")
    func banRankCells() {
        checkCells(.ban(target: .admin), .public, [allowed, .permissionDenied, .permissionDenied, .notAMember, allowed])
        checkCells(.ban(target: .admin), .meeting, [allowed, .permissionDenied, .permissionDenied, .notAMember, allowed])
        for type in GroupType.allCases where type != .work {
            checkCells(.ban(target: .owner), type, Array(repeating: .targetIsOwner, count: 5))
        }
    }

    @Test("everyone may remove members: any member bans ordinary members, not admins")
    func banWithEveryoneRemoving() {
        var settings = GroupType.public.preset.defaultSettings
        settings.removeMembersPermission = .everyone
        #expect(GroupRules.authorize(.ban(target: .member), type: .public, settings: settings, actor: .member).isAllowed)
        #expect(GroupRules.authorize(.ban(target: .admin), type: .public, settings: settings, actor: .member)
            .error?.reason == .permissionDenied)
    }

    @Test("lift and list bans: who bans")
    func manageBansCells() {
        for (type, expected) in Self.banMember { checkCells(.manageBans, type, expected) }
    }

    @Test("change the mute bypass list: who mutes the group")
    func muteBypassCells() {
        checkCells(.updateMuteBypass, .work, [allowed, .permissionDenied, .permissionDenied, .groupNotFound, allowed])
        checkCells(.updateMuteBypass, .public, [allowed, allowed, .permissionDenied, .notAMember, allowed])
        checkCells(.updateMuteBypass, .meeting, [allowed, allowed, .permissionDenied, .notAMember, allowed])
        checkCells(.updateMuteBypass, .avChatRoom, [allowed, .permissionDenied, .permissionDenied, .notAMember, allowed])
        for type in GroupType.allCases {
            for actor in banActors {
                let settings = type.preset.defaultSettings
                #expect(GroupRules.authorize(.updateMuteBypass, type: type, settings: settings, actor: actor)
                    == GroupRules.authorize(.muteGroup, type: type, settings: settings, actor: actor))
            }
        }
    }
}

@Suite("Rules: ban list and mute bypass list")
struct BanRuleTests {
    func ban(_ memory: MemoryGroup, _ users: [String], by user: String?, seconds: Int64 = 0, bans: [String: GroupBan] = [:],
             banCount: Int = 0, limits: AppLimits = fixtureLimits) throws -> BanBatchPlan {
        try GroupRules.planBan(
            of: users, for: seconds, reason: "r", in: memory.group, by: memory.op(user), memberships: memory.members,
            bans: bans, banCount: banCount, managers: [Cast.owner, Cast.admin, Cast.admin2], limits: limits, now: now)
    }

    @Test("a banned member is removed; a non-member is banned without removal; events to managers and users")
    func banPlan() throws {
        var memory = try fixture(.public)
        let plan = try ban(memory, [Cast.member, Cast.outsider, Cast.owner, Cast.admin], by: Cast.admin, seconds: 60)
        let outcomes = plan.results.map(\.outcome)
        guard case .banned(let first, let removed) = outcomes[0] else { Issue.record("\(outcomes)"); return }
        #expect(removed?.userID == Cast.member && first.until == now.adding(seconds: 60) && first.reason == "r")
        guard case .banned(_, nil) = outcomes[1] else { Issue.record("\(outcomes)"); return }
        #expect(outcomes[2] == .failed(try #require(GroupRules.authorize(
            .ban(target: .owner), type: .public, settings: memory.group.settings, actor: .admin).error)))
        guard case .invalid(let own) = outcomes[3] else { Issue.record("\(outcomes)"); return }
        #expect(own.metadata["field"] == "user_ids[3]")
        #expect(plan.change.removedMembers == [Cast.member])
        #expect(plan.change.bans.map(\.userID) == [Cast.member, Cast.outsider])
        #expect(plan.change.group.memberCount == memory.group.memberCount - 1)
        let kinds = plan.change.events.map(\.kind)
        #expect(kinds == [.memberKicked, .kickedFromGroup] + Array(repeating: .memberBanned, count: 5))
        let banned = plan.change.events.filter { $0.kind == .memberBanned }
        #expect(banned.map(\.recipient) == [.user(Cast.owner), .user(Cast.admin), .user(Cast.admin2), .user(Cast.member),
                                            .user(Cast.outsider)])
        #expect(banned[0].targets == [Cast.member, Cast.outsider] && banned[3].targets == [Cast.member])
        #expect(banned.first?.changes["until"] == String(now.adding(seconds: 60).millisecondsSince1970))
        memory.apply(plan.change)
        #expect(memory.members[Cast.member] == nil)
    }

    @Test("the group's running bans may not exceed the limit; re-banning adds none")
    func banLimit() throws {
        let memory = try fixture(.public)
        var limits = fixtureLimits
        limits.maxBansPerGroup = 2
        let running = GroupBan(userID: Cast.outsider, until: nil, operatorID: nil, bannedAt: now)
        #expect(throws: GroupError.self) {
            try ban(memory, [Cast.member, Cast.member2], by: Cast.owner, bans: [Cast.outsider: running], banCount: 1,
                    limits: limits)
        }
        do {
            _ = try ban(memory, [Cast.member, Cast.member2], by: Cast.owner, banCount: 1, limits: limits)
            Issue.record("no error")
        } catch let error as GroupError {
            #expect(error.reason == .banListFull && error.code == .failedPrecondition && error.metadata["limit"] == "2")
        }
        let again = try ban(memory, [Cast.outsider, Cast.member], by: Cast.owner, bans: [Cast.outsider: running],
                            banCount: 1, limits: limits)
        #expect(again.change.bans.count == 2)
    }

    @Test("bad input: batch, duration, reason")
    func banBadInput() throws {
        let memory = try fixture(.public)
        #expect(throws: GroupError.self) { try ban(memory, [], by: Cast.owner) }
        #expect(throws: GroupError.self) { try ban(memory, [Cast.member], by: Cast.owner, seconds: -1) }
        #expect(throws: GroupError.self) { try ban(memory, [Cast.member], by: Cast.member2) }
        do {
            _ = try GroupRules.planBan(
                of: [Cast.member], for: 0, reason: String(repeating: "x", count: 101), in: memory.group,
                by: memory.op(Cast.owner), memberships: memory.members, bans: [:], banCount: 0, managers: [],
                limits: fixtureLimits, now: now)
            Issue.record("no error")
        } catch let error as GroupError {
            #expect(error.metadata["field"] == "reason")
        }
    }

    @Test("unban lifts running bans only, with events")
    func unbanPlan() throws {
        let memory = try fixture(.public)
        let running = GroupBan(userID: Cast.outsider, until: nil, operatorID: nil, bannedAt: now)
        let ended = GroupBan(userID: Cast.newbie, until: now, operatorID: nil, bannedAt: now)
        let plan = try GroupRules.planUnban(
            of: [Cast.outsider, Cast.newbie], in: memory.group, by: memory.op(Cast.admin),
            bans: [Cast.outsider: running, Cast.newbie: ended], managers: [Cast.owner], limits: fixtureLimits, now: now)
        #expect(plan.results.map(\.outcome) == [.lifted(running), .notBanned])
        #expect(plan.change.liftedBans == [Cast.outsider])
        #expect(plan.change.events.map(\.recipient) == [.user(Cast.owner), .user(Cast.outsider)])
        #expect(throws: GroupError.self) {
            try GroupRules.planUnban(of: [Cast.outsider], in: memory.group, by: memory.op(Cast.member), bans: [:],
                                     managers: [], limits: fixtureLimits, now: now)
        }
    }

    @Test("every way in refuses a running ban: join, application, invitation, acceptance; an ended ban is ignored")
    func enforcement() throws {
        let memory = try fixture(.meeting)
        let running = GroupBan(userID: Cast.newbie, until: now.adding(seconds: 1), operatorID: nil, bannedAt: now)
        let ended = GroupBan(userID: Cast.newbie, until: now, operatorID: nil, bannedAt: now)
        func reason(_ body: () throws -> Void) -> GroupError.Reason? {
            do { try body(); return nil } catch let error as GroupError { return error.reason } catch { return nil }
        }
        #expect(reason { _ = try GroupRules.planJoin(memory.group, by: memory.op(Cast.newbie), joinedGroupCount: 0,
                                                     limits: fixtureLimits, now: now, ban: running) } == .userBanned)
        #expect(reason { _ = try GroupRules.planJoin(memory.group, by: memory.op(Cast.newbie), joinedGroupCount: 0,
                                                     limits: fixtureLimits, now: now, ban: ended) } == nil)
        #expect(reason { _ = try GroupRules.planJoinApplication(
            memory.group, by: memory.op(Cast.newbie), joinedGroupCount: 0, message: "", limits: fixtureLimits, now: now,
            retainedMute: nil, pending: nil, newID: "a1", ban: running) } == .userBanned)
        let invited = try GroupRules.planInvitation(
            of: [Cast.newbie, Cast.outsider], to: memory.group, by: .backend, memberships: memory.members,
            joinedGroupCounts: [:], limits: fixtureLimits, now: now, bans: [Cast.newbie: running])
        #expect(invited.results[0].outcome.error?.reason == .userBanned)
        #expect(invited.results[1].outcome.isSuccess)
        #expect(invited.change.insertedMembers.map(\.userID) == [Cast.outsider])

        let item = Application(
            id: "a1", appID: "app", groupID: memory.group.id, kind: .join, senderID: Cast.newbie, subjectID: Cast.newbie,
            message: "", createdAt: now, updatedAt: now, expiresAt: now.adding(seconds: 600), approval: .pending,
            consent: .notNeeded)
        let context = ApplicationContext(application: item, group: memory.group, op: .backend, subjectBan: running)
        #expect(reason { _ = try GroupRules.planAcceptApplication(context, message: "", limits: fixtureLimits, now: now) }
            == .userBanned)
        var lifted = context
        lifted.subjectBan = ended
        #expect(reason { _ = try GroupRules.planAcceptApplication(lifted, message: "", limits: fixtureLimits, now: now) }
            == nil)
    }

    @Test("mute bypass: members only, no repeats, the limit, events; a group mute spares the list")
    func muteBypass() throws {
        var memory = try fixture(.public)
        func update(add: [String] = [], remove: [String] = [], by user: String? = Cast.owner,
                    limits: AppLimits = fixtureLimits) throws -> GroupChange {
            try GroupRules.planMuteBypassUpdate(add: add, remove: remove, in: memory.group, by: memory.op(user),
                                                memberships: memory.members, limits: limits)
        }
        let change = try update(add: [Cast.member])
        #expect(change.group.muteBypass == [Cast.member])
        #expect(change.events.map(\.kind) == [.muteBypassChanged])
        #expect(change.events.first?.changes == ["added": Cast.member, "removed": "", "user_ids": Cast.member])
        memory.apply(change)
        #expect(try update(add: [Cast.member]).isEmpty)
        #expect(try update(remove: [Cast.outsider]).isEmpty)
        do {
            _ = try update(add: [Cast.outsider])
            Issue.record("no error")
        } catch let error as GroupError {
            #expect(error.reason == .memberNotFound && error.metadata["field"] == "add_user_ids[0]")
        }
        do {
            _ = try update(add: [Cast.member2], remove: [Cast.member2])
            Issue.record("no error")
        } catch let error as GroupError {
            #expect(error.reason == .invalidArgument && error.metadata["field"] == "remove_user_ids[0]")
        }
        var limits = fixtureLimits
        limits.maxMuteBypassPerGroup = 1
        do {
            _ = try update(add: [Cast.member2], limits: limits)
            Issue.record("no error")
        } catch let error as GroupError {
            #expect(error.reason == .muteBypassFull && error.metadata["limit"] == "1")
        }
        #expect(throws: GroupError.self) { try update(add: [Cast.member2], by: Cast.member) }
        #expect(throws: GroupError.self) { try update() }

        // Under a group mute the listed member sends; the others do not; a member mute still applies.
        memory.apply(try GroupRules.planGroupMute(.all, of: memory.group, by: memory.op(Cast.owner), now: now))
        #expect(throws: Never.self) { try GroupRules.checkSend(in: memory.group, by: memory.op(Cast.member), now: now) }
        #expect(throws: GroupError.self) { try GroupRules.checkSend(in: memory.group, by: memory.op(Cast.member2), now: now) }
        memory.members[Cast.member]?.mutedUntil = now.adding(seconds: 60)
        do {
            _ = try GroupRules.checkSend(in: memory.group, by: memory.op(Cast.member), now: now)
            Issue.record("no error")
        } catch let error as GroupError {
            #expect(error.reason == .memberMuted)
        }

        // A member who leaves drops off the list.
        let quit = try GroupRules.planKick(of: [Cast.member], from: memory.group, by: memory.op(Cast.owner),
                                           memberships: memory.members, limits: fixtureLimits, now: now)
        #expect(quit.change.droppingLeaversFromMuteBypass().group.muteBypass == [])
    }
}
