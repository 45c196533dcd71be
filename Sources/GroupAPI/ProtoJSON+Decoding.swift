import CProtobufC
import GroupProtoC

extension ProtoJSON {
    /// The deepest nesting of JSON objects and arrays ``decode(json:messageName:)-(UnsafeRawBufferPointer,_)``
    /// accepts; deeper input is a ``ProtoJSONError/Code/syntax`` error.
    public static let maximumDepth = 64

    /// Proto3 JSON text as the protobuf wire bytes of a message, as the Connect protocol's JSON
    /// requests must become the bytes the handlers decode.
    ///
    /// Keys are the lowerCamelCase JSON names or the proto field names; `null` leaves a field at its
    /// default; 64-bit integers may be numbers or strings, bytes standard or URL-safe base64,
    /// enums value names or numbers; `Timestamp`, `Duration`, `FieldMask` and `Any` take their
    /// proto3 JSON forms. Nothing unknown is ignored: see ``ProtoJSONError/Code``.
    ///
    /// The JSON is read once, byte by byte, and the wire format written as it goes (nested messages
    /// get their length patched in when they end); fields come out in the order the JSON gives them.
    ///
    /// - Parameters:
    ///   - json: The JSON text in UTF-8: an object, or for a `google.protobuf` message with a
    ///     special JSON form, that form (a `Timestamp` is a string).
    ///   - messageName: The message's full name, e.g. `groupd.v1.CreateGroupRequest`: any message of
    ///     ``ProtoJSON``'s registry (those of the services' methods and what they contain).
    /// - Returns: The message in the protobuf wire format (empty for `{}`).
    /// - Throws: ``ProtoJSONError`` saying what is wrong and in which field.
    public static func decode(json: UnsafeRawBufferPointer, messageName: String) throws(ProtoJSONError) -> [UInt8] {
        guard let index = JSONDecodingTables.shared.indexByName[messageName] else {
            throw ProtoJSONError(code: .unknownMessage, field: "", message: "no message named \"\(messageName)\" is known")
        }
        return try decode(json: json, messageIndex: index)
    }

    /// Proto3 JSON text as the wire bytes of the message of the table at `index`.
    static func decode(json: UnsafeRawBufferPointer, messageIndex index: Int) throws(ProtoJSONError) -> [UInt8] {
        let tables = JSONDecodingTables.shared
        var decoder = JSONWireDecoder(json: json, tables: tables)
        defer { decoder.scratch?.deallocate() }
        do {
            try decoder.decodeDocument(index)
        } catch {
            throw error.publicError
        }
        return decoder.out
    }

    /// Proto3 JSON text in an array as the protobuf wire bytes of a message.
    ///
    /// - Parameters:
    ///   - json: The JSON text in UTF-8.
    ///   - messageName: The message's full name, e.g. `groupd.v1.CreateGroupRequest`.
    /// - Returns: The message in the protobuf wire format.
    /// - Throws: ``ProtoJSONError`` as ``decode(json:messageName:)-(UnsafeRawBufferPointer,_)``.
    public static func decode(json: [UInt8], messageName: String) throws(ProtoJSONError) -> [UInt8] {
        let result: Result<[UInt8], ProtoJSONError> = json.withUnsafeBytes { raw in
            Result { () throws(ProtoJSONError) in try decode(json: raw, messageName: messageName) }
        }
        return try result.get()
    }

    /// Proto3 JSON text in a string as the protobuf wire bytes of a message.
    ///
    /// - Parameters:
    ///   - json: The JSON text.
    ///   - messageName: The message's full name, e.g. `groupd.v1.CreateGroupRequest`.
    /// - Returns: The message in the protobuf wire format.
    /// - Throws: ``ProtoJSONError`` as ``decode(json:messageName:)-(UnsafeRawBufferPointer,_)``.
    public static func decode(json: String, messageName: String) throws(ProtoJSONError) -> [UInt8] {
        var json = json
        let result: Result<[UInt8], ProtoJSONError> = json.withUTF8 { utf8 in
            Result { () throws(ProtoJSONError) in try decode(json: UnsafeRawBufferPointer(utf8), messageName: messageName) }
        }
        return try result.get()
    }
}

/// A decoding failure on its way out: `path` grows a component at each level it leaves, and the
/// public error's message is composed once, at the top.
struct JSONDecodingFailure: Error {
    var code: ProtoJSONError.Code
    var path: String
    var detail: String

    /// The same failure seen from the enclosing level: `component` (a field name, `[2]`, `["k"]`)
    /// goes in front of the path.
    func inside(_ component: String) -> JSONDecodingFailure {
        var outer = self
        if path.isEmpty {
            outer.path = component
        } else if path.utf8.first == UInt8(ascii: "[") {
            outer.path = component + path
        } else {
            outer.path = component + "." + path
        }
        return outer
    }

    var publicError: ProtoJSONError {
        let message = switch code {
        case .wrongType, .duplicateField: path.isEmpty ? detail : "field \(path): \(detail)"
        default: detail
        }
        return ProtoJSONError(code: code, field: path, message: message)
    }
}

/// A string literal of the input: its content between the quotes, validated (UTF-8, escapes).
struct JSONStringToken {
    /// Index of the first byte after the opening quote.
    var start: Int
    /// Index of the closing quote.
    var end: Int
    /// The length of the content in UTF-8 once escapes are decoded.
    var decodedCount: Int
    var hasEscapes: Bool
}

/// Reads JSON and writes the protobuf wire format in one pass (see ``ProtoJSON``'s decode).
struct JSONWireDecoder {
    private let bytes: UnsafeBufferPointer<UInt8>
    private let tables: JSONDecodingTables
    private var position = 0
    private var depth = 0
    /// The wire bytes written so far.
    private(set) var out: [UInt8] = []
    /// Where a string with escapes is decoded when its text must be parsed (an enum name, a
    /// timestamp): at most the input's size, allocated on first use; the owner frees it.
    var scratch: UnsafeMutableRawBufferPointer?
    /// The wire ranges of the keys of the maps being read (a stack: a map's value may hold a map).
    private var mapKeys: [Range<Int>] = []

    init(json: UnsafeRawBufferPointer, tables: JSONDecodingTables) {
        self.bytes = json.assumingMemoryBound(to: UInt8.self)
        self.tables = tables
        out.reserveCapacity(json.count)
    }

