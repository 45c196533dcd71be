import GroupModel
import Testing

private let t0 = Timestamp(millisecondsSince1970: 1_700_000_000_000)
private let topicA = "c@TOPIC#_AAAAAAAAAAAA"
private let topicB = "c@TOPIC#_BBBBBBBBBBBB"

/// A Community `c` owned by `o` with `groups` as its permission groups, and its topic A (private
/// when `private`).
private func makeCommunity(
    _ groups: [PermissionGroup] = [], settings: ((inout GroupSettings) -> Void)? = nil, private isPrivate: Bool = false
) throws -> (community: Group, topic: Group) {
    var community = try plan(request(.community, id: "c", name: "community"), by: "o").group
    community.permissionGroups = groups
    settings?(&community.settings)
    var stored = community
    stored.id = topicA
    stored.name = "general"
    stored.permissionGroups = []
    stored.isPrivate = isPrivate
    return (community, Group.topic(stored, in: community))
}

private func group(_ id: String, _ permissions: PermissionSet = [], topics: [String: PermissionSet] = [:]) -> PermissionGroup {
    PermissionGroup(id: id, name: id, permissions: permissions, topicPermissions: topics, createdAt: t0, updatedAt: t0)
}

private func user(_ id: String, _ role: MemberRole, in groups: [String] = []) -> GroupOperator {
    var member = Member(userID: id, role: role, joinedAt: t0)
    member.permissionGroups = groups
    return .user(id, membership: member)
}

/// What an ordinary member of a Community holds by role under the type's default settings.
private let memberDefaults: PermissionSet = [.invite, .sendMessage]

@Suite("Permission groups: grants decided by the permission function, topic defaults, plans")
struct PermissionGroupRulesTests {
    /// `view_topic` is decided by a topic's visibility, not by an action (PrivateTopicRulesTests).
    static let actionPermissions = Permission.allCases.filter { $0 != .viewTopic }

