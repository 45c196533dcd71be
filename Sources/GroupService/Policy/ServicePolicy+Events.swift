import GroupModel
import GroupStore
import PolicyHost
import Logging

extension ServicePolicy {
    /// Send every committed event of `hub` to the apps' `after_event` plugins. The hub calls the
    /// observer on a queue of its own after routing, and `PolicyHost.notify(app:event:)`
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

    /// Hand the `after_event` plugins that keep a position (`after_event_position`, such as the
    /// webhook plugin's journal) the committed events they do not have: those a crash caught
    /// between the store's commit and the plugin. Call it when the service starts, before
    /// ``notifyAfterEvents(from:)``: new events wait behind the replay, which reads the store's
    /// event log on a task of its own.
    public func replayAfterEvents(from store: Store, logger: Logger) {
        guard let host else { return }
        let replays = host.beginAfterEventReplays()
        guard !replays.isEmpty else { return }
        Task {
            for replay in replays {
                var after = replay.position
                var count = 0
                do {
                    while true {
                        let page = try await store.appEvents(app: replay.app, after: after, limit: 500)
                        for logged in page.events {
                            replay.offer(Self.afterEventRequest(logged))
                            count += 1
                        }
                        if page.isLast || page.scannedThrough <= after { break }
                        after = page.scannedThrough
                    }
                } catch {
                    logger.error("after_event replay stopped: events after this id may be missing from the app's after_event plugins", metadata: [
                        "app": "\(replay.app)", "event_id": "\(after)", "error": "\(error)",
                    ])
                }
                if count > 0 {
                    logger.info("after_event replay", metadata: [
                        "app": "\(replay.app)", "after_event_id": "\(replay.position)", "events": "\(count)",
                    ])
                }
                replay.finish()
            }
        }
    }

    /// What an `after_event` plugin sees of a committed event: its type (`MEMBER_JOINED`, ...),
    /// group, operator, targets (`users`), changed values (`fields`), its `event_id`, its number
    /// in the group's sequence and its commit time.
    static func afterEventRequest(_ logged: LoggedEvent) -> HookRequest {
        let event = logged.event
        return HookRequest(
            operatorID: event.operatorID ?? "", groupID: event.groupID,
            groupType: GroupdService.hookGroupType(logged.groupType), eventType: event.reportedKind.rawValue,
            fields: event.changes.keys.sorted().map { HookField($0, event.changes[$0]!) }, users: event.targets,
            eventID: logged.eventID, groupSequence: event.sequence, eventTimeMilliseconds: event.time.millisecondsSince1970)
    }
}
