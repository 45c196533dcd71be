import GroupModel
import Testing

private let limits = fixtureLimits

private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

@Suite("Profile and settings updates")
struct ProfileRuleTests {
    @Test("byte limits of Tencent's TIMGroupManager guide, each naming the field and its limit", arguments: [
        (ProfileUpdate(name: String(repeating: "a", count: 31)), "name", 30),
        (ProfileUpdate(name: String(repeating: "名", count: 11)), "name", 30),
        (ProfileUpdate(name: ""), "name", 30),
        (ProfileUpdate(introduction: String(repeating: "a", count: 121)), "introduction", 120),
        (ProfileUpdate(notification: String(repeating: "a", count: 151)), "notification", 150),
        (ProfileUpdate(faceURL: String(repeating: "a", count: 101)), "face_url", 100),
    ])
    func limitsRefused(update: ProfileUpdate, field: String, limit: Int) throws {
        let m = try fixture(.public)
        let error = try #require(groupError {
            _ = try GroupRules.planProfileUpdate(update, of: m.group, by: m.op(Cast.owner), limits: limits, now: now)
        })
        #expect(error.code == .invalidArgument)
        #expect(error.metadata["field"] == field)
        #expect(error.metadata["limit"] == String(limit))
    }

    @Test("values exactly at the limits pass (bytes, not characters)")
    func atLimits() throws {
        let m = try fixture(.public)
        let update = ProfileUpdate(
            name: String(repeating: "名", count: 10), introduction: String(repeating: "i", count: 120),
            notification: String(repeating: "n", count: 150), faceURL: String(repeating: "f", count: 100))
        let change = try GroupRules.planProfileUpdate(update, of: m.group, by: m.op(Cast.owner), limits: limits,
                                                      now: now.adding(seconds: 5))
        #expect(change.group.name == String(repeating: "名", count: 10))
        #expect(change.group.updatedAt == now.adding(seconds: 5))
        let event = try #require(change.events.first)
        #expect(change.events.count == 1)
        #expect(event.kind == .groupInfoChanged)
        #expect(event.operatorID == Cast.owner)
        #expect(Set(event.changes.keys) == ["name", "introduction", "notification", "face_url"])
        #expect(event.changes["introduction"] == String(repeating: "i", count: 120))
    }

    @Test("a partial update lists only the fields that changed; no change, no event")
    func partial() throws {
        var m = try fixture(.work)
        let first = try GroupRules.planProfileUpdate(
            ProfileUpdate(name: "fixture", introduction: "hello"), of: m.group, by: m.op(Cast.member), limits: limits,
            now: now)
        #expect(first.events.first?.changes == ["introduction": "hello"])
        m.apply(first)
        let again = try GroupRules.planProfileUpdate(
            ProfileUpdate(name: "fixture", introduction: "hello"), of: m.group, by: m.op(Cast.member), limits: limits,
            now: now.adding(seconds: 1))
        #expect(again.isEmpty)
        #expect(again.group.updatedAt == m.group.updatedAt)
        let cleared = try GroupRules.planProfileUpdate(
            ProfileUpdate(introduction: ""), of: m.group, by: m.op(Cast.member), limits: limits, now: now)
        #expect(cleared.events.first?.changes == ["introduction": ""])
    }

    @Test("an empty update names update_mask")
    func emptyUpdate() throws {
        let m = try fixture(.public)
        let error = try #require(groupError {
            _ = try GroupRules.planProfileUpdate(ProfileUpdate(), of: m.group, by: .backend, limits: limits, now: now)
        })
        #expect(error.metadata["field"] == "update_mask")
    }

    @Test("custom fields: known keys, value limits, per-key writers, Base64 in the event, removal")
    func customFields() throws {
        let schema = CustomFieldSchema(groupFields: [
            CustomFieldDefinition(key: "topic", maxValueBytes: 8),
            CustomFieldDefinition(key: "level", maxValueBytes: 4, readers: .ownerAndAdmins, writers: .owner),
        ])
        var m = try fixture(.work)
        func plan(_ custom: [String: [UInt8]], by user: String?) throws -> GroupChange {
            try GroupRules.planProfileUpdate(ProfileUpdate(custom: custom), of: m.group, by: m.op(user), limits: limits,
                                             customFields: schema, now: now)
        }
        let unknown = try #require(groupError { _ = try plan(["nope": bytes("x")], by: Cast.owner) })
        #expect(unknown.code == .invalidArgument)
        #expect(unknown.metadata["field"] == "custom.nope")
        let long = try #require(groupError { _ = try plan(["topic": bytes("123456789")], by: Cast.owner) })
        #expect(long.metadata["field"] == "custom.topic")
        #expect(long.metadata["limit"] == "8")
        let writer = try #require(groupError { _ = try plan(["level": bytes("1")], by: Cast.member) })
        #expect(writer.reason == .permissionDenied)
        #expect(writer.metadata["field"] == "custom.level")

        let set = try plan(["topic": bytes("foobar"), "level": bytes("f")], by: Cast.owner)
        #expect(set.events.first?.changes == ["custom.topic": "Zm9vYmFy", "custom.level": "Zg=="])
        m.apply(set)
        #expect(m.group.custom == ["topic": bytes("foobar"), "level": bytes("f")])
        let removed = try plan(["topic": [], "level": bytes("fo")], by: nil)
        #expect(removed.events.first?.changes == ["custom.topic": "", "custom.level": "Zm8="])
        m.apply(removed)
        #expect(m.group.custom == ["level": bytes("fo")])

        #expect(schema.readable(m.group.custom, scope: .group, for: .member).isEmpty)
        #expect(schema.readable(m.group.custom, scope: .group, for: .admin) == ["level": bytes("fo")])
        #expect(schema.readable(m.group.custom, scope: .group, for: .backend) == ["level": bytes("fo")])
    }

    @Test("settings: one GROUP_INFO_CHANGED naming each changed setting and its new value")
    func settingsEvent() throws {
        let m = try fixture(.public)
        let change = try GroupRules.planSettingsUpdate(
            .init(joinOption: .any, inviteeMustAccept: false, editProfilePermission: .ownerAndAdmins),
            of: m.group, by: m.op(Cast.owner), limits: limits, now: now.adding(seconds: 9))
        #expect(change.group.settings.joinOption == .any)
        #expect(change.group.updatedAt == now.adding(seconds: 9))
        #expect(change.events.map(\.kind) == [.groupSettingsChanged])
        #expect(change.events.first?.changes == ["join_option": "any", "invitee_must_accept": "false"])
    }

    @Test("max members: backend only, within the app's limit, not below the member count")
    func maxMembers() throws {
        let m = try fixture(.work)
        let ok = try GroupRules.planSettingsUpdate(.init(), maxMembers: 50, of: m.group, by: .backend, limits: limits,
                                                   now: now)
        #expect(ok.group.maxMembers == 50)
        #expect(ok.events.first?.changes == ["max_members": "50"])
        for (value, message) in [(201, "limit"), (2, "below"), (0, "at least")] {
            let error = try #require(groupError {
                _ = try GroupRules.planSettingsUpdate(.init(), maxMembers: value, of: m.group, by: .backend,
                                                      limits: limits, now: now)
            }, "\(value)")
            #expect(error.metadata["field"] == "max_member_count")
            #expect(error.message.contains(message), "\(error.message)")
        }
        let owner = try #require(groupError {
            _ = try GroupRules.planSettingsUpdate(.init(), maxMembers: 50, of: m.group, by: m.op(Cast.owner),
                                                  limits: limits, now: now)
        })
        #expect(owner.reason == .adminTokenRequired)
    }
}

