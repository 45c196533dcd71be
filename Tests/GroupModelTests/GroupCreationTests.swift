import GroupModel
import Testing

@Suite("CreateGroup and DismissGroup rules")
struct GroupCreationTests {
    @Test("the creator becomes the owner; type defaults apply", arguments: GroupType.allCases)
    func creatorIsOwner(type: GroupType) throws {
        let p = try plan(request(type, id: "g1"))
        #expect(p.group.ownerID == "alice")
        #expect(p.group.id == "g1")
        #expect(p.group.appID == "app")
        #expect(!p.idWasGenerated)
        #expect(p.group.settings == type.preset.defaultSettings)
        #expect(p.group.maxMembers == AppLimits.defaults.maxMembers(for: type))
        #expect(p.members.map(\.userID) == ["alice"])
        #expect(p.members.first?.role == .owner)
        #expect(p.group.memberCount == 1)
        #expect(p.group.createdAt == now)
    }

    @Test("an empty id is generated")
    func generatedID() throws {
        let p = try plan(request(.public, id: ""))
        #expect(p.idWasGenerated)
        #expect(GroupID.isGenerated(p.group.id))
        let q = try plan(request(.public, id: nil))
        #expect(q.idWasGenerated)
    }

    @Test("a bad custom id is refused")
    func badID() throws {
        let error = try #require(groupError { _ = try plan(request(.work, id: "#bad")) })
        #expect(error.metadata["field"] == "group_id")
    }

    @Test("GROUP_CREATED lists the initial members, owner first")
    func createdEvent() throws {
        let p = try plan(request(.public, members: [InitialMember(userID: "bob"), InitialMember(userID: "carol", role: .admin)]))
        #expect(p.events.count == 1)
        let event = try #require(p.events.first)
        #expect(event.kind == .groupCreated)
        #expect(event.operatorID == "alice")
        #expect(event.targets == ["alice", "bob", "carol"])
        #expect(event.recipient == .group)
        #expect(event.changes["type"] == "Public")
        #expect(p.members.map(\.role) == [.owner, .member, .admin])
        #expect(p.members.map(\.joinOrder) == [1, 2, 3])
    }

    @Test("settings overrides the type allows are applied; fixed ones are refused")
    func overrides() throws {
        let p = try plan(request(.public, settings: .init(joinOption: .any, inviteeMustAccept: false)))
        #expect(p.group.settings.joinOption == .any)
        #expect(!p.group.settings.inviteeMustAccept)
        let error = try #require(groupError { _ = try plan(request(.work, settings: .init(joinOption: .any))) })
        #expect(error.code == .failedPrecondition)
        #expect(error.reason == .settingFixedByType)
        #expect(error.metadata["setting"] == "join_option")
    }

    @Test("max members: 0 takes the app limit, more than the limit is refused naming it")
    func maxMembers() throws {
        #expect(try plan(request(.work, maxMembers: 0)).group.maxMembers == 200)
        #expect(try plan(request(.work, maxMembers: 200)).group.maxMembers == 200)
        #expect(try plan(request(.work, maxMembers: 10)).group.maxMembers == 10)
        let error = try #require(groupError { _ = try plan(request(.work, maxMembers: 201)) })
        #expect(error.metadata == ["field": "max_members", "limit": "200"])
        #expect(try plan(request(.avChatRoom)).group.maxMembers == nil)
        #expect(try plan(request(.avChatRoom, maxMembers: 100_000)).group.maxMembers == 100_000)
        #expect(groupError { _ = try plan(request(.work, maxMembers: -1)) }?.metadata["field"] == "max_members")
    }

    @Test("initial members must fit in max members")
    func membersFit() throws {
        let three = ["b", "c", "d"].map { InitialMember(userID: $0) }
        #expect(groupError { _ = try plan(request(.work, members: Array(three.prefix(2)), maxMembers: 3)) } == nil)
        let error = try #require(groupError { _ = try plan(request(.work, members: three, maxMembers: 3)) })
        #expect(error.metadata == ["field": "members", "limit": "3"])
    }