    @Test("an ordinary member: each permission without a grant, with a community grant, with this topic's and another topic's",
          arguments: actionPermissions)
    func memberCells(permission: Permission) throws {
        let action = GroupRules.representativeAction(of: permission)
        let grants: [(name: String, group: PermissionGroup, community: Bool, topic: Bool)] = [
            ("none", group("PG1"), memberDefaults.contains(permission), memberDefaults.contains(permission)),
            ("community", group("PG1", PermissionSet(permission)), true, true),
            ("this topic", group("PG1", topics: [topicA: PermissionSet(permission)]), memberDefaults.contains(permission), true),
            ("other topic", group("PG1", topics: [topicB: PermissionSet(permission)]),
             memberDefaults.contains(permission), memberDefaults.contains(permission)),
        ]
        for grant in grants {
            let (community, topic) = try makeCommunity([grant.group])
            let op = user("m", .member, in: ["PG1"])
            let onCommunity = GroupRules.authorize(action, in: community, by: op)
            #expect(onCommunity.isAllowed == grant.community, "\(permission) \(grant.name) on the community")
            if !onCommunity.isAllowed { #expect(onCommunity.error?.reason == .permissionDenied) }
            let onTopic = GroupRules.authorize(action, in: topic, by: op)
            if action.appliesToTopic {
                #expect(onTopic.isAllowed == grant.topic, "\(permission) \(grant.name) on the topic")
            } else {
                #expect(onTopic.error?.reason == .notAllowedOnTopic, "\(permission) \(grant.name) on the topic")
            }
            // A member not in the group gets nothing from it.
            let outsider = GroupRules.authorize(action, in: community, by: user("n", .member))
            #expect(outsider.isAllowed == memberDefaults.contains(permission), "\(permission) outsider")
        }
    }

    @Test("the owner and the backend hold every permission; a non-member none; the role decision stands where it allows",
          arguments: actionPermissions)
    func otherRoles(permission: Permission) throws {
        let action = GroupRules.representativeAction(of: permission)
        let (community, _) = try makeCommunity([group("PG1", .all)])
        #expect(GroupRules.authorize(action, in: community, by: user("o", .owner)).isAllowed)
        #expect(GroupRules.authorize(action, in: community, by: .backend).isAllowed)
        #expect(GroupRules.authorize(action, in: community, by: user("a", .admin)).isAllowed)
        let stranger = GroupOperator.user("x", membership: nil)
        let refused = GroupRules.authorize(action, in: community, by: stranger)
        #expect(refused.error?.reason == .notAMember)
        #expect(GroupRules.effectivePermissions(in: community, by: user("o", .owner)) == .all)
        #expect(GroupRules.effectivePermissions(in: community, by: user("m", .member, in: ["PG1"])) == .all)
    }

    @Test("an admin gains what the settings leave to the owner only")
    func adminGrant() throws {
        let narrowed: (inout GroupSettings) -> Void = { $0.pinPermission = .owner; $0.mentionAllPermission = .owner }
        let (without, _) = try makeCommunity([group("PG1", .pinMessages)], settings: narrowed)
        #expect(GroupRules.authorize(.pinMessage, in: without, by: user("a", .admin)).error?.reason == .permissionDenied)
        #expect(GroupRules.authorize(.pinMessage, in: without, by: user("a", .admin, in: ["PG1"])).isAllowed)
        #expect(!GroupRules.authorize(.mentionAll, in: without, by: user("a", .admin, in: ["PG1"])).isAllowed)
    }

    @Test("a grant acts on ordinary members and non-members only, never on admins or the owner")
    func ranks() throws {
        let (community, _) = try makeCommunity([group("PG1", [.manageMembers, .muteMembers, .banMembers])])
        let op = user("m", .member, in: ["PG1"])
        #expect(GroupRules.authorize(.kick(target: .member), in: community, by: op).isAllowed)
        #expect(!GroupRules.authorize(.kick(target: .admin), in: community, by: op).isAllowed)
        #expect(GroupRules.authorize(.kick(target: .owner), in: community, by: op).error?.reason == .targetIsOwner)
        #expect(GroupRules.authorize(.muteMember(target: .member), in: community, by: op).isAllowed)
        #expect(!GroupRules.authorize(.muteMember(target: .admin), in: community, by: op).isAllowed)
        #expect(GroupRules.authorize(.ban(target: nil), in: community, by: op).isAllowed)
        #expect(!GroupRules.authorize(.ban(target: .admin), in: community, by: op).isAllowed)
        #expect(GroupRules.authorize(.editMemberInfo(.other(.member)), in: community, by: op).isAllowed)
        #expect(!GroupRules.authorize(.editMemberInfo(.other(.admin)), in: community, by: op).isAllowed)
        // Never granted: roles, settings, ownership, dismissal.
        for action: GroupAction in [.setRole(target: .member, to: .admin), .updateSettings([.joinOption]), .transferOwnership, .dismiss] {
            let (all, _) = try makeCommunity([group("PG1", .all)])
            #expect(!GroupRules.authorize(action, in: all, by: op).isAllowed, "\(action)")
        }
    }

    @Test("topic defaults: everyone's topic value replaces an ordinary member's send, @all and pin there")
    func topicDefaults() throws {
        let readOnly = group(PermissionGroup.everyoneID, topics: [topicA: []])
        let mentionOnly = group(PermissionGroup.everyoneID, topics: [topicA: [.mentionAll]])
        var (community, topic) = try makeCommunity([readOnly])
        #expect(topic.topicDefaults == [])
        let refused = GroupRules.authorize(.sendMessage, in: topic, by: user("m", .member))
        #expect(refused.error?.reason == .permissionDenied && refused.error?.metadata["permission"] == "send_message")
        #expect(GroupRules.authorize(.sendMessage, in: community, by: user("m", .member)).isAllowed)
        #expect(GroupRules.authorize(.sendMessage, in: topic, by: user("a", .admin)).isAllowed)
        (community, topic) = try makeCommunity([readOnly, group("PG1", topics: [topicA: .sendMessage])])
        #expect(GroupRules.authorize(.sendMessage, in: topic, by: user("m", .member, in: ["PG1"])).isAllowed)
        (community, topic) = try makeCommunity([readOnly, group("PG1", .sendMessage)])
        #expect(GroupRules.authorize(.sendMessage, in: topic, by: user("m", .member, in: ["PG1"])).isAllowed)
        (community, topic) = try makeCommunity([mentionOnly])
        #expect(GroupRules.authorize(.mentionAll, in: topic, by: user("m", .member)).isAllowed)
        #expect(!GroupRules.authorize(.mentionAll, in: community, by: user("m", .member)).isAllowed)
        #expect(!GroupRules.authorize(.sendMessage, in: topic, by: user("m", .member)).isAllowed)
        // view_topic: the member sees this public topic.
        #expect(GroupRules.effectivePermissions(in: topic, by: user("m", .member)) == [.invite, .mentionAll, .viewTopic])
        // everyone's community value is every member's.
        (community, topic) = try makeCommunity([group(PermissionGroup.everyoneID, .pinMessages)])
        #expect(GroupRules.authorize(.pinMessage, in: topic, by: user("m", .member)).isAllowed)
        #expect(GroupRules.authorize(.pinMessage, in: community, by: user("m", .member)).isAllowed)
    }

    @Test("a topic's manage value: UpdateTopic and DeleteTopic of that topic, not of another, nor CreateTopic")
    func topicManagement() throws {
        let (community, topic) = try makeCommunity([group("PG1", topics: [topicA: .manageTopics])])
        let op = user("m", .member, in: ["PG1"])
        #expect(throws: Never.self) { try GroupRules.planTopicDeletion(topicA, in: community, by: op) }
        #expect(groupError { _ = try GroupRules.planTopicDeletion(topicB, in: community, by: op) }?.reason == .permissionDenied)
        let update = ProfileUpdate(name: "renamed")
        let updated = try GroupRules.planTopicUpdate(
            update, of: topic, in: community, by: op, limits: .defaults, customFields: nil, now: t0)
        #expect(updated.topic.name == "renamed")
        let create = groupError {
            _ = try GroupRules.planTopicCreation(
                TopicCreation(name: "new"), id: topicB, in: community, by: op, topicCount: 1, limits: .defaults,
                customFields: nil, now: t0)
        }
        #expect(create?.reason == .permissionDenied)
        #expect(GroupRules.effectivePermissions(in: topic, by: op).contains(.manageTopics))
        #expect(!GroupRules.effectivePermissions(in: community, by: op).contains(.manageTopics))
    }

    @Test("a deleted group's id in a member row grants nothing; other types have no permission groups")
    func staleAndTypes() throws {
        let (community, _) = try makeCommunity([group("PG1", .pinMessages)])
        #expect(!GroupRules.authorize(.pinMessage, in: community, by: user("m", .member, in: ["PG9"])).isAllowed)
        let work = try plan(request(.work, id: "w", name: "work"), by: "o").group
        let error = groupError {
            _ = try GroupRules.planPermissionGroupCreation(
                PermissionGroupUpdate(name: "x"), id: "PG1", in: work, by: user("o", .owner), liveTopics: [],
                limits: .defaults, now: t0)
        }
        #expect(error?.reason == .permissionGroupsNotSupported && error?.metadata["group_type"] == "Work")
        #expect(groupError { try GroupRules.checkPermissionGroupsSupported(work) }?.reason == .permissionGroupsNotSupported)
    }

    @Test("creation: the group, its event, the limit, the fields at fault, and no permission the creator lacks")
    func creation() throws {
        let (community, _) = try makeCommunity()
        let owner = user("o", .owner)
        let made = try GroupRules.planPermissionGroupCreation(
            PermissionGroupUpdate(name: "mods", customData: [1, 2], permissions: [.muteMembers, .pinMessages],
                                  topicPermissions: [topicA: .sendMessage]),
            id: "PG1", in: community, by: owner, liveTopics: [topicA], limits: .defaults, now: t0)
        #expect(made.change.group.permissionGroups == [made.group])
        #expect(made.group.topicPermissions == [topicA: .sendMessage] && made.group.customData == [1, 2])
        let event = try #require(made.change.events.first)
        #expect(event.kind == .permissionGroupCreated && event.changes["permission_group_id"] == "PG1")
        #expect(event.changes["permissions"] == "mute_members,pin_messages")
        #expect(event.changes["topic_permissions"] == "\(topicA)=send_message")

        func refusal(_ request: PermissionGroupUpdate, by op: GroupOperator = owner, in group: Group? = nil, limits: AppLimits = .defaults) -> GroupError? {
            groupError {
                _ = try GroupRules.planPermissionGroupCreation(
                    request, id: "PG2", in: group ?? community, by: op, liveTopics: [topicA], limits: limits, now: t0)
            }
        }
        #expect(refusal(PermissionGroupUpdate(name: ""))?.metadata["field"] == "name")
        #expect(refusal(PermissionGroupUpdate(name: String(repeating: "n", count: 500)))?.metadata["field"] == "name")
        #expect(refusal(PermissionGroupUpdate(name: "x", customData: Array(repeating: 0, count: 1025)))?.metadata["field"] == "custom_data")
        let unknownTopic = refusal(PermissionGroupUpdate(name: "x", topicPermissions: [topicB: .sendMessage]))
        #expect(unknownTopic?.reason == .groupNotFound && unknownTopic?.metadata["topic_id"] == topicB)
        let notTopic = refusal(PermissionGroupUpdate(name: "x", topicPermissions: [topicA: .banMembers]))
        #expect(notTopic?.reason == .invalidArgument && notTopic?.metadata["field"] == "topic_permissions")
        var limits = AppLimits.defaults
        limits.maxPermissionGroupsPerCommunity = 1
        #expect(refusal(PermissionGroupUpdate(name: "x"), in: made.change.group, limits: limits)?.reason == .tooManyPermissionGroups)
        // A member granted the management grants only what they hold.
        let (managed, _) = try makeCommunity([group("PGM", .managePermissionGroups)])
        let manager = user("m", .member, in: ["PGM"])
        let escalation = groupError {
            _ = try GroupRules.planPermissionGroupCreation(
                PermissionGroupUpdate(name: "x", permissions: .banMembers), id: "PG2", in: managed, by: manager,
                liveTopics: [], limits: .defaults, now: t0)
        }
        #expect(escalation?.reason == .permissionDenied && escalation?.metadata["permission"] == "ban_members")
        #expect(throws: Never.self) {
            _ = try GroupRules.planPermissionGroupCreation(
                PermissionGroupUpdate(name: "x", permissions: .sendMessage), id: "PG2", in: managed, by: manager,
                liveTopics: [], limits: .defaults, now: t0)
        }
        #expect(refusal(PermissionGroupUpdate(name: "x"), by: user("m", .member))?.reason == .permissionDenied)
    }

