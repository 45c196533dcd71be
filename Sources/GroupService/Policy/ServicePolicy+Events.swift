import GroupModel
import GroupStore
import PolicyHost

extension ServicePolicy {
    /// Send every committed event of `hub` to the apps' `after_event` plugins. The hub calls the
    /// observer on a queue of its own after routing, and ``PolicyHost/notify(app:event:)``
    /// returns at once, so a plugin never delays a call or the stream.
    public func notifyAfterEvents(from hub: EventHub) {
        guard let host else { return }
        hub.observeCommitted { batch in
            for logged in batch {
                let app = logged.event.appID
                guard host.hasPlugins(for: .afterEvent, app: app) else { continue }
                host.notify(app: app, event: Self.afterEventRequest(logged))
            }
        }
    }

    /// What an `after_event` plugin sees of a committed event: its type (`MEMBER_JOINED`, ...),
    /// group, operator, targets (`users`) and changed values (`fields`).
    static func afterEventRequest(_ logged: LoggedEvent) -> HookRequest {
        let event = logged.event
        return HookRequest(
            operatorID: event.operatorID ?? "", groupID: event.groupID,
            groupType: GroupdService.hookGroupType(logged.groupType), eventType: event.kind.rawValue,
            fields: event.changes.keys.sorted().map { HookField($0, event.changes[$0]!) }, users: event.targets)
    }
}
