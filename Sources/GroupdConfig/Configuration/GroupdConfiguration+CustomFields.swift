import GroupModel

/// The YAML form of an app's custom-field definitions (`apps[].custom_fields`), turned into the
/// model's `CustomFieldSchema`.
///
/// ```yaml
/// custom_fields:
///   max_group_keys: 16        # optional, default 16
///   max_member_keys: 16       # optional, default 16
///   group:
///     - key: level
///       max_bytes: 64
///       read_roles: [owner, admin, member, non_member]   # default [owner, admin, member]
///       write_roles: [owner, admin]                      # default [owner, admin, member]
///   member:
///     - key: title
///       max_bytes: 32
/// ```
///
/// Read and write roles are cumulative from the top, as the model's permissions are: a list must
/// hold every role above the lowest one it names (`[owner, admin]`, not `[admin]`).
struct CustomFieldsCoding: Codable {
    var schema: CustomFieldSchema

    init(_ schema: CustomFieldSchema) { self.schema = schema }

    /// The role names of `read_roles`, from the highest.
    static let readOrder = ["owner", "admin", "member", "non_member"]
    /// The role names of `write_roles`, from the highest.
    static let writeOrder = ["owner", "admin", "member"]

    init(from decoder: any Decoder) throws {
        let c = try decoder.configMapping(allowing: ["group", "member", "max_group_keys", "max_member_keys"])
        let defaults = CustomFieldSchema()
        let group: [FieldCoding] = try c.value("group", or: [])
        let member: [FieldCoding] = try c.value("member", or: [])
        var maxGroupKeys: Int = try c.value("max_group_keys", or: defaults.maxGroupKeys)
        var maxMemberKeys: Int = try c.value("max_member_keys", or: defaults.maxMemberKeys)
        if maxGroupKeys < 1 {
            try decoder.record(["max_group_keys"], "expected at least 1, found \(maxGroupKeys)")
            maxGroupKeys = defaults.maxGroupKeys
        }
        if maxMemberKeys < 1 {
            try decoder.record(["max_member_keys"], "expected at least 1, found \(maxMemberKeys)")
            maxMemberKeys = defaults.maxMemberKeys
        }
        for (name, list) in [("group", group), ("member", member)] {
            var seen: Set<String> = []
            for (index, field) in list.enumerated() where !seen.insert(field.definition.key).inserted {
                try decoder.record(
                    keys: [ConfigKey(name), ConfigKey(intValue: index)!, ConfigKey("key")],
                    "key '\(field.definition.key)' is defined twice")
            }
        }
        self.schema = CustomFieldSchema(
            groupFields: group.map(\.definition), memberFields: member.map(\.definition),
            maxGroupKeys: maxGroupKeys, maxMemberKeys: maxMemberKeys)
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: ConfigKey.self)
        try c.encode(schema.groupFields.values.sorted { $0.key < $1.key }.map(FieldCoding.init), forKey: ConfigKey("group"))
        try c.encode(schema.memberFields.values.sorted { $0.key < $1.key }.map(FieldCoding.init), forKey: ConfigKey("member"))
        try c.encode(schema.maxGroupKeys, forKey: ConfigKey("max_group_keys"))
        try c.encode(schema.maxMemberKeys, forKey: ConfigKey("max_member_keys"))
    }

    /// One `custom_fields.group[]` / `.member[]` entry.
    struct FieldCoding: Codable {
        var definition: CustomFieldDefinition

        init(_ definition: CustomFieldDefinition) { self.definition = definition }

        init(from decoder: any Decoder) throws {
            let c = try decoder.configMapping(allowing: ["key", "max_bytes", "read_roles", "write_roles"])
            let key: String = try c.required("key")
            if key.isEmpty || key.utf8.count > 64 {
                try decoder.record(["key"], "expected a key of 1 to 64 bytes")
            }
            var maxBytes: Int = try c.required("max_bytes")
            if maxBytes < 1 || maxBytes > 65536 {
                try decoder.record(["max_bytes"], "expected 1 to 65536 bytes, found \(maxBytes)")
                maxBytes = 1
            }
            let read: [String] = try c.value("read_roles", or: ["owner", "admin", "member"])
            let write: [String] = try c.value("write_roles", or: ["owner", "admin", "member"])
            let readers: CustomFieldReaders
            switch try Self.lowest(read, order: CustomFieldsCoding.readOrder, path: c.codingPath + [ConfigKey("read_roles")]) {
            case 0: readers = .owner
            case 1: readers = .ownerAndAdmins
            case 2: readers = .members
            case 3: readers = .anyone
            default:
                throw ConfigurationFault(path: c.codingPath + [ConfigKey("read_roles")], message: "expected at least the owner")
            }
            let writers: OperationPermission = switch try Self.lowest(
                write, order: CustomFieldsCoding.writeOrder, path: c.codingPath + [ConfigKey("write_roles")]) {
            case 0: .owner
            case 1: .ownerAndAdmins
            case 2: .everyone
            default: .nobody
            }
            self.definition = CustomFieldDefinition(key: key, maxValueBytes: maxBytes, readers: readers, writers: writers)
        }

        /// The index in `order` of the lowest role named (-1 for an empty list), checking the list
        /// holds every role above it.
        static func lowest(_ roles: [String], order: [String], path: [any CodingKey]) throws -> Int {
            var indices: Set<Int> = []
            for role in roles {
                guard let index = order.firstIndex(of: role) else {
                    throw ConfigurationFault(path: path, message: "unknown role '\(role)'; expected one of: \(order.joined(separator: ", "))")
                }
                indices.insert(index)
            }
            let lowest = indices.max() ?? -1
            if lowest >= 0, indices.count != lowest + 1 {
                throw ConfigurationFault(
                    path: path,
                    message: "roles are cumulative: naming \(order[lowest]) needs every role above it (\(order[0...lowest].joined(separator: ", ")))")
            }
            return lowest
        }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: ConfigKey.self)
            try c.encode(definition.key, forKey: ConfigKey("key"))
            try c.encode(definition.maxValueBytes, forKey: ConfigKey("max_bytes"))
            let read = switch definition.readers {
            case .owner: 1
            case .ownerAndAdmins: 2
            case .members: 3
            case .anyone: 4
            }
            let write = switch definition.writers {
            case .nobody: 0
            case .owner: 1
            case .ownerAndAdmins: 2
            case .everyone: 3
            }
            try c.encode(Array(CustomFieldsCoding.readOrder.prefix(read)), forKey: ConfigKey("read_roles"))
            try c.encode(Array(CustomFieldsCoding.writeOrder.prefix(write)), forKey: ConfigKey("write_roles"))
        }
    }
}
