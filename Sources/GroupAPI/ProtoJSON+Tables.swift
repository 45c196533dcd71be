import CProtobufC
import GroupProtoC

// The per-message tables proto3 JSON is read and written by (`ProtoJSON+Decoding.swift`,
// `ProtoJSON+Encoding.swift`): each field's names, kind and C-struct layout, and each enum's
// value names, built once from protobuf-c's descriptors.

// MARK: Descriptor tables

/// The field types of protobuf-c, as the decoder switches over them.
enum JSONFieldKind: UInt8 {
    case int32, sint32, sfixed32, uint32, fixed32, int64, sint64, sfixed64, uint64, fixed64
    case float, double, bool, enumeration, string, bytes, message

    init(_ type: ProtobufCType) {
        switch type {
        case PROTOBUF_C_TYPE_INT32: self = .int32
        case PROTOBUF_C_TYPE_SINT32: self = .sint32
        case PROTOBUF_C_TYPE_SFIXED32: self = .sfixed32
        case PROTOBUF_C_TYPE_UINT32: self = .uint32
        case PROTOBUF_C_TYPE_FIXED32: self = .fixed32
        case PROTOBUF_C_TYPE_INT64: self = .int64
        case PROTOBUF_C_TYPE_SINT64: self = .sint64
        case PROTOBUF_C_TYPE_SFIXED64: self = .sfixed64
        case PROTOBUF_C_TYPE_UINT64: self = .uint64
        case PROTOBUF_C_TYPE_FIXED64: self = .fixed64
        case PROTOBUF_C_TYPE_FLOAT: self = .float
        case PROTOBUF_C_TYPE_DOUBLE: self = .double
        case PROTOBUF_C_TYPE_BOOL: self = .bool
        case PROTOBUF_C_TYPE_ENUM: self = .enumeration
        case PROTOBUF_C_TYPE_STRING: self = .string
        case PROTOBUF_C_TYPE_BYTES: self = .bytes
        default: self = .message
        }
    }

    /// The wire type of one value: 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32.
    var wireType: UInt32 {
        switch self {
        case .sfixed32, .fixed32, .float: 5
        case .sfixed64, .fixed64, .double: 1
        case .string, .bytes, .message: 2
        default: 0
        }
    }

    /// The type's name in a `.proto` file, for messages.
    var protoName: String {
        self == .enumeration ? "enum" : "\(self)"
    }
}

/// What the decoder needs of one field, all plain values (no reference counting on the hot path).
struct JSONFieldInfo {
    var kind: JSONFieldKind
    /// The tag of one value: `number << 3 | wire type`.
    var tag: UInt64
    /// The tag of the packed record: `number << 3 | 2`.
    var packedTag: UInt64
    var isRepeated: Bool
    var isPacked: Bool
    var isMap: Bool
    /// A member of a oneof or a proto3 `optional`: written even at its default.
    var hasPresence: Bool
    /// Which oneof of the message, -1 for none.
    var oneof: Int
    /// The table of the message type (or of the map's entry), -1 for none.
    var message: Int
    var enumDescriptor: UnsafePointer<ProtobufCEnumDescriptor>?
    /// Where the JSON name and the proto name are in the table's `names`.
    var jsonName: Range<Int>
    var protoName: Range<Int>
    /// The encoder's view: where the field is in protobuf-c's C struct, and when it is written.
    var layout: JSONFieldLayout
    /// Where `"jsonName":` is in the table's `keys`, as the encoder writes it.
    var key: Range<Int>
    /// The encoder's table of the enum's value names (``JSONEnumNames``), -1 for none.
    var enumNames: Int
}

/// Where a field lives in protobuf-c's unpacked C struct, and how the encoder decides whether to
/// write it.
struct JSONFieldLayout {
    /// How the encoder tells a field to write from one to leave out.
    enum Presence {
        /// Repeated: written when the count at `quantifierOffset` is not zero.
        case repeated
        /// A oneof member: written when the case at `quantifierOffset` is the field's number.
        case oneof
        /// A proto3 `optional` scalar: written when its `has_` flag at `quantifierOffset` is set.
        case flagged
        /// Written unless at its proto3 default.
        case unlessDefault
    }

    var presence: Presence
    /// Byte offset of the value (or of the element pointer, for a repeated field).
    var offset: Int
    /// Byte offset of the count, oneof case or `has_` flag.
    var quantifierOffset: Int
    /// The field number.
    var number: UInt32
}

