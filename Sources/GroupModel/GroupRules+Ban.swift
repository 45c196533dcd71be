/// A user banned from a group: while the ban runs the user cannot join, apply, be invited or
/// have a pending application or invitation accepted.
public struct GroupBan: Sendable, Hashable {
    /// The banned user.
    public var userID: String
    /// When the ban ends (`nil`: until lifted).
    public var until: Timestamp?
    /// The reason the operator gave ("" when none).
    public var reason: String
    /// Who banned (`nil`: the app's backend).
    public var operatorID: String?
    /// When the ban was set.
    public var bannedAt: Timestamp

    /// Create a ban.
    public init(userID: String, until: Timestamp?, reason: String = "", operatorID: String?, bannedAt: Timestamp) {
        self.userID = userID
        self.until = until
        self.reason = reason
        self.operatorID = operatorID
        self.bannedAt = bannedAt
    }

    /// Whether the ban still runs at `now` (an ended ban is ignored, and deleted lazily).
    public func isActive(at now: Timestamp) -> Bool {
        until.map { $0 > now } ?? true
    }
}

/// The outcome for one user of `BanMembers` or `UnbanMembers`.
public enum BanOutcome: Sendable, Hashable {
    /// Banned (or the running ban replaced); `removed` is the membership the ban ended, if the
    /// user was a member.
    case banned(GroupBan, removed: Member?)
    /// The ban was lifted (the ban as it was).
    case lifted(GroupBan)
    /// Unban: the user is not banned (or the ban already ended).
    case notBanned
    /// Kick with ban: the user is not a member.
    case notMember
    /// Refused for this user (`TARGET_IS_OWNER`, `PERMISSION_DENIED`).
    case failed(GroupError)
    /// The user id itself is invalid (empty, too long, listed twice, the operator).
    case invalid(GroupError)
}

/// One user's result in a ban or unban batch.
public struct BanResult: Sendable, Hashable {
    /// The user the result is about.
    public var userID: String
    /// The outcome.
    public var outcome: BanOutcome

    /// Create a result.
    public init(userID: String, outcome: BanOutcome) {
        self.userID = userID
        self.outcome = outcome
    }
}

/// A ban or unban batch's plan: one result per requested user and the change to write.
public struct BanBatchPlan: Sendable, Hashable {
    /// One result per requested user, in request order.
    public var results: [BanResult]
    /// What to write: bans set or lifted, members removed, events.
    public var change: GroupChange

    /// Create a plan.
    public init(results: [BanResult], change: GroupChange) {
        self.results = results
        self.change = change
    }
}

extension GroupError.Reason {
    /// The user is banned from the group (join, application, invitation, acceptance).
    public static let userBanned: Self = "USER_BANNED"
    /// The group's ban list is at the app's `max_bans_per_group`.
    public static let banListFull: Self = "BAN_LIST_FULL"
    /// Unban: the user is not banned.
    public static let notBanned: Self = "NOT_BANNED"
    /// The group's mute bypass list is at the app's `max_mute_bypass_per_group`.
    public static let muteBypassFull: Self = "MUTE_BYPASS_FULL"
}

extension GroupError {
    /// `PERMISSION_DENIED` / `USER_BANNED`, metadata `user_id` and `until` (ms, `0` = until lifted).
    public static func userBanned(_ ban: GroupBan) -> Self {
        Self(code: .permissionDenied, reason: .userBanned, message: "\(ban.userID) is banned from the group",
             metadata: ["user_id": ban.userID, "until": GroupRules.millisText(ban.until)])
    }
}

extension GroupRules {
    /// `USER_BANNED` when `ban` (the user's ban from the group, if any) still runs at `now`. Join,
    /// application acceptance and the store's net under every plan check it; an invitation
    /// reports it per user.
    public static func checkNotBanned(_ ban: GroupBan?, now: Timestamp) throws {
        if let ban, ban.isActive(at: now) { throw GroupError.userBanned(ban) }
    }

