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
        case .groupMessage: nil
        }
    }

    /// The stored kinds an API kind filter selects.
    static func kinds(_ kinds: [Groupd_V1_EventKind]) throws -> Set<GroupEvent.Kind> {
        var selected: Set<GroupEvent.Kind> = []
        for (index, requested) in kinds.enumerated() {
            let matching = GroupEvent.Kind.allCases.filter { kind($0) == requested }
            if matching.isEmpty {
                // GROUP_SETTINGS_CHANGED: settings changes are stored as GROUP_INFO_CHANGED.
                if requested == .groupSettingsChanged {
                    selected.insert(.groupInfoChanged)
                    continue
                }
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
            $0.kind = kind(event.kind) ?? .unspecified
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
            if event.kind.isMemberChange { $0.memberCount = UInt32(clamping: max(0, logged.memberCount)) }
            if let application = logged.application {
                $0.application = applicationDetail(application, groupName: logged.groupName, at: event.time)
            } else if let detail = detail(event) {
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
    static func detail(_ event: GroupEvent) -> Groupd_V1_GroupEvent.OneOf_Detail? {
        let changes = event.changes
        switch event.kind {
        case .memberKicked, .kickedFromGroup:
            return .kick(.with { $0.reason = changes["reason"] ?? "" })
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
        case .groupRead:
            return .read(.with { $0.readSequence = UInt64(max(Int64(changes["read_sequence"] ?? "") ?? 0, 0)) })
        case .ownerChanged:
            return .ownerChange(.with {
                $0.previousOwnerUserID = changes["previous_owner"] ?? ""
                $0.newOwnerUserID = event.targets.first ?? ""
                $0.previousOwnerQuit = changes["previous_owner_quit"] == "true"
            })
        case .memberInfoChanged:
            return .memberChange(.with { $0.changedFields = changes.keys.sorted() })
        default:
            return nil
        }
    }
}
