/// A partial profile update: the fields to change (`nil` = keep) and custom field changes.
public struct ProfileUpdate: Sendable, Hashable {
    /// New name (must stay non-empty).
    public var name: String?
    /// New introduction (empty clears it).
    public var introduction: String?
    /// New notification, i.e. announcement (empty clears it).
    public var notification: String?
    /// New avatar URL (empty clears it).
    public var faceURL: String?
    /// Custom field changes: key → new value; an empty value removes the key.
    public var custom: [String: [UInt8]]

    /// Create an update; every field defaults to "keep".
    public init(
        name: String? = nil, introduction: String? = nil, notification: String? = nil, faceURL: String? = nil,
        custom: [String: [UInt8]] = [:]
    ) {
        self.name = name
        self.introduction = introduction
        self.notification = notification
        self.faceURL = faceURL
        self.custom = custom
    }

    /// The profile fields the update addresses (for the permission check).
    public var fields: Set<ProfileField> {
        var fields: Set<ProfileField> = []
        if self.name != nil { fields.insert(.name) }
        if self.introduction != nil { fields.insert(.introduction) }
        if self.notification != nil { fields.insert(.notification) }
        if self.faceURL != nil { fields.insert(.faceURL) }
        if !self.custom.isEmpty { fields.insert(.customFields) }
        return fields
    }

    /// Whether the update addresses nothing.
    public var isEmpty: Bool { self.fields.isEmpty }
}

extension GroupRules {
    /// Check an `UpdateGroupProfile` call and plan it.
    ///
    /// - Permission: ``GroupSettings/editProfilePermission`` (Work: any member; Public, Meeting:
    ///   owner and admins; AVChatRoom: owner), through ``authorize(_:type:settings:actor:)``;
    ///   custom keys also need their own write permission from `schema`.
    /// - Limits: name 1…``AppLimits/groupNameBytes``, introduction, notification and avatar URL
    ///   within their byte limits; custom keys as ``CustomFieldSchema`` defines them.
    /// - Events: one `GROUP_INFO_CHANGED` whose `changes` map each changed field (`name`,
    ///   `introduction`, `notification`, `face_url`, `custom.<key>` in Base64, empty = removed) to
    ///   its new value; none when nothing changed (then the plan is empty).
    /// - Throws: `GroupError`: `INVALID_ARGUMENT` naming the field (an empty update names
    ///   `update_mask`), or the refusal of ``authorize(_:type:settings:actor:)``.
    public static func planProfileUpdate(
        _ update: ProfileUpdate, of group: Group, by op: GroupOperator, limits: AppLimits,
        customFields schema: CustomFieldSchema? = nil, now: Timestamp
    ) throws -> GroupChange {
        try authorize(.updateProfile(update.fields), in: group, by: op).get()
        let (after, changes) = try applyProfile(update, to: group, actor: op.role, limits: limits, customFields: schema, now: now)
        if changes.isEmpty { return .unchanged(group) }
        return GroupChange(group: after, events: [
            GroupEvent.Draft(kind: .groupInfoChanged, operatorID: op.userID, changes: changes),
        ])
    }

    /// Check a profile update's fields and apply it to `group` (a group or a topic): the group
    /// after it (`updatedAt` is `now` when something changed) and the changes as event changes
    /// (empty: nothing changed).
    /// - Throws: `INVALID_ARGUMENT` naming the field (an empty update names `update_mask`).
    static func applyProfile(
        _ update: ProfileUpdate, to group: Group, actor: ActingRole, limits: AppLimits, customFields schema: CustomFieldSchema?,
        now: Timestamp
    ) throws -> (group: Group, changes: [String: String]) {
        if update.isEmpty {
            throw GroupError.invalidArgument(field: "update_mask", "name at least one field to change")
        }
        if let name = update.name {
            if name.isEmpty {
                throw GroupError.invalidArgument(field: "name", "name must not be empty", limit: limits.groupNameBytes)
            }
            try FieldValidation.checkBytes(name, field: "name", limit: limits.groupNameBytes)
        }
        if let text = update.introduction {
            try FieldValidation.checkBytes(text, field: "introduction", limit: limits.introductionBytes)
        }
        if let text = update.notification {
            try FieldValidation.checkBytes(text, field: "notification", limit: limits.notificationBytes)
        }
        if let text = update.faceURL {
            try FieldValidation.checkBytes(text, field: "face_url", limit: limits.faceURLBytes)
        }
        let custom = try applyCustom(update.custom, to: group.custom, scope: .group, schema: schema, actor: actor)

        var after = group
        var changes: [String: String] = [:]
        if let v = update.name, v != group.name { after.name = v; changes["name"] = v }
        if let v = update.introduction, v != group.introduction { after.introduction = v; changes["introduction"] = v }
        if let v = update.notification, v != group.notification { after.notification = v; changes["notification"] = v }
        if let v = update.faceURL, v != group.faceURL { after.faceURL = v; changes["face_url"] = v }
        after.custom = custom.values
        customChanges(custom.changed, values: custom.values, into: &changes)
        if !changes.isEmpty { after.updatedAt = now }
        return (after, changes)
    }