    /// Check a `BanMembers` call (or `KickMembers` with `ban`) and plan it.
    ///
    /// - The call as a whole: whoever may remove members (``GroupSettings/removeMembersPermission``;
    ///   AVChatRoom, which removes nobody: the type's mute permission, the owner) bans, with the
    ///   rank rules of a kick; 1…``AppLimits/maxUsersPerBatch`` users; `seconds` in
    ///   0…``maxMuteSeconds`` (0: until lifted); reason ≤ ``AppLimits/applicationMessageBytes``.
    /// - Per user: malformed or repeated id, or the operator → `invalid`; with `membersOnly`
    ///   (kick) a non-member → `notMember`; the owner → `failed` `TARGET_IS_OWNER`; equal or higher
    ///   rank → `failed` `PERMISSION_DENIED`; otherwise `banned` (a running ban is replaced). A
    ///   member is removed as by a kick (`options.keepMuteStatus` keeps a running mute).
    /// - The group's running bans after the call may not exceed ``AppLimits/maxBansPerGroup``
    ///   (`FAILED_PRECONDITION` / `BAN_LIST_FULL`, metadata `limit`; nothing is written).
    /// - Events: for removed members `MEMBER_KICKED` (changes `reason`, `banned`) and
    ///   `KICKED_FROM_GROUP` to each; `MEMBER_BANNED` (targets: the banned users) to each of
    ///   `managers` (owner and admins) and to each banned user, changes `until`,
    ///   `duration_seconds`, `reason`.
    /// - Parameters:
    ///   - userIDs: The users to ban, in request order.
    ///   - seconds: How long the bans last, from `now` (0: until lifted).
    ///   - reason: The reason the operator gave ("" when none), kept with each ban and carried by
    ///     the events.
    ///   - group: The group as stored.
    ///   - op: The banning user and their membership, or the app's backend.
    ///   - memberships: The requested users' current memberships (absent: not a member).
    ///   - bans: The running bans of the requested users.
    ///   - banCount: How many running bans the group has.
    ///   - managers: The group's owner and admins.
    ///   - options: How a banned member leaves (`keepMuteStatus` keeps a running mute for a rejoin).
    ///   - membersOnly: Whether only members are banned (`KickMembers` with `ban`): a non-member gets
    ///     `notMember`, and a bad duration names `ban_duration_seconds`.
    ///   - limits: The app's limits.
    ///   - now: The time of the ban: the bans start at it, and running bans and mutes are compared
    ///     with it.
    public static func planBan(
        of userIDs: [String], for seconds: Int64, reason: String = "", in group: Group, by op: GroupOperator,
        memberships: [String: Member], bans: [String: GroupBan], banCount: Int, managers: [String],
        options: QuitOptions = QuitOptions(), membersOnly: Bool = false, limits: AppLimits, now: Timestamp
    ) throws -> BanBatchPlan {
        try authorize(.ban(target: nil), in: group, by: op).get()
        try checkBatch(userIDs, field: "user_ids", limits: limits)
        if seconds < 0 || seconds > maxMuteSeconds {
            throw GroupError.invalidArgument(
                field: membersOnly ? "ban_duration_seconds" : "duration_seconds",
                "the ban lasts 0 (until lifted) to \(maxMuteSeconds) seconds", limit: Int(maxMuteSeconds))
        }
        try FieldValidation.checkBytes(reason, field: "reason", limit: limits.applicationMessageBytes)
        let until: Timestamp? = seconds == 0 ? nil : now.adding(seconds: seconds)

        var after = group
        var change = GroupChange(group: group)
        var results: [BanResult] = []
        var seen: Set<String> = []
        var banned: [String] = []
        var removed: [String] = []
        var added = 0
        for (index, userID) in userIDs.enumerated() {
            if let error = batchEntryError(userID, index: index, field: "user_ids", seen: &seen, limits: limits) {
                results.append(BanResult(userID: userID, outcome: .invalid(error)))
                continue
            }
            let target = memberships[userID]
            if membersOnly, target == nil {
                results.append(BanResult(userID: userID, outcome: .notMember))
                continue
            }
            if userID == op.userID {
                results.append(BanResult(userID: userID, outcome: .invalid(GroupError.invalidArgument(
                    field: "user_ids[\(index)]", "you cannot ban yourself"))))
                continue
            }
            let decision = authorize(.ban(target: target?.role), in: group, by: op)
            if let error = decision.error {
                results.append(BanResult(userID: userID, outcome: .failed(error)))
                continue
            }
            let ban = GroupBan(userID: userID, until: until, reason: reason, operatorID: op.userID, bannedAt: now)
            if !(bans[userID]?.isActive(at: now) ?? false) { added += 1 }
            change.bans.append(ban)
            banned.append(userID)
            if let target {
                removed.append(userID)
                remove(target, in: &change, count: &after, options: options, now: now)
            }
            results.append(BanResult(userID: userID, outcome: .banned(ban, removed: target)))
        }
        if added > 0, banCount + added > limits.maxBansPerGroup {
            throw GroupError(
                code: .failedPrecondition, reason: .banListFull,
                message: "the group's ban list would exceed \(limits.maxBansPerGroup) users",
                metadata: ["limit": String(limits.maxBansPerGroup), "field": "user_ids"])
        }
        var kicked: [String: String] = ["banned": "true"]
        if !reason.isEmpty { kicked["reason"] = reason }
        change.events += kickEvents(of: removed, by: op, changes: kicked)
        if !banned.isEmpty {
            var changes = ["until": millisText(until), "duration_seconds": String(seconds)]
            if !reason.isEmpty { changes["reason"] = reason }
            change.events += notices(.memberBanned, of: banned, to: managers, by: op, changes: changes)
        }
        change.group = after
        return BanBatchPlan(results: results, change: change)
    }

