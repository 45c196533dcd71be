import GroupAPI
import GroupModel
import PolicyHost

extension GroupError.Reason {
    /// A policy plugin refused the request; `metadata["error_keys"]` lists the rejected field keys.
    public static let policyRejected: Self = "POLICY_REJECTED"
    /// A fail-closed policy plugin failed (error, time budget, circuit breaker): the operation
    /// did not happen; `metadata["plugin"]` and `metadata["kind"]` say which and how.
    public static let policyUnavailable: Self = "POLICY_UNAVAILABLE"
}

/// What a before-hook lets a handler do.
enum PolicyVerdict: Sendable, Equatable {
    /// Go on, with these fields changed (a `nil` value removes the field; empty: unchanged).
    case proceed([String: String?])
    /// Answer success and do nothing (only the send-message hook gives it to its handler;
    /// the other hooks refuse instead).
    case discard

    /// The changes, empty for a discard.
    var changes: [String: String?] {
        if case .proceed(let changes) = self { return changes }
        return [:]
    }
}

extension GroupdService {
    /// Whether the caller's app has a plugin on `hook` (no chain: the hook costs nothing).
    func hasPolicy(_ hook: PolicyHook, _ call: CallContext) -> Bool {
        policy.host?.hasPlugins(for: hook, app: call.caller.appID) ?? false
    }

    /// Run `app`'s chain on `hook` for the caller's app, building the request only when a plugin
    /// listens. A reject throws `POLICY_REJECTED` (`INVALID_ARGUMENT` on the validate hooks,
    /// `FAILED_PRECONDITION` elsewhere) with the rejected keys in `error_keys`; a fail-closed
    /// failure throws `UNAVAILABLE` / `POLICY_UNAVAILABLE`; a discard is returned when
    /// `allowDiscard` (messages) and refused otherwise.
    /// - Parameters:
    ///   - hook: The hook whose chain runs.
    ///   - call: The call being checked: its caller's app picks the chain, and its operator fills the
    ///     request's when the request names none.
    ///   - allowDiscard: Whether a discard is returned to the handler (messages) rather than refused.
    ///   - fieldPath: the request field a hook key names, for `metadata["field"]`.
    ///   - request: Builds what the hook is shown; called only when a plugin listens on `hook`.
    func checkPolicy(
        _ hook: PolicyHook, _ call: CallContext, allowDiscard: Bool = false,
        fieldPath: (String) -> String = { $0 }, _ request: () -> HookRequest
    ) async throws -> PolicyVerdict {
        guard hasPolicy(hook, call), let host = policy.host else { return .proceed([:]) }
        var built = request()
        if built.operatorID.isEmpty { built.operatorID = call.caller.operatorID ?? "" }
        switch await host.run(hook, app: call.caller.appID, request: built) {
        case .allow:
            return .proceed([:])
        case .rewrite(let changes):
            return .proceed(changes)
        case .discard:
            if allowDiscard { return .discard }
            throw Self.policyRejection(
                PolicyRejection(plugin: "", errorKeys: [], message: "the request was discarded by policy"), hook: hook, fieldPath: fieldPath)
        case .reject(let rejection):
            throw Self.policyRejection(rejection, hook: hook, fieldPath: fieldPath)
        case .error(let failure):
            throw GroupError(
                code: .unavailable, reason: .policyUnavailable,
                message: "policy check unavailable: \(failure.message)",
                metadata: ["plugin": failure.plugin, "kind": failure.kind.rawValue])
        }
    }

    /// A plugin's refusal as the caller's error.
    static func policyRejection(_ rejection: PolicyRejection, hook: PolicyHook, fieldPath: (String) -> String) -> GroupError {
        let validation = hook == .validateGroupCustom || hook == .validateMemberCustom
        var metadata: [String: String] = [:]
        if !rejection.errorKeys.isEmpty { metadata["error_keys"] = rejection.errorKeys.joined(separator: ",") }
        if let first = rejection.errorKeys.first { metadata["field"] = fieldPath(first) }
        if !rejection.plugin.isEmpty { metadata["plugin"] = rejection.plugin }
        for key in rejection.errorKeys {
            if let reason = rejection.reasons[key], !reason.isEmpty { metadata["reason." + key] = reason }
        }
        return GroupError(
            code: validation ? .invalidArgument : .failedPrecondition, reason: .policyRejected,
            message: rejection.message, metadata: metadata)
    }

    // MARK: Fields

    /// Custom values as hook fields `prefix + key` (keys sorted; values as UTF-8 text, empty
    /// values, which remove a key, left out).
    static func hookFields(custom: [String: [UInt8]], prefix: String) -> [HookField] {
        custom.keys.sorted().compactMap { key in
            let value = custom[key]!
            return value.isEmpty ? nil : HookField(prefix + key, String(decoding: value, as: UTF8.self))
        }
    }