    @Test("update: the changed fields only, everyone created at its first update, deleted topics' values dropped")
    func update() throws {
        let stored = group("PG1", .pinMessages, topics: [topicA: .sendMessage, topicB: .sendMessage])
        let (community, _) = try makeCommunity([stored])
        let owner = user("o", .owner)
        let renamed = try GroupRules.planPermissionGroupUpdate(
            PermissionGroupUpdate(name: "pins"), id: "PG1", in: community, by: owner, liveTopics: [topicA],
            limits: .defaults, now: Timestamp(millisecondsSince1970: t0.millisecondsSince1970 + 5))
        #expect(renamed.group.name == "pins" && renamed.group.topicPermissions == [topicA: .sendMessage])
        #expect(renamed.change.events.map(\.changes) == [["permission_group_id": "PG1", "name": "pins"]])
        let same = try GroupRules.planPermissionGroupUpdate(
            PermissionGroupUpdate(permissions: .pinMessages), id: "PG1", in: community, by: owner,
            liveTopics: [topicA, topicB], limits: .defaults, now: t0)
        #expect(same.change.isEmpty)
        // In everyone, an empty topic value is kept: the topic's defaults hold nothing.
        let readOnly = try GroupRules.planPermissionGroupUpdate(
            PermissionGroupUpdate(topicPermissions: [topicA: []]), id: PermissionGroup.everyoneID,
            in: community, by: owner, liveTopics: [topicA], limits: .defaults, now: t0)
        #expect(readOnly.group.topicPermissions == [topicA: []])
        #expect(readOnly.change.events.first?.changes["topic_permissions"] == "\(topicA)=")
        // In another group an empty value removes the topic's; removing a value it does not hold changes nothing.
        let cleared = try GroupRules.planPermissionGroupUpdate(
            PermissionGroupUpdate(topicPermissions: [topicA: []]), id: "PG1", in: community, by: owner,
            liveTopics: [topicA, topicB], limits: .defaults, now: t0)
        #expect(cleared.group.topicPermissions == [topicB: .sendMessage])
        let absent = try GroupRules.planPermissionGroupUpdate(
            PermissionGroupUpdate(topicPermissions: [topicA: nil]), id: PermissionGroup.everyoneID,
            in: community, by: owner, liveTopics: [topicA], limits: .defaults, now: t0)
        #expect(absent.change.isEmpty)
        let defaults = try GroupRules.planPermissionGroupUpdate(
            PermissionGroupUpdate(permissions: .pinMessages), id: PermissionGroup.everyoneID, in: community, by: owner,
            liveTopics: [topicA], limits: .defaults, now: t0)
        #expect(defaults.change.group.permissionGroup(PermissionGroup.everyoneID)?.permissions == .pinMessages)
        let name = groupError {
            _ = try GroupRules.planPermissionGroupUpdate(
                PermissionGroupUpdate(name: "all"), id: PermissionGroup.everyoneID, in: community, by: owner,
                liveTopics: [], limits: .defaults, now: t0)
        }
        #expect(name?.metadata["field"] == "name")
        let missing = groupError {
            _ = try GroupRules.planPermissionGroupUpdate(
                PermissionGroupUpdate(name: "x"), id: "PG9", in: community, by: owner, liveTopics: [], limits: .defaults, now: t0)
        }
        #expect(missing?.reason == .permissionGroupNotFound && missing?.code == .notFound)
        #expect(groupError {
            _ = try GroupRules.planPermissionGroupUpdate(
                PermissionGroupUpdate(), id: "PG1", in: community, by: owner, liveTopics: [], limits: .defaults, now: t0)
        }?.metadata["field"] == "update_mask")
    }

    @Test("deletion: the group goes, everyone resets, a stronger group is not the manager's to delete")
    func deletion() throws {
        let (community, _) = try makeCommunity([group("PG1", .banMembers), group("PGM", .managePermissionGroups)])
        let gone = try GroupRules.planPermissionGroupDeletion("PG1", in: community, by: user("o", .owner))
        #expect(gone.group.permissionGroups.map(\.id) == ["PGM"] && gone.events.first?.kind == .permissionGroupDeleted)
        #expect(try GroupRules.planPermissionGroupDeletion(PermissionGroup.everyoneID, in: community, by: user("o", .owner)).isEmpty)
        let stronger = groupError { _ = try GroupRules.planPermissionGroupDeletion("PG1", in: community, by: user("m", .member, in: ["PGM"])) }
        #expect(stronger?.reason == .permissionDenied && stronger?.metadata["permission"] == "ban_members")
        #expect(groupError { _ = try GroupRules.planPermissionGroupDeletion("PG9", in: community, by: user("o", .owner)) }?.reason
            == .permissionGroupNotFound)
    }

    @Test("members: per-user results, the per-member limit, everyone refused, one event for those whose groups changed")
    func members() throws {
        let (community, _) = try makeCommunity([group("PG1", .pinMessages), group("PG2"), group("PG3")])
        var limits = AppLimits.defaults
        limits.maxPermissionGroupsPerMember = 2
        var full = Member(userID: "full", role: .member, joinedAt: t0)
        full.permissionGroups = ["PG2", "PG3"]
        var stale = Member(userID: "stale", role: .member, joinedAt: t0)
        stale.permissionGroups = ["PG1", "PG9"]
        let memberships = [
            "a": Member(userID: "a", role: .member, joinedAt: t0), "full": full, "stale": stale,
        ]
        let added = try GroupRules.planPermissionGroupMembers(
            ["a", "ghost", "full", "stale", "a", ""], adding: true, to: "PG1", in: community, by: user("o", .owner),
            memberships: memberships, limits: limits)
        let outcomes = added.results.map { "\($0.userID):\($0.outcome)" }
        #expect(added.results.count == 6)
        #expect(added.results[1].outcome == .notMember)
        #expect(added.results[2].outcome.error?.reason == .tooManyPermissionGroupsPerMember, "\(outcomes)")
        if case .invalid = added.results[4].outcome {} else { Issue.record("a repeated id is invalid: \(outcomes)") }
        // `stale` was already in: its stale id is dropped, and no event names it.
        #expect(added.change.updatedMembers.map(\.userID) == ["a", "stale"])
        #expect(added.change.updatedMembers.map(\.permissionGroups) == [["PG1"], ["PG1"]])
        #expect(added.change.events.map(\.targets) == [["a"]])
        #expect(added.change.events.first?.changes == ["permission_group_id": "PG1", "change": "added"])
        let removed = try GroupRules.planPermissionGroupMembers(
            ["stale"], adding: false, to: "PG1", in: community, by: user("o", .owner), memberships: memberships, limits: limits)
        #expect(removed.change.updatedMembers.map(\.permissionGroups) == [[]])
        #expect(removed.change.events.first?.kind == .memberPermissionsChanged)
        let everyone = groupError {
            _ = try GroupRules.planPermissionGroupMembers(
                ["a"], adding: true, to: PermissionGroup.everyoneID, in: community, by: user("o", .owner),
                memberships: memberships, limits: limits)
        }
        #expect(everyone?.reason == .invalidArgument && everyone?.metadata["field"] == "permission_group_id")
        let manager = groupError {
            _ = try GroupRules.planPermissionGroupMembers(
                ["a"], adding: true, to: "PG1", in: community, by: user("m", .member), memberships: memberships, limits: limits)
        }
        #expect(manager?.reason == .permissionDenied)
    }
}

