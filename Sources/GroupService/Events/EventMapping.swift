import GroupAPI
import GroupModel
import GroupStore

/// The event stream's items as the API shows them.
enum EventMapping {
    /// The API's kind of a stored event kind (`nil` for `GROUP_MESSAGE`, which is a message item).
    static func kind(_ kind: GroupEvent.Kind) -> Groupd_V1_EventKind? {
        switch kind {
        case .groupCreated: .groupCreated
        case .groupDismissed: .groupDismissed
        case .groupRevoked: .groupRevoked
        case .memberJoined: .memberJoined
        case .memberInvited: .memberInvited
        case .memberQuit: .memberQuit
        case .memberKicked: .memberKicked
        case .adminSet: .adminSet
        case .adminCancelled: .adminCancelled
        case .ownerChanged: .ownerChanged
        case .groupInfoChanged: .groupInfoChanged
        case .groupSettingsChanged: .groupSettingsChanged
        case .memberInfoChanged: .memberInfoChanged
        case .memberMuted: .memberMuted
        case .groupMuted: .groupMuted
        case .joinApplicationReceived, .invitationApprovalRequested: .applicationReceived
        case .joinApplicationApproved: .applicationAccepted
        case .joinApplicationRefused: .applicationRefused
        case .applicationWithdrawn: .applicationWithdrawn
        case .applicationExpired: .applicationExpired
        case .invitationReceived: .invitationReceived
        case .invitationAccepted: .invitationAccepted
        case .invitationRefused: .invitationRefused
        case .invitedToGroup: .invited
        case .kickedFromGroup: .kicked
        case .quitGroup: .quit
        case .adminGranted: .adminGranted
        case .adminRevoked: .adminRevoked
        case .remarkChanged: .remarkChanged
        case .receiveOptionChanged: .receiveOptionChanged
        case .customNotification: .customNotification
        case .groupRead: .groupRead
        case .memberBanned: .memberBanned
        case .memberUnbanned: .memberUnbanned
        case .muteBypassChanged: .muteBypassChanged
        case .messageRecalled: .messageRecalled
        case .messageEdited: .messageEdited
        case .groupAttributesChanged: .groupAttributesChanged
        case .inviteLinkCreated: .inviteLinkCreated
        case .inviteLinkRevoked: .inviteLinkRevoked
        case .messagePinned: .messagePinned
        case .messageUnpinned: .messageUnpinned
        case .messageReadReceipt: .messageReadReceipt
        case .messageReactionAdded: .messageReactionAdded
        case .messageReactionRemoved: .messageReactionRemoved
        case .topicCreated: .topicCreated
        case .topicUpdated: .topicUpdated
        case .topicDeleted: .topicDeleted
        case .permissionGroupCreated: .permissionGroupCreated
        case .permissionGroupUpdated: .permissionGroupUpdated
        case .permissionGroupDeleted: .permissionGroupDeleted
        case .memberPermissionsChanged: .memberPermissionsChanged
        case .groupMessage: nil
        }
    }

    /// The stored kinds an API kind filter selects.
    static func kinds(_ kinds: [Groupd_V1_EventKind]) throws -> Set<GroupEvent.Kind> {
        var selected: Set<GroupEvent.Kind> = []
        for (index, requested) in kinds.enumerated() {
            let matching = GroupEvent.Kind.allCases.filter { kind($0) == requested }
            if matching.isEmpty {
                throw GroupError.invalidArgument(field: "kinds[\(index)]", "unknown event kind \(requested)")
            }
            selected.formUnion(matching)
        }
        return selected
    }

    /// A stored event as the API shows it.
    static func event(_ logged: LoggedEvent) -> Groupd_V1_GroupEvent {
        let event = logged.event
        return .with {
            $0.groupID = event.groupID
            $0.sequence = UInt64(max(event.sequence, 0))
            $0.eventID = String(logged.eventID)
            $0.kind = kind(event.reportedKind) ?? .unspecified
            $0.time = APIMapping.timestamp(event.time)
            $0.operatorUserID = event.operatorID ?? ""
            $0.targetUserIds = event.targets
            switch event.recipient {
            case .group: break
            case .user(let user): $0.recipientUserIds = [user]
            case .approvers: $0.recipientUserIds = logged.approvers
            }
            $0.groupType = APIMapping.groupType(logged.groupType)
            $0.groupName = logged.groupName
            // An AVChatRoom counts viewers online (presence leases, read with the group), which
            // no stored event knows: its events carry none rather than the stored owner alone.
            if event.kind.isMemberChange, logged.groupType.preset.behaviour.membershipStored {
                $0.memberCount = UInt32(clamping: max(0, logged.memberCount))
            }
            if let application = logged.application {
                $0.application = applicationDetail(application, groupName: logged.groupName, at: event.time)
            } else if let detail = detail(event, groupType: logged.groupType) {
                $0.detail = detail
            }
        }
    }