    /// Apply a chain's changes to custom values: a rewritten `prefix + key` replaces the value,
    /// a removed one drops the key from the write.
    static func applyCustom(_ changes: [String: String?], prefix: String, to custom: inout [String: [UInt8]]) {
        for (key, value) in changes where key.hasPrefix(prefix) && key.count > prefix.count {
            let name = String(key.dropFirst(prefix.count))
            if let value { custom[name] = Array(value.utf8) } else { custom[name] = nil }
        }
    }

    /// A changed text field: the rewritten value, `""` when removed, `current` when untouched.
    static func rewritten(_ key: String, _ current: String, _ changes: [String: String?]) -> String {
        guard let change = changes[key] else { return current }
        return change ?? ""
    }

    /// The request field a hook key names: `custom.group.k` / `custom.member.k` → `custom.k`;
    /// other keys (`name`, `name_card`, ...) as they are.
    static func requestPath(_ key: String) -> String {
        for prefix in ["custom.group.", "custom.member."] where key.hasPrefix(prefix) {
            return "custom." + key.dropFirst(prefix.count)
        }
        return key
    }

    /// The `reader_role` of the filter hook for an acting role (the backend reads as the owner).
    static func readerRole(_ role: ActingRole) -> String {
        switch role {
        case .owner, .backend: "owner"
        case .admin: "admin"
        case .member: "member"
        case .nonMember: "none"
        }
    }

    /// Custom values as the app's read filter leaves them for `role` (`prefix` is
    /// `custom.group.` or `custom.member.`). Plugins remove fields; other changes are ignored.
    func filterCustomOnRead(
        _ custom: [String: [UInt8]], prefix: String, role: ActingRole, groupID: String, groupType: String,
        user: String? = nil, _ call: CallContext
    ) async -> [String: [UInt8]] {
        guard !custom.isEmpty, let host = policy.host, host.hasPlugins(for: .filterCustomOnRead, app: call.caller.appID) else {
            return custom
        }
        let request = HookRequest(
            operatorID: call.caller.operatorID ?? "", groupID: groupID, groupType: groupType, readerRole: Self.readerRole(role),
            fields: Self.hookFields(custom: custom, prefix: prefix), users: user.map { [$0] } ?? [])
        switch await host.run(.filterCustomOnRead, app: call.caller.appID, request: request) {
        case .rewrite(let changes):
            var filtered = custom
            for (key, value) in changes where value == nil && key.hasPrefix(prefix) {
                filtered[String(key.dropFirst(prefix.count))] = nil
            }
            return filtered
        case .allow:
            return custom
        case .reject, .discard, .error:
            // A refusal on read hides every value rather than failing the read.
            return [:]
        }
    }

    /// The name of a group type as plugins see it: `work`, `public`, `meeting`, `av_chat_room`,
    /// `community`.
    static func hookGroupType(_ type: GroupType) -> String {
        switch type {
        case .work: "work"
        case .public: "public"
        case .meeting: "meeting"
        case .avChatRoom: "av_chat_room"
        case .community: "community"
        }
    }

    /// A group view with its custom values (and its `self_info`'s) as the app's read filter
    /// leaves them for `role`.
    func filterGroupView(_ view: inout Groupd_V1_Group, role: ActingRole, _ call: CallContext) async {
        guard let host = policy.host, host.hasPlugins(for: .filterCustomOnRead, app: call.caller.appID) else { return }
        let type = (try? APIMapping.groupType(view.type)).map(Self.hookGroupType) ?? ""
        view.custom = await filterCustomOnRead(view.custom, prefix: "custom.group.", role: role, groupID: view.groupID, groupType: type, call)
        if var own = view.selfInfo {
            own.custom = await filterCustomOnRead(
                own.custom, prefix: "custom.member.", role: role, groupID: view.groupID, groupType: type, user: own.userID, call)
            view.selfInfo = own
        }
    }

    /// Member views with their custom values as the app's read filter leaves them for `role`.
    func filterMemberViews(_ members: inout [Groupd_V1_Member], role: ActingRole, group: Group, _ call: CallContext) async {
        guard let host = policy.host, host.hasPlugins(for: .filterCustomOnRead, app: call.caller.appID) else { return }
        let type = Self.hookGroupType(group.type)
        for index in members.indices where !members[index].custom.isEmpty {
            members[index].custom = await filterCustomOnRead(
                members[index].custom, prefix: "custom.member.", role: role, groupID: group.id, groupType: type,
                user: members[index].userID, call)
        }
    }
}
