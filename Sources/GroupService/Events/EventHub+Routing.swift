import GroupModel
import GroupStore
import Synchronization

extension EventHub {
    /// Kinds that make their targets members (applied before the item is routed, so a joiner
    /// receives its own join).
    static let joinKinds: Set<GroupEvent.Kind> = [.groupCreated, .memberJoined, .memberInvited]
    /// Kinds that end their targets' (or recipient's) membership (applied after routing, so the
    /// leaver receives them).
    static let leaveKinds: Set<GroupEvent.Kind> = [.memberKicked, .memberQuit, .kickedFromGroup, .quitGroup]
    /// Kinds that end the group for everyone.
    static let endKinds: Set<GroupEvent.Kind> = [.groupDismissed, .groupRevoked]
    /// Kinds that change their targets' (or the previous owner's) role or permission groups
    /// (applied after routing): who receives a private topic's items.
    static let roleKinds: Set<GroupEvent.Kind> = [.adminSet, .adminCancelled, .ownerChanged, .memberPermissionsChanged]

    // MARK: Registration

    /// Registers a stream for routing (user streams: by user, with no groups until
    /// ``install(_:snapshot:)``). Returns false while shutting down.
    func register(_ subscriber: EventSubscriber) -> Bool {
        let registered = state.withLock { state -> Bool in
            if state.shuttingDown { return false }
            let route = Route(subscriber: subscriber)
            state.routes[subscriber.id] = route
            let routes = Self.appRoutes(subscriber.app, state: &state)
            if let user = subscriber.filter.userID {
                routes.byUser[user, default: [:]][subscriber.id] = subscriber
            } else {
                route.groups = [:]
                routes.firehoses[subscriber.id] = subscriber
            }
            return true
        }
        return registered
    }

    /// A new stream id.
    func nextStreamID() -> Int {
        state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
    }

    /// Installs a user stream's stored memberships, then replays the membership items routed
    /// since the snapshot's watermark.
    func install(_ subscriber: EventSubscriber, snapshot: MembershipSnapshot) {
        state.withLock { state in
            guard let route = state.routes[subscriber.id], route.groups == nil,
                let user = subscriber.filter.userID
            else { return }
            let routes = Self.appRoutes(subscriber.app, state: &state)
            route.groups = [:]
            for membership in snapshot.memberships {
                Self.add(membership.groupID, joinSequence: membership.joinSequence, joinEventID: snapshot.watermark,
                         receiveOption: membership.receiveOption, role: membership.role,
                         permissionGroups: membership.permissionGroups, route: route, routes: routes)
            }
            for logged in route.unsettled where logged.eventID > snapshot.watermark {
                Self.applyBefore(logged, user: user, route: route, routes: routes)
                Self.applyAfter(logged, user: user, route: route, routes: routes)
            }
            route.unsettled = []
        }
    }

    /// Removes a stream from routing (idempotent).
    func unregister(_ subscriber: EventSubscriber) {
        let lastOfUser = state.withLock { state -> Bool in
            guard let route = state.routes.removeValue(forKey: subscriber.id),
                let routes = state.apps[subscriber.app]
            else { return false }
            var last = false
            if let user = subscriber.filter.userID {
                routes.byUser[user]?[subscriber.id] = nil
                if routes.byUser[user]?.isEmpty == true {
                    routes.byUser[user] = nil
                    last = true
                }
                for group in route.groups?.keys ?? [:].keys {
                    routes.byGroup[group]?[subscriber.id] = nil
                    if routes.byGroup[group]?.isEmpty == true { routes.byGroup[group] = nil }
                }
            } else {
                routes.firehoses[subscriber.id] = nil
            }
            return last
        }
        if lastOfUser, let user = subscriber.filter.userID {
            let now = clock.now()
            if let handler = presenceHandler.withLock({ $0 }) {
                Task { await handler(subscriber.app, user, now) }
            }
        }
    }

    /// The users holding a user stream on this node, by app (the viewers whose AVChatRoom
    /// presences this node renews).
    public func streamingUsers() -> [String: [String]] {
        state.withLock { state in
            state.apps.compactMapValues { routes in routes.byUser.isEmpty ? nil : Array(routes.byUser.keys) }
        }
    }

