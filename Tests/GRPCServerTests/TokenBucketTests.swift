import NIOCore
import Testing

@testable import GRPCProtocol
@testable import GRPCServer

/// The reset budget's token bucket, on a clock the test sets.
@Suite struct TokenBucketTests {
    /// The bucket under test behind a reference, so that `#expect` can call its mutating methods.
    final class Bucket {
        var bucket: TokenBucket
        init(capacity: Int, refillPerSecond: Int, now: NIODeadline) {
            bucket = TokenBucket(capacity: capacity, refillPerSecond: refillPerSecond, now: now)
        }
        func take(at now: NIODeadline) -> Bool { bucket.take(at: now) }
        func tokens(at now: NIODeadline) -> Int64 { bucket.tokens(at: now) }
    }

    let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    @Test func startsFullAndRefusesOnceEmpty() {
        let bucket = Bucket(capacity: 3, refillPerSecond: 1, now: start)
        #expect(bucket.take(at: start))
        #expect(bucket.take(at: start))
        #expect(bucket.take(at: start))
        #expect(!bucket.take(at: start))
        #expect(!bucket.take(at: start), "a refused take spends nothing and gains nothing")
        #expect(bucket.tokens(at: start) == 0)
    }

    @Test func refillsAtItsRateUpToItsCapacity() {
        let bucket = Bucket(capacity: 10, refillPerSecond: 4, now: start)
        for _ in 0..<10 { #expect(bucket.take(at: start)) }
        #expect(bucket.tokens(at: start + .milliseconds(249)) == 0)
        #expect(bucket.tokens(at: start + .milliseconds(250)) == 1)
        #expect(bucket.tokens(at: start + .milliseconds(1_000)) == 4)
        #expect(bucket.tokens(at: start + .seconds(2)) == 8)
        #expect(bucket.tokens(at: start + .seconds(60)) == 10, "never above the capacity")
        for _ in 0..<10 { #expect(bucket.take(at: start + .seconds(60))) }
        #expect(!bucket.take(at: start + .seconds(60)))
    }

    @Test func fractionsOfATokenAddUpAcrossTakes() {
        // Three tokens a second: a sixth of a second adds half a token, kept for the next take.
        let bucket = Bucket(capacity: 1, refillPerSecond: 3, now: start)
        #expect(bucket.take(at: start))
        let sixth = TimeAmount.nanoseconds(166_666_667)
        #expect(!bucket.take(at: start + sixth))
        #expect(bucket.take(at: start + sixth + sixth), "two sixths of a second at three a second: one token")
        #expect(!bucket.take(at: start + sixth + sixth))
    }

    @Test func sustainedRateAtTheLimitIsNeverRefused() {
        let bucket = Bucket(capacity: 5, refillPerSecond: 100, now: start)
        var now = start
        for _ in 0..<10_000 {
            now = now + .milliseconds(10)
            #expect(bucket.take(at: now))
        }
        // The first refill found the bucket full (it is capped); each later one went to its take.
        #expect(bucket.tokens(at: now) == 4)
    }

    @Test func longIdleAtTheLargestRatesDoesNotOverflow() {
        let bucket = Bucket(capacity: 1_000_000_000, refillPerSecond: 1_000_000_000, now: start)
        #expect(bucket.take(at: start))
        #expect(bucket.tokens(at: start + .hours(24 * 365)) == 1_000_000_000)
    }

    @Test func aClockGoingBackAddsNothing() {
        let bucket = Bucket(capacity: 2, refillPerSecond: 1, now: start + .seconds(10))
        #expect(bucket.take(at: start + .seconds(10)))
        #expect(bucket.take(at: start + .seconds(10)))
        #expect(!bucket.take(at: start))
        #expect(bucket.tokens(at: start + .seconds(10)) == 0)
        #expect(bucket.tokens(at: start + .seconds(11)) == 1)
    }
}
