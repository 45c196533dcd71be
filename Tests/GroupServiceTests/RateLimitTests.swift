import GRPCProtocol
import GroupAPI
import GroupModel
import GroupService
import GroupTestSupport
import Synchronization
import Testing

/// A monotonic clock the test moves by hand (nanoseconds).
private final class ManualTicks: Sendable {
    private let value = Mutex<UInt64>(1_000_000_000)
    var now: UInt64 { value.withLock { $0 } }
    func advance(seconds: Double) { value.withLock { $0 += UInt64(seconds * 1e9) } }
}

private func limiter(_ limits: RateLimits, _ ticks: ManualTicks, cap: Int = 100_000) -> AppRateLimiter {
    AppRateLimiter(limits: limits, maximumTrackedOperators: cap, now: { ticks.now })
}

@Suite("Rate limits")
struct RateLimitTests {
    @Test("an operator's bucket lets its burst through, then refuses with the delay until the next token")
    func burstThenRefuse() throws {
        let ticks = ManualTicks()
        let l = limiter(RateLimits(perOperator: .init(perSecond: 2, burst: 3)), ticks)
        for _ in 0..<3 { #expect(l.acquire(operatorKey: "alice", isWrite: false) == nil) }
        let refusal = try #require(l.acquire(operatorKey: "alice", isWrite: false))
        #expect(refusal.scope == "operator")
        #expect(abs(refusal.retryAfterSeconds - 0.5) < 1e-6)
        ticks.advance(seconds: 0.25)
        #expect(abs((l.acquire(operatorKey: "alice", isWrite: false)?.retryAfterSeconds ?? 0) - 0.25) < 1e-6)
        ticks.advance(seconds: 0.25)
        #expect(l.acquire(operatorKey: "alice", isWrite: false) == nil)
        #expect(l.acquire(operatorKey: "alice", isWrite: false) != nil)
        // Another operator has a bucket of its own.
        #expect(l.acquire(operatorKey: "bob", isWrite: false) == nil)
    }

    @Test("the app's bucket is shared by every operator")
    func appBucket() throws {
        let ticks = ManualTicks()
        let l = limiter(RateLimits(perApp: .init(perSecond: 1, burst: 2)), ticks)
        #expect(l.acquire(operatorKey: "alice", isWrite: true) == nil)
        #expect(l.acquire(operatorKey: "bob", isWrite: false) == nil)
        #expect(try #require(l.acquire(operatorKey: "carol", isWrite: false)).scope == "app")
        ticks.advance(seconds: 1)
        #expect(l.acquire(operatorKey: "carol", isWrite: false) == nil)
    }

    @Test("operator_writes applies to writes only, besides the operator bucket")
    func writes() throws {
        let ticks = ManualTicks()
        let l = limiter(RateLimits(perOperator: .init(perSecond: 100, burst: 100), perOperatorWrites: .init(perSecond: 1, burst: 1)), ticks)
        #expect(l.acquire(operatorKey: "alice", isWrite: true) == nil)
        #expect(try #require(l.acquire(operatorKey: "alice", isWrite: true)).scope == "operator_writes")
        for _ in 0..<10 { #expect(l.acquire(operatorKey: "alice", isWrite: false) == nil) }
    }

    @Test("a refused call takes no token from any bucket")
    func refusalIsFree() throws {
        let ticks = ManualTicks()
        let l = limiter(RateLimits(perApp: .init(perSecond: 1, burst: 2), perOperator: .init(perSecond: 1, burst: 1)), ticks)
        #expect(l.acquire(operatorKey: "alice", isWrite: false) == nil)
        // Alice is out; her refused calls leave the app's last token to bob.
        for _ in 0..<5 { #expect(l.acquire(operatorKey: "alice", isWrite: false)?.scope == "operator") }
        #expect(l.acquire(operatorKey: "bob", isWrite: false) == nil)
        #expect(l.acquire(operatorKey: "carol", isWrite: false)?.scope == "app")
    }

    @Test("idle operators' buckets are dropped: memory stays bounded")
    func eviction() {
        let ticks = ManualTicks()
        let l = limiter(RateLimits(perOperator: .init(perSecond: 10, burst: 10)), ticks, cap: 2000)
        for i in 0..<1000 { _ = l.acquire(operatorKey: "u\(i)", isWrite: false) }
        #expect(l.trackedOperators == 1000)
        ticks.advance(seconds: 1)  // every bucket refilled: each is the same as none
        for i in 0..<50 { _ = l.acquire(operatorKey: "v\(i)", isWrite: false) }
        #expect(l.trackedOperators < 100)
        // Operators that never go idle: at most the cap, whatever their number.
        for i in 0..<10_000 { _ = l.acquire(operatorKey: "w\(i)", isWrite: false) }
        #expect(l.trackedOperators <= 2001)
        // A dropped operator starts again with a full bucket, never with less.
        #expect(l.acquire(operatorKey: "w0", isWrite: false) == nil)
    }

    @Test("unlimited apps have no limiter; a reload keeps a limiter whose limits did not change")
    func limitersAcrossReload() {
        var configuration = TestApps.configuration()
        configuration.apps[0].rateLimits = RateLimits(perOperator: .init(perSecond: 5, burst: 5))
        let first = RateLimiters(configuration: configuration)
        #expect(first.apps.keys.sorted() == [TestApps.appA])
        let same = RateLimiters(configuration: configuration, previous: first)
        #expect(same.apps[TestApps.appA] === first.apps[TestApps.appA])
        configuration.apps[0].rateLimits.perOperator?.burst = 6
        let changed = RateLimiters(configuration: configuration, previous: first)
        #expect(changed.apps[TestApps.appA] !== first.apps[TestApps.appA])
        #expect(changed.apps[TestApps.appA]?.limits.perOperator?.burst == 6)
    }

    @Test("reads are Get*, List*, Search*, Check, Subscribe and Watch; the rest are writes")
    func methodClasses() {
        for path in ["/groupd.v1.GroupService/GetGroupsInfo", "/groupd.v1.MemberService/ListMembers",
                     "/groupd.v1.GroupService/SearchGroups", "/groupd.v1.EventService/Subscribe",
                     "/groupd.v1.MessageService/GetGroupMessages", "/groupd.v1.ApplicationService/ListApplications"] {
            #expect(RateLimiters.isRead(method: path), "\(path)")
        }
        for path in ["/groupd.v1.GroupService/CreateGroup", "/groupd.v1.MemberService/JoinGroup",
                     "/groupd.v1.MessageService/SendGroupMessage", "/groupd.v1.MessageService/MarkGroupRead",
                     "/groupd.v1.ApplicationService/ReportApplicationsRead"] {
            #expect(!RateLimiters.isRead(method: path), "\(path)")
        }
    }

    @Test("through the service: RESOURCE_EXHAUSTED, RATE_LIMITED and a RetryInfo; other operators and apps unaffected")
    func throughTheService() async throws {
        var configuration = TestApps.configuration()
        configuration.apps[0].rateLimits = RateLimits(perOperator: .init(perSecond: 0.01, burst: 2))
        let h = try await ServiceHarness(configuration: configuration)
        let request = Groupd_V1_GetGroupsInfoRequest.with { $0.groupIds = ["none"] }
        // The bucket refills on the real clock: on a loaded machine seconds may pass before the
        // refusal, and the delay is shorter by as much.
        let started = ContinuousClock.now
        for _ in 0..<2 { #expect(try await h.call(Methods.getGroupsInfo, request, as: .user("alice")).code == .ok) }
        let refused = try await h.call(Methods.getGroupsInfo, request, as: .user("alice"))
        #expect(refused.code == .resourceExhausted)
        #expect(refused.errorInfo?.reason == "RATE_LIMITED")
        #expect(refused.errorInfo?.metadata["scope"] == "operator")
        let details = try #require(try refused.status?.decodedDetails())
        let retry = try #require(details.details.lazy.compactMap { try? $0.unpack(Google_Rpc_RetryInfo.self) }.first)
        let delay = try #require(retry.retryDelay)
        let elapsed = (ContinuousClock.now - started).components.seconds
        #expect(delay.seconds >= 99 - elapsed && delay.seconds <= 100, "one token every 100 s, \(elapsed) s later: \(delay)")
        // Bob, the backend acting for nobody, and app-b each have their own budget.
        #expect(try await h.call(Methods.getGroupsInfo, request, as: .user("bob")).code == .ok)
        #expect(try await h.call(Methods.getGroupsInfo, request, as: .admin).code == .ok)
        #expect(try await h.call(Methods.getGroupsInfo, request, as: .user("alice", app: TestApps.appB)).code == .ok)
        // An admin acting for alice spends alice's budget.
        #expect(try await h.call(Methods.getGroupsInfo, request, as: .adminActing(for: "alice")).code == .resourceExhausted)
        // Token faults are reported as such, not as rate limits.
        #expect(try await h.call(Methods.getGroupsInfo, request, as: .headers(authorization: nil, operatorID: nil)).code == .unauthenticated)
    }
}
