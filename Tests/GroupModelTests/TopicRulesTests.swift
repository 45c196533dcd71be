import GroupModel
import Testing

private let t0 = Timestamp(millisecondsSince1970: 1_700_000_000_000)

/// A Community `c` owned by `o` and a topic of it, in its community's view.
private func communityAndTopic(type: GroupType = .community) throws -> (community: Group, topic: Group) {
    let community = try plan(request(type, id: "c", name: "community"), by: "o").group
    var stored = community
    stored.id = GroupID.generateTopicID(in: "c")
    stored.name = "general"
    return (community, Group.topic(stored, in: community))
}

private func user(_ id: String, _ role: MemberRole) -> GroupOperator {
    .user(id, membership: Member(userID: id, role: role, joinedAt: t0))
}

@Suite("Topics: ids, what applies to a topic, who manages topics, mutes")
struct TopicRulesTests {
    @Test("topic ids: the community's id, the marker, 12 generated characters; custom ids may not hold the marker")
    func ids() throws {
        let id = GroupID.generateTopicID(in: "team-1")
        #expect(id.hasPrefix("team-1@TOPIC#_") && id.utf8.count == "team-1@TOPIC#_".utf8.count + 12)
        #expect(GroupID.communityID(ofTopic: id) == "team-1" && GroupID.isTopic(id))
        #expect(GroupID.communityID(ofTopic: GroupID.generateTopicID(in: "@TGS#ABCDEFGHJKMN")) == "@TGS#ABCDEFGHJKMN")
        for notTopic in ["team-1", "@TOPIC#_ABC", "team-1@TOPIC#_", "team@TOPIC#", ""] {
            #expect(!GroupID.isTopic(notTopic) && GroupID.communityID(ofTopic: notTopic) == nil, "\(notTopic)")
        }
        let refused = groupError { try GroupID.validateCustom("a@TOPIC#_b") }
        #expect(refused?.reason == .invalidArgument && refused?.metadata["field"] == "group_id")
        #expect(groupError { try GroupID.validateCustom("a@TOPIC#b") } == nil)
    }

    @Test("a topic's view: its own profile, mute and sequence; the community's type, settings, owner, counts and mute")
    func view() throws {
        var (community, topic) = try communityAndTopic()
        community.mute = GroupMuteState(mode: .all, until: nil)
        community.memberCount = 7
        topic.mute = GroupMuteState(mode: .ordinaryMembers, until: nil)
        topic.latestSequence = 3
        let merged = Group.topic(topic, in: community)
        #expect(merged.isTopic && merged.parentID == "c" && merged.name == "general")
        #expect(merged.type == .community && merged.settings == community.settings && merged.ownerID == "o")
        #expect(merged.memberCount == 7 && merged.latestSequence == 3)
        #expect(merged.mute.mode == .ordinaryMembers && merged.communityMute.mode == .all)
    }