/// How a message type is written in JSON.
enum JSONWellKnownType {
    case none, timestamp, duration, fieldMask, any
}

/// One message type's fields, by both their names.
final class JSONMessageTable: @unchecked Sendable {
    // @unchecked Sendable: every property is a `let` set in init, and the enum descriptors the
    // fields point to are protoc-c's static, immutable data.
    let name: String
    let descriptor: UnsafePointer<ProtobufCMessageDescriptor>
    let wellKnown: JSONWellKnownType
    let fields: [JSONFieldInfo]
    let protoNames: [String]
    /// The UTF-8 of every field's JSON and proto names, back to back.
    let names: [UInt8]
    /// Every field's `"jsonName":` as the encoder writes it, back to back.
    let keys: [UInt8]

    init(_ descriptor: UnsafePointer<ProtobufCMessageDescriptor>, indexByDescriptor: [UnsafeRawPointer: Int], enums: inout JSONEnumNamesBuilder) {
        self.descriptor = descriptor
        let message = descriptor.pointee
        name = String(cString: message.name)
        wellKnown = switch name {
        case "google.protobuf.Timestamp": .timestamp
        case "google.protobuf.Duration": .duration
        case "google.protobuf.FieldMask": .fieldMask
        case "google.protobuf.Any": .any
        default: .none
        }
        var fields: [JSONFieldInfo] = []
        var protoNames: [String] = []
        var names: [UInt8] = []
        var keys: [UInt8] = []
        var oneofOffsets: [UInt32] = []
        if message.n_fields > 0, let all = message.fields {
            for index in 0..<Int(message.n_fields) {
                let field = all[index]
                let protoName = String(cString: field.name)
                let jsonName = ProtoJSON.jsonName(protoName)
                let jsonRange = names.count..<(names.count + jsonName.utf8.count)
                names += jsonName.utf8
                let protoRange = names.count..<(names.count + protoName.utf8.count)
                names += protoName.utf8
                var key = ""
                JSONString.append(jsonName, to: &key)
                key += ":"
                let keyRange = keys.count..<(keys.count + key.utf8.count)
                keys += key.utf8
                let kind = JSONFieldKind(field.type)
                let isRepeated = field.label == PROTOBUF_C_LABEL_REPEATED
                var oneof = -1
                if field.flags & PROTOBUF_C_FIELD_FLAG_ONEOF.rawValue != 0 {
                    if let known = oneofOffsets.firstIndex(of: field.quantifier_offset) {
                        oneof = known
                    } else {
                        oneof = oneofOffsets.count
                        oneofOffsets.append(field.quantifier_offset)
                    }
                }
                fields.append(JSONFieldInfo(
                    kind: kind,
                    tag: UInt64(field.id) << 3 | UInt64(kind.wireType),
                    packedTag: UInt64(field.id) << 3 | 2,
                    isRepeated: isRepeated,
                    isPacked: isRepeated && kind.wireType != 2 && field.flags & PROTOBUF_C_FIELD_FLAG_PACKED.rawValue != 0,
                    isMap: isRepeated && ProtoJSON.mapEntry(field) != nil,
                    hasPresence: oneof >= 0 || field.label == PROTOBUF_C_LABEL_OPTIONAL,
                    oneof: oneof,
                    message: kind == .message ? field.descriptor.flatMap { indexByDescriptor[$0] } ?? -1 : -1,
                    enumDescriptor: kind == .enumeration ? field.descriptor?.assumingMemoryBound(to: ProtobufCEnumDescriptor.self) : nil,
                    jsonName: jsonRange,
                    protoName: protoRange,
                    layout: JSONFieldLayout(
                        presence: isRepeated ? .repeated
                            : oneof >= 0 ? .oneof
                            : field.label == PROTOBUF_C_LABEL_OPTIONAL && kind != .message && kind != .string ? .flagged
                            : .unlessDefault,
                        offset: Int(field.offset), quantifierOffset: Int(field.quantifier_offset), number: field.id),
                    key: keyRange,
                    enumNames: kind == .enumeration ? field.descriptor.map { enums.index(of: $0.assumingMemoryBound(to: ProtobufCEnumDescriptor.self)) } ?? -1 : -1))
                protoNames.append(protoName)
            }
        }
        self.fields = fields
        self.protoNames = protoNames
        self.names = names
        self.keys = keys
    }

