import CProtobufC
import GroupProtoC

extension ProtoJSON {
    /// A serialized message as proto3 JSON in UTF-8, written straight from protobuf-c's unpacked
    /// message with the per-message tables the decoder uses (field keys, enum names pre-encoded).
    /// - Parameters:
    ///   - bytes: The message in the protobuf wire format.
    ///   - messageName: Its full name, e.g. `groupd.v1.Group`.
    ///   - pretty: Two-space indentation over several lines.
    /// - Returns: The JSON text (no trailing newline), or nil when no message of that name is known.
    /// - Throws: ``ProtoDecodingError`` when the bytes are not a valid encoding of the message.
    public static func encodeBytes(serializedBytes bytes: UnsafeRawBufferPointer, messageName: String, pretty: Bool = false) throws(ProtoDecodingError) -> [UInt8]? {
        guard let message = Message(named: messageName) else { return nil }
        return try message.encode(serializedBytes: bytes, pretty: pretty)
    }

    /// A serialized message in an array as proto3 JSON in UTF-8.
    /// - Parameters:
    ///   - bytes: The message in the protobuf wire format.
    ///   - messageName: Its full name, e.g. `groupd.v1.Group`.
    ///   - pretty: Two-space indentation over several lines.
    /// - Returns: The JSON text, or nil when no message of that name is known.
    /// - Throws: ``ProtoDecodingError`` when the bytes are not a valid encoding of the message.
    public static func encodeBytes(serializedBytes bytes: [UInt8], messageName: String, pretty: Bool = false) throws(ProtoDecodingError) -> [UInt8]? {
        guard let message = Message(named: messageName) else { return nil }
        return try message.encode(serializedBytes: bytes, pretty: pretty)
    }

    /// One message type of the registry, looked up once by name: what a caller that converts the
    /// same types over and over (the Connect codec, per method) keeps instead of the name.
    public struct Message: Sendable, Hashable {
        /// The index of the type's table in the shared tables.
        let index: Int

        /// The message's full name, e.g. `groupd.v1.Group`.
        public var name: String { JSONDecodingTables.shared.messages[index].name }

        /// The message type of that full name, or nil when the registry has none (the messages of
        /// the services' methods, what they contain, and the `google.rpc` error details).
        /// - Parameter name: The message's full name, e.g. `groupd.v1.Group`.
        public init?(named name: String) {
            guard let index = JSONDecodingTables.shared.indexByName[name] else { return nil }
            self.index = index
        }

        /// The message in the wire format as proto3 JSON in UTF-8 (see ``ProtoJSON``).
        /// - Parameters:
        ///   - bytes: The message in the protobuf wire format.
        ///   - pretty: Two-space indentation over several lines.
        /// - Returns: The JSON text (no trailing newline).
        /// - Throws: ``ProtoDecodingError`` when the bytes are not a valid encoding of the message.
        public func encode(serializedBytes bytes: UnsafeRawBufferPointer, pretty: Bool = false) throws(ProtoDecodingError) -> [UInt8] {
            let tables = JSONDecodingTables.shared
            let table = tables.messages[index]
            guard let unpacked = protobuf_c_message_unpack(table.descriptor, nil, bytes.count, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self)) else {
                throw ProtoDecodingError(code: .malformed, subject: table.name, message: "\(bytes.count) bytes are not a valid \(table.name)")
            }
            defer { protobuf_c_message_free_unpacked(unpacked, nil) }
            var encoder = JSONEncoderWalk(tables: tables, pretty: pretty, capacity: bytes.count * 2 + 64)
            defer { encoder.out.deallocate() }
            encoder.writeMessage(UnsafeRawPointer(unpacked), index)
            return encoder.out.array()
        }

        /// The message in the wire format, in an array, as proto3 JSON in UTF-8.
        /// - Parameters:
        ///   - bytes: The message in the protobuf wire format.
        ///   - pretty: Two-space indentation over several lines.
        /// - Returns: The JSON text (no trailing newline).
        /// - Throws: ``ProtoDecodingError`` when the bytes are not a valid encoding of the message.
        public func encode(serializedBytes bytes: [UInt8], pretty: Bool = false) throws(ProtoDecodingError) -> [UInt8] {
            let result = bytes.withUnsafeBytes { raw in
                Result { () throws(ProtoDecodingError) in try encode(serializedBytes: raw, pretty: pretty) }
            }
            return try result.get()
        }

