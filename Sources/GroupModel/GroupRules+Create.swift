/// A member to add when a group is created.
public struct InitialMember: Sendable, Hashable {
    /// The user to add.
    public var userID: String
    /// The role: `member`, or `admin` where the type has admins (never `owner`).
    public var role: MemberRole
    /// The member's name card in the group.
    public var nameCard: String
    /// The member's custom fields.
    public var custom: [String: [UInt8]]

    /// Create an initial member.
    public init(userID: String, role: MemberRole = .member, nameCard: String = "", custom: [String: [UInt8]] = [:]) {
        self.userID = userID
        self.role = role
        self.nameCard = nameCard
        self.custom = custom
    }
}

/// What a `CreateGroup` call asks for, already decoded from the wire.
public struct GroupCreationRequest: Sendable, Hashable {
    /// The type (legacy names are parsed by ``GroupType/init(name:)``).
    public var type: GroupType
    /// A custom id, or `nil`/empty to have one generated (`@TGS#…`).
    public var groupID: String?
    /// The name (required, ≤ ``AppLimits/groupNameBytes``).
    public var name: String
    /// The introduction.
    public var introduction: String
    /// The notification (announcement).
    public var notification: String
    /// The avatar URL.
    public var faceURL: String
    /// The maximum member count; `nil` or 0 takes the app's limit for the type.
    public var maxMembers: Int?
    /// Settings to change from the type's defaults (only those the type does not fix).
    public var settings: GroupSettings.Changes
    /// The owner, when the app's backend creates the group; a user creating a group is its owner
    /// and may leave this `nil` (or name themselves).
    public var ownerID: String?
    /// Members to add besides the owner.
    public var members: [InitialMember]
    /// Group custom fields.
    public var custom: [String: [UInt8]]

    /// Create a request; everything but type and name is optional.
    public init(
        type: GroupType, groupID: String? = nil, name: String, introduction: String = "",
        notification: String = "", faceURL: String = "", maxMembers: Int? = nil,
        settings: GroupSettings.Changes = .init(), ownerID: String? = nil, members: [InitialMember] = [],
        custom: [String: [UInt8]] = [:]
    ) {
        self.type = type
        self.groupID = groupID
        self.name = name
        self.introduction = introduction
        self.notification = notification
        self.faceURL = faceURL
        self.maxMembers = maxMembers
        self.settings = settings
        self.ownerID = ownerID
        self.members = members
        self.custom = custom
    }
}

/// Everything a store must write, in one transaction, to create a group.
public struct GroupCreationPlan: Sendable, Hashable {
    /// The group, with `memberCount` set and `latestSequence` 0 (the store numbers the events).
    public var group: Group
    /// The stored members, owner first, with `joinOrder` 1, 2, 3…
    public var members: [Member]
    /// The events to append, in order.
    public var events: [GroupEvent.Draft]
    /// Whether the id was generated (on `GROUP_ID_TAKEN`, plan again for a fresh id).
    public var idWasGenerated: Bool

    /// Creates a plan.
    public init(group: Group, members: [Member], events: [GroupEvent.Draft], idWasGenerated: Bool) {
        self.group = group
        self.members = members
        self.events = events
        self.idWasGenerated = idWasGenerated
    }
}