@Suite("Private topics: who sees them (view_topic), the calls that name them, their events' audience")
struct PrivateTopicRulesTests {
    /// Where a grant of `view_topic` comes from, and whether it shows topic A to a member of PG1.
    static let grants: [(name: String, groups: [PermissionGroup], sees: Bool, audience: Set<String>?)] = [
        ("none", [group("PG1")], false, []),
        ("a community value", [group("PG1", .viewTopic)], true, ["PG1"]),
        ("a value for this topic", [group("PG1", topics: [topicA: .viewTopic])], true, ["PG1"]),
        ("a value for another topic", [group("PG1", topics: [topicB: .viewTopic])], false, []),
        ("another group's community value", [group("PG1"), group("PG2", .viewTopic)], false, ["PG2"]),
        ("everyone's value for this topic", [group(PermissionGroup.everyoneID, topics: [topicA: [.viewTopic, .sendMessage]])],
         true, nil),
        ("everyone's community value", [group(PermissionGroup.everyoneID, .viewTopic)], true, nil),
    ]

    @Test("each role and each source of view_topic, on a private and on a public topic")
    func cells() throws {
        for grant in Self.grants {
            let (community, topic) = try makeCommunity(grant.groups, private: true)
            let member = user("m", .member, in: ["PG1"])
            #expect(topic.isVisible(to: member) == grant.sees, "\(grant.name): member")
            #expect(topic.audience == grant.audience, "\(grant.name): audience")
            #expect(Group.audience(topic.audience, admits: .member, inGroups: ["PG1"]) == grant.sees, "\(grant.name)")
            for op in [user("o", .owner), user("a", .admin), GroupOperator.backend] {
                #expect(topic.isVisible(to: op), "\(grant.name): \(op)")
                #expect(GroupRules.authorize(.sendMessage, in: topic, by: op).isAllowed, "\(grant.name): \(op)")
            }
            #expect(Group.audience(topic.audience, admits: .admin, inGroups: []))
            #expect(Group.audience(topic.audience, admits: .owner, inGroups: []))
            #expect(!topic.isVisible(to: .user("x", membership: nil)), "\(grant.name): non-member")
            // Every call on the topic answers as for a topic that does not exist.
            for action in [GroupAction.sendMessage, .readHistory, .markRead, .react, .pinMessage, .readReceipts] {
                let decision = GroupRules.authorize(action, in: topic, by: member)
                if grant.sees {
                    #expect(decision.error?.reason != .groupNotFound, "\(grant.name): \(action)")
                } else {
                    #expect(decision.error?.reason == .groupNotFound && decision.error?.code == .notFound,
                            "\(grant.name): \(action)")
                }
            }
            let held = GroupRules.effectivePermissions(in: topic, by: member)
            #expect(held.contains(.viewTopic) == grant.sees, "\(grant.name)")
            if !grant.sees { #expect(held.isEmpty, "\(grant.name): nothing in a topic not seen") }
            // The community itself stays every member's.
            #expect(GroupRules.authorize(.sendMessage, in: community, by: member).isAllowed)
            // A public topic: every member sees it, whatever the grants.
            let (_, open) = try makeCommunity(grant.groups, private: false)
            #expect(open.isVisible(to: member) && open.audience == nil && open.isVisible(to: .user("x", membership: nil)))
        }
    }

