import GroupModel
import Testing

private let limits = fixtureLimits

/// A group created by `creator` with `members`, held in memory.
private func created(_ type: GroupType, id: String, by creator: String, members: [String],
                     settings: GroupSettings.Changes = .init()) throws -> MemoryGroup {
    MemoryGroup(try GroupRules.planCreation(
        GroupCreationRequest(type: type, groupID: id, name: "GroupName", settings: settings,
                             members: members.map { InitialMember(userID: $0) }),
        appID: "app", creatorID: creator, limits: limits, now: now))
}

@Suite("The worked examples of the Tencent, ZIM and RongCloud guides")
struct SeedExampleTests {
    @Test("Tencent TIMGroupManager guide: a private group with iOS_002; invite, delete with a reason, quit")
    func privateGroupWithIOS002() throws {
        // createPrivateGroup:@[@"iOS_002"] groupName:@"GroupName" — the creator is added by default.
        var g = try created(.work, id: "TGID1JYSZEAEQ", by: "iOS_001", members: ["iOS_002"])
        #expect(g.group.type == .work)
        #expect(g.group.ownerID == "iOS_001")
        #expect(g.members["iOS_002"]?.role == .member)

        // inviteGroupMember @[@"iOS_002"]: already a member (TIM_GROUP_MEMBER_STATUS_INVALID).
        let again = try GroupRules.planInvitation(
            of: ["iOS_002"], to: g.group, by: g.op("iOS_001"), memberships: g.members, joinedGroupCounts: [:],
            limits: limits, now: now)
        #expect(again.results == [MemberResult(userID: "iOS_002", outcome: .alreadyMember)])
        #expect(again.change.isEmpty)

        // In a private group any member invites, and the invitee joins at once (Tencent's V2 group guide).
        let invite = try GroupRules.planInvitation(
            of: ["iOS_003"], to: g.group, by: g.op("iOS_002"), memberships: g.members, joinedGroupCounts: [:],
            limits: limits, now: now)
        #expect(invite.results.map(\.outcome.isSuccess) == [true])
        g.apply(invite.change)

        // A non-member cannot apply to join a private group: it does not exist for them.
        let join = try #require(groupError {
            _ = try GroupRules.planJoin(g.group, by: g.op("iOS_004"), joinedGroupCount: 0, limits: limits, now: now)
        })
        #expect(join.reason == .groupNotFound)

        // Any member of a private group modifies the name (Tencent modifyGroupName).
        let renamed = try GroupRules.planProfileUpdate(ProfileUpdate(name: "ModifyGroupName"), of: g.group,
                                                       by: g.op("iOS_003"), limits: limits, now: now)
        #expect(renamed.events.first?.changes == ["name": "ModifyGroupName"])
        g.apply(renamed)

        // deleteGroupMemberWithReason:@"broke group rules" members:@[@"iOS_002"].
        let kick = try GroupRules.planKick(
            of: ["iOS_002"], from: g.group, by: g.op("iOS_001"), memberships: g.members, reason: "broke group rules",
            limits: limits, now: now)
        #expect(kick.results.map(\.outcome.isSuccess) == [true])
        #expect(kick.change.events.first == GroupEvent.Draft(
            kind: .memberKicked, operatorID: "iOS_001", targets: ["iOS_002"], changes: ["reason": "broke group rules"]))
        g.apply(kick.change)
        // Deleting a user who is not a member is invalid for that user.
        let twice = try GroupRules.planKick(of: ["iOS_002"], from: g.group, by: g.op("iOS_001"),
                                            memberships: g.members, limits: limits, now: now)
        #expect(twice.results.first?.outcome == .notMember)

        // Private group: every member can quit, the owner too; ownership passes on.
        let quit = try GroupRules.planQuit(g.group, by: g.op("iOS_001"),
                                           successor: g.successor(excluding: "iOS_001"), now: now)
        #expect(quit.newOwnerID == "iOS_003")
        g.apply(quit.change)
        checkInvariants(g, "Tencent TIMGroupManager private group")
    }

    @Test("Tencent TIMGroupManager guide: mute iOS_001 for 120 seconds, change the name card, set admin, transfer, mute all")
    func publicGroupExamples() throws {
        var g = try created(.public, id: "TGID1JYSZEAEQ", by: "iOS_000", members: ["iOS_001"])

        // modifyGroupMemberInfoSetSilence:@"TGID1JYSZEAEQ" user:@"iOS_001" stime:120.
        let mute = try GroupRules.planMemberMute(of: ["iOS_001"], for: 120, in: g.group, by: g.op("iOS_000"),
                                                 memberships: g.members, limits: limits, now: now)
        g.apply(mute.change)
        let member = try #require(g.members["iOS_001"])
        #expect(member.mutedUntil == Timestamp(millisecondsSince1970: now.millisecondsSince1970 + 120_000))
        #expect(member.isMuted(at: now.adding(seconds: 119)))
        #expect(!member.isMuted(at: now.adding(seconds: 120)))
        #expect(mute.change.events.first?.kind == .memberMuted)
        #expect(mute.change.events.first?.changes["muted_until"] == String(now.millisecondsSince1970 + 120_000))

        // modifyGroupMemberInfoSetNameCard:@"TGID1JYSZEAEQ" user:@"iOS_001" nameCard:@"iOS_001_namecard".
        let card = try GroupRules.planMemberInfoUpdate(
            MemberInfoUpdate(nameCard: "iOS_001_namecard"), of: "iOS_001", in: g.group, by: g.op("iOS_000"),
            target: g.members["iOS_001"], limits: limits, now: now)
        #expect(card.events == [GroupEvent.Draft(kind: .memberInfoChanged, operatorID: "iOS_000", targets: ["iOS_001"],
                                                 changes: ["name_card": "iOS_001_namecard"])])
        g.apply(card)
        #expect(g.members["iOS_001"]?.nameCard == "iOS_001_namecard")

        // modifyGroupMemberInfoSetRole:@"TGID1JYSZEAEQ" user:@"iOS_001" role:TIM_GROUP_MEMBER_ADMIN.
        g.apply(try GroupRules.planRoleChange(of: "iOS_001", to: .admin, in: g.group, by: g.op("iOS_000"),
                                              target: g.members["iOS_001"], limits: limits))
        #expect(g.members["iOS_001"]?.role == .admin)

        // modifyGroupAllShutup:@"TGID1JYSZEAEQ" shutup:YES — by an admin, with no time limit.
        let allMuted = try GroupRules.planGroupMute(.all, of: g.group, by: g.op("iOS_001"), now: now)
        #expect(allMuted.group.mute == GroupMuteState(mode: .all, until: nil, operatorID: "iOS_001"))
        g.apply(allMuted)

        // modifyGroupAddOpt:TIM_GROUP_ADD_FORBID — "only the group owner or admin can modify the
        // option for joining the group": here by the admin iOS_001 (edit_settings_permission).
        g.apply(try GroupRules.planSettingsUpdate(.init(joinOption: .forbidden), of: g.group, by: g.op("iOS_001"),
                                                  limits: limits, now: now))
        let join = try #require(groupError {
            _ = try GroupRules.planJoin(g.group, by: g.op("iOS_009"), joinedGroupCount: 0, limits: limits, now: now)
        })
        #expect(join.reason == .joinForbidden)
        #expect(join.code == .permissionDenied)

        // modifyGroupOwner:@"TGID1JYSZEAEQ" user:@"iOS_001".
        g.apply(try GroupRules.planOwnershipTransfer(of: g.group, to: "iOS_001", by: g.op("iOS_000"),
                                                     newOwner: g.members["iOS_001"], limits: limits, now: now))
        #expect(g.group.ownerID == "iOS_001")
        #expect(g.members["iOS_000"]?.role == .member)

        // modifyReceiveMessageOpt:TIM_GROUP_RECEIVE_NOT_NOTIFY_MESSAGE.
        g.apply(try GroupRules.planReceiveOption(.receiveWithoutPush, in: g.group, by: g.op("iOS_000")))
        #expect(g.members["iOS_000"]?.receiveOption == .receiveWithoutPush)
        checkInvariants(g, "Tencent TIMGroupManager public group")
    }

    @Test("Tencent V2 group guide: filter owner returns the owner; COMMON means ordinary members")
    func filterOwner() throws {
        var g = try created(.public, id: "testGroup", by: "owner", members: ["a", "b", "c"])
        g.apply(try GroupRules.planRoleChange(of: "b", to: .admin, in: g.group, by: g.op("owner"),
                                              target: g.members["b"], limits: limits))
        let byOrder = g.members.values.sorted { $0.joinOrder < $1.joinOrder }
        #expect(byOrder.filter { MemberListFilter.owner.includes($0.role) }.map(\.userID) == ["owner"])
        #expect(byOrder.filter { MemberListFilter.admins.includes($0.role) }.map(\.userID) == ["b"])
        #expect(byOrder.filter { MemberListFilter.ordinary.includes($0.role) }.map(\.userID) == ["a", "c"])
        #expect(byOrder.filter { MemberListFilter.all.includes($0.role) }.count == 4)
    }

    @Test("Tencent V2 group guide: invitations — Work joins at once; Public needs the invitee and an approver")
    func invitationsByType() throws {
        let work = try created(.work, id: "w", by: "owner", members: ["friend"])
        let direct = try GroupRules.planInvitation(of: ["x"], to: work.group, by: work.op("friend"),
                                                   memberships: work.members, joinedGroupCounts: [:], limits: limits,
                                                   now: now)
        #expect(direct.results[0].outcome.isSuccess)
        let pub = try created(.public, id: "p", by: "owner", members: ["friend"],
                              settings: .init(invitePermission: .everyone))
        let pending = try GroupRules.planInvitation(of: ["x"], to: pub.group, by: pub.op("friend"),
                                                    memberships: pub.members, joinedGroupCounts: [:], limits: limits,
                                                    now: now)
        guard case .pending(let invitation) = pending.results[0].outcome else { Issue.record("not pending"); return }
        #expect(invitation.needsApproval && invitation.needsConsent)
    }

    @Test("Tencent V2 group guide: AVChatRoom removes nobody (mute instead); Public owners cannot exit but can disband")
    func avAndPublicOwner() throws {
        let room = try created(.avChatRoom, id: "live", by: "host", members: [])
        var r = room
        r.apply(try GroupRules.planJoin(r.group, by: r.op("fan"), joinedGroupCount: 0, limits: limits, now: now).change)
        let kick = try #require(groupError {
            _ = try GroupRules.planKick(of: ["fan"], from: r.group, by: r.op("host"), memberships: r.members,
                                        limits: limits, now: now)
        })
        #expect(kick.code == .failedPrecondition)
        #expect(kick.reason == .kickNotSupported)
        let mute = try GroupRules.planMemberMute(of: ["fan"], for: 600, in: r.group, by: r.op("host"),
                                                 memberships: r.members, limits: limits, now: now)
        #expect(mute.results[0].outcome.isSuccess)

        let pub = try created(.public, id: "p", by: "owner", members: ["m"])
        #expect(groupError { _ = try GroupRules.planQuit(pub.group, by: pub.op("owner"), now: now) }?.reason == .ownerCannotQuit)
        #expect(try GroupRules.planDismissal(of: pub.group, by: pub.op("owner").role, operatorID: "owner").count == 1)
    }

    @Test("ZIM: the owner leaving hands over to the first member; the last one out disbands")
    func zimLeaving() throws {
        var g = try created(.work, id: "zim", by: "A", members: ["userID1", "userID2"])
        let quit = try GroupRules.planQuit(g.group, by: g.op("A"), successor: g.successor(excluding: "A"), now: now)
        #expect(quit.newOwnerID == "userID1")
        g.apply(quit.change)
        g.apply(try GroupRules.planQuit(g.group, by: g.op("userID2"), now: now).change)
        let last = try GroupRules.planQuit(g.group, by: g.op("userID1"), successor: g.successor(excluding: "userID1"),
                                           now: now)
        #expect(last.groupDismissed)
        g.apply(last.change)
        #expect(g.dismissed && g.members.isEmpty)
    }

    @Test("ZIM: inviteMode and beInviteMode", arguments: [
        // (invite permission, invitee must accept, ordinary inviter's outcome, admin's outcome)
        (OperationPermission.everyone, false, "success", "success"),
        (.ownerAndAdmins, false, "PERMISSION_DENIED", "success"),
        (.everyone, true, "pending", "pending"),
        (.ownerAndAdmins, true, "PERMISSION_DENIED", "pending"),
    ])
    func zimInviteModes(permission: OperationPermission, mustAccept: Bool, member: String, admin: String) throws {
        var g = try created(.public, id: "zim", by: "owner", members: ["m", "a"],
                            settings: .init(invitePermission: permission, inviteeMustAccept: mustAccept,
                                            invitationNeedsApproval: false))
        g.apply(try GroupRules.planRoleChange(of: "a", to: .admin, in: g.group, by: g.op("owner"),
                                              target: g.members["a"], limits: limits))
        func result(by user: String) -> String {
            do {
                let plan = try GroupRules.planInvitation(of: ["x"], to: g.group, by: g.op(user), memberships: g.members,
                                                         joinedGroupCounts: [:], limits: limits, now: now)
                switch plan.results[0].outcome {
                case .success: return "success"
                case .pending: return "pending"
                default: return "other"
                }
            } catch let error as GroupError {
                return error.reason.rawValue
            } catch {
                return "error"
            }
        }
        #expect(result(by: "m") == member)
        #expect(result(by: "a") == admin)
    }

    @Test("ZIM: mute chosen roles for 30 seconds")
    func zimMuteRoles() throws {
        let g = try created(.public, id: "zim", by: "owner", members: ["m"])
        let change = try GroupRules.planGroupMute(.roles([.member]), for: 30, of: g.group, by: g.op("owner"), now: now)
        #expect(change.group.mute.mutes(.member, at: now.adding(seconds: 29)))
        #expect(!change.group.mute.mutes(.owner, at: now))
        #expect(!change.group.mute.mutes(.member, at: now.adding(seconds: 30)))
    }

    @Test("RongCloud: transfer and quit, quit config, group remark")
    func rongCloud() throws {
        var g = try created(.public, id: "groupId", by: "owner", members: ["newOwnerId", "user1"])
        g.apply(try GroupRules.planMemberMute(of: ["user1"], for: 3600, in: g.group, by: g.op("owner"),
                                              memberships: g.members, limits: limits, now: now).change)
        // kickGroupMembers with config.removeMuteStatus = NO: the mute outlives the membership.
        let kick = try GroupRules.planKick(of: ["user1"], from: g.group, by: g.op("owner"), memberships: g.members,
                                           options: QuitOptions(keepMuteStatus: true), limits: limits, now: now)
        #expect(kick.change.retainedMutes["user1"] == now.adding(seconds: 3600))
        g.apply(kick.change)
        // transferGroupOwner:newOwnerId quitGroup:YES — both the transfer and the quit event.
        let transfer = try GroupRules.planOwnershipTransfer(
            of: g.group, to: "newOwnerId", by: g.op("owner"), newOwner: g.members["newOwnerId"], quit: true,
            limits: limits, now: now)
        #expect(transfer.events.map(\.kind) == [.ownerChanged, .memberQuit, .quitGroup])
        g.apply(transfer)
        #expect(g.group.ownerID == "newOwnerId" && g.members["owner"] == nil)
        // setGroupRemark:@"remark", then nil to remove it; only the user's devices hear of it.
        let remark = try GroupRules.planRemark("remark", in: g.group, by: g.op("newOwnerId"))
        #expect(remark.events.first?.recipient == .user("newOwnerId"))
        #expect(try GroupRules.planRemark("", in: g.group, by: g.op("newOwnerId"), current: "remark").remark == nil)
        // memberInfoEditPermission default: owner + admins + self.
        #expect(g.group.settings.editMemberInfoPermission == .ownerAdminsAndSelf)
        checkInvariants(g, "RongCloud")
    }
}