extension GroupRules {
    /// Check a `CreateGroup` request and plan the group, its members and its events.
    ///
    /// - The creator (a user) becomes the owner; the backend (`creatorID == nil`) names the owner
    ///   in `request.ownerID`, which only AVChatRoom may leave empty.
    /// - Type defaults are applied, then the request's setting changes that the type allows.
    /// - `maxMembers` may not exceed the app's limit for the type; owner plus members must fit.
    /// - Members hold roles the type allows; never `owner`; no one twice; the owner listed again
    ///   as a plain member is ignored. AVChatRoom takes no initial members (its audience joins).
    /// - Events: one `GROUP_CREATED` (recipient: the group) whose targets are all initial members,
    ///   owner first, and whose changes carry `type`, `name` and `owner_id`.
    /// - Parameters:
    ///   - request: The decoded request.
    ///   - appID: The caller's app.
    ///   - creatorID: The user creating the group, or `nil` for the app's backend.
    ///   - limits: The app's limits.
    ///   - now: The creation time.
    ///   - generateID: Makes a fresh id when the request has none.
    /// - Throws: `GroupError`: `INVALID_ARGUMENT` naming the field (and limit), or
    ///   `SETTING_FIXED_BY_TYPE`.
    public static func planCreation(
        _ request: GroupCreationRequest, appID: String, creatorID: String?, limits: AppLimits,
        now: Timestamp, generateID: () -> String = { GroupID.generate() }
    ) throws -> GroupCreationPlan {
        try authorize(.createGroup, type: request.type, settings: request.type.preset.defaultSettings,
                      actor: creatorID == nil ? .backend : .nonMember).get()
        let preset = request.type.preset
        let behaviour = preset.behaviour

        // Owner.
        let ownerID: String?
        if let creatorID {
            if let named = request.ownerID, !named.isEmpty, named != creatorID {
                throw GroupError(
                    code: .permissionDenied, reason: .adminTokenRequired,
                    message: "only the app's backend (an admin token without x-operator-id) may name an owner other than the creator",
                    metadata: ["field": "owner_id"])
            }
            ownerID = creatorID
        } else if let named = request.ownerID, !named.isEmpty {
            try FieldValidation.checkUserID(named, field: "owner_id", limit: limits.userIDBytes)
            ownerID = named
        } else if behaviour.ownerlessCreationAllowed {
            ownerID = nil
        } else {
            throw GroupError.invalidArgument(
                field: "owner_id", "a \(request.type) group created by the app's backend needs an owner_id")
        }

        // Id.
        let id: String
        let generated: Bool
        if let custom = request.groupID, !custom.isEmpty {
            try GroupID.validateCustom(custom)
            id = custom
            generated = false
        } else {
            id = generateID()
            generated = true
        }

        // Profile.
        if request.name.isEmpty {
            throw GroupError.invalidArgument(field: "name", "name must not be empty", limit: limits.groupNameBytes)
        }
        try FieldValidation.checkBytes(request.name, field: "name", limit: limits.groupNameBytes)
        try FieldValidation.checkBytes(request.introduction, field: "introduction", limit: limits.introductionBytes)
        try FieldValidation.checkBytes(request.notification, field: "notification", limit: limits.notificationBytes)
        try FieldValidation.checkBytes(request.faceURL, field: "face_url", limit: limits.faceURLBytes)
        for key in request.custom.keys where key.isEmpty {
            throw GroupError.invalidArgument(field: "custom", "custom field keys must not be empty")
        }

        // Settings.
        try validateSlowModeInterval(
            request.settings.slowModeIntervalSeconds, field: "settings.slow_mode_interval_seconds", limits: limits)
        let settings = try preset.apply(request.settings, to: preset.defaultSettings).settings

        // Max members.
        let appLimit = limits.maxMembers(for: request.type)
        var maxMembers = appLimit
        if let requested = request.maxMembers, requested != 0 {
            if requested < 0 {
                throw GroupError.invalidArgument(field: "max_members", "max_members must not be negative")
            }
            if let appLimit, requested > appLimit {
                throw GroupError.invalidArgument(
                    field: "max_members",
                    "max_members \(requested) exceeds this app's limit of \(appLimit) for \(request.type) groups",
                    limit: appLimit)
            }
            maxMembers = requested
        }

        // Members.
        var seen: Set<String> = []
        if let ownerID { seen.insert(ownerID) }
        var others: [InitialMember] = []
        if !behaviour.membershipStored, !request.members.isEmpty {
            throw GroupError.invalidArgument(
                field: "members", "\(request.type) groups take no initial members; members join by themselves")
        }
        if request.members.count > limits.maxUsersPerBatch {
            throw GroupError.invalidArgument(
                field: "members", "\(request.members.count) initial members exceed the limit of \(limits.maxUsersPerBatch)",
                limit: limits.maxUsersPerBatch)
        }
        for (index, member) in request.members.enumerated() {
            let field = "members[\(index)]"
            for key in member.custom.keys where key.isEmpty {
                throw GroupError.invalidArgument(field: field + ".custom", "custom field keys must not be empty")
            }
            try FieldValidation.checkUserID(member.userID, field: field + ".user_id", limit: limits.userIDBytes)
            try FieldValidation.checkBytes(member.nameCard, field: field + ".name_card", limit: limits.nameCardBytes)
            if member.role == .owner {
                throw GroupError.invalidArgument(
                    field: field + ".role", "the owner is the creator or owner_id, not a member's role")
            }
            if !behaviour.allowedRoles.contains(member.role) {
                throw GroupError.invalidArgument(
                    field: field + ".role", "\(request.type) groups have no \(member.role) role")
            }
            if member.userID == ownerID {
                if member.role == .member && member.nameCard.isEmpty && member.custom.isEmpty { continue }
                throw GroupError.invalidArgument(field: field + ".user_id", "the owner is listed as a member")
            }
            if !seen.insert(member.userID).inserted {
                throw GroupError.invalidArgument(field: field + ".user_id", "\(member.userID) is listed twice")
            }
            others.append(member)
        }
        let count = (ownerID == nil ? 0 : 1) + others.count
        if let maxMembers, count > maxMembers {
            throw GroupError.invalidArgument(
                field: "members", "\(count) initial members exceed max_members \(maxMembers)", limit: maxMembers)
        }

        var members: [Member] = []
        if let ownerID {
            members.append(Member(userID: ownerID, role: .owner, joinedAt: now, joinOrder: 1, joinSource: .creator))
        }
        for member in others {
            members.append(Member(
                userID: member.userID, role: member.role, joinedAt: now, joinOrder: Int64(members.count + 1),
                nameCard: member.nameCard, custom: member.custom, joinSource: .initialMember, inviterID: creatorID))
        }

        let group = Group(
            appID: appID, id: id, type: request.type, name: request.name, introduction: request.introduction,
            notification: request.notification, faceURL: request.faceURL, settings: settings, ownerID: ownerID,
            maxMembers: maxMembers, memberCount: members.count, createdAt: now, updatedAt: now,
            custom: request.custom)
        var changes = creationChanges(group, memberCount: members.count)
        let admins = members.filter { $0.role == .admin }.map(\.userID)
        if !admins.isEmpty { changes[GroupEvent.Draft.initialAdminsKey] = admins.joined(separator: "\n") }
        let created = GroupEvent.Draft(
            kind: .groupCreated, operatorID: creatorID, targets: members.map(\.userID), changes: changes)
        return GroupCreationPlan(group: group, members: members, events: [created], idWasGenerated: generated)
    }

    /// Check a `DismissGroup` call and plan its events.
    ///
    /// Work groups are dismissed only by the app's backend; the others by their owner or the
    /// backend (Tencent's V2 group guide).
    /// - Parameters:
    ///   - group: The group as stored.
    ///   - actor: The caller's acting role in the group.
    ///   - operatorID: The user dismissing it, or `nil` for the backend.
    /// - Returns: One `GROUP_DISMISSED` draft (recipient: the group).
    /// - Throws: `GroupError` from ``authorize(_:type:settings:actor:)``.
    public static func planDismissal(
        of group: Group, by actor: ActingRole, operatorID: String?
    ) throws -> [GroupEvent.Draft] {
        try authorize(.dismiss, in: group, actor: actor).get()
        return [GroupEvent.Draft(kind: .groupDismissed, operatorID: operatorID, targets: [])]
    }
}
