/// The plan of a `QuitGroup` call.
public struct QuitPlan: Sendable, Hashable {
    /// What to write.
    public var change: GroupChange
    /// The new owner, when the owner quit and ownership passed on.
    public var newOwnerID: String?
    /// Whether the quitter was the last member and the group is dismissed.
    public var groupDismissed: Bool { self.change.dismissesGroup }

    /// Create a quit plan.
    public init(change: GroupChange, newOwnerID: String?) {
        self.change = change
        self.newOwnerID = newOwnerID
    }
}

extension GroupRules {
    /// Check a `QuitGroup` call and plan it.
    ///
    /// - Only a member quits (the backend gets `OPERATOR_REQUIRED`, a non-member `NOT_A_MEMBER`,
    ///   or `GROUP_NOT_FOUND` for a Work group).
    /// - The owner may quit only where ``GroupSettings/ownerQuit`` allows (by default Work only);
    ///   `refused` is `OWNER_CANNOT_QUIT`. An owner who is not alone hands ownership on, per the
    ///   setting: to the longest-standing member (`successor`, the member with the lowest
    ///   `joinOrder` besides the owner), or to the longest-standing admin (`longestStandingAdmin`)
    ///   and, with no admin, to `successor`. The heir's mute ends (the owner is never muted);
    ///   events `OWNER_CHANGED` (changes `previous_owner`, `previous_owner_quit = true`) first.
    /// - The last member leaving dismisses the group (ZIM): events then end with
    ///   `GROUP_DISMISSED` (changes `reason = LAST_MEMBER_LEFT`). This applies to types whose
    ///   membership is stored; an AVChatRoom audience coming and going never dismisses the room.
    /// - Events: `MEMBER_QUIT` (targets: the user) and `QUIT_GROUP` to the user's own devices.
    /// - `options.keepMuteStatus` keeps a running mute for a later rejoin (``GroupChange/retainedMutes``).
    /// - Parameters:
    ///   - group: The group as stored.
    ///   - op: The quitting user and their membership.
    ///   - options: How the user leaves (`keepMuteStatus` keeps a running mute for a rejoin).
    ///   - successor: For an owner: the longest-standing other member (`nil` if alone).
    ///   - longestStandingAdmin: For an owner under `to_longest_standing_admin`: the
    ///     longest-standing other admin (`nil` if none).
    ///   - now: The time of the quit (the user's mute is kept only if it still runs at it).
    /// - Throws: `GroupError` as above; `INTERNAL` if an owner is not alone but no valid
    ///   successor is given.
    public static func planQuit(
        _ group: Group, by op: GroupOperator, options: QuitOptions = QuitOptions(), successor: Member? = nil,
        longestStandingAdmin: Member? = nil, now: Timestamp
    ) throws -> QuitPlan {
        try authorize(.quit, in: group, by: op).get()
        guard let userID = op.userID, let member = op.membership else { throw GroupError.operatorRequired("quit") }

        var after = group
        var change = GroupChange(group: group)
        var newOwnerID: String?
        let stored = group.type.preset.behaviour.membershipStored
        let last = stored && group.memberCount <= 1

        if member.role == .owner && !last {
            var chosen = successor
            if group.settings.ownerQuit == .longestStandingAdminElseMember, let admin = longestStandingAdmin,
               admin.role == .admin {
                chosen = admin
            }
            guard let chosen, chosen.userID != userID else {
                throw GroupError.internal("an owner quitting needs the longest-standing member as successor")
            }
            var heir = chosen
            heir.role = .owner
            heir.mutedUntil = nil  // the owner is never muted
            after.ownerID = heir.userID
            newOwnerID = heir.userID
            change.updatedMembers.append(heir)
            change.events.append(GroupEvent.Draft(
                kind: .ownerChanged, operatorID: userID, targets: [heir.userID],
                changes: ["previous_owner": userID, "previous_owner_quit": "true"]))
        }
        if member.role == .owner && last {
            after.ownerID = nil
        }

        after.memberCount = max(0, group.memberCount - 1)
        change.removedMembers.append(userID)
        if options.keepMuteStatus, member.isMuted(at: now), let until = member.mutedUntil {
            change.retainedMutes[userID] = until
        }
        change.events.append(GroupEvent.Draft(kind: .memberQuit, operatorID: userID, targets: [userID]))
        change.events.append(GroupEvent.Draft(kind: .quitGroup, operatorID: userID, targets: [userID],
                                              recipient: .user(userID)))
        if last {
            change.dismissesGroup = true
            change.events.append(GroupEvent.Draft(
                kind: .groupDismissed, operatorID: userID, changes: ["reason": "LAST_MEMBER_LEFT"]))
        }
        change.group = after
        return QuitPlan(change: change, newOwnerID: newOwnerID)
    }

