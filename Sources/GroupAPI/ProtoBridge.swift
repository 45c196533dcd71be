import CProtobufC

// The helpers generated code calls to move values between Swift and protobuf-c structures.
// Decoding: C structures never escape the function that unpacked them; everything is copied into
// Swift values before `protobuf_c_message_free_unpacked`.

/// Unpacks `bytes` with protobuf-c, converts the C structure with `convert`, frees it.
///
/// Every message (nested ones have no `<name>__unpack`) goes through
/// `protobuf_c_message_unpack` with its descriptor, which is what `<name>__unpack` calls.
///
/// - Throws: ``ProtoDecodingError/Code/malformed`` when protobuf-c refuses the bytes, or what
///   `convert` throws.
func _protoUnpack<C, M>(
    _ bytes: UnsafeRawBufferPointer,
    _ descriptor: UnsafePointer<ProtobufCMessageDescriptor>,
    as type: C.Type,
    _ convert: (UnsafePointer<C>) throws(ProtoDecodingError) -> M
) throws(ProtoDecodingError) -> M {
    let data = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self)
    guard let message = protobuf_c_message_unpack(descriptor, nil, bytes.count, data) else {
        let name = String(cString: descriptor.pointee.name)
        throw ProtoDecodingError(
            code: .malformed, subject: name,
            message: "\(bytes.count) bytes are not a valid \(name) (truncated, wrong wire type or bad length)"
        )
    }
    defer { protobuf_c_message_free_unpacked(message, nil) }
    return try convert(UnsafeRawPointer(message).assumingMemoryBound(to: C.self))
}

/// Builds the C structure of a message in a per-call arena and hands its size and packer to `body`.
func _protoPack<C, R>(
    _ build: (ProtoArena) -> UnsafeMutablePointer<C>,
    _ body: (_ size: Int, _ pack: (UnsafeMutableRawPointer) -> Int) throws -> R
) rethrows -> R {
    try withUnsafeTemporaryAllocation(byteCount: 1024, alignment: 16) { scratch in
        let arena = ProtoArena(scratch: scratch)
        let message = UnsafeRawPointer(build(arena)).assumingMemoryBound(to: ProtobufCMessage.self)
        let size = protobuf_c_message_get_packed_size(message)
        return try withExtendedLifetime(arena) {
            try body(size) { out in
                protobuf_c_message_pack(message, out.assumingMemoryBound(to: UInt8.self))
            }
        }
    }
}

/// A Swift string from a protobuf-c `char *`, validated as UTF-8.
///
/// - Parameters:
///   - pointer: The C string (NULL reads as empty).
///   - field: The field's full name, for the error.
/// - Throws: ``ProtoDecodingError/Code/invalidUTF8``.
@inline(__always)
func _protoString(_ pointer: UnsafePointer<CChar>?, _ field: String) throws(ProtoDecodingError) -> String {
    guard let pointer, pointer.pointee != 0 else { return "" }
    guard let string = String(validatingCString: pointer) else {
        throw ProtoDecodingError(code: .invalidUTF8, subject: field, message: "\(field) is not valid UTF-8")
    }
    return string
}

/// Swift strings from a protobuf-c `char **` and its count.
func _protoStrings(
    _ pointer: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?, _ count: Int, _ field: String
) throws(ProtoDecodingError) -> [String] {
    guard let pointer, count > 0 else { return [] }
    var result: [String] = []
    result.reserveCapacity(count)
    for index in 0..<count {
        result.append(try _protoString(pointer[index], field))
    }
    return result
}

/// Bytes from a `ProtobufCBinaryData`.
@inline(__always)
func _protoBytes(_ data: ProtobufCBinaryData) -> [UInt8] {
    guard data.len > 0, let bytes = data.data else { return [] }
    return Array(UnsafeBufferPointer(start: bytes, count: data.len))
}

/// Byte arrays from a `ProtobufCBinaryData *` and its count.
func _protoBytesArray(_ pointer: UnsafeMutablePointer<ProtobufCBinaryData>?, _ count: Int) -> [[UInt8]] {
    guard let pointer, count > 0 else { return [] }
    return (0..<count).map { _protoBytes(pointer[$0]) }
}

/// Scalars (integers, floats) from a C array and its count.
func _protoScalars<T>(_ pointer: UnsafeMutablePointer<T>?, _ count: Int) -> [T] {
    guard let pointer, count > 0 else { return [] }
    return Array(UnsafeBufferPointer(start: pointer, count: count))
}

/// Bools from a `protobuf_c_boolean *` and its count.
func _protoBools(_ pointer: UnsafeMutablePointer<protobuf_c_boolean>?, _ count: Int) -> [Bool] {
    guard let pointer, count > 0 else { return [] }
    return (0..<count).map { pointer[$0] != 0 }
}

/// A Swift enum from a C enum value; unknown values become `UNRECOGNIZED`.
@inline(__always)
func _protoEnum<C: RawRepresentable, E: ProtoEnum>(_ value: C) -> E where C.RawValue: FixedWidthInteger {
    // ProtoEnum.init(rawValue:) never fails: unknown values map to UNRECOGNIZED.
    E(rawValue: Int32(truncatingIfNeeded: value.rawValue))!
}

/// Swift enums from a C enum array and its count.
func _protoEnums<C: RawRepresentable, E: ProtoEnum>(_ pointer: UnsafeMutablePointer<C>?, _ count: Int) -> [E]
where C.RawValue: FixedWidthInteger {
    guard let pointer, count > 0 else { return [] }
    return (0..<count).map { _protoEnum(pointer[$0]) }
}

/// A C enum value from a Swift enum (the raw value is kept bit for bit, UNRECOGNIZED included).
@inline(__always)
func _protoCEnum<E: ProtoEnum, C: RawRepresentable>(_ value: E) -> C where C.RawValue: FixedWidthInteger {
    // Imported C enums are structs whose init(rawValue:) cannot fail.
    C(rawValue: C.RawValue(truncatingIfNeeded: value.rawValue))!
}

/// Swift messages from a C array of message pointers and its count.
func _protoMessages<C, M: ProtoMessage>(
    _ pointer: UnsafeMutablePointer<UnsafeMutablePointer<C>?>?, _ count: Int,
    _ convert: (UnsafePointer<C>) throws(ProtoDecodingError) -> M
) throws(ProtoDecodingError) -> [M] {
    guard let pointer, count > 0 else { return [] }
    var result: [M] = []
    result.reserveCapacity(count)
    for index in 0..<count {
        if let element = pointer[index] {
            result.append(try convert(element))
        } else {
            result.append(M())
        }
    }
    return result
}
