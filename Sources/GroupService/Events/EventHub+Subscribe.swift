import GRPCProtocol
import GroupAPI
import GroupModel
import GroupStore
import NIOCore

extension EventHub {
    /// The reasons a stream ends with.
    enum Reasons {
        /// OUT_OF_RANGE: the cursor is older than the app's event retention.
        static let cursorExpired = GroupError.Reason("CURSOR_EXPIRED")
        /// UNAVAILABLE: the stream's bounded queue was full.
        static let subscriberTooSlow = GroupError.Reason("SUBSCRIBER_TOO_SLOW")
        /// UNAVAILABLE: committed items could not be read for live delivery.
        static let streamInterrupted = GroupError.Reason("STREAM_INTERRUPTED")
        /// UNAVAILABLE: the server is shutting down.
        static let shuttingDown = GroupError.Reason("SERVER_SHUTTING_DOWN")
    }

    /// The most `group_ids` a request may name.
    static let maxGroupFilter = 1000

    /// Serves one `Subscribe` call: backlog after the cursor, `caught_up`, then live items
    /// until the stream ends (client gone, too slow, shutdown).
    ///
    /// The handover: the backlog is read from the store with the stream not yet registered;
    /// then the stream registers (live items it is routed are kept), installs the memberships
    /// read after registering, reads the store once more from where the backlog stopped, and
    /// only then queues the kept live items it has not delivered (by `event_id`), `caught_up`,
    /// and goes live. A commit racing the subscription is either routed after registration
    /// (kept) or committed before the last read (read): never lost; the `event_id` comparison
    /// drops the copies.
    ///
    /// The call's task ends once the stream is live: the writer is detached, the subscriber's
    /// end finishes the call with its status (`UNAVAILABLE` / `SUBSCRIBER_TOO_SLOW`,
    /// `STREAM_INTERRUPTED` or `SERVER_SHUTTING_DOWN`, with `StreamResumeInfo`), and the client
    /// going away (the writer closing) ends the subscriber. An idle stream keeps no suspended task.
    /// - Throws: `INVALID_ARGUMENT` (cursor, group_ids, kinds), `OUT_OF_RANGE` /
    ///   `CURSOR_EXPIRED` (with `StreamResumeInfo`), `UNAVAILABLE` / `SERVER_SHUTTING_DOWN`.
    func subscribe(_ request: Groupd_V1_SubscribeRequest, call: CallContext, writer: ServerStreamWriter) async throws {
        let subscriber = try await open(request, call: call, writer: writer)
        writer.detach()
        subscriber.whenEnded { [self] reason in
            unregister(subscriber)
            if let status = Self.status(for: reason, cursor: subscriber.cursor) { writer.finish(status) }
        }
        writer.onClose { [self] in end(subscriber, .cancelled) }
    }

    /// Validates a request, catches the stream up and makes it live; returns it live.
    private func open(
        _ request: Groupd_V1_SubscribeRequest, call: CallContext, writer: ServerStreamWriter
    ) async throws -> EventSubscriber {
        guard let store else {
            throw GroupError(code: .unimplemented, reason: .internal, message: "this store keeps no event log")
        }
        let app = call.caller.appID
        let userID = call.caller.isBackend ? nil : call.caller.operatorID
        if request.groupIds.count > Self.maxGroupFilter {
            throw GroupError.invalidArgument(
                field: "group_ids", "at most \(Self.maxGroupFilter) groups", limit: Self.maxGroupFilter)
        }
        for (index, groupID) in request.groupIds.enumerated() where groupID.isEmpty || groupID.utf8.count > 128 {
            throw GroupError.invalidArgument(field: "group_ids[\(index)]", "not a group id")
        }
        let filter = StreamFilter(
            userID: userID, groupIDs: Set(request.groupIds), kinds: try EventMapping.kinds(request.kinds),
            excludeMessages: request.excludeMessages)

        let now = clock.now()
        let cutoff = now.adding(seconds: -Int64(max(0, call.limits.eventRetentionSeconds)))
        let latest = try await store.latestEventID(app: app)
        let start: EventCursor
        var hasBacklog = true
        if !request.cursor.isEmpty {
            start = try EventCursor(parsing: request.cursor)
            if start.eventID > latest {
                throw GroupError.invalidArgument(field: "cursor", "the cursor is ahead of the event log")
            }
            if start.time < cutoff {
                let oldest = try await oldestCursor(app: app, cutoff: cutoff, latest: latest, now: now)
                throw Self.status(
                    GroupError(code: .outOfRange, reason: Reasons.cursorExpired,
                               message: "the cursor is older than the event retention; resync, then resume from the oldest cursor"),
                    resumeFrom: oldest)
            }
        } else if request.fromOldest {
            start = try await oldestCursor(app: app, cutoff: cutoff, latest: latest, now: now)
        } else {
            start = EventCursor(eventID: latest, time: now)
            hasBacklog = false
        }

        let subscriber = EventSubscriber(
            id: nextStreamID(), app: app, filter: filter, writer: writer, start: start,
            pendingLimit: settings.pendingLimit)
        do {
            try await bringLive(subscriber, userID: userID, backlog: hasBacklog, store: store)
        } catch {
            unregister(subscriber)
            throw error
        }
        return subscriber
    }

