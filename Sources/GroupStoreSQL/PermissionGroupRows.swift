import GroupModel
import Synchronization

/// The stored text of a community's permission groups (the `permission_groups` column of its
/// row) and of a member's assignments (the member row's `permission_groups` column).
public enum PermissionGroupCoding {
    /// Texts decoded and groups encoded lately, both ways: a community's row is read (and, on
    /// PostgreSQL, written) with every change of the group, and its permission groups rarely
    /// change, while parsing the text of 20 groups with values for 100 topics each costs far more
    /// than hashing it. Emptied when it holds 256 texts.
    private static let cache = Mutex<(decoded: [TextKey: [PermissionGroup]], encoded: [[PermissionGroup]: String])>(([:], [:]))

    /// A stored text as a cache key: hashed by its length and its first and last 64 bytes (a
    /// text of 60 KB is hashed in constant time; texts that share those still compare whole).
    private struct TextKey: Hashable {
        let text: String

        static func == (lhs: Self, rhs: Self) -> Bool { lhs.text == rhs.text }

        func hash(into hasher: inout Hasher) {
            let utf8 = text.utf8
            hasher.combine(utf8.count)
            for byte in utf8.prefix(64) { hasher.combine(byte) }
            for byte in utf8.suffix(64) { hasher.combine(byte) }
        }
    }
    private static let cacheCapacity = 256

    /// The groups as stored text: one JSON object of strings per line (`nil` for none).
    public static func encode(_ groups: [PermissionGroup]) -> String? {
        if groups.isEmpty { return nil }
        if let text = cache.withLock({ $0.encoded[groups] }) { return text }
        let text = encodeText(groups)
        remember(text, groups)
        return text
    }

    /// The groups stored as `text`, or `nil` when it is malformed.
    public static func decode(_ text: String?) -> [PermissionGroup]? {
        guard let text, !text.isEmpty else { return [] }
        if let groups = cache.withLock({ $0.decoded[TextKey(text: text)] }) { return groups }
        guard let groups = decodeText(text) else { return nil }
        remember(text, groups)
        return groups
    }

    private static func remember(_ text: String, _ groups: [PermissionGroup]) {
        cache.withLock { cache in
            if cache.decoded.count >= cacheCapacity || cache.encoded.count >= cacheCapacity {
                cache.decoded.removeAll(keepingCapacity: true)
                cache.encoded.removeAll(keepingCapacity: true)
            }
            cache.decoded[TextKey(text: text)] = groups
            cache.encoded[groups] = text
        }
    }

    private static func encodeText(_ groups: [PermissionGroup]) -> String {
        groups.map { group in
            let topics = group.topicPermissions.keys.sorted().map { "\($0)=\(group.topicPermissions[$0]!.rawValue)" }
            return EventJSON.encode([
                "id": group.id, "name": group.name, "data": Hex.encode(group.customData),
                "permissions": String(group.permissions.rawValue), "topics": topics.joined(separator: "\n"),
                "created": String(group.createdAt.millisecondsSince1970),
                "updated": String(group.updatedAt.millisecondsSince1970),
            ])
        }.joined(separator: "\n")
    }

    private static func decodeText(_ text: String) -> [PermissionGroup]? {
        var groups: [PermissionGroup] = []
        for line in text.split(separator: "\n") {
            guard let object = try? EventJSON.object(String(line)), let id = object["id"], let name = object["name"],
                let data = object["data"].flatMap({ Hex.decode($0) }), let bits = object["permissions"].flatMap(UInt32.init),
                let created = object["created"].flatMap(Int64.init), let updated = object["updated"].flatMap(Int64.init)
            else { return nil }
            var topics: [String: PermissionSet] = [:]
            for entry in (object["topics"] ?? "").split(separator: "\n") {
                guard let equals = entry.lastIndex(of: "="), let value = UInt32(entry[entry.index(after: equals)...])
                else { return nil }
                topics[String(entry[..<equals])] = PermissionSet(rawValue: value)
            }
            groups.append(PermissionGroup(
                id: id, name: name, customData: data, permissions: PermissionSet(rawValue: bits),
                topicPermissions: topics, createdAt: Timestamp(millisecondsSince1970: created),
                updatedAt: Timestamp(millisecondsSince1970: updated)))
        }
        return groups
    }

    /// A member's permission group ids as stored (`nil` for none).
    public static func encodeAssignments(_ ids: [String]) -> String? {
        ids.isEmpty ? nil : ids.joined(separator: ",")
    }

    /// A member's permission group ids stored as `text`.
    public static func decodeAssignments(_ text: String?) -> [String] {
        guard let text, !text.isEmpty else { return [] }
        return text.split(separator: ",").map(String.init)
    }
}