@Suite("Join and quit")
struct JoinQuitRuleTests {
    @Test("join a free group: an ordinary member, MEMBER_JOINED")
    func freeJoin() throws {
        var m = try fixture(.meeting)
        let plan = try GroupRules.planJoin(m.group, by: m.op("joiner"), joinedGroupCount: 3, limits: limits,
                                           now: now.adding(seconds: 1))
        guard case .joined(let member) = plan.outcome else { Issue.record("not joined"); return }
        #expect(member.role == .member)
        #expect(member.joinedAt == now.adding(seconds: 1))
        #expect(member.joinSequence == m.group.latestSequence)
        #expect(plan.change.group.memberCount == m.group.memberCount + 1)
        #expect(plan.change.events == [GroupEvent.Draft(
            kind: .memberJoined, operatorID: "joiner", targets: ["joiner"], changes: ["join_source": "free_join"])])
        m.apply(plan.change)
        checkInvariants(m, "free join")
    }

    @Test("join an approval group: pending, JOIN_APPLICATION_RECEIVED to the approvers, nothing stored")
    func approvalJoin() throws {
        let m = try fixture(.public)
        let plan = try GroupRules.planJoin(m.group, by: m.op("joiner"), joinedGroupCount: 0, message: "let me in",
                                           limits: limits, now: now)
        #expect(plan.outcome == .pendingApproval)
        #expect(plan.change.insertedMembers.isEmpty)
        #expect(plan.change.group == m.group)
        #expect(plan.change.events == [GroupEvent.Draft(
            kind: .joinApplicationReceived, operatorID: "joiner", targets: ["joiner"],
            changes: ["message": "let me in"], recipient: .approvers)])
        let long = try #require(groupError {
            _ = try GroupRules.planJoin(m.group, by: m.op("joiner"), joinedGroupCount: 0,
                                        message: String(repeating: "m", count: 101), limits: limits, now: now)
        })
        #expect(long.metadata["field"] == "message")
        #expect(long.metadata["limit"] == "100")
    }

    @Test("a full group refuses joins and applications: FAILED_PRECONDITION GROUP_FULL",
          arguments: [JoinOption.any, .approval])
    func full(option: JoinOption) throws {
        var m = try fixture(.public, settings: .init(joinOption: option))
        m.group.maxMembers = m.group.memberCount
        let error = try #require(groupError {
            _ = try GroupRules.planJoin(m.group, by: m.op("joiner"), joinedGroupCount: 0, limits: limits, now: now)
        })
        #expect(error.code == .failedPrecondition)
        #expect(error.reason == .groupFull)
    }

    @Test("the joined-group limit: TOO_MANY_GROUPS, except for AVChatRoom rooms")
    func tooManyGroups() throws {
        let pub = try fixture(.meeting)
        let error = try #require(groupError {
            _ = try GroupRules.planJoin(pub.group, by: pub.op("busy"), joinedGroupCount: limits.maxGroupsPerUser,
                                        limits: limits, now: now)
        })
        #expect(error.reason == .tooManyGroups)
        #expect(error.code == .failedPrecondition)
        let av = try fixture(.avChatRoom)
        let plan = try GroupRules.planJoin(av.group, by: av.op("busy"), joinedGroupCount: limits.maxGroupsPerUser,
                                           limits: limits, now: now)
        #expect(plan.change.insertedMembers.count == 1)
    }

    @Test("a Work owner quitting hands ownership to the longest-standing member")
    func workOwnerQuits() throws {
        var m = try fixture(.work)
        m.members[Cast.member]!.mutedUntil = now.adding(seconds: 60)
        let heir = try #require(m.successor(excluding: Cast.owner))
        #expect(heir.userID == Cast.member)  // initial members in order: member, member2
        let plan = try GroupRules.planQuit(m.group, by: m.op(Cast.owner), successor: heir, now: now)
        #expect(plan.newOwnerID == Cast.member)
        #expect(!plan.groupDismissed)
        #expect(plan.change.events.map(\.kind) == [.ownerChanged, .memberQuit, .quitGroup])
        #expect(plan.change.events[0].changes == ["previous_owner": Cast.owner, "previous_owner_quit": "true"])
        #expect(plan.change.events[2].recipient == .user(Cast.owner))
        m.apply(plan.change)
        #expect(m.group.ownerID == Cast.member)
        #expect(m.members[Cast.member]?.role == .owner)
        #expect(m.members[Cast.member]?.mutedUntil == nil)
        #expect(m.members[Cast.owner] == nil)
        checkInvariants(m, "work owner quit")

        let missing = try #require(groupError {
            _ = try GroupRules.planQuit(m.group, by: m.op(Cast.member), successor: nil, now: now)
        })
        #expect(missing.code == .internal)
    }

    @Test("the last member leaving dismisses the group (ZIM)")
    func lastMember() throws {
        let creation = try GroupRules.planCreation(GroupCreationRequest(type: .work, groupID: "solo", name: "solo"),
                                                   appID: "app", creatorID: "alone", limits: limits, now: now)
        var m = MemoryGroup(creation)
        let plan = try GroupRules.planQuit(m.group, by: m.op("alone"), now: now)
        #expect(plan.groupDismissed)
        #expect(plan.newOwnerID == nil)
        #expect(plan.change.events.map(\.kind) == [.memberQuit, .quitGroup, .groupDismissed])
        #expect(plan.change.events.last?.changes == ["reason": "LAST_MEMBER_LEFT"])
        m.apply(plan.change)
        #expect(m.members.isEmpty && m.dismissed && m.group.ownerID == nil && m.group.memberCount == 0)
    }

    @Test("an AVChatRoom audience leaving never dismisses the room, even an ownerless one")
    func audienceLeaves() throws {
        let creation = try GroupRules.planCreation(GroupCreationRequest(type: .avChatRoom, name: "live"),
                                                   appID: "app", creatorID: nil, limits: limits, now: now)
        var m = MemoryGroup(creation)
        #expect(m.group.ownerID == nil)
        m.apply(try GroupRules.planJoin(m.group, by: m.op("viewer"), joinedGroupCount: 0, limits: limits, now: now).change)
        let plan = try GroupRules.planQuit(m.group, by: m.op("viewer"), now: now)
        #expect(!plan.groupDismissed)
        m.apply(plan.change)
        checkInvariants(m, "ownerless room")
    }

    @Test("quit options: the mute is cleared by default, kept on request and applied again on rejoin")
    func keepMute() throws {
        var m = try fixture(.meeting)
        m.members[Cast.member]!.mutedUntil = now.adding(seconds: 300)
        let cleared = try GroupRules.planQuit(m.group, by: m.op(Cast.member), now: now)
        #expect(cleared.change.retainedMutes.isEmpty)
        let kept = try GroupRules.planQuit(m.group, by: m.op(Cast.member), options: QuitOptions(keepMuteStatus: true),
                                           now: now)
        #expect(kept.change.retainedMutes == [Cast.member: now.adding(seconds: 300)])
        m.apply(kept.change)
        let back = try GroupRules.planJoin(m.group, by: m.op(Cast.member), joinedGroupCount: 0, limits: limits,
                                           now: now.adding(seconds: 10), retainedMute: m.retainedMutes[Cast.member])
        guard case .joined(let member) = back.outcome else { Issue.record("not joined"); return }
        #expect(member.mutedUntil == now.adding(seconds: 300))
        let late = try GroupRules.planJoin(m.group, by: m.op(Cast.member), joinedGroupCount: 0, limits: limits,
                                           now: now.adding(seconds: 300), retainedMute: m.retainedMutes[Cast.member])
        guard case .joined(let fresh) = late.outcome else { Issue.record("not joined"); return }
        #expect(fresh.mutedUntil == nil)
    }
}

