/// One group attribute (ZIM's group attributes): a key, an opaque value and a version.
public struct GroupAttribute: Sendable, Hashable {
    /// The key (1…``AppLimits/groupAttributeKeyBytes`` bytes).
    public var key: String
    /// The value, opaque bytes.
    public var value: [UInt8]
    /// The group sequence of the `GROUP_ATTRIBUTES_CHANGED` event that wrote this value: it grows
    /// with every write of the key and is never reused, even after the key was deleted and set
    /// again (so a conditional write cannot mistake a new value for the one it read).
    public var version: Int64
    /// When the value was written.
    public var updatedAt: Timestamp
    /// Who wrote it (`nil`: the app's backend).
    public var updatedBy: String?

    /// Create an attribute.
    public init(key: String, value: [UInt8], version: Int64, updatedAt: Timestamp, updatedBy: String?) {
        self.key = key
        self.value = value
        self.version = version
        self.updatedAt = updatedAt
        self.updatedBy = updatedBy
    }
}

/// The condition of one key in a conditional attribute write (the API's `expected_version`).
public enum AttributeCondition: Sendable, Hashable {
    /// No condition (`expected_version` 0).
    case none
    /// The key must not exist (`expected_version` -1).
    case absent
    /// The key must exist with this version (`expected_version` > 0).
    case version(Int64)

    /// The condition an API `expected_version` expresses.
    /// - Throws: `INVALID_ARGUMENT` naming `field` for a value below -1.
    public init(expectedVersion: Int64, field: String) throws {
        switch expectedVersion {
        case 0: self = .none
        case -1: self = .absent
        case 1...: self = .version(expectedVersion)
        default:
            throw GroupError.invalidArgument(
                field: field, "\(field) is 0 (no condition), -1 (the key must not exist) or a version")
        }
    }

    /// Whether `current` (nil: the key does not exist) satisfies the condition.
    public func holds(for current: GroupAttribute?) -> Bool {
        switch self {
        case .none: true
        case .absent: current == nil
        case .version(let version): current?.version == version
        }
    }

    /// The API's `expected_version` of this condition.
    public var expectedVersion: Int64 {
        switch self {
        case .none: 0
        case .absent: -1
        case .version(let version): version
        }
    }
}

/// One key to set in ``GroupRules/planSetAttributes(_:by:current:writes:limits:now:)``.
public struct AttributeWrite: Sendable, Hashable {
    /// The key.
    public var key: String
    /// The new value.
    public var value: [UInt8]
    /// What the key must be before the write.
    public var condition: AttributeCondition

    /// Create a write.
    public init(key: String, value: [UInt8], condition: AttributeCondition = .none) {
        self.key = key
        self.value = value
        self.condition = condition
    }
}

/// One key to delete in ``GroupRules/planDeleteAttributes(_:by:current:deletions:limits:)``.
public struct AttributeDeletion: Sendable, Hashable {
    /// The key.
    public var key: String
    /// What the key must be before the deletion.
    public var condition: AttributeCondition

    /// Create a deletion.
    public init(key: String, condition: AttributeCondition = .none) {
        self.key = key
        self.condition = condition
    }
}

/// What an attribute or counter operation writes: keys set, keys deleted, counters set, and the
/// event (none for counters, or when nothing changed).
public struct AttributeChange: Sendable, Hashable {
    /// Attributes written (inserted or replaced), with their new versions.
    public var upserts: [GroupAttribute]
    /// Keys deleted (each existed).
    public var deletions: [String]
    /// Counters and their new values.
    public var counters: [String: Int64]
    /// The events to append.
    public var events: [GroupEvent.Draft]

    /// Create a change.
    public init(
        upserts: [GroupAttribute] = [], deletions: [String] = [], counters: [String: Int64] = [:],
        events: [GroupEvent.Draft] = []
    ) {
        self.upserts = upserts
        self.deletions = deletions
        self.counters = counters
        self.events = events
    }

    /// Whether nothing is written.
    public var isEmpty: Bool { upserts.isEmpty && deletions.isEmpty && counters.isEmpty && events.isEmpty }
}

extension GroupError.Reason {
    /// A conditional attribute write found the key at another version (or present, or absent);
    /// `metadata["key"]` names the key, `expected_version` and `current_version` (0: absent) say why.
    public static let attributeVersionMismatch: Self = "ATTRIBUTE_VERSION_MISMATCH"
    /// The write would take the group past the app's attribute limits (`metadata["limit_name"]`).
    public static let groupAttributesFull: Self = "GROUP_ATTRIBUTES_FULL"
    /// The increment would take the group past the app's counter limit (`metadata["limit_name"]`).
    public static let groupCountersFull: Self = "GROUP_COUNTERS_FULL"
    /// A counter would leave the range of a signed 64-bit integer; `metadata["key"]` names it.
    public static let counterOverflow: Self = "COUNTER_OVERFLOW"
}

extension GroupEvent.Kind {
    /// The `changes` key prefix of a key set by a `GROUP_ATTRIBUTES_CHANGED` event (value: the
    /// new version).
    public static let attributeSetPrefix = "set:"
    /// The `changes` key prefix of a key deleted by a `GROUP_ATTRIBUTES_CHANGED` event.
    public static let attributeDeletedPrefix = "deleted:"
}

