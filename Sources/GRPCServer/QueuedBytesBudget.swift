import Dispatch
import GRPCProtocol
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The bytes every connection of a server holds queued for its client and not yet sent, against
/// ``TransportLimits/maxQueuedBytes``; and the return of freed memory to the system once a
/// connection that held much of it is gone.
///
/// Connections on every event loop add and subtract; the total is one atomic.
final class QueuedBytesBudget: Sendable {
    /// The server-wide limit.
    let limit: Int
    private let total = Atomic<Int>(0)
    /// Whether a trim is scheduled and has not run yet.
    private let trimScheduled = Atomic<Bool>(false)

    /// Connections whose queued bytes reached this much ask for a trim when they go.
    static let trimThreshold = 256 << 10

    /// A budget of `limit` bytes.
    init(limit: Int) {
        self.limit = limit
    }

    /// The bytes queued now, over every connection.
    var queuedBytes: Int { total.load(ordering: .relaxed) }

    /// Whether the total is above the limit.
    var isOverLimit: Bool { total.load(ordering: .relaxed) > limit }

    /// Adds `delta` (negative: bytes sent or dropped).
    func add(_ delta: Int) {
        if delta != 0 { total.add(delta, ordering: .relaxed) }
    }

    /// Gives the memory freed by a torn-down backlog back to the system, once for a burst: glibc
    /// keeps freed blocks in its arenas (a flood of stalled streams left hundreds of MB resident
    /// after they closed), and `malloc_trim` returns the free pages. It runs a second after the
    /// first request of a burst, off the event loops.
    func releaseFreedMemorySoon() {
        guard Self.mallocTrimAddress != 0 else { return }
        guard trimScheduled.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged else { return }
        DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + .seconds(1)) { [self] in
            trimScheduled.store(false, ordering: .relaxed)
            let trim = unsafeBitCast(Self.mallocTrimAddress, to: (@convention(c) (Int) -> Int32).self)
            _ = trim(0)
        }
    }

    /// The address of glibc's `malloc_trim` (declared in `malloc.h`, which the Glibc module does
    /// not import), looked up once; 0 with another C library.
    private static let mallocTrimAddress: UInt = {
        #if canImport(Glibc)
        return dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim").map { UInt(bitPattern: $0) } ?? 0
        #else
        return 0
        #endif
    }()
}