    /// Check a `TransferOwnership` call and plan it.
    ///
    /// - Owner only (or the backend); not in AVChatRoom (`TRANSFER_NOT_SUPPORTED`). The new owner
    ///   must be another member (`MEMBER_NOT_FOUND`, or `INVALID_ARGUMENT` for oneself).
    /// - The previous owner becomes an ordinary member, or leaves when `quit` is set (RongCloud
    ///   transfer-and-quit; `options` as for quitting). The backend cannot quit (`INVALID_ARGUMENT`
    ///   naming `quit_after_transfer`).
    /// - Events: `OWNER_CHANGED` (targets: the new owner; changes `previous_owner`,
    ///   `previous_owner_quit`), then, when quitting, `MEMBER_QUIT` and `QUIT_GROUP`.
    /// - Parameters:
    ///   - group: The group as stored.
    ///   - newOwnerID: The member who becomes owner.
    ///   - op: The owner transferring, with their membership, or the app's backend.
    ///   - newOwner: That user's membership (`nil`: not a member).
    ///   - currentOwner: The current owner's membership, when the backend transfers (a user
    ///     operator is the owner and passes it as `op.membership`).
    ///   - quit: Whether the previous owner leaves the group once it is transferred.
    ///   - options: How the previous owner leaves when `quit` is set (`keepMuteStatus` keeps a running
    ///     mute for a rejoin).
    ///   - limits: The app's limits (the new owner's id ≤ ``AppLimits/userIDBytes``).
    ///   - now: The time of the transfer (a quitting owner's mute is kept only if it still runs at it).
    public static func planOwnershipTransfer(
        of group: Group, to newOwnerID: String, by op: GroupOperator, newOwner: Member?,
        currentOwner: Member? = nil, quit: Bool = false, options: QuitOptions = QuitOptions(), limits: AppLimits,
        now: Timestamp
    ) throws -> GroupChange {
        try authorize(.transferOwnership, in: group, by: op).get()
        try FieldValidation.checkUserID(newOwnerID, field: "new_owner_user_id", limit: limits.userIDBytes)
        if quit && op.isBackend {
            throw GroupError.invalidArgument(
                field: "quit_after_transfer", "the app's backend is not a member and cannot quit; act for the owner")
        }
        let previous = op.isBackend ? currentOwner : op.membership
        guard let previous, previous.role == .owner, group.ownerID == previous.userID else {
            throw GroupError.internal("the current owner's membership is needed to transfer ownership")
        }
        if newOwnerID == previous.userID {
            throw GroupError.invalidArgument(field: "new_owner_user_id", "the new owner is the current owner")
        }
        guard var heir = newOwner, heir.userID == newOwnerID else {
            throw GroupError.memberNotFound(newOwnerID, field: "new_owner_user_id")
        }

        var after = group
        var change = GroupChange(group: group)
        heir.role = .owner
        heir.mutedUntil = nil  // the owner is never muted
        after.ownerID = heir.userID
        change.updatedMembers.append(heir)
        change.events.append(GroupEvent.Draft(
            kind: .ownerChanged, operatorID: op.userID, targets: [heir.userID],
            changes: ["previous_owner": previous.userID, "previous_owner_quit": String(quit)]))
        if quit {
            after.memberCount = max(0, group.memberCount - 1)
            change.removedMembers.append(previous.userID)
            if options.keepMuteStatus, previous.isMuted(at: now), let until = previous.mutedUntil {
                change.retainedMutes[previous.userID] = until
            }
            change.events.append(GroupEvent.Draft(kind: .memberQuit, operatorID: previous.userID, targets: [previous.userID]))
            change.events.append(GroupEvent.Draft(kind: .quitGroup, operatorID: previous.userID,
                                                  targets: [previous.userID], recipient: .user(previous.userID)))
        } else {
            var demoted = previous
            demoted.role = .member
            change.updatedMembers.append(demoted)
        }
        change.group = after
        return change
    }
}
