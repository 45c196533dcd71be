import GroupAPI
import GroupModel
import GroupStore

/// How AVChatRoom messages leave this module: to the room's subscribers on this node (sent
/// here, or through another node).
extension GroupdService {
    /// Hands an admitted AVChatRoom message (not stored) to the room's subscribers on this node.
    func publishRoomMessage(_ message: GroupMessage) {
        events.publishRoomMessage(app: message.appID, groupID: message.groupID, message: MessageMapping.message(message))
    }
}