    /// An application event's detail: the item as stored when the row was read (right after its
    /// commit for live delivery), its state as of the event's time. The hub encodes each item
    /// once for every subscriber, so the reader-relative fields (`caller_roles`,
    /// `handle_status`) stay unset; ListApplications gives them per caller.
    static func applicationDetail(_ application: Application, groupName: String, at time: Timestamp) -> Groupd_V1_Application {
        // No roles: `caller_roles` stays empty; `handle_status` is per reader, so it is cleared.
        var view = GroupdService.applicationView(
            application, groupName: groupName, roles: [],
            caller: Caller(appID: application.appID, userID: "", isAdmin: true), now: time)
        view.handleStatus = .unspecified
        return view
    }

    /// The kind-specific detail that the event's `changes` carry.
    static func detail(_ event: GroupEvent, groupType: GroupType) -> Groupd_V1_GroupEvent.OneOf_Detail? {
        let changes = event.changes
        switch event.reportedKind {
        case .memberKicked, .kickedFromGroup:
            return .kick(.with { $0.reason = changes["reason"] ?? "" })
        case .memberBanned, .memberUnbanned:
            return .ban(.with {
                if let until = Int64(changes["until"] ?? ""), until > 0 {
                    $0.until = APIMapping.timestamp(Timestamp(millisecondsSince1970: until))
                }
                $0.durationSeconds = UInt32(changes["duration_seconds"] ?? "") ?? 0
                $0.reason = changes["reason"] ?? ""
            })
        case .muteBypassChanged:
            func users(_ key: String) -> [String] {
                (changes[key] ?? "").split(separator: "\n").map(String.init)
            }
            return .muteBypass(.with {
                $0.addedUserIds = users("added")
                $0.removedUserIds = users("removed")
                $0.userIds = users("user_ids")
            })
        case .groupDismissed, .groupRevoked:
            return .dismissal(.with { $0.reason = changes["reason"] ?? "" })
        case .customNotification:
            let body = CustomNotification(changes: changes)
            return .custom(.with {
                $0.text = body.text
                $0.payload = body.payload
            })
        case .remarkChanged:
            return .remark(.with { $0.remark = changes["remark"] ?? "" })
        case .receiveOptionChanged:
            let option: Groupd_V1_ReceiveMessageOption =
                switch changes["option"].flatMap(ReceiveOption.init(rawValue:)) {
                case .receive: .receive
                case .notReceive: .notReceive
                case .receiveWithoutPush: .receiveWithoutPush
                case nil: .unspecified
                }
            return .receiveOption(.with { $0.option = option })
        case .messageRecalled:
            return .messageRecall(.with {
                $0.sequence = UInt64(max(Int64(changes["sequence"] ?? "") ?? 0, 0))
                $0.messageID = changes["message_id"] ?? ""
                $0.senderUserID = event.targets.first ?? ""
                $0.recalledByUserID = event.operatorID ?? ""
            })
        case .messageEdited:
            let body = CustomNotification(changes: changes)
            return .messageEdit(.with {
                $0.sequence = UInt64(max(Int64(changes["sequence"] ?? "") ?? 0, 0))
                $0.messageID = changes["message_id"] ?? ""
                $0.senderUserID = event.targets.first ?? ""
                $0.editedByUserID = event.operatorID ?? ""
                $0.editCount = UInt32(clamping: Int64(changes["edit_count"] ?? "") ?? 0)
                $0.text = body.text
                $0.payload = body.payload
            })
        case .groupRead:
            return .read(.with { $0.readSequence = UInt64(max(Int64(changes["read_sequence"] ?? "") ?? 0, 0)) })
        case .ownerChanged:
            return .ownerChange(.with {
                $0.previousOwnerUserID = changes["previous_owner"] ?? ""
                $0.newOwnerUserID = event.targets.first ?? ""
                $0.previousOwnerQuit = changes["previous_owner_quit"] == "true"
            })
        case .memberInfoChanged:
            return .memberChange(.with {
                $0.changedFields = changes.keys.sorted()
                $0.members = event.targets.map { user in
                    .with {
                        $0.userID = user
                        if let card = changes["name_card"] { $0.nameCard = card }
                    }
                }
            })
        case .memberJoined, .memberInvited, .invitedToGroup:
            return .memberChange(joinDetail(event))
        case .memberMuted:
            let until = Int64(changes["muted_until"] ?? "") ?? 0
            return .memberChange(.with {
                $0.changedFields = ["mute_until"]
                $0.members = event.targets.map { user in
                    .with {
                        $0.userID = user
                        if until > 0 { $0.muteUntil = APIMapping.timestamp(Timestamp(millisecondsSince1970: until)) }
                    }
                }
            })
        case .groupMuted:
            return .groupMute(groupMuteDetail(event))
        case .groupInfoChanged:
            return .profileChange(.with {
                $0.changedFields = changes.keys.sorted()
                $0.profile = .with {
                    if let v = changes["name"] { $0.name = v }
                    if let v = changes["introduction"] { $0.introduction = v }
                    if let v = changes["notification"] { $0.notification = v }
                    if let v = changes["face_url"] { $0.faceURL = v }
                }
                // No custom values: the stream encodes an item once for every reader, and which
                // keys a reader may read depends on their role (DECISIONS.md).
            })
        case .groupSettingsChanged:
            return .settingsChange(settingsDetail(changes, groupType: groupType))
        case .groupCreated:
            return .group(createdGroup(event, groupType: groupType))
        case .groupAttributesChanged:
            return .attributesChange(attributesDetail(changes))
        case .inviteLinkCreated, .inviteLinkRevoked:
            return .inviteLink(.with {
                $0.linkID = changes["link_id"] ?? ""
                $0.groupID = event.groupID
                $0.maxUses = UInt32(clamping: Int64(changes["max_uses"] ?? "") ?? 0)
                $0.useCount = UInt32(clamping: Int64(changes["use_count"] ?? "") ?? 0)
                $0.requireApproval = changes["requires_approval"] == "true"
                if let ms = changes["expires_at"].flatMap({ Int64($0) }) {
                    $0.expireTime = APIMapping.timestamp(Timestamp(millisecondsSince1970: ms))
                }
            })
        case .messagePinned, .messageUnpinned:
            guard let pin = PinnedMessage(changes: changes) else { return nil }
            return .pin(APIMapping.pin(pin))
        case .messageReactionAdded, .messageReactionRemoved:
            guard let change = ReactionChange(changes: changes) else { return nil }
            return .reaction(.with {
                $0.sequence = UInt64(max(change.sequence, 0))
                $0.reactionKey = change.key
                $0.count = UInt32(clamping: change.count)
            })
        case .topicCreated, .topicUpdated, .topicDeleted:
            return .topic(topicDetail(event))
        case .permissionGroupCreated, .permissionGroupUpdated, .permissionGroupDeleted, .memberPermissionsChanged:
            return .permissionGroup(permissionGroupDetail(event))
        case .messageReadReceipt:
            return .readReceipts(.with {
                $0.messages = ReadReceiptCount.decode(changes["receipts"] ?? "").map { count in
                    .with {
                        $0.sequence = UInt64(max(count.sequence, 0))
                        $0.readCount = UInt32(clamping: count.readCount)
                        $0.unreadCount = UInt32(clamping: count.unreadCount)
                    }
                }
            })
        default:
            return nil
        }
    }