@Suite("Invite and kick")
struct InviteKickRuleTests {
    @Test("invite: a result per user, in request order")
    func results() throws {
        var m = try fixture(.work)
        let tooLong = String(repeating: "x", count: 65)
        let plan = try GroupRules.planInvitation(
            of: ["", Cast.member, "new1", "new1", tooLong, "new2"], to: m.group, by: m.op(Cast.member),
            memberships: m.members, joinedGroupCounts: ["new2": limits.maxGroupsPerUser], limits: limits, now: now)
        let outcomes = plan.results.map(\.outcome)
        #expect(outcomes[0].error?.metadata["field"] == "user_ids[0]")
        #expect(outcomes[1] == .alreadyMember)
        #expect(outcomes[2].isSuccess)
        #expect(outcomes[3].error?.metadata["field"] == "user_ids[3]")
        #expect(outcomes[4].error?.metadata["field"] == "user_ids[4]")
        #expect(outcomes[5].error?.reason == .tooManyGroups)
        #expect(plan.results.map(\.userID) == ["", Cast.member, "new1", "new1", tooLong, "new2"])
        let invited = ["join_source": "invitation", "inviter": Cast.member]
        #expect(plan.change.events == [
            GroupEvent.Draft(kind: .memberInvited, operatorID: Cast.member, targets: ["new1"], changes: invited),
            GroupEvent.Draft(
                kind: .invitedToGroup, operatorID: Cast.member, targets: ["new1"], changes: invited,
                recipient: .user("new1")),
        ])
        m.apply(plan.change)
        #expect(m.members["new1"]?.role == .member)
        checkInvariants(m, "invite")
    }

    @Test("invite: the group-full check counts users added earlier in the same call")
    func fullMidBatch() throws {
        var m = try fixture(.work)
        m.group.maxMembers = m.group.memberCount + 1
        let plan = try GroupRules.planInvitation(
            of: ["a1", "a2"], to: m.group, by: m.op(Cast.owner), memberships: m.members, joinedGroupCounts: [:],
            limits: limits, now: now)
        #expect(plan.results[0].outcome.isSuccess)
        #expect(plan.results[1].outcome.error?.reason == .groupFull)
        #expect(plan.results[1].outcome.error?.code == .failedPrecondition)
    }

    @Test("invite: the batch limit and an empty list fail the call")
    func batchLimit() throws {
        let m = try fixture(.work)
        for ids in [[], (0...limits.maxUsersPerBatch).map { "u\($0)" }] {
            let error = try #require(groupError {
                _ = try GroupRules.planInvitation(of: ids, to: m.group, by: m.op(Cast.owner), memberships: m.members,
                                                  joinedGroupCounts: [:], limits: limits, now: now)
            })
            #expect(error.metadata["field"] == "user_ids")
            #expect(error.metadata["limit"] == String(limits.maxUsersPerBatch))
        }
    }

    @Test("invite: pending invitations notify the invitee or the approvers, and take no seat")
    func pending() throws {
        let m = try fixture(.public, settings: .init(invitePermission: .everyone))
        let byOwner = try GroupRules.planInvitation(
            of: ["guest"], to: m.group, by: m.op(Cast.owner), memberships: m.members, joinedGroupCounts: [:],
            message: "join us", limits: limits, now: now)
        #expect(byOwner.results[0].outcome == .pending(PendingInvitation(
            inviteeID: "guest", inviterID: Cast.owner, needsApproval: false, needsConsent: true, message: "join us")))
        #expect(byOwner.change.events.map(\.kind) == [.invitationReceived])
        #expect(byOwner.change.events[0].recipient == .user("guest"))
        #expect(byOwner.change.group.memberCount == m.group.memberCount)
        #expect(byOwner.change.insertedMembers.isEmpty)

        let byMember = try GroupRules.planInvitation(
            of: ["guest"], to: m.group, by: m.op(Cast.member), memberships: m.members, joinedGroupCounts: [:],
            limits: limits, now: now)
        guard case .pending(let invitation) = byMember.results[0].outcome else { Issue.record("not pending"); return }
        #expect(invitation.needsApproval && invitation.needsConsent)
        #expect(byMember.change.events.map(\.kind) == [.invitationApprovalRequested])
        #expect(byMember.change.events[0].recipient == .approvers)
    }

    @Test("kick: results per user, MEMBER_KICKED with the reason, KICKED_FROM_GROUP to each")
    func kick() throws {
        var m = try fixture(.public)
        m.members[Cast.member2]!.mutedUntil = now.adding(seconds: 30)
        let plan = try GroupRules.planKick(
            of: [Cast.member2, "stranger", Cast.admin2, Cast.admin, Cast.owner], from: m.group, by: m.op(Cast.admin),
            memberships: m.members, reason: "spam", options: QuitOptions(keepMuteStatus: true), limits: limits,
            now: now)
        let outcomes = plan.results.map(\.outcome)
        #expect(outcomes[0].isSuccess)
        #expect(outcomes[1] == .notMember)
        #expect(outcomes[2].error?.reason == .permissionDenied)  // admins do not kick admins
        #expect(outcomes[3].error?.reason == .permissionDenied)  // nor themselves
        #expect(outcomes[4].error?.reason == .targetIsOwner)     // nobody kicks the owner
        #expect(plan.change.removedMembers == [Cast.member2])
        #expect(plan.change.retainedMutes == [Cast.member2: now.adding(seconds: 30)])
        #expect(plan.change.events == [
            GroupEvent.Draft(kind: .memberKicked, operatorID: Cast.admin, targets: [Cast.member2], changes: ["reason": "spam"]),
            GroupEvent.Draft(kind: .kickedFromGroup, operatorID: Cast.admin, targets: [Cast.member2],
                             changes: ["reason": "spam"], recipient: .user(Cast.member2)),
        ])
        m.apply(plan.change)
        checkInvariants(m, "kick")

        let byOwner = try GroupRules.planKick(of: [Cast.admin2], from: m.group, by: m.op(Cast.owner),
                                              memberships: m.members, limits: limits, now: now)
        #expect(byOwner.results[0].outcome.isSuccess)
        let long = try #require(groupError {
            _ = try GroupRules.planKick(of: [Cast.member], from: m.group, by: m.op(Cast.owner), memberships: m.members,
                                        reason: String(repeating: "r", count: 101), limits: limits, now: now)
        })
        #expect(long.metadata["field"] == "reason")
    }

    @Test("kick: whoever may remove ordinary members still cannot remove themselves")
    func kickSelf() throws {
        let m = try fixture(.public, settings: .init(removeMembersPermission: .everyone))
        let plan = try GroupRules.planKick(of: [Cast.member], from: m.group, by: m.op(Cast.member),
                                           memberships: m.members, limits: limits, now: now)
        #expect(plan.results[0].outcome.error?.code == .invalidArgument)
        #expect(plan.change.isEmpty)
    }
}