    // MARK: Messages

    /// The whole input: one message value, then only whitespace.
    mutating func decodeDocument(_ index: Int) throws(JSONDecodingFailure) {
        skipWhitespace()
        let wellKnown = tables.messages[index].wellKnown
        if wellKnown == .none || wellKnown == .any, peek() != UInt8(ascii: "{") {
            throw syntax(position == bytes.count ? "expected an object, found the end of the input" : "expected an object at the top level")
        }
        try decodeMessage(index)
        skipWhitespace()
        guard position == bytes.count else { throw syntax("unexpected data after the top-level value") }
    }

    /// A value of message type (the caller wrote its tag and length, if any).
    private mutating func decodeMessage(_ index: Int) throws(JSONDecodingFailure) {
        let table = tables.messages[index]
        switch table.wellKnown {
        case .none:
            guard peek() == UInt8(ascii: "{") else { throw try expected("an object (\(table.name))") }
            try decodeFields(of: index, skippingTypeKey: false)
        case .any:
            guard peek() == UInt8(ascii: "{") else { throw try expected("an object with \"@type\" (google.protobuf.Any)") }
            try decodeAny()
        case .timestamp:
            let text = try wellKnownText("an RFC 3339 timestamp (google.protobuf.Timestamp)")
            guard let (seconds, nanos) = Self.timestamp(text) else {
                throw wrongType("\(Self.quoted(text)) is not an RFC 3339 timestamp between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999999999Z")
            }
            writeSecondsAndNanos(seconds, nanos)
        case .duration:
            let text = try wellKnownText("a duration such as \"1.5s\" (google.protobuf.Duration)")
            guard let (seconds, nanos) = Self.duration(text) else {
                throw wrongType("\(Self.quoted(text)) is not a duration: seconds with up to 9 fractional digits and \"s\", within ±315576000000s")
            }
            writeSecondsAndNanos(seconds, nanos)
        case .fieldMask:
            try writeFieldMask(try wellKnownText("a comma-separated list of paths (google.protobuf.FieldMask)"))
        }
    }

    /// An object's members as the fields of the message at `index` (positioned at `{`).
    private mutating func decodeFields(of index: Int, skippingTypeKey: Bool) throws(JSONDecodingFailure) {
        let table = tables.messages[index]
        try openContainer()
        var seen = FieldSet(count: table.fields.count)
        var setOneofMembers = FieldSet(count: table.fields.count)
        var hint = 0
        var first = true
        while let key = try nextKey(&first) {
            let keyText = text(key)
            guard let fieldIndex = table.fieldIndex(named: keyText, hint: hint) else {
                if skippingTypeKey, Self.equals(keyText, "@type") {
                    try skipValue()
                    continue
                }
                let name = String(decoding: keyText, as: UTF8.self)
                throw JSONDecodingFailure(code: .unknownField, path: name, detail: "unknown field \(Self.quoted(keyText)) in \(table.name)")
            }
            hint = fieldIndex + 1
            let field = table.fields[fieldIndex]
            guard !seen.contains(fieldIndex) else {
                throw JSONDecodingFailure(
                    code: .duplicateField, path: table.protoNames[fieldIndex],
                    detail: "given more than once (a repeated key, or both its JSON name and its proto name)")
            }
            seen.insert(fieldIndex)
            if peek() == UInt8(ascii: "n") {
                do {
                    try literal("null")
                } catch {
                    throw error.inside(table.protoNames[fieldIndex])
                }
                continue
            }
            if field.oneof >= 0 {
                if let other = table.fields.indices.first(where: { setOneofMembers.contains($0) && table.fields[$0].oneof == field.oneof }) {
                    throw JSONDecodingFailure(
                        code: .duplicateField, path: table.protoNames[fieldIndex],
                        detail: "\(table.protoNames[other]) of the same oneof is already set; set at most one")
                }
                setOneofMembers.insert(fieldIndex)
            }
            do {
                if field.isMap {
                    try decodeMap(field)
                } else if field.isRepeated {
                    try decodeRepeated(field)
                } else {
                    try decodeValue(field, always: field.hasPresence)
                }
            } catch {
                throw error.inside(table.protoNames[fieldIndex])
            }
        }
    }

    /// One value of `field` with its tag: a singular field, an element, a map value. A scalar at
    /// its default is left out unless `always` (the field has presence: a oneof member).
    private mutating func decodeValue(_ field: JSONFieldInfo, always: Bool) throws(JSONDecodingFailure) {
        switch field.kind {
        case .message:
            writeVarint(field.tag)
            let start = beginLength()
            try decodeMessage(field.message)
            endLength(start)
        case .string:
            guard peek() == UInt8(ascii: "\"") else { throw try expected("a string") }
            let token = try scanString()
            guard always || token.decodedCount > 0 else { return }
            writeVarint(field.tag)
            writeVarint(UInt64(token.decodedCount))
            appendContent(of: token)
        case .bytes:
            guard peek() == UInt8(ascii: "\"") else { throw try expected("base64 in a string") }
            let token = try scanString()
            try writeBase64(text(token), tag: field.tag, always: always)
        default:
            let bits = try scalarBits(field)
            guard always || bits != 0 else { return }
            writeVarint(field.tag)
            writePayload(bits, field.kind.wireType)
        }
    }

    /// A JSON array as a repeated field: one packed record for numbers, one record per element otherwise.
    private mutating func decodeRepeated(_ field: JSONFieldInfo) throws(JSONDecodingFailure) {
        guard peek() == UInt8(ascii: "[") else { throw try expected("an array") }
        try openContainer()
        var first = true
        var count = 0
        let mark = out.count
        var start = 0
        if field.isPacked {
            writeVarint(field.packedTag)
            start = beginLength()
        }
        while try nextElement(&first) {
            do throws(JSONDecodingFailure) {
                if peek() == UInt8(ascii: "n") {
                    try literal("null")
                    throw wrongType("null is not allowed in an array")
                }
                if field.isPacked {
                    writePayload(try scalarBits(field), field.kind.wireType)
                } else {
                    try decodeValue(field, always: true)
                }
            } catch {
                throw error.inside("[\(count)]")
            }
            count += 1
        }
        if field.isPacked {
            if count == 0 {
                out.removeLast(out.count - mark)
            } else {
                endLength(start)
            }
        }
    }