    /// A `TOPIC_CREATED` / `TOPIC_UPDATED` / `TOPIC_DELETED` detail: the topic, the changed
    /// fields and their new values (no custom values, as in `GROUP_INFO_CHANGED`).
    static func topicDetail(_ event: GroupEvent) -> Groupd_V1_TopicChange {
        let changes = event.changes
        return .with {
            $0.topicID = changes[GroupEvent.Draft.topicIDKey] ?? ""
            $0.changedFields = GroupEvent.topicChangedFields(changes)
            if let v = changes["name"] { $0.name = v }
            if let v = changes["introduction"] { $0.introduction = v }
            if let v = changes["notification"] { $0.notification = v }
            if let v = changes["face_url"] { $0.faceURL = v }
            if let v = changes[GroupEvent.Draft.topicPrivateKey] { $0.isPrivate = v == "true" }
            if let mute = GroupEvent.topicMute(changes, operatorID: event.operatorID) {
                var view = APIMapping.muteState(mute, now: nil) ?? Groupd_V1_GroupMuteState()
                view.operatorUserID = event.operatorID ?? ""
                $0.mute = view
            }
        }
    }

    /// A permission group event's detail: the group, the changed fields and their new values
    /// (`MEMBER_PERMISSIONS_CHANGED`: `added` or `removed`; the members are the targets).
    static func permissionGroupDetail(_ event: GroupEvent) -> Groupd_V1_PermissionGroupChange {
        let changes = event.changes
        return .with {
            $0.permissionGroupID = changes[GroupEvent.Draft.permissionGroupIDKey] ?? ""
            if event.kind == .memberPermissionsChanged {
                $0.changedFields = [changes["change"] ?? ""]
                return
            }
            $0.changedFields = ["name", "custom_data", "permissions", "topic_permissions"].filter { changes[$0] != nil }
            if let name = changes["name"] { $0.name = name }
            if let names = changes["permissions"] { $0.permissions = PermissionMapping.permissions(named: names, separator: ",") }
            if let topics = changes["topic_permissions"] {
                $0.topicPermissions = topics.split(separator: "\n").compactMap { line in
                    guard let equals = line.lastIndex(of: "=") else { return nil }
                    return .with {
                        $0.topicID = String(line[..<equals])
                        $0.permissions = PermissionMapping.permissions(
                            named: String(line[line.index(after: equals)...]), separator: "|")
                    }
                }
            }
        }
    }

