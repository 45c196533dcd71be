import GroupModel
import Testing

@Suite("Message shedding (AVChatRoom rate)")
struct MessageSheddingTests {
    /// Admit `count` messages of `priority` at one instant; how many passed.
    private func burst(_ shedding: inout MessageShedding, _ priority: MessagePriority, _ count: Int, rate: Int, at time: Timestamp) -> Int {
        (0..<count).filter { _ in shedding.admit(priority, rate: rate, now: time) }.count
    }

    @Test("a quiet room admits one second's worth: half of it low, the rest normal, high always")
    func burstFromQuiet() {
        var shedding = MessageShedding(rate: 40, now: now)
        #expect(burst(&shedding, .low, 100, rate: 40, at: now) == 20)
        #expect(burst(&shedding, .normal, 100, rate: 40, at: now) == 20)
        #expect(burst(&shedding, .high, 100, rate: 40, at: now) == 100)
        #expect(burst(&shedding, .normal, 1, rate: 40, at: now) == 0)
    }

    @Test("over the rate, low is shed before normal, and high is kept")
    func sheddingOrder() {
        var shedding = MessageShedding(rate: 40, now: now)
        // Half the bucket spent by normal traffic: low stops, normal continues.
        #expect(burst(&shedding, .normal, 20, rate: 40, at: now) == 20)
        #expect(burst(&shedding, .low, 1, rate: 40, at: now) == 0)
        #expect(burst(&shedding, .normal, 1, rate: 40, at: now) == 1)
        #expect(burst(&shedding, .normal, 19, rate: 40, at: now) == 19)
        // Empty: normal is shed too, high still passes.
        #expect(burst(&shedding, .normal, 1, rate: 40, at: now) == 0)
        #expect(burst(&shedding, .low, 1, rate: 40, at: now) == 0)
        #expect(burst(&shedding, .high, 1, rate: 40, at: now) == 1)
    }

    @Test("odd and tiny rates: low keeps half the bucket rounded down; at rate 1 it is not starved")
    func smallRates() {
        var five = MessageShedding(rate: 5, now: now)
        #expect(burst(&five, .low, 10, rate: 5, at: now) == 3)
        var one = MessageShedding(rate: 1, now: now)
        #expect(burst(&one, .low, 3, rate: 1, at: now) == 1)
        var two = MessageShedding(rate: 2, now: now)
        #expect(burst(&two, .low, 3, rate: 2, at: now) == 1)
        #expect(burst(&two, .normal, 3, rate: 2, at: now) == 1)
    }

    @Test("the bucket refills at the rate")
    func refill() {
        var shedding = MessageShedding(rate: 40, now: now)
        #expect(burst(&shedding, .normal, 40, rate: 40, at: now) == 40)
        #expect(burst(&shedding, .normal, 1, rate: 40, at: now) == 0)
        // 100 ms at 40/s: 4 messages.
        let later = now.adding(milliseconds: 100)
        #expect(burst(&shedding, .normal, 10, rate: 40, at: later) == 4)
        // A full second later the room is quiet again.
        #expect(shedding.isFull(rate: 40, now: later.adding(seconds: 1)))
        #expect(!shedding.isFull(rate: 40, now: later))
    }

    @Test("a clock stepping back drains nothing and refills nothing")
    func clockStepsBack() {
        var shedding = MessageShedding(rate: 10, now: now)
        #expect(burst(&shedding, .normal, 10, rate: 10, at: now) == 10)
        #expect(burst(&shedding, .normal, 1, rate: 10, at: now.adding(seconds: -5)) == 0)
        #expect(burst(&shedding, .normal, 1, rate: 10, at: now.adding(milliseconds: 100)) == 1)
    }

    @Test("priorities order low < normal < high")
    func order() {
        #expect(MessagePriority.low < .normal)
        #expect(MessagePriority.normal < .high)
        #expect(MessagePriority.allCases.sorted() == [.low, .normal, .high])
    }
}
