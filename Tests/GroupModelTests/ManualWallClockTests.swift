import GroupModel
import Synchronization
import Testing

@Suite("ManualWallClock: time, elapsed time and periodic jobs move only when told")
struct ManualWallClockTests {
    @Test("now and uptime move with advances; a move back changes now, not the elapsed time")
    func moves() {
        let clock = ManualWallClock(Timestamp(secondsSince1970: 1_000))
        let up = clock.uptimeNanoseconds()
        clock.advance(milliseconds: 1_500)
        #expect(clock.now() == Timestamp(millisecondsSince1970: 1_001_500))
        #expect(clock.uptimeNanoseconds() - up == 1_500_000_000)
        clock.advance(seconds: -10)
        #expect(clock.now() == Timestamp(millisecondsSince1970: 991_500))
        #expect(clock.uptimeNanoseconds() - up == 1_500_000_000)
    }

    @Test("a periodic job runs at once, then each time an advance reaches its turn; settle() waits for the run")
    func repeatingRunsOnAdvance() async {
        let clock = ManualWallClock()
        let runs = Mutex<[Int64]>([])
        let (first, firstSignal) = AsyncStream<Void>.makeStream()
        let loop = Task {
            await clock.repeating(every: .seconds(60)) {
                runs.withLock { $0.append(clock.now().millisecondsSince1970) }
                firstSignal.yield()
            }
        }
        await clock.settle(jobs: 1)  // the loop started and its first run ended
        for await _ in first { break }
        let start = clock.now().millisecondsSince1970
        #expect(runs.withLock { $0 } == [start])
        clock.advance(seconds: 59)
        await clock.settle()
        #expect(runs.withLock { $0 } == [start])  // not its turn yet
        clock.advance(seconds: 1)
        await clock.settle()
        #expect(runs.withLock { $0 } == [start, start + 60_000])
        // A jump of many intervals is one run; the next turn counts from its end.
        clock.advance(seconds: 600)
        await clock.settle()
        #expect(runs.withLock { $0 } == [start, start + 60_000, start + 660_000])
        loop.cancel()
        await loop.value
        clock.advance(seconds: 600)
        await clock.settle()
        #expect(runs.withLock { $0 }.count == 3)  // cancelled: no more runs
    }

    @Test("settle() waits for a run in progress, released by a gate")
    func settleWaitsForTheRun() async {
        let clock = ManualWallClock()
        let (started, startedSignal) = AsyncStream<Void>.makeStream()
        let (gate, open) = AsyncStream<Void>.makeStream()
        let finished = Mutex(0)
        let loop = Task {
            await clock.repeating(every: .seconds(1)) {
                startedSignal.yield()
                for await _ in gate { break }
                finished.withLock { $0 += 1 }
            }
        }
        var startedRuns = started.makeAsyncIterator()
        _ = await startedRuns.next()
        let settled = Task { await clock.settle(jobs: 1) }
        open.yield()
        await settled.value
        #expect(finished.withLock { $0 } == 1)
        loop.cancel()
        await loop.value
    }
}