    /// Check an `UnbanMembers` call and plan it: who may ban lifts bans
    /// (``GroupAction/manageBans``); 1…``AppLimits/maxUsersPerBatch`` users. Per user: malformed
    /// or repeated id → `invalid`; no running ban → `notBanned`; otherwise `lifted`. Events:
    /// `MEMBER_UNBANNED` (targets: the users whose ban was lifted) to each of `managers` and each
    /// of those users; none if nothing was lifted.
    public static func planUnban(
        of userIDs: [String], in group: Group, by op: GroupOperator, bans: [String: GroupBan], managers: [String],
        limits: AppLimits, now: Timestamp
    ) throws -> BanBatchPlan {
        try authorize(.manageBans, in: group, by: op).get()
        try checkBatch(userIDs, field: "user_ids", limits: limits)
        var change = GroupChange(group: group)
        var results: [BanResult] = []
        var seen: Set<String> = []
        var lifted: [String] = []
        for (index, userID) in userIDs.enumerated() {
            if let error = batchEntryError(userID, index: index, field: "user_ids", seen: &seen, limits: limits) {
                results.append(BanResult(userID: userID, outcome: .invalid(error)))
                continue
            }
            guard let ban = bans[userID], ban.isActive(at: now) else {
                results.append(BanResult(userID: userID, outcome: .notBanned))
                continue
            }
            change.liftedBans.append(userID)
            lifted.append(userID)
            results.append(BanResult(userID: userID, outcome: .lifted(ban)))
        }
        if !lifted.isEmpty {
            change.events += notices(.memberUnbanned, of: lifted, to: managers, by: op, changes: [:])
        }
        return BanBatchPlan(results: results, change: change)
    }