        /// Proto3 JSON text as the message's wire bytes, as
        /// ``ProtoJSON/decode(json:messageName:)-(UnsafeRawBufferPointer,_)`` without the look-up.
        /// - Parameter json: The JSON text in UTF-8.
        /// - Returns: The message in the protobuf wire format (empty for `{}`).
        /// - Throws: ``ProtoJSONError`` saying what is wrong and in which field.
        public func decode(json: UnsafeRawBufferPointer) throws(ProtoJSONError) -> [UInt8] {
            try ProtoJSON.decode(json: json, messageIndex: index)
        }
    }
}

/// A growable byte buffer the encoder owns (freed with ``deallocate()``): appends without the
/// checks of an array's.
struct JSONByteWriter {
    private(set) var base: UnsafeMutablePointer<UInt8>
    private(set) var count = 0
    private var capacity: Int

    init(capacity: Int) {
        self.capacity = max(capacity, 64)
        base = .allocate(capacity: self.capacity)
    }

    func deallocate() {
        base.deallocate()
    }

    /// Room for `extra` more bytes.
    @inline(__always)
    mutating func reserve(_ extra: Int) {
        if count + extra > capacity { grow(count + extra) }
    }

    private mutating func grow(_ needed: Int) {
        let newCapacity = max(needed, capacity * 2)
        let newBase = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
        newBase.initialize(from: base, count: count)
        base.deallocate()
        base = newBase
        capacity = newCapacity
    }

    @inline(__always)
    mutating func append(_ byte: UInt8) {
        reserve(1)
        base[count] = byte
        count += 1
    }

    @inline(__always)
    mutating func append(_ bytes: UnsafePointer<UInt8>, count extra: Int) {
        reserve(extra)
        (base + count).initialize(from: bytes, count: extra)
        count += extra
    }

    mutating func append(_ bytes: [UInt8], _ range: Range<Int>) {
        bytes.withUnsafeBufferPointer { append($0.baseAddress! + range.lowerBound, count: range.count) }
    }

    mutating func append(_ text: StaticString) {
        append(text.utf8Start, count: text.utf8CodeUnitCount)
    }

    mutating func append(contentsOf text: String) {
        var text = text
        text.withUTF8 { append($0.baseAddress!, count: $0.count) }
    }

    /// Counts `extra` bytes written in place after the end (room reserved first).
    @inline(__always)
    mutating func advance(_ extra: Int) {
        count += extra
    }

    /// Forgets what was written after `mark` (a `count` read earlier).
    mutating func truncate(to mark: Int) {
        count = mark
    }

    /// The bytes written, copied into an array.
    func array() -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            buffer.baseAddress!.initialize(from: base, count: count)
            initialized = count
        }
    }
}

/// Walks an unpacked protobuf-c message and writes its proto3 JSON (``ProtoJSON``'s rules).
struct JSONEncoderWalk {
    let tables: JSONDecodingTables
    let pretty: Bool
    var out: JSONByteWriter
    /// The nesting of the value being written (pretty output only): its members or elements go
    /// one level deeper, its closing bracket at this level.
    private var indent = 0

    init(tables: JSONDecodingTables, pretty: Bool, capacity: Int) {
        self.tables = tables
        self.pretty = pretty
        out = JSONByteWriter(capacity: capacity)
    }

    // MARK: Containers

    /// What comes before a member or element: a comma after the first, and in pretty output a new
    /// line indented one level deeper than the container.
    @inline(__always)
    private mutating func separator(_ first: inout Bool) {
        if first { first = false } else { out.append(UInt8(ascii: ",")) }
        if pretty { newline(indent + 1) }
    }

    private mutating func newline(_ level: Int) {
        out.reserve(1 + 2 * level)
        out.append(UInt8(ascii: "\n"))
        for _ in 0..<level { out.append(UInt8(ascii: " ")); out.append(UInt8(ascii: " ")) }
    }