@Suite("Ownership, roles, mute, member info")
struct MemberRuleTests {
    @Test("transfer: the new owner is owner, the old one an ordinary member")
    func transfer() throws {
        var m = try fixture(.public)
        let change = try GroupRules.planOwnershipTransfer(
            of: m.group, to: Cast.admin, by: m.op(Cast.owner), newOwner: m.members[Cast.admin], limits: limits, now: now)
        #expect(change.events == [GroupEvent.Draft(
            kind: .ownerChanged, operatorID: Cast.owner, targets: [Cast.admin],
            changes: ["previous_owner": Cast.owner, "previous_owner_quit": "false"])])
        m.apply(change)
        #expect(m.group.ownerID == Cast.admin)
        #expect(m.members[Cast.admin]?.role == .owner)
        #expect(m.members[Cast.owner]?.role == .member)
        checkInvariants(m, "transfer")
    }

    @Test("transfer and quit in one plan (RongCloud): OWNER_CHANGED, then MEMBER_QUIT")
    func transferAndQuit() throws {
        var m = try fixture(.meeting)
        let change = try GroupRules.planOwnershipTransfer(
            of: m.group, to: Cast.member2, by: m.op(Cast.owner), newOwner: m.members[Cast.member2], quit: true,
            limits: limits, now: now)
        #expect(change.events.map(\.kind) == [.ownerChanged, .memberQuit, .quitGroup])
        #expect(change.events[0].changes["previous_owner_quit"] == "true")
        m.apply(change)
        #expect(m.members[Cast.owner] == nil)
        #expect(m.group.ownerID == Cast.member2)
        checkInvariants(m, "transfer and quit")
    }

    @Test("transfer refusals: oneself, a non-member, the backend quitting")
    func transferRefusals() throws {
        let m = try fixture(.work)
        let own = try #require(groupError {
            _ = try GroupRules.planOwnershipTransfer(of: m.group, to: Cast.owner, by: m.op(Cast.owner),
                                                     newOwner: m.members[Cast.owner], limits: limits, now: now)
        })
        #expect(own.metadata["field"] == "new_owner_user_id")
        let stranger = try #require(groupError {
            _ = try GroupRules.planOwnershipTransfer(of: m.group, to: "stranger", by: m.op(Cast.owner), newOwner: nil,
                                                     limits: limits, now: now)
        })
        #expect(stranger.code == .notFound)
        #expect(stranger.reason == .memberNotFound)
        let backendQuit = try #require(groupError {
            _ = try GroupRules.planOwnershipTransfer(of: m.group, to: Cast.member, by: .backend,
                                                     newOwner: m.members[Cast.member], currentOwner: m.owner,
                                                     quit: true, limits: limits, now: now)
        })
        #expect(backendQuit.metadata["field"] == "quit_after_transfer")
    }

    @Test("set role: ADMIN_SET + ADMIN_GRANTED, ADMIN_CANCELLED + ADMIN_REVOKED; same role is a no-op")
    func roles() throws {
        var m = try fixture(.public)
        let promote = try GroupRules.planRoleChange(of: Cast.member, to: .admin, in: m.group, by: m.op(Cast.owner),
                                                    target: m.members[Cast.member], limits: limits)
        #expect(promote.events == [
            GroupEvent.Draft(kind: .adminSet, operatorID: Cast.owner, targets: [Cast.member]),
            GroupEvent.Draft(kind: .adminGranted, operatorID: Cast.owner, targets: [Cast.member],
                             recipient: .user(Cast.member)),
        ])
        m.apply(promote)
        let demote = try GroupRules.planRoleChange(of: Cast.member, to: .member, in: m.group, by: .backend,
                                                   target: m.members[Cast.member], limits: limits)
        #expect(demote.events.map(\.kind) == [.adminCancelled, .adminRevoked])
        #expect(demote.events[0].operatorID == nil)
        let same = try GroupRules.planRoleChange(of: Cast.admin, to: .admin, in: m.group, by: m.op(Cast.owner),
                                                 target: m.members[Cast.admin], limits: limits)
        #expect(same.isEmpty)
    }

    @Test("set role guard rails: no owner role, nobody promotes themselves, the owner cannot demote themselves")
    func roleGuards() throws {
        let m = try fixture(.public)
        func reason(_ user: String, _ role: MemberRole, by actor: String?) -> GroupError.Reason? {
            groupError {
                _ = try GroupRules.planRoleChange(of: user, to: role, in: m.group, by: m.op(actor),
                                                  target: m.members[user], limits: limits)
            }?.reason
        }
        #expect(reason(Cast.member, .owner, by: Cast.owner) == .invalidArgument)
        #expect(reason(Cast.member, .owner, by: nil) == .invalidArgument)
        #expect(reason(Cast.member, .admin, by: Cast.member) == .permissionDenied)
        #expect(reason(Cast.admin, .member, by: Cast.admin) == .permissionDenied)
        #expect(reason(Cast.owner, .member, by: Cast.owner) == .targetIsOwner)
        #expect(reason(Cast.owner, .admin, by: nil) == .targetIsOwner)
        #expect(reason("stranger", .admin, by: Cast.owner) == .memberNotFound)
        #expect(reason("stranger", .admin, by: Cast.member) == .permissionDenied)
    }

    @Test("mute a member for N seconds; 0 unmutes; repeating the same state emits nothing")
    func muteMember() throws {
        var m = try fixture(.public)
        let plan = try GroupRules.planMemberMute(of: [Cast.member, "stranger", Cast.owner], for: 60, in: m.group,
                                                 by: m.op(Cast.admin), memberships: m.members, limits: limits, now: now)
        guard case .success(let muted) = plan.results[0].outcome else { Issue.record("not muted"); return }
        #expect(muted.mutedUntil == now.adding(seconds: 60))
        #expect(plan.results[1].outcome == .notMember)
        #expect(plan.results[2].outcome.error?.reason == .targetIsOwner)
        #expect(plan.change.events == [GroupEvent.Draft(
            kind: .memberMuted, operatorID: Cast.admin, targets: [Cast.member],
            changes: ["muted_until": String(now.adding(seconds: 60).millisecondsSince1970), "duration_seconds": "60"])])
        m.apply(plan.change)
        let unmute = try GroupRules.planMemberMute(of: [Cast.member], for: 0, in: m.group, by: m.op(Cast.owner),
                                                   memberships: m.members, limits: limits, now: now)
        #expect(unmute.change.updatedMembers.first?.mutedUntil == nil)
        #expect(unmute.change.events.first?.changes["muted_until"] == "0")
        m.apply(unmute.change)
        let again = try GroupRules.planMemberMute(of: [Cast.member], for: 0, in: m.group, by: m.op(Cast.owner),
                                                  memberships: m.members, limits: limits, now: now)
        #expect(again.results[0].outcome.isSuccess)
        #expect(again.change.isEmpty)
        for seconds in [-1, GroupRules.maxMuteSeconds + 1] {
            let error = try #require(groupError {
                _ = try GroupRules.planMemberMute(of: [Cast.member], for: seconds, in: m.group, by: m.op(Cast.owner),
                                                  memberships: m.members, limits: limits, now: now)
            })
            #expect(error.metadata["field"] == "duration_seconds")
        }
    }

    @Test("mute the group: all, ordinary members, chosen roles, with a duration; unmute", arguments: [
        (GroupMuteMode.all, [MemberRole.owner, .admin, .member], "all", ""),
        (.ordinaryMembers, [.member], "ordinary_members", ""),
        (.roles([.admin, .member]), [.admin, .member], "roles", "admin,member"),
    ])
    func muteGroup(mode: GroupMuteMode, muted: [MemberRole], text: String, roles: String) throws {
        var m = try fixture(.meeting)
        let change = try GroupRules.planGroupMute(mode, for: 30, of: m.group, by: m.op(Cast.admin), now: now)
        #expect(change.group.mute == GroupMuteState(mode: mode, until: now.adding(seconds: 30), operatorID: Cast.admin))
        for role in MemberRole.allCases {
            #expect(change.group.mute.mutes(role, at: now) == muted.contains(role), "\(role)")
            #expect(!change.group.mute.mutes(role, at: now.adding(seconds: 30)), "\(role) after")
        }
        #expect(change.events == [GroupEvent.Draft(
            kind: .groupMuted, operatorID: Cast.admin,
            changes: ["mode": text, "roles": roles, "until": String(now.adding(seconds: 30).millisecondsSince1970)])])
        m.apply(change)
        let same = try GroupRules.planGroupMute(mode, for: 30, of: m.group, by: m.op(Cast.owner), now: now)
        #expect(same.isEmpty)
        let lifted = try GroupRules.planGroupMute(.none, of: m.group, by: m.op(Cast.owner), now: now)
        #expect(lifted.group.mute == .unmuted)
        #expect(lifted.events.first?.changes == ["mode": "none", "roles": "", "until": "0"])
        let forever = try GroupRules.planGroupMute(.all, of: m.group, by: m.op(Cast.owner), now: now)
        #expect(forever.group.mute.until == nil)
    }

    @Test("group mute refusals: no roles, roles the type lacks")
    func muteGroupRefusals() throws {
        let m = try fixture(.work)
        for mode in [GroupMuteMode.roles([]), .roles([.admin])] {
            let error = try #require(groupError {
                _ = try GroupRules.planGroupMute(mode, of: m.group, by: m.op(Cast.owner), now: now)
            })
            #expect(error.metadata["field"] == "roles")
        }
    }

    @Test("member info: name card limit, custom fields, MEMBER_INFO_CHANGED, no-op")
    func memberInfo() throws {
        let schema = CustomFieldSchema(memberFields: [
            CustomFieldDefinition(key: "title", maxValueBytes: 10, writers: .ownerAndAdmins),
            CustomFieldDefinition(key: "motto", maxValueBytes: 10),
        ])
        var m = try fixture(.public)
        func plan(_ update: MemberInfoUpdate, of user: String?, by actor: String?) throws -> GroupChange {
            try GroupRules.planMemberInfoUpdate(update, of: user, in: m.group, by: m.op(actor),
                                                target: user.flatMap { m.members[$0] }, limits: limits,
                                                customFields: schema, now: now)
        }
        let card = String(repeating: "c", count: 50)
        let ok = try plan(MemberInfoUpdate(nameCard: card, custom: ["motto": bytes("carpe")]), of: nil, by: Cast.member)
        #expect(ok.events == [GroupEvent.Draft(
            kind: .memberInfoChanged, operatorID: Cast.member, targets: [Cast.member],
            changes: ["name_card": card, "custom.motto": "Y2FycGU="])])
        m.apply(ok)
        #expect(m.members[Cast.member]?.nameCard == card)
        #expect(try plan(MemberInfoUpdate(nameCard: card), of: Cast.member, by: Cast.member).isEmpty)
        let long = try #require(groupError {
            _ = try plan(MemberInfoUpdate(nameCard: card + "c"), of: nil, by: Cast.member)
        })
        #expect(long.metadata == ["field": "name_card", "limit": "50"])
        let title = try #require(groupError {
            _ = try plan(MemberInfoUpdate(custom: ["title": bytes("boss")]), of: nil, by: Cast.member)
        })
        #expect(title.reason == .permissionDenied)
        #expect(try !plan(MemberInfoUpdate(custom: ["title": bytes("boss")]), of: Cast.member, by: Cast.admin).isEmpty)
        let missing = try #require(groupError {
            _ = try plan(MemberInfoUpdate(nameCard: "x"), of: "stranger", by: Cast.owner)
        })
        #expect(missing.reason == .memberNotFound)
        let empty = try #require(groupError { _ = try plan(MemberInfoUpdate(), of: nil, by: Cast.member) })
        #expect(empty.metadata["field"] == "update_mask")
    }

    @Test("receive option and remark: the member's own, synced to their own devices only")
    func preferences() throws {
        var m = try fixture(.work)
        let option = try GroupRules.planReceiveOption(.receiveWithoutPush, in: m.group, by: m.op(Cast.member))
        #expect(option.updatedMembers.first?.receiveOption == .receiveWithoutPush)
        #expect(option.events == [GroupEvent.Draft(
            kind: .receiveOptionChanged, operatorID: Cast.member, targets: [Cast.member],
            changes: ["option": "receive_without_push"], recipient: .user(Cast.member))])
        m.apply(option)
        #expect(try GroupRules.planReceiveOption(.receiveWithoutPush, in: m.group, by: m.op(Cast.member)).isEmpty)

        let remark = try GroupRules.planRemark("team ✨", in: m.group, by: m.op(Cast.member))
        #expect(remark.remark == "team ✨")
        #expect(remark.events.first?.recipient == .user(Cast.member))
        #expect(remark.events.first?.kind == .remarkChanged)
        let removed = try GroupRules.planRemark("", in: m.group, by: m.op(Cast.member), current: "team")
        #expect(removed.remark == nil)
        #expect(removed.events.first?.changes == ["remark": ""])
        #expect(try GroupRules.planRemark("team", in: m.group, by: m.op(Cast.member), current: "team").events.isEmpty)
        #expect(try GroupRules.planRemark(String(repeating: "r", count: 64), in: m.group, by: m.op(Cast.member)).remark != nil)
        let long = try #require(groupError {
            _ = try GroupRules.planRemark(String(repeating: "r", count: 65), in: m.group, by: m.op(Cast.member))
        })
        #expect(long.metadata == ["field": "remark", "limit": "64"])
    }

    @Test("member list: filters by role, page size rule")
    func memberList() throws {
        let m = try fixture(.public)
        func listed(_ filter: MemberListFilter) -> [String] {
            m.members.values.sorted { $0.joinOrder < $1.joinOrder }.filter { filter.includes($0.role) }.map(\.userID)
        }
        #expect(listed(.owner) == [Cast.owner])
        #expect(listed(.admins) == [Cast.admin, Cast.admin2])
        #expect(listed(.ordinary) == [Cast.member, Cast.member2])
        #expect(listed(.all).count == 5)
        #expect(try GroupRules.checkMemberList(of: m.group, by: m.op(Cast.member), pageSize: 0, limits: limits) == 50)
        #expect(try GroupRules.checkMemberList(of: m.group, by: m.op(Cast.member), pageSize: 500, limits: limits) == 50)
        #expect(try GroupRules.checkMemberList(of: m.group, by: m.op(Cast.member), pageSize: 7, limits: limits) == 7)
        let negative = try #require(groupError {
            _ = try GroupRules.checkMemberList(of: m.group, by: m.op(Cast.member), pageSize: -1, limits: limits)
        })
        #expect(negative.metadata["field"] == "page_size")
    }
}