    /// A `GROUP_ATTRIBUTES_CHANGED` detail: the keys set with their versions and the keys
    /// deleted, each in key order.
    static func attributesDetail(_ changes: [String: String]) -> Groupd_V1_AttributesChange {
        .with { detail in
            for (name, value) in changes.sorted(by: { $0.key < $1.key }) {
                if name.hasPrefix(GroupEvent.Kind.attributeSetPrefix) {
                    let key = String(name.dropFirst(GroupEvent.Kind.attributeSetPrefix.count))
                    detail.set.append(.with {
                        $0.key = key
                        $0.version = UInt64(max(Int64(value) ?? 0, 0))
                    })
                } else if name.hasPrefix(GroupEvent.Kind.attributeDeletedPrefix) {
                    detail.deletedKeys.append(String(name.dropFirst(GroupEvent.Kind.attributeDeletedPrefix.count)))
                }
            }
        }
    }

    /// The API field name (`GroupSettings` field, or `max_member_count`) of a settings key in
    /// event changes.
    static func settingsFieldName(_ key: String) -> String {
        GroupSettingKey(rawValue: key)?.apiName ?? (key == "max_members" ? "max_member_count" : key)
    }

    /// A `GROUP_SETTINGS_CHANGED` detail: the changed settings by their API names, those
    /// settings' new values (the others unset) and the new maximum member count if it changed.
    static func settingsDetail(_ changes: [String: String], groupType: GroupType) -> Groupd_V1_SettingsChange {
        var settings = groupType.preset.defaultSettings
        var keys: [GroupSettingKey] = []
        for (key, text) in changes {
            if let setting = GroupSettingKey(rawValue: key), settings.set(setting, text: text) { keys.append(setting) }
        }
        let full = APIMapping.settings(settings, type: groupType)
        return .with { detail in
            detail.changedFields = changes.keys.map(settingsFieldName).sorted()
            detail.settings = .with {
                for key in keys {
                    switch key {
                    case .joinOption: $0.joinOption = full.joinOption
                    case .joinApprovers: $0.approverScope = full.approverScope
                    case .invitePermission: $0.inviteScope = full.inviteScope
                    case .inviteeMustAccept: $0.inviteeConsent = full.inviteeConsent
                    case .invitationNeedsApproval: $0.inviteApproval = full.inviteApproval
                    case .removeMembersPermission: $0.removeScope = full.removeScope
                    case .editProfilePermission: $0.profileEditScope = full.profileEditScope
                    case .editMemberInfoPermission: $0.memberEditScope = full.memberEditScope
                    case .editSettingsPermission: $0.settingsEditScope = full.settingsEditScope
                    case .ownerQuit: $0.ownerQuit = full.ownerQuit
                    case .mentionAllPermission: $0.mentionAllScope = full.mentionAllScope
                    case .slowModeInterval: $0.slowModeIntervalSeconds = full.slowModeIntervalSeconds
                    case .inviteLinkPermission: $0.inviteLinkScope = full.inviteLinkScope
                    case .pinPermission: $0.pinScope = full.pinScope
                    }
                }
            }
            if let max = changes["max_members"].flatMap(UInt32.init) { detail.maxMemberCount = max }
        }
    }