    /// Catches a stream up and makes it live (see ``subscribe(_:call:writer:)``).
    private func bringLive(
        _ subscriber: EventSubscriber, userID: String?, backlog: Bool, store: Store
    ) async throws {
        if backlog { try await catchUp(subscriber, store: store) }
        guard register(subscriber) else { throw Self.shutdownStatus(cursor: subscriber.cursor) }
        if let userID {
            await presenceStarted(app: subscriber.app, user: userID)
            install(subscriber, snapshot: try await store.streamMemberships(app: subscriber.app, userID: userID))
        }
        try await catchUp(subscriber, store: store)
        if let reason = subscriber.goLive(caughtUp: Self.caughtUp) { end(subscriber, reason) }
    }

    /// Delivers the stored items after the stream's cursor, page by page, waiting on the
    /// stream's queue (the backlog is the one place a stream waits). A private topic's items
    /// (`LoggedEvent.audience`) reach a user stream when the user's role and
    /// permission groups in the community, read once at the first such item, admit them.
    func catchUp(_ subscriber: EventSubscriber, store: Store) async throws {
        var after = subscriber.cursor.eventID
        var memberships: [String: StreamMembership]?
        while true {
            try Task.checkCancellation()
            let page: EventLogPage
            if let user = subscriber.filter.userID {
                page = try await store.userEvents(
                    app: subscriber.app, userID: user, after: after, limit: settings.backlogPageSize)
            } else {
                page = try await store.appEvents(app: subscriber.app, after: after, limit: settings.backlogPageSize)
            }
            for logged in page.events where logged.eventID > subscriber.cursor.eventID && subscriber.filter.accepts(logged) {
                if let audience = logged.audience, let user = subscriber.filter.userID {
                    if memberships == nil {
                        let snapshot = try await store.streamMemberships(app: subscriber.app, userID: user)
                        memberships = Dictionary(snapshot.memberships.map { ($0.groupID, $0) }) { first, _ in first }
                    }
                    let event = logged.event
                    let community = GroupID.communityID(ofTopic: event.groupID) ?? event.groupID
                    guard let membership = memberships?[community],
                        Group.audience(audience, admits: membership.role, inGroups: membership.permissionGroups)
                    else { continue }
                }
                let cursor = EventCursor(eventID: logged.eventID, time: logged.event.time)
                try await subscriber.writer.write(Self.encode(logged, cursor: cursor))
                subscriber.advance(to: cursor)
            }
            if page.isLast { return }
            after = max(after, page.scannedThrough)
        }
    }

    /// The cursor that resumes at the oldest retained item of `app`.
    func oldestCursor(app: String, cutoff: Timestamp, latest: Int64, now: Timestamp) async throws -> EventCursor {
        guard let store else { return EventCursor(eventID: latest, time: now) }
        let start = try await store.retainedStart(app: app, cutoff: cutoff)
        // Nothing retained: the position is the end of the log, as of now.
        if start.afterEventID >= latest { return EventCursor(eventID: latest, time: now) }
        return EventCursor(eventID: start.afterEventID, time: start.time)
    }

    /// The status a stream ends with; `nil` when the client went (its call is over already).
    static func status(for reason: StreamEnd, cursor: EventCursor) -> GRPCStatus? {
        switch reason {
        case .tooSlow(let cursor):
            status(GroupError(code: .unavailable, reason: Reasons.subscriberTooSlow,
                              message: "the subscriber fell behind its queue; resume from the cursor"),
                   resumeFrom: cursor)
        case .interrupted(let cursor):
            status(GroupError(code: .unavailable, reason: Reasons.streamInterrupted,
                              message: "live delivery was interrupted; resume from the cursor"),
                   resumeFrom: cursor)
        case .shutdown:
            shutdownStatus(cursor: cursor)
        case .cancelled:
            nil
        }
    }

    /// `UNAVAILABLE` / `SERVER_SHUTTING_DOWN`, resuming from `cursor`.
    static func shutdownStatus(cursor: EventCursor) -> GRPCStatus {
        status(GroupError(code: .unavailable, reason: Reasons.shuttingDown,
                          message: "the server is shutting down; resume from the cursor on another node"),
               resumeFrom: cursor)
    }

    /// `error`'s status with a `StreamResumeInfo` added to its details.
    static func status(_ error: GroupError, resumeFrom cursor: EventCursor) -> GRPCStatus {
        var status = error.grpcStatus
        var details = status.details.flatMap { try? Google_Rpc_Status(serializedBytes: $0) } ?? Google_Rpc_Status()
        details.details.append(Google_Protobuf_Any(packing: Groupd_V1_StreamResumeInfo.with { $0.cursor = cursor.encoded }))
        status.details = details.serializedBytes()
        return status
    }
}
