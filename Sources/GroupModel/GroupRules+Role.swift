extension GroupRules {
    /// Check a `SetMemberRole` call and plan it.
    ///
    /// - Only types with admins (Public, Meeting; else `ROLE_NOT_SUPPORTED`), only the owner (or
    ///   the backend); the new role is `admin` or `member` (`owner` is `INVALID_ARGUMENT`: ownership
    ///   moves by transfer); the owner's role cannot be set (`TARGET_IS_OWNER`, so the owner cannot
    ///   demote themselves); nobody sets their own role (`PERMISSION_DENIED`, so nobody promotes
    ///   themselves); the target must be a member (`MEMBER_NOT_FOUND`).
    /// - Setting the role a member already holds changes nothing (empty plan).
    /// - Events: `ADMIN_SET` tip and `ADMIN_GRANTED` to the user, or `ADMIN_CANCELLED` and
    ///   `ADMIN_REVOKED`.
    /// - Parameters:
    ///   - userID: The member whose role changes.
    ///   - role: `admin` or `member`.
    ///   - group: The group as stored.
    ///   - op: The owner changing the role, with their membership, or the app's backend.
    ///   - target: That user's membership (`nil`: not a member).
    ///   - limits: The app's limits (the user id ≤ ``AppLimits/userIDBytes``).
    public static func planRoleChange(
        of userID: String, to role: MemberRole, in group: Group, by op: GroupOperator, target: Member?,
        limits: AppLimits
    ) throws -> GroupChange {
        guard let target, target.userID == userID else {
            // Type- and operator-level refusals come first, then the missing target.
            try authorize(.setRole(target: .member, to: role), in: group, by: op).get()
            try FieldValidation.checkUserID(userID, field: "user_id", limit: limits.userIDBytes)
            throw GroupError.memberNotFound(userID, field: "user_id")
        }
        try authorize(.setRole(target: target.role, to: role), in: group, by: op).get()
        if userID == op.userID {
            throw GroupError(code: .permissionDenied, reason: .permissionDenied,
                             message: "nobody changes their own role", metadata: ["field": "user_id"])
        }
        if !group.type.preset.behaviour.allowedRoles.contains(role) {
            throw GroupError.invalidArgument(field: "role", "\(group.type) groups have no \(role) role")
        }
        if target.role == role { return .unchanged(group) }

        var changed = target
        changed.role = role
        let promoted = role == .admin
        return GroupChange(group: group, updatedMembers: [changed], events: [
            GroupEvent.Draft(kind: promoted ? .adminSet : .adminCancelled, operatorID: op.userID, targets: [userID]),
            GroupEvent.Draft(kind: promoted ? .adminGranted : .adminRevoked, operatorID: op.userID, targets: [userID],
                             recipient: .user(userID)),
        ])
    }
}
