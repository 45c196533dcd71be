import CProtobufC

/// Per-call memory for the protobuf-c structures an encode builds: a bump allocator that frees
/// everything at once when it is released.
///
/// The first chunk is caller-provided scratch memory (a stack buffer in `_protoPack`), so
/// small messages encode without touching the heap for their C structures.
///
/// - Important: Confined to the encoding call that made it; every pointer it hands out dies with it.
final class ProtoArena {
    /// Heap chunks to free in `deinit`.
    private var chunks: [UnsafeMutableRawPointer] = []
    /// The next free byte of the current chunk.
    private var cursor: UnsafeMutableRawPointer
    /// Free bytes left after `cursor` in the current chunk.
    private var remaining: Int
    /// The size of the next heap chunk; doubles up to `maxChunkSize`.
    private var nextChunkSize = 1024
    private static let maxChunkSize = 64 * 1024

    /// Makes an arena whose first chunk is `scratch`, which must outlive the arena.
    ///
    /// - Parameter scratch: Memory to use first; may be empty.
    init(scratch: UnsafeMutableRawBufferPointer) {
        if let base = scratch.baseAddress, scratch.count > 0 {
            cursor = base
            remaining = scratch.count
        } else {
            let chunk = UnsafeMutableRawPointer.allocate(byteCount: nextChunkSize, alignment: 16)
            chunks.append(chunk)
            cursor = chunk
            remaining = nextChunkSize
        }
    }

    deinit {
        for chunk in chunks {
            chunk.deallocate()
        }
    }

    /// Uninitialized memory for `count` values of `T`, aligned for `T`.
    ///
    /// - Parameters:
    ///   - type: The element type (trivial C types only: nothing is deinitialized).
    ///   - count: How many elements; at least 1.
    /// - Returns: Memory bound to `T`, valid until the arena is released.
    func allocate<T>(_ type: T.Type, count: Int) -> UnsafeMutablePointer<T> {
        let raw = allocateBytes(MemoryLayout<T>.stride * max(count, 1), alignment: MemoryLayout<T>.alignment)
        return raw.bindMemory(to: T.self, capacity: max(count, 1))
    }

    /// A protobuf-c message structure initialized by its generated `…__init` function.
    ///
    /// - Parameters:
    ///   - type: The C message structure.
    ///   - initialize: protoc-c's `<name>__init` (the `__INIT` macro does not import into Swift).
    /// - Returns: The initialized structure.
    func make<C>(_ type: C.Type, _ initialize: (UnsafeMutablePointer<C>?) -> Void) -> UnsafeMutablePointer<C> {
        let pointer = allocate(C.self, count: 1)
        initialize(pointer)
        return pointer
    }

    /// A NUL-terminated copy of `string`'s UTF-8.
    ///
    /// - Important: An embedded NUL ends the string for protobuf-c (see ``ProtoMessage``).
    func cString(_ string: String) -> UnsafeMutablePointer<CChar> {
        var string = string
        return string.withUTF8 { utf8 in
            let pointer = allocate(CChar.self, count: utf8.count + 1)
            if let source = utf8.baseAddress, utf8.count > 0 {
                UnsafeMutableRawPointer(pointer).copyMemory(from: source, byteCount: utf8.count)
            }
            pointer[utf8.count] = 0
            return pointer
        }
    }

    /// An array of C strings.
    func cStrings(_ strings: [String]) -> UnsafeMutablePointer<UnsafeMutablePointer<CChar>?> {
        let array = allocate(UnsafeMutablePointer<CChar>?.self, count: strings.count)
        for (index, string) in strings.enumerated() {
            array[index] = cString(string)
        }
        return array
    }

    /// A `ProtobufCBinaryData` pointing at a copy of `bytes`.
    func binary(_ bytes: [UInt8]) -> ProtobufCBinaryData {
        guard !bytes.isEmpty else { return ProtobufCBinaryData(len: 0, data: nil) }
        let pointer = allocate(UInt8.self, count: bytes.count)
        bytes.withUnsafeBufferPointer { source in
            pointer.update(from: source.baseAddress!, count: source.count)
        }
        return ProtobufCBinaryData(len: bytes.count, data: pointer)
    }

    /// An array of `ProtobufCBinaryData`.
    func binaries(_ values: [[UInt8]]) -> UnsafeMutablePointer<ProtobufCBinaryData> {
        let array = allocate(ProtobufCBinaryData.self, count: values.count)
        for (index, value) in values.enumerated() {
            array[index] = binary(value)
        }
        return array
    }

    /// A copy of a scalar array (integers, floats).
    func copy<T>(_ values: [T]) -> UnsafeMutablePointer<T> {
        let array = allocate(T.self, count: values.count)
        values.withUnsafeBufferPointer { source in
            array.update(from: source.baseAddress!, count: source.count)
        }
        return array
    }

    /// A `protobuf_c_boolean` array.
    func bools(_ values: [Bool]) -> UnsafeMutablePointer<protobuf_c_boolean> {
        let array = allocate(protobuf_c_boolean.self, count: values.count)
        for (index, value) in values.enumerated() {
            array[index] = value ? 1 : 0
        }
        return array
    }

    /// A C enum array.
    func enums<E: ProtoEnum, C: RawRepresentable>(_ values: [E]) -> UnsafeMutablePointer<C>
    where C.RawValue: FixedWidthInteger {
        let array = allocate(C.self, count: values.count)
        for (index, value) in values.enumerated() {
            array[index] = _protoCEnum(value)
        }
        return array
    }

    /// An array of sub-message pointers, each built by `build`.
    func messages<M, C>(
        _ values: [M], _ build: (M, ProtoArena) -> UnsafeMutablePointer<C>
    ) -> UnsafeMutablePointer<UnsafeMutablePointer<C>?> {
        let array = allocate(UnsafeMutablePointer<C>?.self, count: values.count)
        for (index, value) in values.enumerated() {
            array[index] = build(value, self)
        }
        return array
    }

    private func allocateBytes(_ size: Int, alignment: Int) -> UnsafeMutableRawPointer {
        let padding = (alignment - Int(bitPattern: cursor) % alignment) % alignment
        if padding + size <= remaining {
            let pointer = cursor + padding
            cursor = pointer + size
            remaining -= padding + size
            return pointer
        }
        if size > nextChunkSize / 4 {
            // Big blocks get a chunk of their own, so the current chunk keeps serving small ones.
            let chunk = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: max(alignment, 16))
            chunks.append(chunk)
            return chunk
        }
        let chunk = UnsafeMutableRawPointer.allocate(byteCount: nextChunkSize, alignment: 16)
        chunks.append(chunk)
        cursor = chunk + size
        remaining = nextChunkSize - size
        nextChunkSize = min(nextChunkSize * 2, Self.maxChunkSize)
        return chunk
    }
}
