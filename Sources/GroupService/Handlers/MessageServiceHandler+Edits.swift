import GroupAPI
import GroupModel
import GroupStore
import PolicyHost

/// MessageService: EditGroupMessage.
extension MessageServiceHandler {
    /// EditGroupMessage: validates the new body as a send's, runs the policy plugins'
    /// before-send-message hook on it when the app has one (with `message.edit_of`), then, in one
    /// transaction, `GroupRules.planEdit(_:sequence:text:payload:in:by:now:limits:)` on the message
    /// and the operator's membership as they are then: the new body and the `MESSAGE_EDITED` event
    /// commit together. An edit a plugin discarded is planned as any other but not stored.
    func editGroupMessage(
        _ request: Groupd_V1_EditGroupMessageRequest, _ call: CallContext
    ) async throws -> Groupd_V1_EditGroupMessageResponse {
        try GroupdService.requireGroupID(request.groupID)
        let sequence = try GroupRules.messageSequence(request.sequence)
        try GroupRules.validateEdit(text: request.text, payload: request.payload)
        var body = MessageContent(text: request.text, payload: request.payload)
        var keep = true
        if service.hasPolicy(.beforeSendGroupMessage, call) {
            // Moderation needs the group's type; a group that does not exist costs none.
            let (group, _) = try await service.loadGroup(call, groupID: request.groupID)
            keep = try await checkMessagePolicy(&body, groupID: request.groupID, groupType: group.type, editOf: sequence, call)
        }
        let caller = call.caller
        let limits = call.limits
        let now = clock.now()
        let text = body.text
        let payload = body.payload
        let committed = try await store.editMessage(
            app: caller.appID, groupID: request.groupID, sequence: sequence, text: text, payload: payload,
            operatorID: caller.operatorID, at: now, write: keep
        ) { group, member, message in
            try GroupRules.planEdit(
                message, sequence: sequence, text: text, payload: payload, in: group,
                by: GroupdService.groupOperator(caller, membership: member), now: now, limits: limits)
        }
        return .with {
            $0.message = MessageMapping.message(committed.value.message)
            $0.unchanged = committed.value.unchanged
        }
    }
}