    /// A JSON object as a map field: one entry message (key = 1, value = 2) per member.
    private mutating func decodeMap(_ field: JSONFieldInfo) throws(JSONDecodingFailure) {
        guard peek() == UInt8(ascii: "{") else { throw try expected("an object (a map)") }
        let entry = tables.messages[field.message]
        let keyField = entry.fields[0], valueField = entry.fields[1]
        try openContainer()
        let base = mapKeys.count
        defer { mapKeys.removeSubrange(base...) }
        // Past a few entries, duplicate keys are found by hashing rather than by comparing with each.
        var manyKeys: Set<[UInt8]> = []
        var first = true
        while let key = try nextKey(&first) {
            writeVarint(field.tag)
            let start = beginLength()
            do {
                try writeMapKey(keyField, key)
            } catch {
                throw error.inside(mapKeyComponent(key))
            }
            let keyEnd = out.count
            do throws(JSONDecodingFailure) {
                if peek() == UInt8(ascii: "n") {
                    try literal("null")
                    throw wrongType("a map value cannot be null")
                }
                try decodeValue(valueField, always: true)
            } catch {
                throw error.inside(mapKeyComponent(key))
            }
            let shift = endLength(start)
            let keyRange = (start + shift)..<(keyEnd + shift)
            let duplicate: Bool
            if mapKeys.count - base < 16 {
                duplicate = mapKeys[base...].contains { out[$0].elementsEqual(out[keyRange]) }
                mapKeys.append(keyRange)
                if mapKeys.count - base == 16 {
                    for range in mapKeys[base...] { manyKeys.insert(Array(out[range])) }
                }
            } else {
                duplicate = !manyKeys.insert(Array(out[keyRange])).inserted
            }
            if duplicate {
                throw JSONDecodingFailure(code: .duplicateField, path: mapKeyComponent(key), detail: "map key given more than once")
            }
        }
    }

    /// The key of a map entry (field 1), from the member's name: the string itself, or the integer
    /// or `true`/`false` it spells.
    private mutating func writeMapKey(_ keyField: JSONFieldInfo, _ key: JSONStringToken) throws(JSONDecodingFailure) {
        switch keyField.kind {
        case .string:
            writeVarint(keyField.tag)
            writeVarint(UInt64(key.decodedCount))
            appendContent(of: key)
        case .bool:
            let keyText = text(key)
            let value: UInt64
            if Self.equals(keyText, "true") {
                value = 1
            } else if Self.equals(keyText, "false") {
                value = 0
            } else {
                throw wrongType("map key \(Self.quoted(keyText)) is not \"true\" or \"false\"")
            }
            writeVarint(keyField.tag)
            writeVarint(value)
        default:
            let keyText = text(key)
            guard Self.numberEnd(keyText, from: 0) == keyText.count else {
                throw wrongType("map key \(Self.quoted(keyText)) is not an integer")
            }
            let bits = try integerBits(keyField.kind, keyText)
            writeVarint(keyField.tag)
            writePayload(bits, keyField.kind.wireType)
        }
    }

    private mutating func mapKeyComponent(_ key: JSONStringToken) -> String {
        var component = "["
        JSONString.append(String(decoding: text(key), as: UTF8.self), to: &component)
        return component + "]"
    }

    /// `{"@type": "type.googleapis.com/<name>", ...}`: the type URL is looked for first (it may come
    /// anywhere in the object), then the object is read again as that message's fields, or as
    /// `"value"` for a `google.protobuf` type with a special JSON form.
    private mutating func decodeAny() throws(JSONDecodingFailure) {
        let objectStart = position
        try openContainer()
        var typeURL: JSONStringToken?
        var memberCount = 0
        var first = true
        while let key = try nextKey(&first) {
            memberCount += 1
            guard Self.equals(text(key), "@type") else {
                try skipValue()
                continue
            }
            guard typeURL == nil else {
                throw JSONDecodingFailure(code: .duplicateField, path: "@type", detail: "given more than once")
            }
            guard peek() == UInt8(ascii: "\"") else {
                throw try expected("a type URL string").inside("@type")
            }
            typeURL = try scanString()
        }
        guard let typeURL else {
            // `{}` is the empty Any.
            guard memberCount == 0 else { throw wrongType("an Any with fields needs \"@type\"") }
            return
        }
        let objectEnd = position
        let url = text(typeURL)
        guard let slash = url.lastIndex(of: UInt8(ascii: "/")) else {
            throw wrongType("type URL \(Self.quoted(url)) has no '/' before the message name").inside("@type")
        }
        let name = String(decoding: url[(slash + 1)...], as: UTF8.self)
        guard let inner = tables.indexByName[name] else {
            throw JSONDecodingFailure(
                code: .unknownMessage, path: "@type",
                detail: "type URL \(Self.quoted(url)) names no message this build knows")
        }
        writeVarint(0x0A)
        writeVarint(UInt64(url.count))
        out.append(contentsOf: url)

        position = objectStart
        let mark = out.count
        writeVarint(0x12)
        let start = beginLength()
        if tables.messages[inner].wellKnown == .none {
            try decodeFields(of: inner, skippingTypeKey: true)
        } else {
            try openContainer()
            var sawValue = false
            first = true
            while let key = try nextKey(&first) {
                let keyText = text(key)
                if Self.equals(keyText, "@type") {
                    try skipValue()
                } else if Self.equals(keyText, "value") {
                    guard !sawValue else {
                        throw JSONDecodingFailure(code: .duplicateField, path: "value", detail: "given more than once")
                    }
                    sawValue = true
                    if peek() == UInt8(ascii: "n") {
                        try literal("null")
                        continue
                    }
                    do {
                        try decodeMessage(inner)
                    } catch {
                        throw error.inside("value")
                    }
                } else {
                    throw JSONDecodingFailure(
                        code: .unknownField, path: String(decoding: keyText, as: UTF8.self),
                        detail: "unknown field \(Self.quoted(keyText)) in an Any holding \(name) (only \"@type\" and \"value\")")
                }
            }
        }
        if out.count == start {
            out.removeLast(out.count - mark)
        } else {
            endLength(start)
        }
        assert(position == objectEnd)
    }

