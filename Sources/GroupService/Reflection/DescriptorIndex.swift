/// The files of a serialized `google.protobuf.FileDescriptorSet`, indexed by file name and by
/// the fully-qualified name of every symbol they define: what server reflection answers from.
///
/// Only the parts of `descriptor.proto` that name things are read (a small wire-format reader;
/// the files themselves are handed out as they were serialized).
struct DescriptorIndex: Sendable {
    /// One `FileDescriptorProto`.
    struct File: Sendable, Equatable {
        /// The file's name, e.g. `groupd/v1/group.proto`.
        var name: String
        /// The serialized `FileDescriptorProto`.
        var bytes: [UInt8]
        /// The names of the files it imports, in declaration order.
        var dependencies: [String]
    }

    /// A malformed descriptor set.
    struct Malformed: Error, CustomStringConvertible {
        var description: String
    }

    /// Every file, by name.
    private(set) var files: [String: File] = [:]
    /// The files in the set's order (dependencies first).
    private(set) var fileNames: [String] = []
    /// The file defining each symbol: packages' messages, fields, oneofs, enums, enum values
    /// (scoped like C++: beside their enum), services, methods and extensions.
    private(set) var fileOfSymbol: [String: String] = [:]
    /// The fully-qualified name of every message type.
    private(set) var messageTypes: Set<String> = []
    /// The fully-qualified name of every service, in file order.
    private(set) var services: [String] = []
    /// Extensions by extended type and number (groupd defines none; kept for completeness).
    private(set) var extensions: [String: [Int32: String]] = [:]

    /// Indexes a serialized `FileDescriptorSet`.
    /// - Throws: ``Malformed`` when the bytes are not one.
    init(descriptorSet: [UInt8]) throws(Malformed) {
        var reader = WireReader(descriptorSet[...])
        while let (field, value) = try reader.next() {
            guard field == 1 else { continue }  // FileDescriptorSet.file
            try addFile(try value.bytes())
        }
    }

    private mutating func addFile(_ bytes: ArraySlice<UInt8>) throws(Malformed) {
        var name = ""
        var package = ""
        var dependencies: [String] = []
        var messages: [ArraySlice<UInt8>] = []
        var enums: [ArraySlice<UInt8>] = []
        var servicesInFile: [ArraySlice<UInt8>] = []
        var fileExtensions: [ArraySlice<UInt8>] = []
        var reader = WireReader(bytes)
        while let (field, value) = try reader.next() {
            switch field {
            case 1: name = try value.string()
            case 2: package = try value.string()
            case 3: dependencies.append(try value.string())
            case 4: messages.append(try value.bytes())
            case 5: enums.append(try value.bytes())
            case 6: servicesInFile.append(try value.bytes())
            case 7: fileExtensions.append(try value.bytes())
            default: continue
            }
        }
        guard !name.isEmpty else { throw Malformed(description: "a file without a name") }
        guard files[name] == nil else { throw Malformed(description: "\(name) appears twice") }
        files[name] = File(name: name, bytes: Array(bytes), dependencies: dependencies)
        fileNames.append(name)
        for message in messages { try addMessage(message, scope: package, file: name) }
        for enumeration in enums { try addEnum(enumeration, scope: package, file: name) }
        for extensionField in fileExtensions { try addExtension(extensionField, scope: package, file: name) }
        for service in servicesInFile {
            var serviceName = ""
            var methods: [String] = []
            var reader = WireReader(service)
            while let (field, value) = try reader.next() {
                if field == 1 { serviceName = try value.string() }
                if field == 2 { methods.append(try Self.name(of: try value.bytes())) }
            }
            let full = Self.qualified(serviceName, in: package)
            services.append(full)
            fileOfSymbol[full] = name
            for method in methods { fileOfSymbol[full + "." + method] = name }
        }
    }

    private mutating func addMessage(_ bytes: ArraySlice<UInt8>, scope: String, file: String) throws(Malformed) {
        var name = ""
        var members: [ArraySlice<UInt8>] = []  // fields and oneofs: named children
        var nested: [ArraySlice<UInt8>] = []
        var enums: [ArraySlice<UInt8>] = []
        var nestedExtensions: [ArraySlice<UInt8>] = []
        var reader = WireReader(bytes)
        while let (field, value) = try reader.next() {
            switch field {
            case 1: name = try value.string()
            case 2, 8: members.append(try value.bytes())  // field, oneof_decl
            case 3: nested.append(try value.bytes())
            case 4: enums.append(try value.bytes())
            case 6: nestedExtensions.append(try value.bytes())
            default: continue
            }
        }
        let full = Self.qualified(name, in: scope)
        messageTypes.insert(full)
        fileOfSymbol[full] = file
        for member in members { fileOfSymbol[full + "." + (try Self.name(of: member))] = file }
        for message in nested { try addMessage(message, scope: full, file: file) }
        for enumeration in enums { try addEnum(enumeration, scope: full, file: file) }
        for extensionField in nestedExtensions { try addExtension(extensionField, scope: full, file: file) }
    }

