import Dispatch

/// Splits a fuzz input into chunks the way a network might: the lengths come from a small
/// generator seeded by one input byte, so a corpus entry replays the same split every time.
///
/// Seed 0 hands the bytes over in one piece; any other seed gives chunks of 1 to `seed` bytes.
public struct Chunker: Sequence, IteratorProtocol {
    private let bytes: UnsafeRawBufferPointer
    private var offset = 0
    private var state: UInt32
    private let seed: UInt8

    public init(_ bytes: UnsafeRawBufferPointer, seed: UInt8) {
        self.bytes = bytes
        self.seed = seed
        self.state = UInt32(seed) &* 2_654_435_761 | 1
    }

    public mutating func next() -> UnsafeRawBufferPointer? {
        guard offset < bytes.count else { return nil }
        var length = bytes.count - offset
        if seed != 0 {
            // xorshift32: cheap, deterministic, never zero.
            state ^= state << 13
            state ^= state >> 17
            state ^= state << 5
            length = Swift.min(length, Int(state % UInt32(seed)) + 1)
        }
        defer { offset += length }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + length])
    }
}

/// The fuzz input as a buffer (libFuzzer passes NULL for an empty input).
public func fuzzInput(_ start: UnsafeRawPointer?, _ count: Int) -> UnsafeRawBufferPointer {
    guard let start, count > 0 else { return UnsafeRawBufferPointer(start: nil, count: 0) }
    return UnsafeRawBufferPointer(start: start, count: count)
}

/// Runs `body` to completion from synchronous code (fuzz targets set up async APIs once).
public func runBlocking<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
    let box = BlockingBox<T>()
    let done = DispatchSemaphore(value: 0)
    Task {
        box.value = await body()
        done.signal()
    }
    done.wait()
    return box.value!
}

private final class BlockingBox<T>: @unchecked Sendable {
    var value: T?
}
