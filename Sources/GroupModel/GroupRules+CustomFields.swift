/// Who may read a custom field.
public enum CustomFieldReaders: String, Sendable, Hashable, CaseIterable {
    /// Everyone who may see the group, non-members included where the public profile is visible
    /// (group fields; Tencent's TIMGroupManager guide lists `customInfo` in the public subset).
    case anyone
    /// Members of the group.
    case members
    /// The owner and the admins.
    case ownerAndAdmins = "owner_and_admins"
    /// Only the owner.
    case owner

    /// Whether `actor` may read (the backend always may).
    public func allows(_ actor: ActingRole) -> Bool {
        switch actor {
        case .backend: true
        case .nonMember: self == .anyone
        case .owner: true
        case .admin: self != .owner
        case .member: self == .anyone || self == .members
        }
    }
}

/// One custom field key an app defines, for groups or for members (Tencent: keys are configured
/// per app before use).
public struct CustomFieldDefinition: Sendable, Hashable {
    /// The key.
    public var key: String
    /// The largest value, in bytes.
    public var maxValueBytes: Int
    /// Who may read values of this key.
    public var readers: CustomFieldReaders
    /// Which members may write it (the backend always may). For member fields this applies on top
    /// of the group's member-info edit permission.
    public var writers: OperationPermission

    /// Create a definition.
    public init(
        key: String, maxValueBytes: Int, readers: CustomFieldReaders = .members,
        writers: OperationPermission = .everyone
    ) {
        self.key = key
        self.maxValueBytes = maxValueBytes
        self.readers = readers
        self.writers = writers
    }
}

/// The custom field keys of one app, for groups and for members (from the config).
public struct CustomFieldSchema: Sendable, Hashable {
    /// Group custom fields by key.
    public var groupFields: [String: CustomFieldDefinition]
    /// Member custom fields by key.
    public var memberFields: [String: CustomFieldDefinition]
    /// The most keys one group may hold.
    public var maxGroupKeys: Int
    /// The most keys one member may hold.
    public var maxMemberKeys: Int

    /// Create a schema.
    public init(
        groupFields: [CustomFieldDefinition] = [], memberFields: [CustomFieldDefinition] = [],
        maxGroupKeys: Int = 16, maxMemberKeys: Int = 16
    ) {
        self.groupFields = Dictionary(groupFields.map { ($0.key, $0) }, uniquingKeysWith: { _, last in last })
        self.memberFields = Dictionary(memberFields.map { ($0.key, $0) }, uniquingKeysWith: { _, last in last })
        self.maxGroupKeys = maxGroupKeys
        self.maxMemberKeys = maxMemberKeys
    }

    /// Which custom fields a request addresses.
    public enum Scope: String, Sendable, Hashable {
        /// Group custom fields.
        case group
        /// Member custom fields.
        case member
    }

    /// The definitions of `scope`.
    public func fields(_ scope: Scope) -> [String: CustomFieldDefinition] {
        scope == .group ? self.groupFields : self.memberFields
    }

    /// The values of `custom` that `actor` may read.
    public func readable(_ custom: [String: [UInt8]], scope: Scope, for actor: ActingRole) -> [String: [UInt8]] {
        let fields = self.fields(scope)
        return custom.filter { key, _ in fields[key]?.readers.allows(actor) ?? (actor == .backend) }
    }
}

extension GroupRules {
    /// Apply custom field changes (key → new value; an empty value removes the key) to `current`,
    /// checking each key against `schema` (or, without one, only that keys are non-empty).
    ///
    /// - Parameters:
    ///   - changes: The requested changes.
    ///   - current: The values before.
    ///   - scope: Group or member fields.
    ///   - schema: The app's definitions, or `nil` for any non-empty key.
    ///   - actor: Who writes (for per-key write permissions).
    ///   - field: The request field to name in errors (`custom`).
    /// - Returns: The values after, and the keys whose value changed.
    /// - Throws: `INVALID_ARGUMENT` naming `custom.<key>` for an unknown key or an oversize value
    ///   (with the limit), or too many keys; `PERMISSION_DENIED` for a key the actor may not write.
    static func applyCustom(
        _ changes: [String: [UInt8]], to current: [String: [UInt8]], scope: CustomFieldSchema.Scope,
        schema: CustomFieldSchema?, actor: ActingRole, field: String = "custom"
    ) throws -> (values: [String: [UInt8]], changed: [String]) {
        var values = current
        var changed: [String] = []
        for key in changes.keys.sorted() {
            let value = changes[key]!
            let path = "\(field).\(key)"
            if key.isEmpty {
                throw GroupError.invalidArgument(field: field, "custom field keys must not be empty")
            }
            if let schema {
                guard let definition = schema.fields(scope)[key] else {
                    throw GroupError.invalidArgument(field: path, "\(key) is not a \(scope.rawValue) custom field of this app")
                }
                if value.count > definition.maxValueBytes {
                    throw GroupError.invalidArgument(
                        field: path, "\(path) is \(value.count) bytes; at most \(definition.maxValueBytes) allowed",
                        limit: definition.maxValueBytes)
                }
                if let role = actor.role, !definition.writers.grants(role) {
                    throw GroupError(
                        code: .permissionDenied, reason: .permissionDenied,
                        message: "a group \(actor) may not write \(path) (allowed: \(definition.writers.rawValue))",
                        metadata: ["field": path, "role": actor.description])
                }
            }
            let old = values[key]
            if value.isEmpty {
                if old != nil { values[key] = nil; changed.append(key) }
            } else if old != value {
                values[key] = value
                changed.append(key)
            }
        }
        if let schema {
            let limit = scope == .group ? schema.maxGroupKeys : schema.maxMemberKeys
            if values.count > limit, values.count > current.count {
                throw GroupError.invalidArgument(
                    field: field, "\(values.count) custom fields exceed the limit of \(limit)", limit: limit)
            }
        }
        return (values, changed)
    }

    /// Custom field values as text in event changes: `custom.<key>` → standard Base64 of the new
    /// value; an empty text means the key was removed.
    static func customChanges(_ keys: [String], values: [String: [UInt8]], into changes: inout [String: String]) {
        for key in keys {
            changes["custom.\(key)"] = Base64Text.encode(values[key] ?? [])
        }
    }
}

/// Standard Base64 (RFC 4648 §4, with padding), for custom field bytes in event changes.
enum Base64Text {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Encode `bytes`.
    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index + 2 < bytes.count {
            let n = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            out += [alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)], alphabet[Int(n & 63)]]
            index += 3
        }
        let rest = bytes.count - index
        if rest == 1 {
            let n = UInt32(bytes[index]) << 16
            out += [alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)], UInt8(ascii: "="), UInt8(ascii: "=")]
        } else if rest == 2 {
            let n = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8
            out += [alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)], UInt8(ascii: "=")]
        }
        return String(decoding: out, as: UTF8.self)
    }
}