    /// The field whose JSON or proto name is `key`, trying `hint` (the field after the last one
    /// found: objects usually follow declaration order) first.
    func fieldIndex(named key: UnsafeBufferPointer<UInt8>, hint: Int) -> Int? {
        names.withUnsafeBufferPointer { names in
            func matches(_ range: Range<Int>) -> Bool {
                guard range.count == key.count else { return false }
                var offset = 0
                while offset < key.count {
                    guard names[range.lowerBound + offset] == key[offset] else { return false }
                    offset += 1
                }
                return true
            }
            if hint < fields.count, matches(fields[hint].jsonName) || matches(fields[hint].protoName) { return hint }
            for index in fields.indices where matches(fields[index].jsonName) || matches(fields[index].protoName) {
                return index
            }
            return nil
        }
    }
}

/// A ``JSONMessageTable`` for every message of the ``DescriptorRegistry``, and the encoder's
/// ``JSONEnumNames`` of every enum they use: built once, immutable, shared by the decoder and the
/// encoder.
struct JSONDecodingTables: Sendable {
    let messages: [JSONMessageTable]
    let indexByName: [String: Int]
    let enums: [JSONEnumNames]

    static let shared = JSONDecodingTables()

    private init() {
        let registry = DescriptorRegistry.shared.descriptors.sorted { $0.key < $1.key }
        var indexByName: [String: Int] = [:]
        var indexByDescriptor: [UnsafeRawPointer: Int] = [:]
        for (index, (name, descriptor)) in registry.enumerated() {
            indexByName[name] = index
            indexByDescriptor[UnsafeRawPointer(descriptor)] = index
        }
        var enums = JSONEnumNamesBuilder()
        self.messages = registry.map { JSONMessageTable($0.value, indexByDescriptor: indexByDescriptor, enums: &enums) }
        self.indexByName = indexByName
        self.enums = enums.tables
    }
}

/// One enum's value names as the encoder writes them, quotes included, by number.
struct JSONEnumNames: @unchecked Sendable {
    // @unchecked Sendable: the descriptor is protoc-c's static, immutable data.
    let descriptor: UnsafePointer<ProtobufCEnumDescriptor>
    /// The smallest number with a name.
    let minimum: Int32
    /// Per number from `minimum`, where its quoted name is in `names` (empty for a number without one).
    let ranges: [Range<Int>]
    let names: [UInt8]

    /// The widest span of numbers a dense table is built for; a sparser enum is looked up in
    /// protobuf-c's descriptor.
    static let maximumSpan = 1024

    init(_ descriptor: UnsafePointer<ProtobufCEnumDescriptor>) {
        self.descriptor = descriptor
        let count = Int(descriptor.pointee.n_values)
        let numbers = (0..<count).map { descriptor.pointee.values[$0].value }
        let minimum = numbers.min() ?? 0, maximum = numbers.max() ?? -1
        self.minimum = minimum
        var ranges: [Range<Int>] = []
        var names: [UInt8] = []
        if Int(maximum) - Int(minimum) < Self.maximumSpan, minimum <= maximum {
            for number in minimum...maximum {
                // The name protobuf-c gives the number (the first of aliases), as the old encoder did.
                guard let value = protobuf_c_enum_descriptor_get_value(descriptor, number) else {
                    ranges.append(names.count..<names.count)
                    continue
                }
                var quoted = ""
                JSONString.append(String(cString: value.pointee.name), to: &quoted)
                ranges.append(names.count..<(names.count + quoted.utf8.count))
                names += quoted.utf8
            }
        }
        self.ranges = ranges
        self.names = names
    }
}

/// Collects the ``JSONEnumNames`` of the enums the message tables use, one per descriptor.
struct JSONEnumNamesBuilder {
    private(set) var tables: [JSONEnumNames] = []
    private var indexByDescriptor: [UnsafeRawPointer: Int] = [:]

    /// The index of `descriptor`'s table, built on first use.
    mutating func index(of descriptor: UnsafePointer<ProtobufCEnumDescriptor>) -> Int {
        if let known = indexByDescriptor[UnsafeRawPointer(descriptor)] { return known }
        tables.append(JSONEnumNames(descriptor))
        indexByDescriptor[UnsafeRawPointer(descriptor)] = tables.count - 1
        return tables.count - 1
    }
}
