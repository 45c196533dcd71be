@testable import GRPCProtocol
@testable import GRPCServer
import GroupAPI
import GroupModel
import GroupService
import GroupStore
import GroupTestSupport
import NIOCore
import NIOEmbedded
import Synchronization
import Testing

typealias EventMethods = Groupd_V1_EventService.Method
typealias StreamMemberMethods = Groupd_V1_MemberService.Method

/// One `Subscribe` call run against the service's router, with a real `ServerStreamWriter`
/// whose connection side is this object: it decodes what the stream queues and, unless told
/// to stall, acknowledges each message at once (as a connection that keeps up would).
final class TestStream: Sendable {
    private struct State {
        var items: [Groupd_V1_SubscribeResponse] = []
        var stalled: Bool
        var unacknowledged = 0
        var end: GRPCStatus?
        var ended = false
        /// One more at each item, at the end and at a waiter's deadline.
        var version = 0
        /// Waiters for the next change after the version they saw.
        var waiters: [(version: Int, wake: CheckedContinuation<Void, Never>)] = []

        /// Counts a change; the waiters to wake.
        mutating func change() -> [CheckedContinuation<Void, Never>] {
            version += 1
            defer { waiters = [] }
            return waiters.map(\.wake)
        }
    }

    private let state: Mutex<State>
    private let writerBox = Mutex<ServerStreamWriter?>(nil)
    private let task = Mutex<Task<Void, Never>?>(nil)

    /// Starts the call.
    /// - Parameters:
    ///   - capacity: The writer's queue bound.
    ///   - stalled: Whether the connection side never acknowledges (a subscriber that stopped reading).
    init(
        _ harness: ServiceHarness, _ request: Groupd_V1_SubscribeRequest, as identity: TestIdentity,
        capacity: Int = 128, stalled: Bool = false
    ) async throws {
        state = Mutex(State(stalled: stalled))
        let (authorization, operatorID) = try await harness.headers(for: identity)
        var metadata = Metadata()
        if let authorization { metadata.append(name: "authorization", value: authorization) }
        if let operatorID { metadata.append(name: "x-operator-id", value: operatorID) }
        let writer = ServerStreamWriter(capacity: capacity, finish: { [weak self] status in
            self?.finished(status)
        }, deliver: { [weak self] buffer in self?.received(buffer) })
        writerBox.withLock { $0 = writer }
        let path = EventMethods.subscribe.path
        guard case .serverStreaming(let body) = try #require(harness.router.handler(for: path)) else {
            Issue.record("Subscribe is not server-streaming")
            return
        }
        let context = ServerContext(path: path, metadata: metadata)
        let bytes = ByteBuffer(bytes: request.serializedBytes())
        task.withLock {
            $0 = Task { [self] in
                var status = GRPCStatus(.ok)
                do {
                    try await body(bytes, context, writer)
                    // A detached call goes on; it ends through `finished(_:)` or `cancel()`.
                    if writer.isDetached { return }
                } catch let error as any GRPCStatusConvertible {
                    status = error.grpcStatus
                } catch {
                    status = GRPCStatus(.cancelled, "\(error)")
                }
                finished(status)
            }
        }
    }

    /// The call ended with `status` (the first end wins); the writer closes, as the transport's does.
    private func finished(_ status: GRPCStatus) {
        let wake = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            guard !state.ended else { return [] }
            state.end = status
            state.ended = true
            return state.change()
        }
        for waiter in wake { waiter.resume() }
        writerBox.withLock { $0 }?.close()
    }

    /// Returns at the first change after `version` (at once if there was one already).
    private func change(after version: Int) async {
        await withCheckedContinuation { (wake: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if state.version != version { return true }
                state.waiters.append((version, wake))
                return false
            }
            if now { wake.resume() }
        }
    }

    /// Waits — woken by each item and by the end of the call, not by polling — until `check`
    /// gives a result or, as a bound for a broken test, `seconds` passed (then `nil`).
    private func watch<T>(seconds: Double, _ check: (State) -> T?) async -> T? {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        let timer = Task { [weak self] in
            try? await Task.sleep(until: deadline)
            guard let self else { return }
            for waiter in self.state.withLock({ $0.change() }) { waiter.resume() }
        }
        defer { timer.cancel() }
        while true {
            let (result, version) = state.withLock { (check($0), $0.version) }
            if let result { return result }
            if ContinuousClock.now >= deadline { return nil }
            await change(after: version)
        }
    }

    private func received(_ buffer: ByteBuffer) {
        let item = try? Groupd_V1_SubscribeResponse(serializedBytes: Array(buffer.readableBytesView))
        let (acknowledge, wake) = state.withLock { state -> (Bool, [CheckedContinuation<Void, Never>]) in
            if let item { state.items.append(item) }
            if state.stalled { state.unacknowledged += 1 }
            return (!state.stalled, state.change())
        }
        for waiter in wake { waiter.resume() }
        if acknowledge { writerBox.withLock { $0 }?.didSend() }
    }

    /// Everything received so far.
    var items: [Groupd_V1_SubscribeResponse] { state.withLock { $0.items } }

    /// The events received so far (no messages, no marker).
    var events: [Groupd_V1_GroupEvent] { items.compactMap { $0.hasEvent ? $0.event : nil } }

    /// Messages queued to the connection and not acknowledged (a stalled stream's queue).
    var queuedCount: Int { writerBox.withLock { $0 }?.queuedCount ?? 0 }

    /// The status the call ended with (`nil` while it runs).
    var status: GRPCStatus? { state.withLock { $0.end } }

    /// Waits (woken by each item, up to `seconds`) until `condition` holds on the received items,
    /// or the call ended.
    @discardableResult
    func wait(
        seconds: Double = 60, sourceLocation: SourceLocation = #_sourceLocation,
        until condition: ([Groupd_V1_SubscribeResponse]) -> Bool
    ) async -> Bool {
        let outcome = await self.watch(seconds: seconds) { state -> Bool? in
            if condition(state.items) { return true }
            return state.ended ? false : nil
        }
        if let outcome { return outcome }
        Issue.record("the stream did not reach the expected state; got \(items.count) items", sourceLocation: sourceLocation)
        return false
    }

    /// Waits until `caught_up` arrived.
    func waitCaughtUp(sourceLocation: SourceLocation = #_sourceLocation) async {
        await wait(sourceLocation: sourceLocation) { $0.contains { $0.hasCaughtUp } }
    }

    /// Waits until the call ended and returns its status.
    func waitEnd(seconds: Double = 60, sourceLocation: SourceLocation = #_sourceLocation) async -> GRPCStatus? {
        if let status = await self.watch(seconds: seconds, { $0.end }) { return status }
        Issue.record("the stream did not end", sourceLocation: sourceLocation)
        return nil
    }

    /// Ends the call from the client's side (a dropped connection).
    func cancel() async {
        let task = self.task.withLock { $0 }
        writerBox.withLock { $0 }?.close()
        task?.cancel()
        await task?.value
        finished(GRPCStatus(.cancelled, "the client went away"))
    }
}