    /// Closes a container: `{}` or `[]` when nothing was written in it.
    private mutating func close(_ bracket: UInt8, empty: Bool) {
        if pretty, !empty { newline(indent) }
        out.append(bracket)
    }

    /// A member's key from its pre-encoded `"name":`.
    @inline(__always)
    private mutating func key(_ table: JSONMessageTable, _ field: JSONFieldInfo) {
        if pretty {
            out.append(table.keys, field.key.lowerBound..<(field.key.upperBound - 1))
            out.append(": ")
        } else {
            out.append(table.keys, field.key)
        }
    }

    private mutating func colon() {
        if pretty { out.append(": ") } else { out.append(UInt8(ascii: ":")) }
    }

    // MARK: Messages

    /// The message at `message` of the table at `index`: an object, or a well-known type's form.
    mutating func writeMessage(_ message: UnsafeRawPointer, _ index: Int) {
        let table = tables.messages[index]
        switch table.wellKnown {
        case .none:
            out.append(UInt8(ascii: "{"))
            var first = true
            writeFields(message, table, first: &first)
            close(UInt8(ascii: "}"), empty: first)
        case .timestamp:
            let timestamp = message.assumingMemoryBound(to: Google__Protobuf__Timestamp.self).pointee
            out.append(UInt8(ascii: "\""))
            ProtoJSON.writeRFC3339(seconds: timestamp.seconds, nanos: timestamp.nanos, into: &out)
            out.append(UInt8(ascii: "\""))
        case .duration:
            let duration = message.assumingMemoryBound(to: Google__Protobuf__Duration.self).pointee
            out.append(UInt8(ascii: "\""))
            ProtoJSON.writeDuration(seconds: duration.seconds, nanos: duration.nanos, into: &out)
            out.append(UInt8(ascii: "\""))
        case .fieldMask:
            let mask = message.assumingMemoryBound(to: Google__Protobuf__FieldMask.self).pointee
            let paths = (0..<mask.n_paths).map { index -> String in
                guard let path = mask.paths[index] else { return "" }
                return String(cString: path).split(separator: ".", omittingEmptySubsequences: false)
                    .map { ProtoJSON.jsonName(String($0)) }.joined(separator: ".")
            }
            writeQuoted(paths.joined(separator: ","))
        case .any:
            let any = message.assumingMemoryBound(to: Google__Protobuf__Any.self).pointee
            writeAny(typeURL: any.type_url.map { String(cString: $0) } ?? "", value: any.value)
        }
    }

    /// The members of a message's fields that are set, in declaration order.
    private mutating func writeFields(_ message: UnsafeRawPointer, _ table: JSONMessageTable, first: inout Bool) {
        for field in table.fields {
            let layout = field.layout
            let address = message + layout.offset
            switch layout.presence {
            case .repeated:
                let count = message.load(fromByteOffset: layout.quantifierOffset, as: Int.self)
                guard count > 0, let elements = address.load(as: UnsafeRawPointer?.self) else { continue }
                separator(&first)
                key(table, field)
                indent += 1
                if field.isMap {
                    writeMap(elements, count: count, entry: tables.messages[field.message])
                } else {
                    writeArray(elements, count: count, field)
                }
                indent -= 1
                continue
            case .oneof:
                guard message.load(fromByteOffset: layout.quantifierOffset, as: UInt32.self) == layout.number else { continue }
            case .flagged:
                guard message.load(fromByteOffset: layout.quantifierOffset, as: Int32.self) != 0 else { continue }
            case .unlessDefault:
                guard !Self.isDefault(address, field.kind) else { continue }
            }
            separator(&first)
            key(table, field)
            indent += 1
            writeValue(address, field)
            indent -= 1
        }
    }

    private mutating func writeArray(_ elements: UnsafeRawPointer, count: Int, _ field: JSONFieldInfo) {
        out.append(UInt8(ascii: "["))
        let stride = Self.elementStride(field.kind)
        var first = true
        for element in 0..<count {
            separator(&first)
            indent += 1
            writeValue(elements + element * stride, field)
            indent -= 1
        }
        close(UInt8(ascii: "]"), empty: false)
    }