    /// Awaits ``observePresence(_:)``'s handler for a user whose stream just registered.
    func presenceStarted(app: String, user: String) async {
        let now = clock.now()
        if let handler = presenceHandler.withLock({ $0 }) { await handler(app, user, now) }
    }

    /// Calls `handler` with the app, the user and the time each time a user stream registers
    /// (awaited before the stream's `caught_up`) and each time the last stream of a user of an
    /// app ends on this node (in a task of its own): the moments a viewer's AVChatRoom presences
    /// are renewed.
    public func observePresence(_ handler: @escaping @Sendable (_ app: String, _ user: String, _ at: Timestamp) async -> Void) {
        presenceHandler.withLock { $0 = handler }
    }

    /// The indexes of `app`, created on first use.
    static func appRoutes(_ app: String, state: inout State) -> AppRoutes {
        if let routes = state.apps[app] { return routes }
        let routes = AppRoutes()
        state.apps[app] = routes
        return routes
    }

    // MARK: Routing

    /// The streams one stored item goes to, updating memberships on the way.
    static func route(_ logged: LoggedEvent, state: inout State, now: Timestamp, settings: Settings) -> [EventSubscriber] {
        let event = logged.event
        guard let routes = state.apps[event.appID] else { return [] }
        var users = event.targets
        if case .user(let user) = event.recipient { users.append(user) }
        if event.kind == .ownerChanged, let previous = event.changes["previous_owner"] { users.append(previous) }
        let changesMembership = joinKinds.contains(event.kind) || leaveKinds.contains(event.kind)
            || event.kind == .receiveOptionChanged || roleKinds.contains(event.kind)
        // The users' streams whose memberships this item changes, before it is routed.
        var affected: [(String, Route)] = []
        if changesMembership {
            for user in Set(users) {
                for id in routes.byUser[user]?.keys ?? [:].keys {
                    guard let route = state.routes[id] else { continue }
                    if route.groups == nil {
                        route.unsettled.append(logged)
                    } else {
                        affected.append((user, route))
                        applyBefore(logged, user: user, route: route, routes: routes)
                    }
                }
            }
        }

        var targets: [EventSubscriber] = []
        for subscriber in routes.firehoses.values where subscriber.filter.accepts(logged) {
            targets.append(subscriber)
        }
        switch event.recipient {
        case .group:
            if logged.reachesMemberStreams, admitsMemberEvent(logged, state: &state, now: now, settings: settings) {
                let isMessage = event.kind == .groupMessage
                if let community = GroupID.communityID(ofTopic: event.groupID) {
                    // A topic's item: to the community's members (a topic has no members of its
                    // own), joined before it by `event_id` (the topic's sequence is its own).
                    for view in routes.byGroup[community]?.values ?? [:].values {
                        guard logged.eventID > view.joinEventID, view.admits(logged.audience) else { continue }
                        if isMessage, view.receiveOption == .notReceive { continue }
                        let subscriber = view.subscriber
                        if subscriber.filter.accepts(logged) { targets.append(subscriber) }
                    }
                } else {
                    for view in routes.byGroup[event.groupID]?.values ?? [:].values {
                        // A community's `TOPIC_*` event of a private topic carries its audience.
                        guard event.sequence > view.joinSequence, view.admits(logged.audience) else { continue }
                        if isMessage, view.receiveOption == .notReceive { continue }
                        let subscriber = view.subscriber
                        if subscriber.filter.accepts(logged) { targets.append(subscriber) }
                    }
                }
            }
        case .user(let user):
            for subscriber in routes.byUser[user]?.values ?? [:].values where subscriber.filter.accepts(logged) {
                targets.append(subscriber)
            }
        case .approvers:
            for user in Set(logged.approvers) {
                for subscriber in routes.byUser[user]?.values ?? [:].values where subscriber.filter.accepts(logged) {
                    targets.append(subscriber)
                }
            }
        }

        for (user, route) in affected { applyAfter(logged, user: user, route: route, routes: routes) }
        if endKinds.contains(event.kind) {
            for view in Array(routes.byGroup[event.groupID]?.values ?? [:].values) {
                remove(event.groupID, route: view.route, routes: routes)
            }
        }
        return targets
    }