    // MARK: Scalars

    /// A number, bool or enum value as the integer its wire encoding carries: the varint's value
    /// (zigzag for `sint`), or the bits of a fixed32/fixed64/float/double.
    private mutating func scalarBits(_ field: JSONFieldInfo) throws(JSONDecodingFailure) -> UInt64 {
        let first = peek()
        switch field.kind {
        case .bool:
            if first == UInt8(ascii: "t") {
                try literal("true")
                return 1
            }
            if first == UInt8(ascii: "f") {
                try literal("false")
                return 0
            }
            throw try expected("true or false")
        case .enumeration:
            if first == UInt8(ascii: "\"") {
                let name = text(try scanString())
                guard let descriptor = field.enumDescriptor, let value = Self.enumValue(named: name, in: descriptor) else {
                    let enumName = field.enumDescriptor.map { String(cString: $0.pointee.name) } ?? "enum"
                    throw wrongType("\(Self.quoted(name)) is not a value of \(enumName)")
                }
                return UInt64(bitPattern: Int64(value))
            }
            if Self.isNumberStart(first) {
                return try integerBits(.int32, try scanNumber())
            }
            throw try expected("an enum value name or number")
        case .float, .double:
            let number: UnsafeBufferPointer<UInt8>
            if first == UInt8(ascii: "\"") {
                number = text(try scanString())
                if let special = Self.specialFloatingValue(number) {
                    return field.kind == .float ? UInt64(Float(special).bitPattern) : special.bitPattern
                }
                guard Self.numberEnd(number, from: 0) == number.count else { throw wrongType("\(Self.quoted(number)) is not a number") }
            } else if Self.isNumberStart(first) {
                number = try scanNumber()
            } else {
                throw try expected("a number")
            }
            let value = Double(String(decoding: number, as: UTF8.self)) ?? .nan
            if field.kind == .float {
                let narrowed = Float(value)
                guard narrowed.isFinite else { throw wrongType("\(String(decoding: number, as: UTF8.self)) is out of range for float") }
                return UInt64(narrowed.bitPattern)
            }
            guard value.isFinite else { throw wrongType("\(String(decoding: number, as: UTF8.self)) is out of range for double") }
            return value.bitPattern
        default:
            let number: UnsafeBufferPointer<UInt8>
            if first == UInt8(ascii: "\"") {
                number = text(try scanString())
                guard Self.numberEnd(number, from: 0) == number.count else { throw wrongType("\(Self.quoted(number)) is not an integer") }
            } else if Self.isNumberStart(first) {
                number = try scanNumber()
            } else {
                throw try expected("an integer")
            }
            return try integerBits(field.kind, number)
        }
    }

    /// A JSON number's text (grammar already checked) as the varint or fixed bits of an integer
    /// field of `kind`, range-checked.
    private func integerBits(_ kind: JSONFieldKind, _ number: UnsafeBufferPointer<UInt8>) throws(JSONDecodingFailure) -> UInt64 {
        let (negative, magnitude): (Bool, UInt64)
        switch Self.integer(number) {
        case .value(let sign, let value): (negative, magnitude) = (sign && value != 0, value)
        case .notIntegral: throw wrongType("\(String(decoding: number, as: UTF8.self)) is not an integer")
        case .tooLarge: throw wrongType("\(String(decoding: number, as: UTF8.self)) is out of range for \(kind.protoName)")
        }
        let limit: UInt64 = switch kind {
        case .int32, .sint32, .sfixed32: negative ? 1 << 31 : (1 << 31) - 1
        case .uint32, .fixed32: negative ? 0 : UInt64(UInt32.max)
        case .int64, .sint64, .sfixed64: negative ? 1 << 63 : (1 << 63) - 1
        default: negative ? 0 : UInt64.max
        }
        guard magnitude <= limit else {
            throw wrongType("\(String(decoding: number, as: UTF8.self)) is out of range for \(kind.protoName)")
        }
        let signed = negative ? Int64(bitPattern: 0 &- magnitude) : Int64(bitPattern: magnitude)
        return switch kind {
        case .int32, .int64: UInt64(bitPattern: signed)
        case .sint32: UInt64(UInt32(bitPattern: Int32(signed) << 1 ^ Int32(signed) >> 31))
        case .sint64: UInt64(bitPattern: signed << 1 ^ signed >> 63)
        case .sfixed32: UInt64(UInt32(bitPattern: Int32(signed)))
        default: magnitude
        }
    }

    private enum IntegerText {
        case value(negative: Bool, magnitude: UInt64)
        case notIntegral
        case tooLarge
    }