    /// A join event's detail: each joined member as they came in (role, join time, how they
    /// came in and who let them in). Events stored before the source was kept infer it from
    /// their kind.
    static func joinDetail(_ event: GroupEvent) -> Groupd_V1_MemberChange {
        let changes = event.changes
        var source = changes["join_source"].flatMap(JoinSource.init(name:))
        var inviter = changes["inviter"]
        if source == nil {
            switch event.kind {
            case .memberInvited, .invitedToGroup:
                source = .invitation
                inviter = event.operatorID
            default:
                if let via = changes["via"] {
                    source = via == "invitation" ? .invitation : .application
                    inviter = event.operatorID
                } else {
                    source = .unknown
                }
            }
        }
        let member = Member(
            userID: "", role: .member, joinedAt: event.time, joinSource: source ?? .unknown, inviterID: inviter)
        let template = APIMapping.member(member, now: event.time)
        return .with {
            $0.members = event.targets.map { user in
                var view = Groupd_V1_Member()
                view.userID = user
                view.role = template.role
                view.joinTime = template.joinTime
                view.joinSource = template.joinSource
                view.inviterUserID = template.inviterUserID
                view.inviteLinkID = changes["invite_link"] ?? ""
                return view
            }
        }
    }

    /// A `GROUP_MUTED` detail: the new state (mode `UNSPECIFIED` when lifted) and who set it.
    static func groupMuteDetail(_ event: GroupEvent) -> Groupd_V1_GroupMuteState {
        let changes = event.changes
        let roles = Set((changes["roles"] ?? "").split(separator: ",").compactMap { MemberRole(rawValue: String($0)) })
        let mode: GroupMuteMode =
            switch changes["mode"] {
            case "all": .all
            case "ordinary_members": .ordinaryMembers
            case "roles": .roles(roles)
            default: .none
            }
        let until = Int64(changes["until"] ?? "") ?? 0
        let state = GroupMuteState(
            mode: mode, until: until > 0 ? Timestamp(millisecondsSince1970: until) : nil, operatorID: event.operatorID)
        var view = APIMapping.muteState(state, now: nil) ?? Groupd_V1_GroupMuteState()
        view.operatorUserID = event.operatorID ?? ""
        return view
    }

    /// A `GROUP_CREATED` detail: the group as created (profile, settings, owner, counts).
    static func createdGroup(_ event: GroupEvent, groupType: GroupType) -> Groupd_V1_Group {
        let changes = event.changes
        var settings = groupType.preset.defaultSettings
        for key in GroupSettingKey.allCases { if let text = changes[key.rawValue] { settings.set(key, text: text) } }
        return .with {
            $0.groupID = event.groupID
            $0.type = APIMapping.groupType(groupType)
            $0.profile = .with {
                $0.name = changes["name"] ?? ""
                $0.introduction = changes["introduction"] ?? ""
                $0.notification = changes["notification"] ?? ""
                $0.faceURL = changes["face_url"] ?? ""
            }
            $0.settings = APIMapping.settings(settings, type: groupType)
            $0.ownerUserID = changes["owner_id"] ?? ""
            $0.memberCount = changes["member_count"].flatMap(UInt32.init) ?? UInt32(clamping: event.targets.count)
            $0.maxMemberCount = changes["max_members"].flatMap(UInt32.init) ?? 0
            let created = changes["created_at"].flatMap(Int64.init).map(Timestamp.init(millisecondsSince1970:))
            $0.createTime = APIMapping.timestamp(created ?? event.time)
            $0.lastInfoTime = APIMapping.timestamp(event.time)
        }
    }
}