    @Test("on a topic, what acts on the conversation is decided as on its community; the rest is NOT_ALLOWED_ON_TOPIC")
    func appliesToTopic() throws {
        let (community, topic) = try communityAndTopic()
        let conversation: [GroupAction] = [
            .viewProfile, .sendMessage, .mentionAll, .recallMessage(own: true), .editMessage(own: true), .readHistory,
            .markRead, .pinMessage, .readReceipts, .react, .muteGroup,
        ]
        for action in conversation {
            for actor in ActingRole.allCases {
                #expect(
                    GroupRules.authorize(action, in: topic, actor: actor)
                        == GroupRules.authorize(action, in: community, actor: actor), "\(action) \(actor)")
            }
        }
        let others: [GroupAction] = [
            .updateProfile([.name]), .updateSettings([.joinOption]), .dismiss, .transferOwnership, .invite, .join, .quit,
            .kick(target: .member), .setRole(target: .member, to: .admin), .muteMember(target: .member),
            .ban(target: .member), .manageBans, .updateMuteBypass, .editMemberInfo(.own), .setOwnPreferences,
            .listMembers, .viewMemberInfo, .handleApplication, .sendCustomNotification, .importData, .readAttributes,
            .writeAttributes, .manageInviteLinks, .joinByInviteLink, .manageTopics, .managePermissionGroups, .revoke,
            .setMaxMembers,
        ]
        for action in others {
            #expect(!action.appliesToTopic)
            for actor in ActingRole.allCases {
                let error = GroupRules.authorize(action, in: topic, actor: actor).error
                #expect(error?.reason == .notAllowedOnTopic && error?.metadata["community_id"] == "c", "\(action) \(actor)")
            }
        }
    }

    @Test("manage topics: the owner, admins and the backend of a community; members, non-members and other types refused",
          arguments: GroupType.allCases)
    func manageTopics(type: GroupType) throws {
        let community = try plan(request(type, id: "c"), by: type == .avChatRoom ? nil : "o").group
        let cells: [(ActingRole, GroupError.Reason?)] = [
            (.owner, nil), (.admin, nil), (.backend, nil), (.member, .permissionDenied), (.nonMember, .notAMember),
        ]
        for (actor, expected) in cells {
            let decision = GroupRules.authorize(.manageTopics, in: community, actor: actor)
            if type == .community {
                #expect(decision.error?.reason == expected, "\(actor)")
            } else if actor == .nonMember && type == .work {
                #expect(decision.error?.reason == .groupNotFound)
            } else {
                #expect(decision.error?.reason == .topicsNotSupported && decision.error?.metadata["group_type"] == type.name)
            }
        }
    }

    @Test("creation: checked as a group profile, counted against the app's limit, refused to members")
    func creation() throws {
        let (community, _) = try communityAndTopic()
        var limits = AppLimits.defaults
        limits.maxTopicsPerCommunity = 2
        let made = try GroupRules.planTopicCreation(
            TopicCreation(name: "general", introduction: "talk"), id: "c@TOPIC#_ABCDEFGHJKMN", in: community,
            by: user("o", .owner), topicCount: 1, limits: limits, customFields: nil, now: t0)
        #expect(made.topic.name == "general" && made.topic.introduction == "talk" && made.topic.parentID == "c")
        #expect(made.event.kind == .topicCreated && made.event.operatorID == "o")
        let full = groupError {
            _ = try GroupRules.planTopicCreation(
                TopicCreation(name: "more"), id: "c@TOPIC#_ABCDEFGHJKMP", in: community, by: user("o", .owner),
                topicCount: 2, limits: limits, customFields: nil, now: t0)
        }
        #expect(full?.reason == .tooManyTopics && full?.metadata["limit"] == "2")
        let unnamed = groupError {
            _ = try GroupRules.planTopicCreation(
                TopicCreation(name: ""), id: "c@TOPIC#_ABCDEFGHJKMQ", in: community, by: user("a", .admin),
                topicCount: 0, limits: limits, customFields: nil, now: t0)
        }
        #expect(unnamed?.reason == .invalidArgument && unnamed?.metadata["field"] == "name")
        let member = groupError {
            _ = try GroupRules.planTopicCreation(
                TopicCreation(name: "mine"), id: "c@TOPIC#_ABCDEFGHJKMR", in: community, by: user("m", .member),
                topicCount: 0, limits: limits, customFields: nil, now: t0)
        }
        #expect(member?.reason == .permissionDenied)
    }

    @Test("an update emits TOPIC_UPDATED with what changed, nothing when nothing changed")
    func update() throws {
        let (community, topic) = try communityAndTopic()
        let renamed = try GroupRules.planTopicUpdate(
            ProfileUpdate(name: "news", introduction: ""), of: topic, in: community, by: user("a", .admin),
            limits: .defaults, customFields: nil, now: t0)
        #expect(renamed.topic.name == "news" && renamed.event?.kind == .topicUpdated)
        let same = try GroupRules.planTopicUpdate(
            ProfileUpdate(name: "general"), of: topic, in: community, by: user("a", .admin), limits: .defaults,
            customFields: nil, now: t0)
        #expect(same.event == nil)
        let refused = groupError {
            _ = try GroupRules.planTopicUpdate(
                ProfileUpdate(name: "x"), of: topic, in: community, by: user("m", .member), limits: .defaults,
                customFields: nil, now: t0)
        }
        #expect(refused?.reason == .permissionDenied)
        #expect(try GroupRules.planTopicDeletion(topic.id, in: community, by: .backend).kind == .topicDeleted)
    }

    @Test("a topic's own mute and its community's mute both silence a send in the topic; the bypass list holds for both")
    func mutes() throws {
        var (community, topic) = try communityAndTopic()
        let member = user("m", .member)
        #expect(try GroupRules.checkSend(in: topic, by: member, now: t0) == "")
        topic.mute = GroupMuteState(mode: .ordinaryMembers, until: nil)
        #expect(groupError { _ = try GroupRules.checkSend(in: topic, by: member, now: t0) }?.reason == .groupMuted)
        #expect(try GroupRules.checkSend(in: topic, by: user("a", .admin), now: t0) == "")
        topic.mute = .unmuted
        community.mute = GroupMuteState(mode: .all, until: nil)
        topic = Group.topic(topic, in: community)
        let silenced = groupError { _ = try GroupRules.checkSend(in: topic, by: user("a", .admin), now: t0) }
        #expect(silenced?.reason == .groupMuted && silenced?.metadata["mode"] == "all")
        community.muteBypass = ["a"]
        topic = Group.topic(topic, in: community)
        #expect(try GroupRules.checkSend(in: topic, by: user("a", .admin), now: t0) == "")
        // Ended mutes apply no more.
        community.mute = GroupMuteState(mode: .all, until: t0)
        community.muteBypass = []
        #expect(try GroupRules.checkSend(in: Group.topic(topic, in: community), by: member, now: t0) == "")
    }
}