    @Test("initial member roles must exist in the type and never be owner")
    func memberRoles() throws {
        let adminInWork = try #require(groupError {
            _ = try plan(request(.work, members: [InitialMember(userID: "bob", role: .admin)]))
        })
        #expect(adminInWork.metadata["field"] == "members[0].role")
        let owner = try #require(groupError {
            _ = try plan(request(.public, members: [InitialMember(userID: "bob", role: .owner)]))
        })
        #expect(owner.metadata["field"] == "members[0].role")
        #expect(groupError { _ = try plan(request(.meeting, members: [InitialMember(userID: "bob", role: .admin)])) } == nil)
    }

    @Test("duplicates are refused; the owner listed as a plain member is ignored")
    func duplicates() throws {
        let twice = try #require(groupError {
            _ = try plan(request(.work, members: [InitialMember(userID: "bob"), InitialMember(userID: "bob")]))
        })
        #expect(twice.metadata["field"] == "members[1].user_id")
        let p = try plan(request(.work, members: [InitialMember(userID: "alice"), InitialMember(userID: "bob")]))
        #expect(p.members.map(\.userID) == ["alice", "bob"])
        #expect(groupError {
            _ = try plan(request(.public, members: [InitialMember(userID: "alice", role: .admin)]))
        }?.metadata["field"] == "members[0].user_id")
        #expect(groupError { _ = try plan(request(.work, members: [InitialMember(userID: "")])) }?
            .metadata["field"] == "members[0].user_id")
    }

    @Test("AVChatRoom takes no initial members")
    func avChatRoomMembers() throws {
        let error = try #require(groupError {
            _ = try plan(request(.avChatRoom, members: [InitialMember(userID: "bob")]))
        })
        #expect(error.metadata["field"] == "members")
    }

    @Test("the backend names the owner; only AVChatRoom may have none", arguments: GroupType.allCases)
    func backendOwner(type: GroupType) throws {
        let named = try plan(request(type, ownerID: "olivia"), by: nil)
        #expect(named.group.ownerID == "olivia")
        #expect(named.events.first?.operatorID == nil)
        if type == .avChatRoom {
            let ownerless = try plan(request(type), by: nil)
            #expect(ownerless.group.ownerID == nil)
            #expect(ownerless.members.isEmpty)
        } else {
            #expect(groupError { _ = try plan(request(type), by: nil) }?.metadata["field"] == "owner_id")
        }
    }

    @Test("a user may not name another owner")
    func userNamesOwner() throws {
        let error = groupError { _ = try plan(request(.work, ownerID: "mallory")) }
        #expect(error?.reason == .adminTokenRequired && error?.code == .permissionDenied)
        #expect(error?.metadata["field"] == "owner_id")
        #expect(try plan(request(.work, ownerID: "alice")).group.ownerID == "alice")
    }

    @Test("dismissal produces GROUP_DISMISSED when allowed")
    func dismissal() throws {
        let pub = try plan(request(.public)).group
        let events = try GroupRules.planDismissal(of: pub, by: .owner, operatorID: "alice")
        #expect(events.map(\.kind) == [.groupDismissed])
        #expect(events.first?.operatorID == "alice")
        let work = try plan(request(.work)).group
        #expect(groupError { _ = try GroupRules.planDismissal(of: work, by: .owner, operatorID: "alice") }?
            .reason == .adminTokenRequired)
        #expect(try GroupRules.planDismissal(of: work, by: .backend, operatorID: nil).count == 1)
    }
}

@Suite("Small values")
struct ValueTests {
    @Test("timestamps")
    func timestamps() {
        let t = Timestamp(secondsSince1970: 10)
        #expect(t.millisecondsSince1970 == 10_000)
        #expect(t.adding(seconds: 5).secondsSince1970 == 15)
        #expect(Timestamp(millisecondsSince1970: -1).secondsSince1970 == -1)
        #expect(t < t.adding(milliseconds: 1))
    }

    @Test("the manual clock moves only when told")
    func manualClock() {
        let clock = ManualWallClock(Timestamp(secondsSince1970: 100))
        #expect(clock.now() == Timestamp(secondsSince1970: 100))
        clock.advance(seconds: 30)
        #expect(clock.now() == Timestamp(secondsSince1970: 130))
        #expect(SystemWallClock().now() > Timestamp(secondsSince1970: 1_600_000_000))
    }

    @Test("group mute modes and expiry")
    func groupMute() {
        let t = Timestamp(secondsSince1970: 100)
        let ordinary = GroupMuteState(mode: .ordinaryMembers, until: t.adding(seconds: 60))
        #expect(ordinary.mutes(.member, at: t))
        #expect(!ordinary.mutes(.admin, at: t))
        #expect(!ordinary.mutes(.member, at: t.adding(seconds: 60)))
        #expect(GroupMuteState(mode: .all, until: nil).mutes(.owner, at: t))
        #expect(GroupMuteState(mode: .roles([.admin]), until: nil).mutes(.admin, at: t))
        #expect(!GroupMuteState.unmuted.mutes(.member, at: t))
        let member = Member(userID: "u", role: .member, joinedAt: t, mutedUntil: t.adding(seconds: 120))
        #expect(member.isMuted(at: t))
        #expect(!member.isMuted(at: t.adding(seconds: 120)))
    }

    @Test("errors: codes compare, description names code and reason, cause is not equality")
    func errors() {
        struct Boom: Error {}
        let a = GroupError(code: .notFound, reason: .groupNotFound, message: "x", metadata: ["k": "v"])
        var b = a
        b.cause = Boom()
        #expect(a == b)
        #expect(a.code != GroupError.Code.internal)
        #expect(a.description == "notFound/GROUP_NOT_FOUND: x [k=v]")
        #expect(GroupError.Reason("CUSTOM").rawValue == "CUSTOM")
        #expect(GroupEvent.Kind.groupCreated.isTip)
        #expect(!GroupEvent.Kind.joinApplicationReceived.isTip)
    }
}