    /// A map as an object: each entry's key (field 1) as a member name, its value (field 2).
    private mutating func writeMap(_ entries: UnsafeRawPointer, count: Int, entry: JSONMessageTable) {
        let keyField = entry.fields[0], valueField = entry.fields[1]
        out.append(UInt8(ascii: "{"))
        var first = true
        for index in 0..<count {
            let pair = entries.load(fromByteOffset: index * MemoryLayout<UnsafeRawPointer>.stride, as: UnsafeRawPointer.self)
            separator(&first)
            writeMapKey(pair + keyField.layout.offset, keyField)
            colon()
            indent += 1
            writeValue(pair + valueField.layout.offset, valueField)
            indent -= 1
        }
        close(UInt8(ascii: "}"), empty: false)
    }

    /// A map key as a member name: the string, or the integer or `true`/`false` in quotes.
    private mutating func writeMapKey(_ address: UnsafeRawPointer, _ field: JSONFieldInfo) {
        switch field.kind {
        case .string:
            writeString(address.load(as: UnsafePointer<UInt8>?.self))
        case .bool:
            out.append(address.load(as: Int32.self) != 0 ? "\"true\"" : "\"false\"")
        case .message, .bytes, .float, .double, .enumeration:
            // Not a key type proto3 allows.
            out.append("\"\"")
        default:
            out.append(UInt8(ascii: "\""))
            writeInteger(address, field.kind)
            out.append(UInt8(ascii: "\""))
        }
    }

    // MARK: Values

    /// One value (a singular field, or an element of a repeated one) at `address`.
    private mutating func writeValue(_ address: UnsafeRawPointer, _ field: JSONFieldInfo) {
        switch field.kind {
        case .int32, .sint32, .sfixed32, .uint32, .fixed32:
            writeInteger(address, field.kind)
        case .int64, .sint64, .sfixed64, .uint64, .fixed64:
            out.append(UInt8(ascii: "\""))
            writeInteger(address, field.kind)
            out.append(UInt8(ascii: "\""))
        case .float:
            writeFloating(Double(address.load(as: Float.self)))
        case .double:
            writeFloating(address.load(as: Double.self))
        case .bool:
            out.append(address.load(as: Int32.self) != 0 ? "true" : "false")
        case .enumeration:
            writeEnum(address.load(as: Int32.self), field)
        case .string:
            writeString(address.load(as: UnsafePointer<UInt8>?.self))
        case .bytes:
            let data = address.load(as: ProtobufCBinaryData.self)
            out.append(UInt8(ascii: "\""))
            if data.len > 0, let bytes = data.data {
                ProtoJSON.writeBase64(UnsafeBufferPointer(start: bytes, count: data.len), into: &out)
            }
            out.append(UInt8(ascii: "\""))
        case .message:
            guard let nested = address.load(as: UnsafeRawPointer?.self), field.message >= 0 else {
                out.append("{}")
                return
            }
            writeMessage(nested, field.message)
        }
    }

    private mutating func writeEnum(_ number: Int32, _ field: JSONFieldInfo) {
        if field.enumNames >= 0 {
            let names = tables.enums[field.enumNames]
            if !names.ranges.isEmpty {
                let slot = Int(number) - Int(names.minimum)
                if slot >= 0, slot < names.ranges.count, !names.ranges[slot].isEmpty {
                    out.append(names.names, names.ranges[slot])
                    return
                }
            } else if let value = protobuf_c_enum_descriptor_get_value(names.descriptor, number) {
                writeQuoted(String(cString: value.pointee.name))
                return
            }
        }
        writeDecimal(Int64(number))
    }

    /// A 32- or 64-bit integer field's value in decimal (no quotes).
    private mutating func writeInteger(_ address: UnsafeRawPointer, _ kind: JSONFieldKind) {
        switch kind {
        case .uint32, .fixed32:
            writeDecimal(UInt64(address.load(as: UInt32.self)), negative: false)
        case .int64, .sint64, .sfixed64:
            writeDecimal(address.load(as: Int64.self))
        case .uint64, .fixed64:
            writeDecimal(address.load(as: UInt64.self), negative: false)
        default:
            writeDecimal(Int64(address.load(as: Int32.self)))
        }
    }