    /// The integer a JSON number spells exactly (`1e3`, `1.0`, `-0`), or why it is none.
    private static func integer(_ text: UnsafeBufferPointer<UInt8>) -> IntegerText {
        var index = 0
        let negative = text[0] == UInt8(ascii: "-")
        if negative { index = 1 }
        let integerStart = index
        while index < text.count, isDigit(text[index]) { index += 1 }
        let integerCount = index - integerStart
        var fractionStart = index, fractionCount = 0
        if index < text.count, text[index] == UInt8(ascii: ".") {
            index += 1
            fractionStart = index
            while index < text.count, isDigit(text[index]) { index += 1 }
            fractionCount = index - fractionStart
        }
        var exponent = 0
        if index < text.count {
            index += 1  // e or E
            var exponentNegative = false
            if text[index] == UInt8(ascii: "+") {
                index += 1
            } else if text[index] == UInt8(ascii: "-") {
                exponentNegative = true
                index += 1
            }
            while index < text.count {
                if exponent < 100_000 { exponent = exponent * 10 + Int(text[index] &- 48) }
                index += 1
            }
            if exponentNegative { exponent = -exponent }
        }
        let total = integerCount + fractionCount
        func digit(_ position: Int) -> UInt8 {
            (position < integerCount ? text[integerStart + position] : text[fractionStart + position - integerCount]) &- 48
        }
        var firstSignificant = 0
        while firstSignificant < total, digit(firstSignificant) == 0 { firstSignificant += 1 }
        guard firstSignificant < total else { return .value(negative: negative, magnitude: 0) }
        var lastSignificant = total - 1
        while digit(lastSignificant) == 0 { lastSignificant -= 1 }
        let scale = exponent - fractionCount + (total - 1 - lastSignificant)
        guard scale >= 0 else { return .notIntegral }
        guard lastSignificant - firstSignificant + 1 + scale <= 20 else { return .tooLarge }
        var magnitude: UInt64 = 0
        for position in firstSignificant...lastSignificant {
            let (shifted, overflow) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, carry) = shifted.addingReportingOverflow(UInt64(digit(position)))
            guard !overflow, !carry else { return .tooLarge }
            magnitude = sum
        }
        for _ in 0..<scale {
            let (shifted, overflow) = magnitude.multipliedReportingOverflow(by: 10)
            guard !overflow else { return .tooLarge }
            magnitude = shifted
        }
        return .value(negative: negative, magnitude: magnitude)
    }

    private static func specialFloatingValue(_ text: UnsafeBufferPointer<UInt8>) -> Double? {
        if equals(text, "NaN") { return .nan }
        if equals(text, "Infinity") { return .infinity }
        if equals(text, "-Infinity") { return -.infinity }
        return nil
    }

    /// The number of the value named `name` in an enum (aliases included), by binary search of
    /// protobuf-c's name index.
    private static func enumValue(named name: UnsafeBufferPointer<UInt8>, in descriptor: UnsafePointer<ProtobufCEnumDescriptor>) -> Int32? {
        let enumeration = descriptor.pointee
        var low = 0, high = Int(enumeration.n_value_names)
        while low < high {
            let middle = (low + high) / 2
            let entry = enumeration.values_by_name[middle]
            let order = compare(name, entry.name)
            if order == 0 { return Int32(enumeration.values[Int(entry.index)].value) }
            if order < 0 { high = middle } else { low = middle + 1 }
        }
        return nil
    }

    /// `strcmp` of the bytes with a C string: negative, zero or positive.
    private static func compare(_ bytes: UnsafeBufferPointer<UInt8>, _ cString: UnsafePointer<CChar>) -> Int {
        var index = 0
        while true {
            let other = UInt8(bitPattern: cString[index])
            if index == bytes.count { return other == 0 ? 0 : -1 }
            if other == 0 { return 1 }
            if bytes[index] != other { return bytes[index] < other ? -1 : 1 }
            index += 1
        }
    }

    /// Base64 (standard or URL-safe alphabet, padding optional) decoded straight into a bytes field.
    private mutating func writeBase64(_ text: UnsafeBufferPointer<UInt8>, tag: UInt64, always: Bool) throws(JSONDecodingFailure) {
        var count = text.count
        if count > 0, text[count - 1] == UInt8(ascii: "=") {
            count -= 1
            if count > 0, text[count - 1] == UInt8(ascii: "=") { count -= 1 }
            guard text.count % 4 == 0 else { throw wrongType("\(Self.quoted(text)) is not base64: wrong padding") }
        }
        guard count % 4 != 1 else { throw wrongType("\(Self.quoted(text)) is not base64: wrong length") }
        let length = count / 4 * 3 + (count % 4 == 0 ? 0 : count % 4 - 1)
        guard always || length > 0 else { return }
        writeVarint(tag)
        writeVarint(UInt64(length))
        let table = Self.base64Values
        var accumulator: UInt32 = 0
        var bits = 0
        for index in 0..<count {
            let value = table[Int(text[index])]
            guard value < 64 else {
                throw wrongType("\(Self.quoted(text)) is not base64: unexpected character at offset \(index)")
            }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
    }

    /// Each byte's value in either base64 alphabet, 255 for none.
    private static let base64Values: [UInt8] = {
        var values = [UInt8](repeating: 255, count: 256)
        for (index, character) in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8.enumerated() {
            values[Int(character)] = UInt8(index)
        }
        values[Int(UInt8(ascii: "+"))] = 62
        values[Int(UInt8(ascii: "-"))] = 62
        values[Int(UInt8(ascii: "/"))] = 63
        values[Int(UInt8(ascii: "_"))] = 63
        return values
    }()

    // MARK: Well-known types

    /// The text of a string that must hold a well-known type's JSON form.
    private mutating func wellKnownText(_ form: String) throws(JSONDecodingFailure) -> UnsafeBufferPointer<UInt8> {
        guard peek() == UInt8(ascii: "\"") else { throw try expected("\(form) in a string") }
        return text(try scanString())
    }

    /// The fields of a Timestamp or a Duration (seconds = 1, nanos = 2), each left out at zero.
    private mutating func writeSecondsAndNanos(_ seconds: Int64, _ nanos: Int32) {
        if seconds != 0 {
            writeVarint(0x08)
            writeVarint(UInt64(bitPattern: seconds))
        }
        if nanos != 0 {
            writeVarint(0x10)
            writeVarint(UInt64(bitPattern: Int64(nanos)))
        }
    }

    /// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` as seconds since the epoch and nanoseconds.
    static func timestamp(_ text: UnsafeBufferPointer<UInt8>) -> (seconds: Int64, nanos: Int32)? {
        func number(_ start: Int, _ count: Int) -> Int? {
            guard start + count <= text.count else { return nil }
            var value = 0
            for index in start..<(start + count) {
                guard isDigit(text[index]) else { return nil }
                value = value * 10 + Int(text[index] &- 48)
            }
            return value
        }
        func at(_ index: Int, _ character: Unicode.Scalar) -> Bool {
            index < text.count && text[index] == UInt8(ascii: character)
        }
        guard let year = number(0, 4), at(4, "-"), let month = number(5, 2), at(7, "-"), let day = number(8, 2), at(10, "T"),
              let hour = number(11, 2), at(13, ":"), let minute = number(14, 2), at(16, ":"), let second = number(17, 2),
              year >= 1, (1...12).contains(month), day >= 1, day <= daysInMonth(month, year), hour < 24, minute < 60, second < 60
        else { return nil }
        var index = 19
        guard let nanos = fraction(text, &index, end: text.count) else { return nil }
        var offset = 0
        if at(index, "Z") {
            index += 1
        } else if at(index, "+") || at(index, "-") {
            guard let offsetHours = number(index + 1, 2), at(index + 3, ":"), let offsetMinutes = number(index + 4, 2),
                  offsetHours < 24, offsetMinutes < 60 else { return nil }
            offset = (offsetHours * 3600 + offsetMinutes * 60) * (at(index, "-") ? -1 : 1)
            index += 6
        } else {
            return nil
        }
        guard index == text.count else { return nil }
        let seconds = Int64(daysFromCivil(year: year, month: month, day: day)) * 86_400
            + Int64(hour * 3600 + minute * 60 + second - offset)
        guard (-62_135_596_800...253_402_300_799).contains(seconds) else { return nil }
        return (seconds, nanos)
    }

    private static func daysInMonth(_ month: Int, _ year: Int) -> Int {
        switch month {
        case 2: year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// `[-]seconds[.fraction]s` as seconds and nanoseconds of the same sign, within ±315576000000s.
    static func duration(_ text: UnsafeBufferPointer<UInt8>) -> (seconds: Int64, nanos: Int32)? {
        guard text.count >= 2, text[text.count - 1] == UInt8(ascii: "s") else { return nil }
        let end = text.count - 1
        let negative = text[0] == UInt8(ascii: "-")
        var index = negative ? 1 : 0
        guard let (seconds, _) = digitRun(text, &index, end: end, limit: 12), let nanos = fraction(text, &index, end: end),
              index == end, seconds <= 315_576_000_000 else { return nil }
        return negative ? (-seconds, -nanos) : (seconds, nanos)
    }

    /// The digits at `index` as a number, moving past them; nil when there are none or more than `limit`.
    private static func digitRun(_ text: UnsafeBufferPointer<UInt8>, _ index: inout Int, end: Int, limit: Int) -> (value: Int64, count: Int)? {
        var value: Int64 = 0
        var count = 0
        while index < end, isDigit(text[index]) {
            guard count < limit else { return nil }
            value = value * 10 + Int64(text[index] &- 48)
            count += 1
            index += 1
        }
        return count > 0 ? (value, count) : nil
    }

    /// A `.` and 1 to 9 digits at `index` as nanoseconds, moving past them: 0 when there is no `.`,
    /// nil when the digits are missing or too many.
    private static func fraction(_ text: UnsafeBufferPointer<UInt8>, _ index: inout Int, end: Int) -> Int32? {
        guard index < end, text[index] == UInt8(ascii: ".") else { return 0 }
        index += 1
        guard let (value, count) = digitRun(text, &index, end: end, limit: 9) else { return nil }
        var nanos = value
        for _ in count..<9 { nanos *= 10 }
        return Int32(nanos)
    }

    /// `"userId,profile.faceUrl"` as the paths (field 1) `user_id` and `profile.face_url`.
    private mutating func writeFieldMask(_ text: UnsafeBufferPointer<UInt8>) throws(JSONDecodingFailure) {
        guard !text.isEmpty else { return }
        var start = 0
        while start <= text.count {
            var end = start
            var capitals = 0
            while end < text.count, text[end] != UInt8(ascii: ",") {
                if Self.isCapital(text[end]) {
                    capitals += 1
                } else if text[end] == UInt8(ascii: "_") {
                    throw wrongType("field mask \(Self.quoted(text)) has a path with '_': paths are written in lowerCamelCase")
                }
                end += 1
            }
            guard end > start else { throw wrongType("field mask \(Self.quoted(text)) has an empty path") }
            writeVarint(0x0A)
            writeVarint(UInt64(end - start + capitals))
            for index in start..<end {
                let character = text[index]
                if Self.isCapital(character) {
                    out.append(UInt8(ascii: "_"))
                    out.append(character + 32)
                } else {
                    out.append(character)
                }
            }
            start = end + 1
        }
    }

    // MARK: JSON tokens

    private func peek() -> UInt8 {
        position < bytes.count ? bytes[position] : 0
    }

    private mutating func skipWhitespace() {
        while position < bytes.count {
            switch bytes[position] {
            case 0x20, 0x0A, 0x0D, 0x09: position += 1
            default: return
            }
        }
    }

    /// Steps into an object or array (at its `{` or `[`), counting the depth.
    private mutating func openContainer() throws(JSONDecodingFailure) {
        depth += 1
        guard depth <= ProtoJSON.maximumDepth else { throw syntax("nested deeper than \(ProtoJSON.maximumDepth) levels") }
        position += 1
    }

    /// The next member's key of the object being read, positioned at its value; nil at the `}`.
    private mutating func nextKey(_ first: inout Bool) throws(JSONDecodingFailure) -> JSONStringToken? {
        guard try anotherItem(&first, closing: UInt8(ascii: "}")) else { return nil }
        guard peek() == UInt8(ascii: "\"") else { throw syntax("expected a string key") }
        let key = try scanString()
        skipWhitespace()
        guard peek() == UInt8(ascii: ":") else { throw syntax("expected ':'") }
        position += 1
        skipWhitespace()
        return key
    }

    /// Whether another element of the array being read follows (positioned at it), false at the `]`.
    private mutating func nextElement(_ first: inout Bool) throws(JSONDecodingFailure) -> Bool {
        try anotherItem(&first, closing: UInt8(ascii: "]"))
    }

    /// Whether a member or element follows in the container being read: after the first, a `,`
    /// must separate it; at `closing` the container ends.
    private mutating func anotherItem(_ first: inout Bool, closing: UInt8) throws(JSONDecodingFailure) -> Bool {
        skipWhitespace()
        let byte = peek()
        if byte == closing {
            position += 1
            depth -= 1
            return false
        }
        if first {
            first = false
            return true
        }
        guard byte == UInt8(ascii: ",") else {
            throw syntax("expected ',' or '\(Character(Unicode.Scalar(closing)))'")
        }
        position += 1
        skipWhitespace()
        return true
    }

    /// Reads past any value, checking its syntax.
    private mutating func skipValue() throws(JSONDecodingFailure) {
        switch peek() {
        case UInt8(ascii: "\""):
            _ = try scanString()
        case UInt8(ascii: "{"):
            try openContainer()
            var first = true
            while try nextKey(&first) != nil { try skipValue() }
        case UInt8(ascii: "["):
            try openContainer()
            var first = true
            while try nextElement(&first) { try skipValue() }
        case UInt8(ascii: "t"):
            try literal("true")
        case UInt8(ascii: "f"):
            try literal("false")
        case UInt8(ascii: "n"):
            try literal("null")
        default:
            _ = try scanNumber()
        }
    }

    private mutating func literal(_ word: StaticString) throws(JSONDecodingFailure) {
        let count = word.utf8CodeUnitCount
        guard position + count <= bytes.count,
              UnsafeBufferPointer(rebasing: bytes[position..<(position + count)]).elementsEqual(UnsafeBufferPointer(start: word.utf8Start, count: count))
        else { throw syntax("invalid literal") }
        position += count
    }

    /// A wrong-type failure: what the field takes, and what the value at the position is.
    private func expected(_ what: String) throws(JSONDecodingFailure) -> JSONDecodingFailure {
        let found = try describeValue()
        return wrongType("expected \(what), got \(found)")
    }

    /// What the value at the position is, for a message (checking that it starts like one).
    private func describeValue() throws(JSONDecodingFailure) -> String {
        switch peek() {
        case UInt8(ascii: "\""): return "a string"
        case UInt8(ascii: "{"): return "an object"
        case UInt8(ascii: "["): return "an array"
        case UInt8(ascii: "t"), UInt8(ascii: "f"): return "a boolean"
        case UInt8(ascii: "n"): return "null"
        case let byte where Self.isNumberStart(byte): return "a number"
        default: throw syntax(position == bytes.count ? "unexpected end of the input" : "expected a value")
        }
    }

    /// A number token's text, its grammar checked (RFC 8259: no leading zeros, no `+`, no bare `.`).
    private mutating func scanNumber() throws(JSONDecodingFailure) -> UnsafeBufferPointer<UInt8> {
        guard let end = Self.numberEnd(bytes, from: position) else { throw syntax("expected a value") }
        defer { position = end }
        return UnsafeBufferPointer(rebasing: bytes[position..<end])
    }

    /// Where the JSON number starting at `start` ends, or nil when none starts there.
    private static func numberEnd(_ text: UnsafeBufferPointer<UInt8>, from start: Int) -> Int? {
        var index = start
        if index < text.count, text[index] == UInt8(ascii: "-") { index += 1 }
        guard index < text.count, isDigit(text[index]) else { return nil }
        if text[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            while index < text.count, isDigit(text[index]) { index += 1 }
        }
        if index < text.count, text[index] == UInt8(ascii: ".") {
            index += 1
            guard index < text.count, isDigit(text[index]) else { return nil }
            while index < text.count, isDigit(text[index]) { index += 1 }
        }
        if index < text.count, text[index] | 0x20 == UInt8(ascii: "e") {
            index += 1
            if index < text.count, text[index] == UInt8(ascii: "+") || text[index] == UInt8(ascii: "-") { index += 1 }
            guard index < text.count, isDigit(text[index]) else { return nil }
            while index < text.count, isDigit(text[index]) { index += 1 }
        }
        return index
    }

    /// Reads a string literal (at its opening quote), validating UTF-8 and escapes.
    private mutating func scanString() throws(JSONDecodingFailure) -> JSONStringToken {
        position += 1
        let start = position
        var decodedCount = 0
        var hasEscapes = false
        while true {
            guard position < bytes.count else { throw syntax("unterminated string") }
            let byte = bytes[position]
            if byte < 0x80 {
                if byte == UInt8(ascii: "\"") { break }
                if byte == UInt8(ascii: "\\") {
                    hasEscapes = true
                    decodedCount += try scanEscape()
                    continue
                }
                guard byte >= 0x20 else { throw syntax("control character in a string") }
                position += 1
                decodedCount += 1
                continue
            }
            guard let length = Self.utf8SequenceLength(bytes, at: position) else { throw syntax("invalid UTF-8") }
            position += length
            decodedCount += length
        }
        let token = JSONStringToken(start: start, end: position, decodedCount: decodedCount, hasEscapes: hasEscapes)
        position += 1
        return token
    }

    /// Checks the escape at the position (a backslash), moves past it and returns its length in UTF-8.
    private mutating func scanEscape() throws(JSONDecodingFailure) -> Int {
        guard position + 1 < bytes.count else { throw syntax("unterminated string") }
        switch bytes[position + 1] {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
             UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            position += 2
            return 1
        case UInt8(ascii: "u"):
            guard let unit = Self.hex4(bytes, at: position + 2) else { throw syntax("invalid \\u escape") }
            switch unit {
            case 0xD800...0xDBFF:
                guard position + 11 < bytes.count, bytes[position + 6] == UInt8(ascii: "\\"), bytes[position + 7] == UInt8(ascii: "u"),
                      let low = Self.hex4(bytes, at: position + 8), (0xDC00...0xDFFF).contains(low)
                else { throw syntax("lone surrogate in a \\u escape") }
                position += 12
                return 4
            case 0xDC00...0xDFFF:
                throw syntax("lone surrogate in a \\u escape")
            default:
                position += 6
                return unit < 0x80 ? 1 : unit < 0x800 ? 2 : 3
            }
        default:
            throw syntax("invalid escape")
        }
    }

    private static func hex4(_ text: UnsafeBufferPointer<UInt8>, at start: Int) -> UInt32? {
        guard start + 4 <= text.count else { return nil }
        var value: UInt32 = 0
        for index in start..<(start + 4) {
            let byte = text[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            value = value << 4 | UInt32(digit)
        }
        return value
    }

    /// The length of the well-formed UTF-8 sequence of 2 to 4 bytes at `index` (RFC 3629: no
    /// overlong forms, no surrogates, nothing past U+10FFFF), or nil.
    private static func utf8SequenceLength(_ text: UnsafeBufferPointer<UInt8>, at index: Int) -> Int? {
        func continuation(_ offset: Int, _ range: ClosedRange<UInt8> = 0x80...0xBF) -> Bool {
            index + offset < text.count && range.contains(text[index + offset])
        }
        switch text[index] {
        case 0xC2...0xDF: return continuation(1) ? 2 : nil
        case 0xE0: return continuation(1, 0xA0...0xBF) && continuation(2) ? 3 : nil
        case 0xE1...0xEC, 0xEE...0xEF: return continuation(1) && continuation(2) ? 3 : nil
        case 0xED: return continuation(1, 0x80...0x9F) && continuation(2) ? 3 : nil
        case 0xF0: return continuation(1, 0x90...0xBF) && continuation(2) && continuation(3) ? 4 : nil
        case 0xF1...0xF3: return continuation(1) && continuation(2) && continuation(3) ? 4 : nil
        case 0xF4: return continuation(1, 0x80...0x8F) && continuation(2) && continuation(3) ? 4 : nil
        default: return nil
        }
    }

    /// A string's content: the input's bytes when it has no escapes, else decoded into the scratch
    /// buffer (valid until the next call).
    private mutating func text(_ token: JSONStringToken) -> UnsafeBufferPointer<UInt8> {
        guard token.hasEscapes else { return UnsafeBufferPointer(rebasing: bytes[token.start..<token.end]) }
        if scratch == nil { scratch = .allocate(byteCount: bytes.count, alignment: 1) }
        let target = scratch!.baseAddress!
        Self.unescape(token, in: bytes, into: target)
        return UnsafeBufferPointer(start: target.assumingMemoryBound(to: UInt8.self), count: token.decodedCount)
    }

    /// Appends a string's content, escapes decoded.
    private mutating func appendContent(of token: JSONStringToken) {
        guard token.hasEscapes else {
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[token.start..<token.end]))
            return
        }
        let offset = out.count
        out.append(contentsOf: repeatElement(0, count: token.decodedCount))
        let bytes = self.bytes
        out.withUnsafeMutableBytes { Self.unescape(token, in: bytes, into: $0.baseAddress! + offset) }
    }

    /// Writes a validated string's content with its escapes decoded.
    private static func unescape(_ token: JSONStringToken, in bytes: UnsafeBufferPointer<UInt8>, into target: UnsafeMutableRawPointer) {
        var index = token.start
        var written = 0
        func put(_ byte: UInt8) {
            target.storeBytes(of: byte, toByteOffset: written, as: UInt8.self)
            written += 1
        }
        while index < token.end {
            let byte = bytes[index]
            guard byte == UInt8(ascii: "\\") else {
                put(byte)
                index += 1
                continue
            }
            let escaped = bytes[index + 1]
            index += 2
            switch escaped {
            case UInt8(ascii: "b"): put(0x08)
            case UInt8(ascii: "f"): put(0x0C)
            case UInt8(ascii: "n"): put(0x0A)
            case UInt8(ascii: "r"): put(0x0D)
            case UInt8(ascii: "t"): put(0x09)
            case UInt8(ascii: "u"):
                var scalar = hex4(bytes, at: index)!
                index += 4
                if (0xD800...0xDBFF).contains(scalar) {
                    let low = hex4(bytes, at: index + 2)!
                    index += 6
                    scalar = 0x10000 + (scalar - 0xD800) << 10 + (low - 0xDC00)
                }
                for unit in UTF8.encode(Unicode.Scalar(scalar)!)! { put(unit) }
            default: put(escaped)
            }
        }
    }

    private static func isDigit(_ byte: UInt8) -> Bool {
        byte &- UInt8(ascii: "0") < 10
    }

    private static func isCapital(_ byte: UInt8) -> Bool {
        byte &- UInt8(ascii: "A") < 26
    }

    private static func isNumberStart(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: "-") || isDigit(byte)
    }

    private static func equals(_ bytes: UnsafeBufferPointer<UInt8>, _ word: StaticString) -> Bool {
        bytes.count == word.utf8CodeUnitCount && bytes.elementsEqual(UnsafeBufferPointer(start: word.utf8Start, count: bytes.count))
    }

    /// Text for a message: in quotes, escaped as JSON.
    private static func quoted(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        var out = ""
        JSONString.append(String(decoding: bytes, as: UTF8.self), to: &out)
        return out
    }

    private func syntax(_ what: String) -> JSONDecodingFailure {
        JSONDecodingFailure(code: .syntax, path: "", detail: "invalid JSON at byte \(position): \(what)")
    }

    private func wrongType(_ what: String) -> JSONDecodingFailure {
        JSONDecodingFailure(code: .wrongType, path: "", detail: what)
    }

    // MARK: Wire format

    private mutating func writeVarint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            out.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        out.append(UInt8(truncatingIfNeeded: value))
    }

    private mutating func writePayload(_ bits: UInt64, _ wireType: UInt32) {
        switch wireType {
        case 5:
            for shift in stride(from: 0, to: 32, by: 8) { out.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
        case 1:
            for shift in stride(from: 0, to: 64, by: 8) { out.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
        default:
            writeVarint(bits)
        }
    }

    /// Reserves one byte for a length and returns where the content starts.
    private mutating func beginLength() -> Int {
        out.append(0)
        return out.count
    }

    /// Writes the length of the content from `start` to the end, moving the content when the length
    /// needs more than the one byte reserved; returns by how much it moved.
    @discardableResult
    private mutating func endLength(_ start: Int) -> Int {
        let length = out.count - start
        if length < 0x80 {
            out[start - 1] = UInt8(truncatingIfNeeded: length)
            return 0
        }
        var shift = 0
        var rest = length >> 7
        while rest > 0 {
            shift += 1
            rest >>= 7
        }
        out.append(contentsOf: repeatElement(0, count: shift))
        out.withUnsafeMutableBytes { raw in
            let base = raw.baseAddress!
            (base + start + shift).copyMemory(from: base + start, byteCount: length)
            var value = length
            var index = start - 1
            while value >= 0x80 {
                raw[index] = UInt8(truncatingIfNeeded: value) | 0x80
                value >>= 7
                index += 1
            }
            raw[index] = UInt8(truncatingIfNeeded: value)
        }
        return shift
    }
}

/// Which fields of a message an object has given: a bit each (an array past 64 fields).
private struct FieldSet {
    private var low: UInt64 = 0
    private var high: [Bool]

    init(count: Int) {
        high = count > 64 ? Array(repeating: false, count: count - 64) : []
    }

    func contains(_ index: Int) -> Bool {
        index < 64 ? low & 1 << UInt64(index) != 0 : high[index - 64]
    }

    mutating func insert(_ index: Int) {
        if index < 64 { low |= 1 << UInt64(index) } else { high[index - 64] = true }
    }
}