extension Groupd_V1_SubscribeResponse {
    /// Whether the item is an event.
    var hasEvent: Bool { if case .event? = item { true } else { false } }
    /// Whether the item is a message.
    var hasMessage: Bool { if case .message? = item { true } else { false } }
    /// Whether the item is the `caught_up` marker.
    var hasCaughtUp: Bool { if case .caughtUp? = item { true } else { false } }
}

extension GRPCStatus {
    /// The `StreamResumeInfo` in `details`.
    var resumeInfo: Groupd_V1_StreamResumeInfo? {
        guard let status = try? decodedDetails() else { return nil }
        for any in status.details {
            if let info = try? any.unpack(Groupd_V1_StreamResumeInfo.self) { return info }
        }
        return nil
    }
}

/// A Subscribe request.
func subscribeRequest(
    cursor: String = "", fromOldest: Bool = false, groups: [String] = [], kinds: [Groupd_V1_EventKind] = [],
    excludeMessages: Bool = false
) -> Groupd_V1_SubscribeRequest {
    .with {
        $0.cursor = cursor
        $0.fromOldest = fromOldest
        $0.groupIds = groups
        $0.kinds = kinds
        $0.excludeMessages = excludeMessages
    }
}

extension ServiceHarness {
    /// Renames group `id` as `identity` (one GROUP_INFO_CHANGED event).
    func rename(_ id: String, to name: String, as identity: TestIdentity) async throws {
        _ = try await ok(Methods.updateGroupProfile, .with {
            $0.groupID = id
            $0.updateMask = Self.mask("name")
            $0.profile = .with { $0.name = name }
        }, as: identity)
    }

    /// Every stored event of app-a as the backend's firehose sees it from the start: `(group, sequence, kind)`.
    func fullLog() async throws -> [LoggedEvent] {
        var all: [LoggedEvent] = []
        var after: Int64 = 0
        while true {
            let page = try await store.appEvents(app: TestApps.appA, after: after, limit: 500)
            all += page.events
            if page.isLast { return all }
            after = page.scannedThrough
        }
    }
}

@Suite("Subscribe test support")
struct SubscribeSupportTests {
    @Test("A stalled test stream keeps its messages queued")
    func stalledStreamQueues() async throws {
        let harness = try await ServiceHarness()
        try await harness.create(.public, id: "g", members: [("bob", .member)], owner: "alice", as: .admin)
        let stream = try await TestStream(harness, subscribeRequest(fromOldest: true), as: .user("bob"), stalled: true)
        await stream.waitCaughtUp()
        #expect(stream.queuedCount == 2)
        await stream.cancel()
    }
}