    /// Check an `UpdateGroupSettings` call and plan it.
    ///
    /// - The roles in ``GroupSettings/editSettingsPermission`` (and the backend) change settings;
    ///   ``GroupSettingKey/ownerOnly`` (who edits settings, what an owner's quit does) only the
    ///   owner (and the backend), so a granted role cannot widen its own grant; a setting the type fixes cannot be
    ///   moved by anyone (`FAILED_PRECONDITION` / `SETTING_FIXED_BY_TYPE`), though sending its
    ///   current value is a no-op. `maxMembers` is for the backend only (`ADMIN_TOKEN_REQUIRED`),
    ///   at least 1, at most the app's limit for the type and not below the current member count.
    /// - Events: one `GROUP_SETTINGS_CHANGED` whose `changes` map each changed setting (its
    ///   ``GroupSettingKey`` name, and `max_members`) to its new value; none when nothing changed.
    /// - Throws: `GroupError` as above, or `INVALID_ARGUMENT` for an empty request (`update_mask`).
    public static func planSettingsUpdate(
        _ changes: GroupSettings.Changes, maxMembers: Int? = nil, of group: Group, by op: GroupOperator,
        limits: AppLimits, now: Timestamp
    ) throws -> GroupChange {
        let preset = group.type.preset
        try validateSlowModeInterval(changes.slowModeIntervalSeconds, field: "settings.slow_mode_interval_seconds", limits: limits)
        let requested = group.settings.applying(changes).differences(from: group.settings)
        if !changes.isEmpty || maxMembers == nil {
            try authorize(.updateSettings(requested), in: group, by: op).get()
        }
        if let maxMembers, maxMembers != group.maxMembers || changes.isEmpty {
            try authorize(.setMaxMembers, in: group, by: op).get()
        }
        if changes.isEmpty && maxMembers == nil {
            throw GroupError.invalidArgument(field: "update_mask", "name at least one setting to change")
        }
        let applied = try preset.apply(changes, to: group.settings)

        var after = group
        after.settings = applied.settings
        var text: [String: String] = [:]
        for key in applied.changed { text[key.rawValue] = applied.settings.value(of: key) }

        if let maxMembers {
            let appLimit = limits.maxMembers(for: group.type)
            if maxMembers < 1 {
                throw GroupError.invalidArgument(field: "max_member_count", "max_member_count must be at least 1")
            }
            if let appLimit, maxMembers > appLimit {
                throw GroupError.invalidArgument(
                    field: "max_member_count",
                    "max_member_count \(maxMembers) exceeds this app's limit of \(appLimit) for \(group.type) groups",
                    limit: appLimit)
            }
            if maxMembers < group.memberCount {
                throw GroupError.invalidArgument(
                    field: "max_member_count",
                    "max_member_count \(maxMembers) is below the current \(group.memberCount) members")
            }
            if maxMembers != group.maxMembers {
                after.maxMembers = maxMembers
                text["max_members"] = String(maxMembers)
            }
        }
        if text.isEmpty { return .unchanged(group) }
        after.updatedAt = now
        return GroupChange(group: after, events: [
            GroupEvent.Draft(kind: .groupSettingsChanged, operatorID: op.userID, changes: text),
        ])
    }
}