    private mutating func writeDecimal(_ value: Int64) {
        writeDecimal(value.magnitude, negative: value < 0)
    }

    /// The digits of `magnitude`, after a `-` when `negative`.
    private mutating func writeDecimal(_ magnitude: UInt64, negative: Bool) {
        ProtoJSON.writeDecimal(magnitude, negative: negative, into: &out)
    }

    /// A float or double as the old encoder wrote it: integral values below 10^15 as integers,
    /// NaN and the infinities as strings, others in Swift's shortest round-trip form.
    private mutating func writeFloating(_ value: Double) {
        if value.isNaN {
            out.append("\"NaN\"")
        } else if value.isInfinite {
            out.append(value > 0 ? "\"Infinity\"" : "\"-Infinity\"")
        } else if value == value.rounded(), abs(value) < 1e15 {
            writeDecimal(Int64(value))
        } else {
            out.append(contentsOf: "\(value)")
        }
    }

    // MARK: Strings

    /// A C string as a JSON string literal: runs of bytes that need no escape copied at once,
    /// multi-byte UTF-8 validated as it goes. Invalid UTF-8 is written as `String(cString:)` reads
    /// it (each bad sequence a U+FFFD), as the old encoder did.
    mutating func writeString(_ text: UnsafePointer<UInt8>?) {
        guard let text else {
            out.append("\"\"")
            return
        }
        let mark = out.count
        out.append(UInt8(ascii: "\""))
        var runStart = 0
        var position = 0
        while true {
            let byte = text[position]
            if byte >= 0x20, byte < 0x80, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\") {
                position += 1
                continue
            }
            if byte >= 0x80 {
                let length = Self.utf8SequenceLength(text + position)
                guard length > 0 else {
                    out.truncate(to: mark)
                    writeQuoted(String(cString: text))
                    return
                }
                // U+2028 and U+2029 are escaped; other sequences stay in the run.
                if length == 3, byte == 0xE2, text[position + 1] == 0x80, text[position + 2] & 0xFE == 0xA8 {
                    out.append(text + runStart, count: position - runStart)
                    out.append(text[position + 2] == 0xA8 ? "\\u2028" : "\\u2029")
                    runStart = position + 3
                }
                position += length
                continue
            }
            out.append(text + runStart, count: position - runStart)
            if byte == 0 { break }
            writeEscape(byte)
            position += 1
            runStart = position
        }
        out.append(UInt8(ascii: "\""))
    }

    /// The escape of a quote, backslash or control character, as ``JSONString`` writes it.
    private mutating func writeEscape(_ byte: UInt8) {
        switch byte {
        case UInt8(ascii: "\""): out.append("\\\"")
        case UInt8(ascii: "\\"): out.append("\\\\")
        case UInt8(ascii: "\n"): out.append("\\n")
        case UInt8(ascii: "\r"): out.append("\\r")
        case UInt8(ascii: "\t"): out.append("\\t")
        case 0x08: out.append("\\b")
        case 0x0C: out.append("\\f")
        default:
            let hex: StaticString = "0123456789abcdef"
            out.append("\\u00")
            out.append(hex.utf8Start[Int(byte >> 4)])
            out.append(hex.utf8Start[Int(byte & 15)])
        }
    }

    /// The length of the well-formed UTF-8 sequence of 2 to 4 bytes at `bytes`, 0 when it is not
    /// one (a NUL terminator is never a continuation byte, so the check stops there).
    private static func utf8SequenceLength(_ bytes: UnsafePointer<UInt8>) -> Int {
        let lead = bytes[0]
        func continuation(_ index: Int, _ low: UInt8 = 0x80, _ high: UInt8 = 0xBF) -> Bool {
            (low...high).contains(bytes[index])
        }
        switch lead {
        case 0xC2...0xDF:
            return continuation(1) ? 2 : 0
        case 0xE0:
            return continuation(1, 0xA0) && continuation(2) ? 3 : 0
        case 0xE1...0xEC, 0xEE...0xEF:
            return continuation(1) && continuation(2) ? 3 : 0
        case 0xED:
            return continuation(1, 0x80, 0x9F) && continuation(2) ? 3 : 0
        case 0xF0:
            return continuation(1, 0x90) && continuation(2) && continuation(3) ? 4 : 0
        case 0xF1...0xF3:
            return continuation(1) && continuation(2) && continuation(3) ? 4 : 0
        case 0xF4:
            return continuation(1, 0x80, 0x8F) && continuation(2) && continuation(3) ? 4 : 0
        default:
            return 0
        }
    }

    /// A Swift string as a JSON string literal (the rare paths: field masks, type URLs).
    private mutating func writeQuoted(_ text: String) {
        var literal = ""
        JSONString.append(text, to: &literal)
        out.append(contentsOf: literal)
    }

    // MARK: Any

    /// `{"@type": url, ...}`: a known message's fields after the type (or its JSON form as
    /// `"value"`, for a `google.protobuf` type), an unknown type's bytes in base64 as `"value"`.
    private mutating func writeAny(typeURL: String, value: ProtobufCBinaryData) {
        let name = typeURL.split(separator: "/").last.map(String.init) ?? typeURL
        out.append(UInt8(ascii: "{"))
        var first = true
        separator(&first)
        writeQuoted("@type")
        colon()
        writeQuoted(typeURL)
        let bytes = value.len > 0 ? value.data : nil
        if let index = tables.indexByName[name],
           let message = protobuf_c_message_unpack(tables.messages[index].descriptor, nil, bytes == nil ? 0 : value.len, bytes) {
            defer { protobuf_c_message_free_unpacked(message, nil) }
            if name.hasPrefix("google.protobuf.") {
                separator(&first)
                writeQuoted("value")
                colon()
                indent += 1
                writeMessage(UnsafeRawPointer(message), index)
                indent -= 1
            } else {
                // Every message outside google.protobuf is written as an object: its members follow.
                writeFields(UnsafeRawPointer(message), tables.messages[index], first: &first)
            }
        } else {
            // A type this build does not know: its bytes, so nothing is lost.
            separator(&first)
            writeQuoted("value")
            colon()
            out.append(UInt8(ascii: "\""))
            if let bytes {
                ProtoJSON.writeBase64(UnsafeBufferPointer(start: bytes, count: value.len), into: &out)
            }
            out.append(UInt8(ascii: "\""))
        }
        close(UInt8(ascii: "}"), empty: false)
    }

    // MARK: Layout

    private static func elementStride(_ kind: JSONFieldKind) -> Int {
        switch kind {
        case .int64, .sint64, .sfixed64, .uint64, .fixed64, .double: 8
        case .string, .message: MemoryLayout<UnsafeRawPointer>.stride
        case .bytes: MemoryLayout<ProtobufCBinaryData>.stride
        default: 4
        }
    }

    private static func isDefault(_ address: UnsafeRawPointer, _ kind: JSONFieldKind) -> Bool {
        switch kind {
        case .int64, .sint64, .sfixed64, .uint64, .fixed64:
            return address.load(as: UInt64.self) == 0
        case .double:
            return address.load(as: Double.self) == 0
        case .float:
            return address.load(as: Float.self) == 0
        case .string:
            guard let text = address.load(as: UnsafePointer<UInt8>?.self) else { return true }
            return text.pointee == 0
        case .bytes:
            return address.load(as: ProtobufCBinaryData.self).len == 0
        case .message:
            return address.load(as: UnsafeRawPointer?.self) == nil
        default:
            return address.load(as: UInt32.self) == 0
        }
    }
}