    /// Membership changes that take effect before the item is routed: joins (as an ordinary
    /// member; a new group's owner and initial admins with their roles).
    static func applyBefore(_ logged: LoggedEvent, user: String, route: Route, routes: AppRoutes) {
        let event = logged.event
        guard joinKinds.contains(event.kind), event.targets.contains(user) else { return }
        if route.groups?[event.groupID] != nil { return }
        var role = MemberRole.member
        if event.kind == .groupCreated {
            let admins = event.changes[GroupEvent.Draft.initialAdminsKey]?.split(separator: "\n") ?? []
            if event.changes["owner_id"] == user {
                role = .owner
            } else if admins.contains(where: { $0 == user }) {
                role = .admin
            }
        }
        add(event.groupID, joinSequence: event.sequence - 1, joinEventID: logged.eventID - 1, receiveOption: .receive,
            role: role, permissionGroups: [], route: route, routes: routes)
    }

    /// Membership changes that take effect after the item is routed: kicks, quits, receive option,
    /// roles and permission groups.
    static func applyAfter(_ logged: LoggedEvent, user: String, route: Route, routes: AppRoutes) {
        let event = logged.event
        switch event.kind {
        case .adminSet, .adminCancelled:
            guard event.targets.contains(user), let view = route.groups?[event.groupID], view.role != .owner else { return }
            view.role = event.kind == .adminSet ? .admin : .member
        case .ownerChanged:
            guard let view = route.groups?[event.groupID] else { return }
            if event.targets.first == user {
                view.role = .owner
            } else if event.changes["previous_owner"] == user {
                view.role = .member
            }
        case .memberPermissionsChanged:
            guard event.targets.contains(user), let view = route.groups?[event.groupID],
                let id = event.changes[GroupEvent.Draft.permissionGroupIDKey]
            else { return }
            view.permissionGroups.removeAll { $0 == id }
            if event.changes["change"] == "added" { view.permissionGroups.append(id) }
        case .memberKicked, .memberQuit, .kickedFromGroup, .quitGroup:
            guard event.targets.contains(user) || event.recipient == .user(user) else { return }
            remove(event.groupID, route: route, routes: routes)
        case .receiveOptionChanged:
            guard let option = event.changes["option"].flatMap(ReceiveOption.init(rawValue:)) else { return }
            route.groups?[event.groupID]?.receiveOption = option
        default:
            break
        }
    }

    /// Makes a stream receive `group` (and, for a Community, its topics).
    static func add(
        _ group: String, joinSequence: Int64, joinEventID: Int64, receiveOption: ReceiveOption, role: MemberRole,
        permissionGroups: [String], route: Route, routes: AppRoutes
    ) {
        let view = GroupView(
            route: route, joinSequence: joinSequence, joinEventID: joinEventID, receiveOption: receiveOption, role: role,
            permissionGroups: permissionGroups)
        route.groups?[group] = view
        routes.byGroup[group, default: [:]][route.subscriber.id] = view
    }

    /// Stops a stream receiving `group`.
    static func remove(_ group: String, route: Route, routes: AppRoutes) {
        route.groups?[group] = nil
        routes.byGroup[group]?[route.subscriber.id] = nil
        if routes.byGroup[group]?.isEmpty == true { routes.byGroup[group] = nil }
    }

    /// Whether a group item may reach user streams under the AVChatRoom member-event rate
    /// (every other item may).
    static func admitsMemberEvent(_ logged: LoggedEvent, state: inout State, now: Timestamp, settings: Settings) -> Bool {
        guard logged.event.kind.isMemberChange,
            GroupTypePreset.of(logged.groupType).behaviour.memberChangeEvents == .rateLimited
        else { return true }
        let key = RoomKey(app: logged.event.appID, group: logged.event.groupID)
        let second = now.millisecondsSince1970 / 1000
        var window = state.roomWindows[key] ?? (second, 0)
        if window.second != second { window = (second, 0) }
        guard window.count < settings.avChatRoomMemberEventsPerSecond else { return false }
        window.count += 1
        state.roomWindows[key] = window
        if state.roomWindows.count > 10_000 { state.roomWindows = state.roomWindows.filter { $0.value.second == second } }
        return true
    }
}