    @Test("view_topic on the community: the owner, admins and the backend hold it; a member by a community value")
    func communityValue() throws {
        let (community, _) = try makeCommunity([group("PG1", .viewTopic), group("PG2", topics: [topicA: .viewTopic])], private: true)
        for op in [user("o", .owner), user("a", .admin), GroupOperator.backend] {
            #expect(GroupRules.effectivePermissions(in: community, by: op).contains(.viewTopic))
        }
        #expect(GroupRules.effectivePermissions(in: community, by: user("m", .member, in: ["PG1"])).contains(.viewTopic))
        #expect(!GroupRules.effectivePermissions(in: community, by: user("m", .member, in: ["PG2"])).contains(.viewTopic))
        #expect(!GroupRules.effectivePermissions(in: community, by: user("m", .member)).contains(.viewTopic))
        #expect(!GroupRules.effectivePermissions(in: community, by: .user("x", membership: nil)).contains(.viewTopic))
        #expect(Permission.topicPermissions.contains(.viewTopic) && !Permission.topicDefaults.contains(.viewTopic))
    }

    @Test("creation and updates carry the topic's privacy; a manager who does not see it finds no topic")
    func plans() throws {
        let (community, topic) = try makeCommunity([group("PG1", .manageTopics)], private: true)
        let made = try GroupRules.planTopicCreation(
            TopicCreation(name: "secret", isPrivate: true), id: "c@TOPIC#_ABCDEFGHJKMN", in: community,
            by: user("o", .owner), topicCount: 0, limits: .defaults, customFields: nil, now: t0)
        #expect(made.topic.isPrivate && made.event.changes[GroupEvent.Draft.topicPrivateKey] == "true")
        let open = try GroupRules.planTopicCreation(
            TopicCreation(name: "open"), id: "c@TOPIC#_ABCDEFGHJKMP", in: community,
            by: user("o", .owner), topicCount: 0, limits: .defaults, customFields: nil, now: t0)
        #expect(!open.topic.isPrivate && open.event.changes[GroupEvent.Draft.topicPrivateKey] == nil)

        let later = t0.adding(seconds: 5)
        let (after, event) = try GroupRules.planTopicUpdate(
            ProfileUpdate(), isPrivate: false, of: topic, in: community, by: user("a", .admin), limits: .defaults,
            customFields: nil, now: later)
        #expect(!after.isPrivate && after.updatedAt == later)
        #expect(event?.kind == .topicUpdated && event?.changes[GroupEvent.Draft.topicPrivateKey] == "false")
        #expect(GroupEvent.topicChangedFields(event?.changes ?? [:]) == ["is_private"])
        // Setting what it is: nothing.
        let same = try GroupRules.planTopicUpdate(
            ProfileUpdate(), isPrivate: true, of: topic, in: community, by: user("a", .admin), limits: .defaults,
            customFields: nil, now: later)
        #expect(same.event == nil && same.topic == topic)
        // A member granted manage_topics on the community but not view_topic: as for no topic; an
        // ordinary member: the role decides first, as for no topic.
        let manager = groupError {
            _ = try GroupRules.planTopicUpdate(
                ProfileUpdate(name: "x"), of: topic, in: community, by: user("m", .member, in: ["PG1"]),
                limits: .defaults, customFields: nil, now: later)
        }
        #expect(manager?.reason == .groupNotFound)
        let plain = groupError {
            try GroupRules.checkManagedTopicVisible(topic, in: community, by: user("n", .member))
        }
        #expect(plain?.reason == .permissionDenied)
        #expect(groupError { try GroupRules.checkManagedTopicVisible(topic, in: community, by: user("a", .admin)) } == nil)
    }
}
