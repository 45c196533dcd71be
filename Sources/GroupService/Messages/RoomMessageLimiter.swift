import GroupModel
import Synchronization

/// The per-room state of AVChatRoom messages on this node: the rate at which each room admits
/// messages (`MessageShedding`: low shed first, then normal, high kept) and the recent client
/// message ids of sent messages, so that a retry answers the first result without sending again.
///
/// In memory, per node, like the rooms' audiences. Both are decided under one lock, so two
/// concurrent retries with the same client message id cannot both be sent.
final class RoomMessageLimiter: Sendable {
    /// How long a sent message's client id is remembered for retries.
    static let retrySeconds: Int64 = 300
    /// The most client ids remembered per room (the oldest are forgotten first).
    static let retryCapacity = 1024
    /// Above this many rooms, quiet rooms (full bucket, nothing remembered) are forgotten, at most
    /// once a second, so memory follows the rooms active in the last seconds (and those with
    /// client ids remembered).
    static let pruneThreshold = 4096

    private struct Key: Hashable {
        var app: String
        var group: String
    }

    private struct Retry: Hashable {
        var sender: String
        var clientMessageID: String
    }

    private struct Room {
        var shedding: MessageShedding
        /// The rate of the room's app at its last message.
        var rate: Int
        var sent: [Retry: GroupMessage] = [:]
        /// The keys of ``sent``, oldest first.
        var order: [Retry] = []

        mutating func forget(before cutoff: Timestamp) {
            var drop = 0
            while drop < order.count, let message = sent[order[drop]], message.time < cutoff { drop += 1 }
            if drop == 0 { return }
            for key in order[..<drop] { sent.removeValue(forKey: key) }
            order.removeFirst(drop)
        }
    }

    private struct State {
        var rooms: [Key: Room] = [:]
        var lastPrune = Timestamp(millisecondsSince1970: 0)
    }

    private let state = Mutex(State())

    /// Decide one message of a room at `now`: a retry of a remembered message answers it
    /// (deduplicated), otherwise the room's rate admits or sheds it. An admitted message with a
    /// client id is remembered; a shed one is not, so its retry gets a new chance.
    /// - Parameters:
    ///   - message: The message to send (its `time` is `now`).
    ///   - rate: The app's `av_chat_room_messages_per_second`.
    ///   - now: The time of the send: the room's rate refills up to it, and client ids remembered for
    ///     longer than ``retrySeconds`` before it are forgotten.
    func admit(_ message: GroupMessage, rate: Int, now: Timestamp) -> SendOutcome {
        let key = Key(app: message.appID, group: message.groupID)
        let retry = message.content.clientMessageID.map { Retry(sender: message.senderID, clientMessageID: $0) }
        return state.withLock { state in
            var room = state.rooms[key] ?? Room(shedding: MessageShedding(rate: rate, now: now), rate: rate)
            room.rate = rate
            room.forget(before: now.adding(seconds: -Self.retrySeconds))
            if let retry, let earlier = room.sent[retry] {
                state.rooms[key] = room
                return .sent(earlier, deduplicated: true)
            }
            let outcome: SendOutcome
            if room.shedding.admit(message.content.priority, rate: rate, now: now) {
                if let retry {
                    room.sent[retry] = message
                    room.order.append(retry)
                    if room.order.count > Self.retryCapacity {
                        room.sent.removeValue(forKey: room.order.removeFirst())
                    }
                }
                outcome = .sent(message, deduplicated: false)
            } else {
                outcome = .shed(message)
            }
            state.rooms[key] = room
            if state.rooms.count > Self.pruneThreshold, now.millisecondsSince1970 - state.lastPrune.millisecondsSince1970 >= 1000 {
                state.lastPrune = now
                let cutoff = now.adding(seconds: -Self.retrySeconds)
                state.rooms = state.rooms.compactMapValues { room in
                    var room = room
                    room.forget(before: cutoff)
                    return room.sent.isEmpty && room.shedding.isFull(rate: room.rate, now: now) ? nil : room
                }
            }
            return outcome
        }
    }

    /// Counts a message another node admitted in the room (the room's rate is the room's,
    /// wherever its members send) and remembers its client id, so a retry through this node
    /// answers it too.
    func admitted(elsewhere message: GroupMessage, rate: Int, now: Timestamp) {
        let key = Key(app: message.appID, group: message.groupID)
        state.withLock { state in
            var room = state.rooms[key] ?? Room(shedding: MessageShedding(rate: rate, now: now), rate: rate)
            room.rate = rate
            room.shedding.consume(rate: rate, now: now)
            if let id = message.content.clientMessageID {
                let retry = Retry(sender: message.senderID, clientMessageID: id)
                if room.sent[retry] == nil {
                    room.sent[retry] = message
                    room.order.append(retry)
                    if room.order.count > Self.retryCapacity { room.sent.removeValue(forKey: room.order.removeFirst()) }
                }
            }
            state.rooms[key] = room
        }
    }

    /// The message a sender sent in a room with `clientMessageID` within the last
    /// ``retrySeconds``, if this node remembers it.
    func sent(app: String, groupID: String, senderID: String, clientMessageID: String, now: Timestamp) -> GroupMessage? {
        state.withLock { state in
            guard let message = state.rooms[Key(app: app, group: groupID)]?.sent[
                Retry(sender: senderID, clientMessageID: clientMessageID)]
            else { return nil }
            return message.time >= now.adding(seconds: -Self.retrySeconds) ? message : nil
        }
    }

    /// How many rooms are tracked (tests: pruning keeps memory bounded).
    var roomCount: Int { state.withLock { $0.rooms.count } }

    /// Forgets a room (dismissed).
    func removeRoom(app: String, group: String) {
        _ = state.withLock { $0.rooms.removeValue(forKey: Key(app: app, group: group)) }
    }
}