extension GroupRules {
    /// Who may set and delete group attributes and increment counters in a group of `type`:
    /// every member, except in an AVChatRoom, whose audience is not stored: there the owner and
    /// the admins (the app's backend always may).
    public static func attributeWriters(for type: GroupType) -> OperationPermission {
        type == .avChatRoom ? .ownerAndAdmins : .everyone
    }

    /// Check a `SetGroupAttributes` call and plan it: all keys or none.
    ///
    /// - Writers: ``attributeWriters(for:)`` (`NOT_A_MEMBER`, `PERMISSION_DENIED`).
    /// - `INVALID_ARGUMENT` naming `attributes` (empty, more than
    ///   ``AppLimits/maxGroupAttributeKeys``), `attributes[i].key` (empty, over
    ///   ``AppLimits/groupAttributeKeyBytes``, given twice).
    /// - A condition that does not hold: `ABORTED` / `ATTRIBUTE_VERSION_MISMATCH` naming the first
    ///   such key (in request order).
    /// - More keys than ``AppLimits/maxGroupAttributeKeys`` or more bytes (keys and values) than
    ///   ``AppLimits/groupAttributeBytes`` in the group afterwards: `FAILED_PRECONDITION` /
    ///   `GROUP_ATTRIBUTES_FULL`.
    /// - Every key written gets the version `group.latestSequence + 1`: the sequence of the one
    ///   `GROUP_ATTRIBUTES_CHANGED` event written with it (to the group; `changes` map
    ///   `set:<key>` to the version).
    public static func planSetAttributes(
        _ group: Group, by op: GroupOperator, current: [String: GroupAttribute], writes: [AttributeWrite],
        limits: AppLimits, now: Timestamp
    ) throws -> AttributeChange {
        try authorizeAttributeWrite(group, by: op)
        try checkKeys(writes.map(\.key), field: "attributes", limits: limits)
        for write in writes where !write.condition.holds(for: current[write.key]) {
            throw versionMismatch(write.key, condition: write.condition, current: current[write.key])
        }
        var after = current
        let version = group.latestSequence + 1
        var upserts: [GroupAttribute] = []
        var changes: [String: String] = [:]
        for write in writes {
            let attribute = GroupAttribute(key: write.key, value: write.value, version: version, updatedAt: now, updatedBy: op.userID)
            after[write.key] = attribute
            upserts.append(attribute)
            changes[GroupEvent.Kind.attributeSetPrefix + write.key] = String(version)
        }
        if after.count > limits.maxGroupAttributeKeys {
            throw attributesFull("max_group_attribute_keys", limits.maxGroupAttributeKeys,
                                 "the group would hold \(after.count) attributes")
        }
        let bytes = after.values.reduce(0) { $0 + $1.key.utf8.count + $1.value.count }
        if bytes > limits.groupAttributeBytes {
            throw attributesFull("group_attribute_bytes", limits.groupAttributeBytes,
                                 "the group's attributes would take \(bytes) bytes")
        }
        let event = GroupEvent.Draft(kind: .groupAttributesChanged, operatorID: op.userID, changes: changes)
        return AttributeChange(upserts: upserts, events: [event])
    }

    /// Check a `DeleteGroupAttributes` call and plan it: all keys or none. Keys that do not exist
    /// are left out (a deletion of absent keys only changes nothing and emits nothing).
    ///
    /// Writers and validation as ``planSetAttributes(_:by:current:writes:limits:now:)`` (the
    /// list field is `keys`); a condition that does not hold: `ABORTED` /
    /// `ATTRIBUTE_VERSION_MISMATCH`. The event's `changes` map `deleted:<key>` to "".
    public static func planDeleteAttributes(
        _ group: Group, by op: GroupOperator, current: [String: GroupAttribute], deletions: [AttributeDeletion],
        limits: AppLimits
    ) throws -> AttributeChange {
        try authorizeAttributeWrite(group, by: op)
        try checkKeys(deletions.map(\.key), field: "keys", limits: limits)
        for deletion in deletions where !deletion.condition.holds(for: current[deletion.key]) {
            throw versionMismatch(deletion.key, condition: deletion.condition, current: current[deletion.key])
        }
        let removed = deletions.map(\.key).filter { current[$0] != nil }
        if removed.isEmpty { return AttributeChange() }
        var changes: [String: String] = [:]
        for key in removed { changes[GroupEvent.Kind.attributeDeletedPrefix + key] = "" }
        let event = GroupEvent.Draft(kind: .groupAttributesChanged, operatorID: op.userID, changes: changes)
        return AttributeChange(deletions: removed, events: [event])
    }