// MARK: Well-known type text

extension ProtoJSON {
    /// The digits of `magnitude`, after a `-` when `negative`.
    static func writeDecimal(_ magnitude: UInt64, negative: Bool, into out: inout JSONByteWriter) {
        out.reserve(21)
        if negative { out.append(UInt8(ascii: "-")) }
        var digits = 1
        var rest = magnitude
        while rest >= 10 { rest /= 10; digits += 1 }
        var value = magnitude
        var position = out.base + out.count + digits
        repeat {
            position -= 1
            position.pointee = UInt8(ascii: "0") + UInt8(value % 10)
            value /= 10
        } while value > 0
        out.advance(digits)
    }

    /// `value` in decimal with zeros in front up to `width` characters, the sign counted (as
    /// `String(value)` padded, which the old encoder did).
    private static func writePadded(_ value: Int64, _ width: Int, into out: inout JSONByteWriter) {
        var length = value < 0 ? 2 : 1
        var rest = value.magnitude
        while rest >= 10 { rest /= 10; length += 1 }
        for _ in 0..<max(0, width - length) { out.append(UInt8(ascii: "0")) }
        writeDecimal(value.magnitude, negative: value < 0, into: &out)
    }

    /// RFC 3339 in UTC with 0, 3, 6 or 9 fractional digits, as proto3 JSON writes a Timestamp.
    static func writeRFC3339(seconds: Int64, nanos: Int32, into out: inout JSONByteWriter) {
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        // Civil date from days since 1970-01-01 (Howard Hinnant's days_from_civil, inverted).
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        writePadded(year, 4, into: &out)
        out.append(UInt8(ascii: "-"))
        writePadded(month, 2, into: &out)
        out.append(UInt8(ascii: "-"))
        writePadded(day, 2, into: &out)
        out.append(UInt8(ascii: "T"))
        writePadded(secondOfDay / 3600, 2, into: &out)
        out.append(UInt8(ascii: ":"))
        writePadded(secondOfDay / 60 % 60, 2, into: &out)
        out.append(UInt8(ascii: ":"))
        writePadded(secondOfDay % 60, 2, into: &out)
        writeFraction(nanos, into: &out)
        out.append(UInt8(ascii: "Z"))
    }

