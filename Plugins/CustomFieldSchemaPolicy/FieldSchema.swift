#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The plugin's configuration (JSON):
///
///     {"group":  {"level": {"type": "integer", "min": 1, "max": 10},
///                 "motto": {"type": "string", "max_length": 20, "pattern": "[a-z ]+"},
///                 "vip":   {"type": "boolean", "read": "admin"},
///                 "tier":  {"type": "enum", "values": ["gold", "silver"]},
///                 "meta":  {"type": "object"}},
///      "member": {"title": {"type": "string", "max_length": 16}},
///      "unknown": "reject"}
///
/// `read` is the lowest role that sees the field (`none`, `member`, `admin`, `owner`;
/// default `none`, everyone). `unknown` says what to do with a field that has no definition
/// on write: `reject` (default) or `allow`.
struct SchemaConfiguration: Decodable {
    var group: [String: FieldDefinition]?
    var member: [String: FieldDefinition]?
    var unknown: UnknownFields?

    enum UnknownFields: String, Decodable {
        case reject, allow
    }
}

/// One custom field's definition.
struct FieldDefinition: Decodable {
    enum Kind: String, Decodable {
        case string, integer, boolean, `enum`, object
    }

    var type: Kind
    var maxLength: Int?
    var pattern: String?
    var min: Int?
    var max: Int?
    var values: [String]?
    var read: Role?

    enum CodingKeys: String, CodingKey {
        case type, pattern, min, max, values, read
        case maxLength = "max_length"
    }
}

/// Reader roles, lowest first.
enum Role: String, Decodable, Comparable {
    case none, member, admin, owner

    private var rank: Int {
        switch self {
        case .none: 0
        case .member: 1
        case .admin: 2
        case .owner: 3
        }
    }

    static func < (lhs: Role, rhs: Role) -> Bool { lhs.rank < rhs.rank }
}

/// A JSON value, to check that an `object` field holds a JSON object.
private enum JSONValue: Decodable {
    case object, other

    init(from decoder: any Decoder) throws {
        if (try? decoder.container(keyedBy: AnyKey.self)) != nil {
            self = .object
        } else {
            self = .other
        }
    }

    struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}

/// The validator for one app: compiled definitions. Immutable after `init`.
///
/// `@unchecked Sendable`: every stored property is a `let`; `Regex` is a value type whose
/// lazily compiled program is initialised atomically, so concurrent matching is safe.
final class FieldSchema: @unchecked Sendable {
    enum Verdict: Equatable {
        case valid
        case normalized(String)
        case invalid(String)
    }

    private let definitions: [String: FieldDefinition]
    private let patterns: [String: Regex<AnyRegexOutput>]
    private let rejectUnknown: Bool

    /// - Throws: a message when a pattern does not compile or a definition is incomplete.
    init(_ configuration: SchemaConfiguration) throws {
        var definitions: [String: FieldDefinition] = [:]
        for (key, definition) in configuration.group ?? [:] { definitions["custom.group.\(key)"] = definition }
        for (key, definition) in configuration.member ?? [:] { definitions["custom.member.\(key)"] = definition }
        var patterns: [String: Regex<AnyRegexOutput>] = [:]
        for (key, definition) in definitions {
            if let pattern = definition.pattern {
                do {
                    patterns[key] = try Regex(pattern)
                } catch {
                    throw SchemaError(message: "\(key): pattern \(pattern) does not compile: \(error)")
                }
            }
            if definition.type == .enum && (definition.values ?? []).isEmpty {
                throw SchemaError(message: "\(key): an enum needs \"values\"")
            }
        }
        self.definitions = definitions
        self.patterns = patterns
        self.rejectUnknown = configuration.unknown != .allow
    }

    static func isCustom(_ key: String) -> Bool {
        key.hasPrefix("custom.group.") || key.hasPrefix("custom.member.")
    }

    /// Check one custom field's value on write.
    func validate(key: String, value: String) -> Verdict {
        guard let definition = definitions[key] else {
            return rejectUnknown ? .invalid("no such custom field") : .valid
        }
        switch definition.type {
        case .string:
            if let maxLength = definition.maxLength, value.count > maxLength {
                return .invalid("longer than \(maxLength) characters")
            }
            if let pattern = patterns[key], (try? pattern.wholeMatch(in: value)) == nil {
                return .invalid("does not match \(definition.pattern ?? "")")
            }
            return .valid
        case .integer:
            let trimmed = value.drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed()
            guard let number = Int(String(trimmed)) else { return .invalid("not an integer") }
            if let min = definition.min, number < min { return .invalid("less than \(min)") }
            if let max = definition.max, number > max { return .invalid("greater than \(max)") }
            let canonical = String(number)
            return canonical == value ? .valid : .normalized(canonical)
        case .boolean:
            switch value.lowercased() {
            case "true", "1", "yes": return value == "true" ? .valid : .normalized("true")
            case "false", "0", "no": return value == "false" ? .valid : .normalized("false")
            default: return .invalid("not a boolean")
            }
        case .enum:
            return (definition.values ?? []).contains(value) ? .valid : .invalid("not one of \((definition.values ?? []).joined(separator: ", "))")
        case .object:
            guard case .object = try? JSONDecoder().decode(JSONValue.self, from: Data(value.utf8)) else {
                return .invalid("not a JSON object")
            }
            return .valid
        }
    }

    /// Whether a reader with `role` may see `key`.
    func readable(key: String, by role: Role) -> Bool {
        guard let minimum = definitions[key]?.read else { return true }
        return role >= minimum
    }
}

struct SchemaError: Error {
    var message: String
}