    /// A ban notice addressed to each manager (targets: every user) and to each user (targets:
    /// that user), each recipient once.
    private static func notices(
        _ kind: GroupEvent.Kind, of users: [String], to managers: [String], by op: GroupOperator,
        changes: [String: String]
    ) -> [GroupEvent.Draft] {
        var drafts: [GroupEvent.Draft] = []
        let userSet = Set(users)
        var seen: Set<String> = []
        for manager in managers where !userSet.contains(manager) && seen.insert(manager).inserted {
            drafts.append(GroupEvent.Draft(kind: kind, operatorID: op.userID, targets: users, changes: changes,
                                           recipient: .user(manager)))
        }
        for user in users {
            drafts.append(GroupEvent.Draft(kind: kind, operatorID: op.userID, targets: [user], changes: changes,
                                           recipient: .user(user)))
        }
        return drafts
    }

    /// Check an `UpdateMuteBypassList` call and plan it.
    ///
    /// - Who mutes the group (``GroupAction/updateMuteBypass``: Work, AVChatRoom the owner; Public,
    ///   Meeting owner and admins) changes the list. `add` and `remove` together name
    ///   1…``AppLimits/maxUsersPerBatch`` users; a malformed id, or one listed twice (in either
    ///   list) → `INVALID_ARGUMENT` naming it (`add_user_ids[i]`, `remove_user_ids[i]`).
    /// - Only members are added (`NOT_FOUND` / `MEMBER_NOT_FOUND` naming the entry); removing a
    ///   user not on the list changes nothing for them. The list may not grow past
    ///   ``AppLimits/maxMuteBypassPerGroup`` (`FAILED_PRECONDITION` / `MUTE_BYPASS_FULL`, metadata
    ///   `limit`). Any refusal changes nothing.
    /// - Events: `MUTE_BYPASS_CHANGED` with changes `added`, `removed` (the users actually added
    ///   and removed) and `user_ids` (the list after), newline-separated (user ids hold no control
    ///   characters); none if nothing changed.
    public static func planMuteBypassUpdate(
        add: [String], remove: [String], in group: Group, by op: GroupOperator, memberships: [String: Member],
        limits: AppLimits
    ) throws -> GroupChange {
        try authorize(.updateMuteBypass, in: group, by: op).get()
        if add.isEmpty && remove.isEmpty {
            throw GroupError.invalidArgument(field: "add_user_ids", "name at least one user to add or remove",
                                             limit: limits.maxUsersPerBatch)
        }
        if add.count + remove.count > limits.maxUsersPerBatch {
            throw GroupError.invalidArgument(
                field: "add_user_ids", "\(add.count + remove.count) users exceed the limit of \(limits.maxUsersPerBatch) per call",
                limit: limits.maxUsersPerBatch)
        }
        var seen: Set<String> = []
        for (field, users) in [("add_user_ids", add), ("remove_user_ids", remove)] {
            for (index, userID) in users.enumerated() {
                if let error = batchEntryError(userID, index: index, field: field, seen: &seen, limits: limits) {
                    throw error
                }
            }
        }
        var list = group.muteBypass
        var added: [String] = []
        for (index, userID) in add.enumerated() {
            guard memberships[userID] != nil else {
                throw GroupError.memberNotFound(userID, field: "add_user_ids[\(index)]")
            }
            if !list.contains(userID) {
                list.append(userID)
                added.append(userID)
            }
        }
        let removed = remove.filter { list.contains($0) }
        list.removeAll { removed.contains($0) }
        if list.count > limits.maxMuteBypassPerGroup {
            throw GroupError(
                code: .failedPrecondition, reason: .muteBypassFull,
                message: "the group's mute bypass list would exceed \(limits.maxMuteBypassPerGroup) members",
                metadata: ["limit": String(limits.maxMuteBypassPerGroup), "field": "add_user_ids"])
        }
        if added.isEmpty && removed.isEmpty { return .unchanged(group) }
        var after = group
        after.muteBypass = list
        return GroupChange(group: after, events: [GroupEvent.Draft(
            kind: .muteBypassChanged, operatorID: op.userID, targets: added + removed,
            changes: ["added": added.joined(separator: "\n"), "removed": removed.joined(separator: "\n"),
                      "user_ids": list.joined(separator: "\n")])])
    }
}
