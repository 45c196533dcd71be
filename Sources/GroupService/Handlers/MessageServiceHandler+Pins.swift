import GroupAPI
import GroupModel
import GroupStore

/// MessageService: PinGroupMessage, UnpinGroupMessage.
extension MessageServiceHandler {
    /// PinGroupMessage: checks the permission (`GroupAction.pinMessage`) and that the message
    /// is one the operator may read, then, in one transaction, the rule of
    /// `GroupRules.planPin(sequence:in:by:limits:now:)` on the group as it is then (already
    /// pinned, the app's limit); the `MESSAGE_PINNED` tip commits with the pin.
    func pinGroupMessage(
        _ request: Groupd_V1_PinGroupMessageRequest, _ call: CallContext
    ) async throws -> Groupd_V1_PinGroupMessageResponse {
        try GroupdService.requireGroupID(request.groupID)
        let sequence = try GroupRules.messageSequence(request.sequence)
        let (group, membership) = try await service.loadGroup(call, groupID: request.groupID)
        let op = GroupdService.groupOperator(call.caller, membership: membership)
        try GroupRules.authorize(.pinMessage, in: group, by: op).get()
        _ = try await readableMessage(sequence, in: group, by: op, call: call)
        let limits = call.limits
        let now = clock.now()
        let result = try await service.mutate(call, groupID: request.groupID) { snapshot, op in
            (try GroupRules.planPin(sequence: sequence, in: snapshot.group, by: op, limits: limits, now: now), ())
        }
        return .with { $0.pinnedMessages = result.group.pins.map(APIMapping.pin) }
    }

    /// UnpinGroupMessage: in one transaction, `GroupRules.planUnpin(sequence:in:by:)` (the
    /// permission, then whether it is pinned); the `MESSAGE_UNPINNED` tip commits with it. A
    /// pinned message since purged can still be unpinned.
    func unpinGroupMessage(
        _ request: Groupd_V1_UnpinGroupMessageRequest, _ call: CallContext
    ) async throws -> Groupd_V1_UnpinGroupMessageResponse {
        try GroupdService.requireGroupID(request.groupID)
        let sequence = try GroupRules.messageSequence(request.sequence)
        let result = try await service.mutate(call, groupID: request.groupID) { snapshot, op in
            (try GroupRules.planUnpin(sequence: sequence, in: snapshot.group, by: op), ())
        }
        return .with { $0.pinnedMessages = result.group.pins.map(APIMapping.pin) }
    }

    /// The stored message `sequence` of `group` if `op` may read it (its history floor,
    /// `GroupRules.historyFloor(in:by:)`).
    /// - Throws: `MESSAGE_NOT_FOUND` naming `sequence` (no such message, an event's sequence, a
    ///   purged message, one from before the operator joined); what `historyFloor` throws.
    func readableMessage(
        _ sequence: Int64, in group: Group, by op: GroupOperator, call: CallContext
    ) async throws -> GroupMessage {
        let floor = try GroupRules.historyFloor(in: group, by: op)
        guard sequence > floor else { throw GroupRules.messageNotFound(sequence) }
        let page = try await store.messages(
            app: call.caller.appID, groupID: group.id,
            range: MessageRange(direction: .newer, anchor: sequence - 1, floor: floor), limit: 1)
        guard let message = page.messages.first, message.sequence == sequence else {
            throw GroupRules.messageNotFound(sequence)
        }
        return message
    }
}
