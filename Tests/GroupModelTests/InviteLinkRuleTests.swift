import GroupModel
import Testing

private let linkActors: [ActingRole] = [.owner, .admin, .member, .nonMember, .backend]

private func linkCheck(_ action: GroupAction, _ type: GroupType, _ expected: [GroupError.Reason?], settings: GroupSettings? = nil) {
    for (actor, reason) in zip(linkActors, expected) {
        let decision = GroupRules.authorize(action, type: type, settings: settings ?? type.preset.defaultSettings, actor: actor)
        #expect(decision.error?.reason == reason, "\(action) on \(type) by \(actor)")
    }
}

@Suite("Permissions: invite links, every type × actor")
struct InviteLinkPermissionTests {
    @Test("manage (create, list, revoke): invite_link_scope by type; AVChatRoom has no links")
    func manage() {
        linkCheck(.manageInviteLinks, .work, [nil, nil, nil, .groupNotFound, nil])
        linkCheck(.manageInviteLinks, .public, [nil, nil, .permissionDenied, .notAMember, nil])
        linkCheck(.manageInviteLinks, .meeting, [nil, nil, .permissionDenied, .notAMember, nil])
        let none: GroupError.Reason = .inviteLinkNotSupported
        linkCheck(.manageInviteLinks, .avChatRoom, [none, none, none, none, none])
        let error = GroupRules.authorize(.manageInviteLinks, type: .public, settings: GroupTypePreset.public.defaultSettings, actor: .member).error
        #expect(error?.metadata["setting"] == GroupSettingKey.inviteLinkPermission.rawValue)
    }

    @Test("manage follows the setting: owner only, nobody, everyone")
    func manageBySetting() {
        var settings = GroupTypePreset.public.defaultSettings
        settings.inviteLinkPermission = .owner
        linkCheck(.manageInviteLinks, .public, [nil, .permissionDenied, .permissionDenied, .notAMember, nil], settings: settings)
        settings.inviteLinkPermission = .nobody
        linkCheck(.manageInviteLinks, .public, [.permissionDenied, .permissionDenied, .permissionDenied, .notAMember, nil], settings: settings)
        settings.inviteLinkPermission = .everyone
        linkCheck(.manageInviteLinks, .public, [nil, nil, nil, .notAMember, nil], settings: settings)
    }

    @Test("join by link: non-members of every type that has links, whatever the join option (Work included)")
    func join() {
        for type in [GroupType.work, .public, .meeting] {
            linkCheck(.joinByInviteLink, type, [.alreadyMember, .alreadyMember, .alreadyMember, nil, .operatorRequired])
        }
        var forbidden = GroupTypePreset.public.defaultSettings
        forbidden.joinOption = .forbidden
        linkCheck(.joinByInviteLink, .public, [.alreadyMember, .alreadyMember, .alreadyMember, nil, .operatorRequired], settings: forbidden)
        let none: GroupError.Reason = .inviteLinkNotSupported
        linkCheck(.joinByInviteLink, .avChatRoom, [none, none, none, none, none])
    }

    @Test("the setting's defaults per type, fixed in AVChatRoom")
    func defaults() {
        #expect(GroupTypePreset.work.defaultSettings.inviteLinkPermission == .everyone)
        #expect(GroupTypePreset.public.defaultSettings.inviteLinkPermission == .ownerAndAdmins)
        #expect(GroupTypePreset.meeting.defaultSettings.inviteLinkPermission == .ownerAndAdmins)
        #expect(GroupTypePreset.avChatRoom.defaultSettings.inviteLinkPermission == .nobody)
        #expect(GroupTypePreset.avChatRoom.fixedSettings.contains(.inviteLinkPermission))
        #expect(GroupSettingKey.inviteLinkPermission.apiName == "invite_link_scope")
    }
}

@Suite("Invite link plans")
struct InviteLinkRuleTests {
    let now = Timestamp(millisecondsSince1970: 10_000)
    let owner = GroupOperator.user("o", membership: Member(userID: "o", role: .owner, joinedAt: Timestamp(millisecondsSince1970: 0)))
    let stranger = GroupOperator.user("u", membership: nil)

    func group(_ type: GroupType = .public, members: Int = 1, max: Int? = nil) -> Group {
        Group(appID: "app", id: "g", type: type, name: "g", settings: type.preset.defaultSettings, ownerID: "o",
              maxMembers: max, memberCount: members, createdAt: now, updatedAt: now)
    }

    func link(expires: Timestamp? = nil, maxUses: Int = 0, uses: Int = 0, approval: Bool = false, revoked: Bool = false) -> InviteLink {
        InviteLink(id: "lnk_1", appID: "app", groupID: "g", tokenHash: "h", createdBy: "o", createdAt: now, expiresAt: expires,
                   maxUses: maxUses, useCount: uses, requiresApproval: approval, revokedAt: revoked ? now : nil)
    }

