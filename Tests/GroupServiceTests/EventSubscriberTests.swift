@testable import GRPCProtocol
@testable import GRPCServer
import GroupModel
@testable import GroupService
import NIOCore
import Synchronization
import Testing

/// What a test writer was given, in order.
private final class Written: Sendable {
    private let items = Mutex<[String]>([])
    func append(_ item: String) { items.withLock { $0.append(item) } }
    var all: [String] { items.withLock { $0 } }
}

/// One stream's catch-up queue and hand-over, without a hub or a store.
@Suite("Event subscriber: the live items kept while catching up")
struct EventSubscriberTests {
    /// A subscriber at event 10 whose writer records what it is given.
    private func subscriber(pendingLimit: Int, capacity: Int = 16) -> (EventSubscriber, Written) {
        let written = Written()
        let writer = ServerStreamWriter(capacity: capacity, deliver: { buffer in written.append(String(buffer: buffer)) })
        let filter = StreamFilter(userID: "bob", groupIDs: [], kinds: [], excludeMessages: false)
        let start = EventCursor(eventID: 10, time: Timestamp(millisecondsSince1970: 1_000))
        return (EventSubscriber(id: 1, app: "app-a", filter: filter, writer: writer, start: start, pendingLimit: pendingLimit), written)
    }

    private func offer(_ id: Int64) -> EventSubscriber.Offer {
        EventSubscriber.Offer(
            eventID: id, cursor: EventCursor(eventID: id, time: Timestamp(millisecondsSince1970: id * 1_000)),
            bytes: ByteBuffer(string: "e\(id)"))
    }

    @Test("past pendingLimit live items during catch-up, the stream is too slow, with the cursor the backlog reached")
    func pendingLimit() {
        let (stream, written) = subscriber(pendingLimit: 3)
        for id in Int64(11)...13 { #expect(stream.offer(offer(id)) == nil) }
        #expect(stream.pendingCount == 3)
        stream.advance(to: EventCursor(eventID: 12, time: Timestamp(millisecondsSince1970: 12_000)))
        // The fourth is refused and nothing is written: the client resumes from the store at 12.
        #expect(stream.offer(offer(14)) == .tooSlow(EventCursor(eventID: 12, time: Timestamp(millisecondsSince1970: 12_000))))
        #expect(stream.pendingCount == 3)
        #expect(written.all.isEmpty)
    }

    @Test("going live writes the kept items the backlog did not deliver, in order, then caught_up")
    func handOver() {
        let (stream, written) = subscriber(pendingLimit: 8)
        for id in Int64(11)...14 { #expect(stream.offer(offer(id)) == nil) }
        // The backlog delivered 11 and 12 itself.
        stream.advance(to: EventCursor(eventID: 12, time: Timestamp(millisecondsSince1970: 12_000)))
        #expect(stream.goLive { ByteBuffer(string: "caught_up@\($0.eventID)") } == nil)
        #expect(written.all == ["e13", "e14", "caught_up@14"])
        #expect(stream.pendingCount == 0)
        // Live: straight to the writer.
        #expect(stream.offer(offer(15)) == nil)
        #expect(written.all.last == "e15")
        #expect(stream.cursor.eventID == 15)
    }

    @Test("a writer queue too small for the kept items ends the stream as too slow at going live")
    func handOverOverflow() {
        let (stream, written) = subscriber(pendingLimit: 8, capacity: 2)
        for id in Int64(11)...14 { #expect(stream.offer(offer(id)) == nil) }
        let end = stream.goLive { _ in ByteBuffer(string: "caught_up") }
        // 11 and 12 fit the queue of 2; 13 does not: resume after 12.
        #expect(end == .tooSlow(EventCursor(eventID: 12, time: Timestamp(millisecondsSince1970: 12_000))))
        #expect(written.all == ["e11", "e12"])
    }

    @Test("live, an item at or below the cursor is not written again: the backlog delivered it")
    func liveItemAlreadyDelivered() {
        let (stream, written) = subscriber(pendingLimit: 8)
        // The backlog read up to 15 before an item committed at 13 was routed.
        stream.advance(to: EventCursor(eventID: 15, time: Timestamp(millisecondsSince1970: 15_000)))
        #expect(stream.goLive { ByteBuffer(string: "caught_up@\($0.eventID)") } == nil)
        #expect(stream.offer(offer(13)) == nil)
        #expect(stream.offer(offer(15)) == nil)
        #expect(stream.offer(offer(16)) == nil)
        #expect(written.all == ["caught_up@15", "e16"])
        #expect(stream.cursor.eventID == 16)
    }
}
