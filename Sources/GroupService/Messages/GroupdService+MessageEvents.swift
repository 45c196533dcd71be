import GroupAPI
import GroupModel
import GroupStore

/// How messages and notifications leave this module: AVChatRoom messages to the room's
/// subscribers, notification events in the API's form.
extension GroupdService {
    /// Hands an admitted AVChatRoom message (not stored) to the room's subscribers on this node.
    func publishRoomMessage(_ message: GroupMessage) {
        events.publishRoomMessage(app: message.appID, groupID: message.groupID, message: MessageMapping.message(message))
    }

    /// A stored `CUSTOM_NOTIFICATION` in the API's form, as the event stream shows it; for a
    /// notification to listed members (one stored event each) the first, listing every recipient.
    static func notificationView(
        _ event: GroupEvent, eventID: Int64, group: Group, recipients: [String]
    ) -> Groupd_V1_GroupEvent {
        var view = EventMapping.event(LoggedEvent(eventID: eventID, event: event, groupType: group.type))
        view.recipientUserIds = recipients
        view.groupName = group.name
        return view
    }
}