    @Test("creation: expiry, the live-link limit, the event to the approvers")
    func create() throws {
        let (made, events) = try GroupRules.planCreateInviteLink(
            InviteLinkRequest(expirySeconds: 60, maxUses: 3, requiresApproval: true), in: group(), by: owner, liveLinks: 0,
            limits: .defaults, now: now, id: "lnk_1", tokenHash: "h")
        #expect(made.expiresAt == Timestamp(millisecondsSince1970: 70_000) && made.maxUses == 3 && made.requiresApproval)
        #expect(events.map(\.kind) == [.inviteLinkCreated] && events[0].recipient == .approvers)
        #expect(events[0].changes["link_id"] == "lnk_1" && events[0].changes["expires_at"] == "70000")
        var limits = AppLimits.defaults
        limits.maxInviteLinksPerGroup = 2
        let full = groupError {
            _ = try GroupRules.planCreateInviteLink(InviteLinkRequest(), in: group(), by: owner, liveLinks: 2, limits: limits,
                                                    now: now, id: "x", tokenHash: "h")
        }
        #expect(full?.reason == .inviteLinksFull && full?.metadata["limit"] == "2")
        let negative = groupError {
            _ = try GroupRules.planCreateInviteLink(InviteLinkRequest(maxUses: -1), in: group(), by: owner, liveLinks: 0,
                                                    limits: .defaults, now: now, id: "x", tokenHash: "h")
        }
        #expect(negative?.metadata["field"] == "max_uses")
    }

    @Test("a link's state: revoked before expired before used up")
    func states() {
        #expect(link().state(at: now) == .live)
        #expect(link(expires: now).state(at: now) == .expired)
        #expect(link(maxUses: 2, uses: 2).state(at: now) == .usedUp)
        #expect(link(expires: now, maxUses: 1, uses: 1, revoked: true).state(at: now) == .revoked)
        #expect(groupError { _ = try GroupRules.checkInviteLink(nil, now: now) }?.reason == .inviteLinkNotFound)
        #expect(groupError { _ = try GroupRules.checkInviteLink(link(maxUses: 1, uses: 1), now: now) }?.reason == .inviteLinkUsedUp)
        #expect(groupError { _ = try GroupRules.checkInviteLink(link(expires: now), now: now) }?.reason == .inviteLinkExpired)
    }

    @Test("a join through a link: the link decides approval; JoinGroup's limits apply")
    func join() throws {
        var forbidden = group()
        forbidden.settings.joinOption = .forbidden
        let plan = try GroupRules.planJoin(forbidden, by: stranger, joinedGroupCount: 0, limits: .defaults, now: now, link: link())
        guard case .joined(let member) = plan.outcome else { Issue.record("not joined"); return }
        #expect(member.joinSource == .inviteLink && member.inviteLinkID == "lnk_1")
        #expect(plan.change.events.first?.changes == ["join_source": "invite_link", "invite_link": "lnk_1"])
        let pending = try GroupRules.planJoin(group(.meeting), by: stranger, joinedGroupCount: 0, limits: .defaults, now: now,
                                              link: link(approval: true))
        #expect(pending.outcome == .pendingApproval)
        let filed = try GroupRules.planJoinApplication(
            group(.meeting), by: stranger, joinedGroupCount: 0, message: "hi", limits: .defaults, now: now,
            retainedMute: nil, pending: nil, newID: "ap-1", link: link(approval: true))
        #expect(filed.application?.inviteLinkID == "lnk_1")
        #expect(filed.join.change.events.first?.changes["invite_link"] == "lnk_1")
        #expect(groupError {
            _ = try GroupRules.planJoin(group(members: 2, max: 2), by: stranger, joinedGroupCount: 0, limits: .defaults, now: now, link: link())
        }?.reason == .groupFull)
        #expect(groupError {
            _ = try GroupRules.planJoin(group(), by: stranger, joinedGroupCount: 1000, limits: .defaults, now: now, link: link())
        }?.reason == .tooManyGroups)
    }

    @Test("revocation: the group's link only, once")
    func revoke() throws {
        let (revoked, events) = try GroupRules.planRevokeInviteLink(link(), linkID: "lnk_1", in: group(), by: owner, now: now)
        #expect(revoked.revokedAt == now && revoked.revokedBy == "o" && events.map(\.kind) == [.inviteLinkRevoked])
        #expect(groupError { _ = try GroupRules.planRevokeInviteLink(nil, linkID: "x", in: group(), by: owner, now: now) }?
            .metadata["field"] == "link_id")
        #expect(groupError { _ = try GroupRules.planRevokeInviteLink(link(revoked: true), linkID: "lnk_1", in: group(), by: owner, now: now) }?
            .reason == .inviteLinkRevoked)
    }
}