    /// Check an `IncrementGroupCounters` call and plan it: every counter or none. A counter not
    /// stored yet starts at 0. No event is written (counters change too often to notify).
    ///
    /// - Writers: ``attributeWriters(for:)``.
    /// - `INVALID_ARGUMENT` naming `deltas` (empty, more than ``AppLimits/maxGroupCounters``) or
    ///   `deltas[<key>]` (an empty key, or one over ``AppLimits/groupAttributeKeyBytes``).
    /// - A counter leaving the signed 64-bit range: `OUT_OF_RANGE` / `COUNTER_OVERFLOW` naming it.
    /// - More counters than ``AppLimits/maxGroupCounters`` afterwards: `FAILED_PRECONDITION` /
    ///   `GROUP_COUNTERS_FULL`.
    /// - Returns: The counters written, with their new values.
    public static func planIncrementCounters(
        _ group: Group, by op: GroupOperator, current: [String: Int64], deltas: [String: Int64], limits: AppLimits
    ) throws -> AttributeChange {
        try authorizeAttributeWrite(group, by: op)
        if deltas.isEmpty { throw GroupError.invalidArgument(field: "deltas", "deltas must name at least one counter") }
        if deltas.count > limits.maxGroupCounters {
            throw GroupError.invalidArgument(
                field: "deltas", "at most \(limits.maxGroupCounters) counters per group", limit: limits.maxGroupCounters)
        }
        for key in deltas.keys.sorted() {
            try checkKey(key, field: "deltas[\(key)]", limits: limits)
        }
        var values: [String: Int64] = [:]
        for (key, delta) in deltas.sorted(by: { $0.key < $1.key }) {
            let (sum, overflow) = (current[key] ?? 0).addingReportingOverflow(delta)
            if overflow {
                throw GroupError(
                    code: .outOfRange, reason: .counterOverflow,
                    message: "counter \(key) would leave the signed 64-bit range",
                    metadata: ["key": key, "field": "deltas[\(key)]"])
            }
            values[key] = sum
        }
        let count = Set(current.keys).union(values.keys).count
        if count > limits.maxGroupCounters {
            throw GroupError(
                code: .failedPrecondition, reason: .groupCountersFull,
                message: "the group would hold \(count) counters; at most \(limits.maxGroupCounters)",
                metadata: ["limit_name": "max_group_counters", "limit": String(limits.maxGroupCounters)])
        }
        return AttributeChange(counters: values)
    }

    // MARK: Helpers

    private static func authorizeAttributeWrite(_ group: Group, by op: GroupOperator) throws {
        try authorize(.writeAttributes, in: group, by: op).get()
    }

    /// Non-empty, at most the key limit, each key valid and given once.
    static func checkKeys(_ keys: [String], field: String, limits: AppLimits) throws {
        if keys.isEmpty { throw GroupError.invalidArgument(field: field, "\(field) must name at least one key") }
        if keys.count > limits.maxGroupAttributeKeys {
            throw GroupError.invalidArgument(
                field: field, "at most \(limits.maxGroupAttributeKeys) keys per group", limit: limits.maxGroupAttributeKeys)
        }
        var seen: Set<String> = []
        for (index, key) in keys.enumerated() {
            let keyField = field == "keys" ? "keys[\(index)]" : "\(field)[\(index)].key"
            try checkKey(key, field: keyField, limits: limits)
            if !seen.insert(key).inserted {
                throw GroupError.invalidArgument(field: keyField, "key \(key) is given twice")
            }
        }
    }

    /// The keys of a read (`keys`): at most `maxKeys` (``AppLimits/maxGroupAttributeKeys`` for
    /// attributes, ``AppLimits/maxGroupCounters`` for counters), each valid.
    /// - Throws: `INVALID_ARGUMENT` naming `keys` or `keys[i]`.
    public static func checkReadKeys(_ keys: [String], maxKeys: Int, limits: AppLimits) throws {
        if keys.count > maxKeys {
            throw GroupError.invalidArgument(field: "keys", "at most \(maxKeys) keys per call", limit: maxKeys)
        }
        for (index, key) in keys.enumerated() { try checkKey(key, field: "keys[\(index)]", limits: limits) }
    }

    /// A key: 1…``AppLimits/groupAttributeKeyBytes`` bytes, no control characters.
    static func checkKey(_ key: String, field: String, limits: AppLimits) throws {
        if key.isEmpty { throw GroupError.invalidArgument(field: field, "\(field) must not be empty") }
        try FieldValidation.checkBytes(key, field: field, limit: limits.groupAttributeKeyBytes)
        if key.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            throw GroupError.invalidArgument(field: field, "\(field) must not contain control characters")
        }
    }

    private static func versionMismatch(
        _ key: String, condition: AttributeCondition, current: GroupAttribute?
    ) -> GroupError {
        let currentVersion = current?.version ?? 0
        let what = current == nil ? "does not exist" : "is at version \(currentVersion)"
        return GroupError(
            code: .aborted, reason: .attributeVersionMismatch,
            message: "attribute \(key) \(what) (expected version \(condition.expectedVersion))",
            metadata: ["key": key, "expected_version": String(condition.expectedVersion),
                       "current_version": String(currentVersion)])
    }

    private static func attributesFull(_ name: String, _ limit: Int, _ what: String) -> GroupError {
        GroupError(
            code: .failedPrecondition, reason: .groupAttributesFull, message: "\(what); at most \(limit) (\(name))",
            metadata: ["limit_name": name, "limit": String(limit)])
    }
}