    /// A Duration as proto3 JSON writes it: seconds with 0, 3, 6 or 9 fractional digits and `s`.
    static func writeDuration(seconds: Int64, nanos: Int32, into out: inout JSONByteWriter) {
        if seconds < 0 || nanos < 0 { out.append(UInt8(ascii: "-")) }
        writeDecimal(seconds.magnitude, negative: false, into: &out)
        writeFraction(Int32(truncatingIfNeeded: nanos.magnitude), into: &out)
        out.append(UInt8(ascii: "s"))
    }

    /// `.` and 3, 6 or 9 digits of the nanoseconds, nothing for 0.
    private static func writeFraction(_ nanos: Int32, into out: inout JSONByteWriter) {
        guard nanos > 0 else { return }
        let digits = nanos % 1_000_000 == 0 ? 3 : nanos % 1_000 == 0 ? 6 : 9
        out.append(UInt8(ascii: "."))
        var divisor: Int32 = 100_000_000
        for _ in 0..<digits {
            out.append(UInt8(ascii: "0") + UInt8(nanos / divisor % 10))
            divisor /= 10
        }
    }

    private static let base64Alphabet: StaticString = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

    /// Standard base64 with padding, as proto3 JSON writes bytes.
    static func writeBase64(_ bytes: UnsafeBufferPointer<UInt8>, into out: inout JSONByteWriter) {
        let alphabet = base64Alphabet.utf8Start
        out.reserve((bytes.count + 2) / 3 * 4)
        var index = 0
        while index < bytes.count {
            let b0 = UInt32(bytes[index])
            let b1 = index + 1 < bytes.count ? UInt32(bytes[index + 1]) : 0
            let b2 = index + 2 < bytes.count ? UInt32(bytes[index + 2]) : 0
            let value = b0 << 16 | b1 << 8 | b2
            out.append(alphabet[Int(value >> 18 & 63)])
            out.append(alphabet[Int(value >> 12 & 63)])
            out.append(index + 1 < bytes.count ? alphabet[Int(value >> 6 & 63)] : UInt8(ascii: "="))
            out.append(index + 2 < bytes.count ? alphabet[Int(value & 63)] : UInt8(ascii: "="))
            index += 3
        }
    }

    /// What a `write…(into:)` function writes, as a string.
    static func text(_ write: (inout JSONByteWriter) -> Void) -> String {
        var out = JSONByteWriter(capacity: 64)
        defer { out.deallocate() }
        write(&out)
        return String(decoding: UnsafeBufferPointer(start: out.base, count: out.count), as: UTF8.self)
    }
}