    private mutating func addEnum(_ bytes: ArraySlice<UInt8>, scope: String, file: String) throws(Malformed) {
        var name = ""
        var values: [String] = []
        var reader = WireReader(bytes)
        while let (field, value) = try reader.next() {
            if field == 1 { name = try value.string() }
            if field == 2 { values.append(try Self.name(of: try value.bytes())) }
        }
        fileOfSymbol[Self.qualified(name, in: scope)] = file
        for value in values { fileOfSymbol[Self.qualified(value, in: scope)] = file }
    }

    private mutating func addExtension(_ bytes: ArraySlice<UInt8>, scope: String, file: String) throws(Malformed) {
        var name = ""
        var number: Int32 = 0
        var extendee = ""
        var reader = WireReader(bytes)
        while let (field, value) = try reader.next() {
            switch field {
            case 1: name = try value.string()
            case 2: extendee = try value.string()
            case 3: number = Int32(truncatingIfNeeded: try value.varint())
            default: continue
            }
        }
        let full = Self.qualified(name, in: scope)
        fileOfSymbol[full] = file
        let base = extendee.hasPrefix(".") ? String(extendee.dropFirst()) : extendee
        extensions[base, default: [:]][number] = file
    }

    /// Field 1 (`name`) of a descriptor message.
    private static func name(of bytes: ArraySlice<UInt8>) throws(Malformed) -> String {
        var reader = WireReader(bytes)
        while let (field, value) = try reader.next() {
            if field == 1 { return try value.string() }
        }
        return ""
    }

    private static func qualified(_ name: String, in scope: String) -> String {
        scope.isEmpty ? name : scope + "." + name
    }

    /// `name` and the files it imports, transitively, breadth first, leaving out imports already
    /// in `sent` (the file itself is always included), as grpc-go's reflection answers; every
    /// file returned is added to `sent`. Nil when no file has that name.
    func fileWithDependencies(_ name: String, sent: inout Set<String>) -> [[UInt8]]? {
        guard let file = files[name] else { return nil }
        var out: [[UInt8]] = [file.bytes]
        sent.insert(name)
        var queue = file.dependencies[...]
        while let next = queue.popFirst() {
            guard !sent.contains(next), let dependency = files[next] else { continue }
            sent.insert(next)
            out.append(dependency.bytes)
            queue.append(contentsOf: dependency.dependencies)
        }
        return out
    }
}

/// Reads protobuf wire-format fields one at a time.
struct WireReader {
    /// One field's value.
    enum Value {
        case varint(UInt64)
        case lengthDelimited(ArraySlice<UInt8>)
        case fixed

        func bytes() throws(DescriptorIndex.Malformed) -> ArraySlice<UInt8> {
            guard case .lengthDelimited(let bytes) = self else { throw DescriptorIndex.Malformed(description: "expected bytes") }
            return bytes
        }

        func string() throws(DescriptorIndex.Malformed) -> String {
            String(decoding: try bytes(), as: UTF8.self)
        }

        func varint() throws(DescriptorIndex.Malformed) -> UInt64 {
            guard case .varint(let value) = self else { throw DescriptorIndex.Malformed(description: "expected a varint") }
            return value
        }
    }

    private var bytes: ArraySlice<UInt8>

    init(_ bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
    }

    /// The next field number and value; nil at the end.
    mutating func next() throws(DescriptorIndex.Malformed) -> (Int, Value)? {
        guard !bytes.isEmpty else { return nil }
        let key = try readVarint()
        let field = Int(key >> 3)
        switch key & 7 {
        case 0: return (field, .varint(try readVarint()))
        case 1: try skip(8)
        case 2:
            let length = try readVarint()
            guard length <= UInt64(bytes.count) else { throw DescriptorIndex.Malformed(description: "length past the end") }
            let value = bytes.prefix(Int(length))
            bytes = bytes.dropFirst(Int(length))
            return (field, .lengthDelimited(value))
        case 5: try skip(4)
        default: throw DescriptorIndex.Malformed(description: "unsupported wire type \(key & 7)")
        }
        return (field, .fixed)
    }

    private mutating func skip(_ count: Int) throws(DescriptorIndex.Malformed) {
        guard bytes.count >= count else { throw DescriptorIndex.Malformed(description: "truncated field") }
        bytes = bytes.dropFirst(count)
    }

    private mutating func readVarint() throws(DescriptorIndex.Malformed) -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while let byte = bytes.popFirst() {
            guard shift < 64 else { break }
            value |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return value }
            shift += 7
        }
        throw DescriptorIndex.Malformed(description: "truncated varint")
    }
}
