import GRPCProtocol
import GroupAPI
import GroupModel
import GroupService
import GroupTestSupport
import Dispatch
import Logging
import PolicyHost
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A service whose app-a runs `plugins` (paths relative to the build directory), on a host of its own.
func policyHarness(
    _ plugins: [PluginConfiguration], failureModes: [PolicyHook: FailureMode] = [:], budgetMilliseconds: Int = 5000
) async throws -> ServiceHarness {
    var configuration = TestApps.configuration()
    configuration.apps[0].policy = AppPolicySettings(
        plugins: plugins, budgetMilliseconds: budgetMilliseconds, failureModes: failureModes)
    var logger = Logger(label: "groupd.policy.test")
    logger.logLevel = .critical
    let policy = ServicePolicy(host: PolicyHost(
        configuration: PolicyHostConfiguration(threads: 2, breakerThreshold: 100, breakerCooldown: .seconds(30)), logger: logger))
    try policy.apply(configuration, baseDirectory: "/nonexistent")
    return try await ServiceHarness(configuration: configuration, policy: policy)
}

/// The behaviours fixture's per-tag counter `which` (3: completed calls), through its own symbol.
func fixtureCompletedCalls(_ tag: String) -> Int {
    let path = ServicePolicy.resolvePluginPath("libPolicyFixtureBehaviors.so", baseDirectory: "/nonexistent")
    guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL), let symbol = dlsym(handle, "policy_fixture_stat") else { return -1 }
    typealias Stat = @convention(c) (UnsafePointer<CChar>, Int32) -> Int
    return tag.withCString { unsafeBitCast(symbol, to: Stat.self)($0, 3) }
}

/// Waits until the behaviours fixture has completed `count` calls tagged `tag` — woken by the
/// fixture at each completed call, at most 60 s (a bound for a broken test) — and returns the count.
func fixtureCompletedCalls(_ tag: String, reaching count: Int) async -> Int {
    let path = ServicePolicy.resolvePluginPath("libPolicyFixtureBehaviors.so", baseDirectory: "/nonexistent")
    // The wait blocks a thread: a dispatch thread, never the cooperative pool's.
    return await withCheckedContinuation { continuation in
        DispatchQueue.global().async {
            guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL), let symbol = dlsym(handle, "policy_fixture_wait_stat") else {
                continuation.resume(returning: -1)
                return
            }
            typealias Wait = @convention(c) (UnsafePointer<CChar>, Int32, Int, Int) -> Int
            let wait = unsafeBitCast(symbol, to: Wait.self)
            continuation.resume(returning: tag.withCString { wait($0, 3, count, 60_000) })
        }
    }
}

func uniquePolicyTag(_ prefix: String) -> String { "\(prefix)-\(UInt32.random(in: 0...UInt32.max))" }

/// The hook points of the service with the shipped plugins and the behaviours fixture loaded.
@Suite("Policy plugins in the RPCs, in process")
struct PolicyRPCTests {
    static let keywordReject = PluginConfiguration(
        path: "libKeywordPolicy.so", config: #"{"words": ["forbidden"], "mode": "reject"}"#,
        hooks: [.beforeCreateGroup, .beforeUpdateProfile, .beforeSetMemberInfo])
    static let keywordMask = PluginConfiguration(
        path: "libKeywordPolicy.so", config: #"{"words": ["darn"], "mode": "mask"}"#,
        hooks: [.beforeCreateGroup, .beforeUpdateProfile, .beforeSetMemberInfo])
    static let schema = PluginConfiguration(
        path: "libCustomFieldSchemaPolicy.so",
        config: #"{"group": {"level": {"type": "integer", "min": 1, "max": 10}, "vip": {"type": "boolean", "read": "admin"}}, "member": {"title": {"type": "string", "max_length": 4}}}"#,
        hooks: [.validateGroupCustom, .validateMemberCustom, .filterCustomOnRead])

    @Test("a banned word in CreateGroup: FAILED_PRECONDITION, POLICY_REJECTED, error_keys and a BadRequest; nothing stored")
    func createRejected() async throws {
        let h = try await policyHarness([Self.keywordReject])
        let outcome = await h.callCreate(name: "a forbidden name", id: "pol-1")
        #expect(outcome.code == .failedPrecondition)
        #expect(outcome.errorInfo?.reason == "POLICY_REJECTED")
        #expect(outcome.errorInfo?.metadata["error_keys"] == "name")
        #expect(outcome.errorInfo?.metadata["field"] == "profile.name")
        #expect(outcome.status?.badRequest?.fieldViolations.map(\.field) == ["name"])
        #expect(outcome.status?.badRequest?.fieldViolations.first?.description_p.isEmpty == false)
        #expect(outcome.errorInfo?.metadata.keys.contains { $0.hasPrefix("reason.") } == false)
        #expect(try await h.read("pol-1", as: .admin) == nil)
    }

    @Test("masking rewrites what CreateGroup and UpdateGroupProfile store")
    func masked() async throws {
        let h = try await policyHarness([Self.keywordMask])
        let group = try await h.create(.public, id: "pol-2", name: "darn team", as: .user("alice"))
        #expect(group.profile?.name == "*** team")
        _ = try await h.ok(Methods.updateGroupProfile, .with {
            $0.groupID = "pol-2"
            $0.profile = .with { $0.introduction = "a darn good group" }
            $0.updateMask = ServiceHarness.mask("introduction")
        }, as: .user("alice"))
        #expect(try await h.read("pol-2", as: .admin)?.profile?.introduction == "a *** good group")
    }

    @Test("UpdateMemberInfo: a banned name card is refused, a masked one stored masked")
    func memberInfo() async throws {
        let h = try await policyHarness([Self.keywordReject, Self.keywordMask])
        _ = try await h.create(.public, id: "pol-3", members: [("bob", .member)], as: .user("alice"))
        let refused = try await h.call(Groupd_V1_MemberService.Method.updateMemberInfo, .with {
            $0.groupID = "pol-3"
            $0.nameCard = "forbidden bob"
            $0.updateMask = ServiceHarness.mask("name_card")
        }, as: .user("bob"))
        #expect(refused.code == .failedPrecondition)
        #expect(refused.errorInfo?.metadata["error_keys"] == "name_card")
        let changed = try await h.ok(Groupd_V1_MemberService.Method.updateMemberInfo, .with {
            $0.groupID = "pol-3"
            $0.nameCard = "darn bob"
            $0.updateMask = ServiceHarness.mask("name_card")
        }, as: .user("bob"))
        #expect(changed.member?.nameCard == "*** bob")
    }

    @Test("custom fields: wrong type INVALID_ARGUMENT with the request path, normalised values stored, member fields too")
    func customValidation() async throws {
        let h = try await policyHarness([Self.schema])
        var request = createRequest(.public, id: "pol-4", owner: "alice")
        request.custom = ["level": Array("eleven".utf8)]
        let wrong = try await h.call(Methods.createGroup, request, as: .admin)
        #expect(wrong.code == .invalidArgument)
        #expect(wrong.errorInfo?.reason == "POLICY_REJECTED")
        #expect(wrong.errorInfo?.metadata["error_keys"] == "custom.group.level")
        #expect(wrong.errorInfo?.metadata["field"] == "custom.level")

        request.custom = ["level": Array("007".utf8)]
        request.members = [.with { $0.userID = "bob"; $0.custom = ["title": Array("chief".utf8)] }]
        let member = try await h.call(Methods.createGroup, request, as: .admin)
        #expect(member.code == .invalidArgument)
        #expect(member.errorInfo?.metadata["field"] == "members[0].custom.title")

        request.members = []
        let created = try await h.ok(Methods.createGroup, request, as: .admin)
        #expect(created.group?.custom["level"] == Array("7".utf8))
    }

    @Test("filter on read: a field readable by admins is hidden from members, shown to the owner")
    func readFilter() async throws {
        let h = try await policyHarness([Self.schema])
        var request = createRequest(.public, id: "pol-5", members: [("bob", .member)], owner: "alice")
        request.custom = ["level": Array("3".utf8), "vip": Array("true".utf8)]
        _ = try await h.ok(Methods.createGroup, request, as: .admin)
        let asMember = try #require(try await h.read("pol-5", as: .user("bob")))
        #expect(asMember.custom.keys.sorted() == ["level"])
        let asOwner = try #require(try await h.read("pol-5", as: .user("alice")))
        #expect(asOwner.custom.keys.sorted() == ["level", "vip"])
    }

    @Test("a failing plugin: fail closed on custom-field validation (UNAVAILABLE), fail open elsewhere")
    func failureModes() async throws {
        let failing = PluginConfiguration(path: "libPolicyFixtureBehaviors.so", config: "mode=error;tag=\(uniquePolicyTag("err"))",
                                          hooks: [.validateGroupCustom, .beforeCreateGroup])
        let h = try await policyHarness([failing])
        // before_create_group fails open: the group is created.
        _ = try await h.create(.public, id: "pol-6", owner: "alice", as: .admin)
        // validate_group_custom fails closed: nothing is created.
        var request = createRequest(.public, id: "pol-7", owner: "alice")
        request.custom = ["level": Array("1".utf8)]
        let closed = try await h.call(Methods.createGroup, request, as: .admin)
        #expect(closed.code == .unavailable)
        #expect(closed.errorInfo?.reason == "POLICY_UNAVAILABLE")
        #expect(closed.errorInfo?.metadata["kind"] == "plugin_error")
        #expect(try await h.read("pol-7", as: .admin) == nil)

        // The app's failure_modes make before_create_group fail closed too.
        let strict = try await policyHarness([failing], failureModes: [.beforeCreateGroup: .failClosed])
        let refused = await strict.callCreate(name: "x", id: "pol-8")
        #expect(refused.code == .unavailable)
    }

    @Test("a reload whose plugin fails to load leaves the previous chain in force")
    func reloadKeepsChain() async throws {
        let h = try await policyHarness([Self.keywordReject])
        var broken = h.configuration
        broken.apps[0].policy = AppPolicySettings(plugins: [PluginConfiguration(path: "libNoSuchPolicy.so", hooks: [.beforeCreateGroup])])
        #expect(throws: PolicyLoadError.self) { try h.service.policy.apply(broken, baseDirectory: "/nonexistent") }
        #expect(await h.callCreate(name: "forbidden", id: "pol-9").errorInfo?.reason == "POLICY_REJECTED")
        // A good reload replaces it: no plugin any more.
        var none = h.configuration
        none.apps[0].policy = nil
        try h.service.policy.apply(none, baseDirectory: nil)
        #expect(await h.callCreate(name: "forbidden", id: "pol-10").code == .ok)
    }

    @Test("SIGHUP's reload(to:): a broken plugin refuses the reload and keeps the chain; a good one swaps it")
    func serviceReload() async throws {
        let h = try await policyHarness([Self.keywordReject])
        var broken = h.configuration
        broken.apps[0].policy = AppPolicySettings(plugins: [PluginConfiguration(
            path: "libPolicyFixtureBehaviors.so", config: "mode=init_fail;tag=\(uniquePolicyTag("init"))", hooks: [.beforeCreateGroup])])
        do {
            _ = try await h.service.reload(to: broken, baseDirectory: "/nonexistent")
            Issue.record("a reload with a plugin whose instance_new fails was accepted")
        } catch {
            guard case .policy(let message) = error else { Issue.record("unexpected \(error)"); return }
            #expect(message.contains("instance_failed"))
        }
        #expect(h.service.snapshot.generation == 1)
        #expect(await h.callCreate(name: "forbidden", id: "pol-13").errorInfo?.reason == "POLICY_REJECTED")

        var masking = h.configuration
        masking.apps[0].policy = AppPolicySettings(plugins: [PluginConfiguration(
            path: "libKeywordPolicy.so", config: #"{"words": ["forbidden"], "mode": "mask"}"#, hooks: [.beforeCreateGroup])])
        let outcome = try await h.service.reload(to: masking, baseDirectory: "/nonexistent")
        #expect(outcome.appsChanged == [TestApps.appA])
        #expect(try await h.callCreate(name: "forbidden", id: "pol-14").get().group?.profile?.name == "***")
    }

    @Test("after_event: every committed event reaches the plugin without blocking the call")
    func afterEvent() async throws {
        let tag = uniquePolicyTag("after")
        let h = try await policyHarness([PluginConfiguration(
            path: "libPolicyFixtureBehaviors.so", config: "mode=allow;tag=\(tag)", hooks: [.afterEvent])])
        _ = try await h.create(.public, id: "pol-11", members: [("bob", .member)], as: .user("alice"))
        let events = try await h.events("pol-11").count
        #expect(events > 0)
        // Delivered asynchronously: wait for the plugin to have seen them (no timing asserted),
        // then for the host to have nothing more to deliver: not one more than the events.
        #expect(await fixtureCompletedCalls(tag, reaching: events) == events)
        await h.service.policy.host?.afterEventsDelivered()
        #expect(fixtureCompletedCalls(tag) == events)
    }

    @Test("discard is refused on hooks other than messages")
    func discardElsewhere() async throws {
        let h = try await policyHarness([PluginConfiguration(
            path: "libPolicyFixtureBehaviors.so", config: "mode=discard;tag=\(uniquePolicyTag("discard"))", hooks: [.beforeCreateGroup])])
        let outcome = await h.callCreate(name: "x", id: "pol-12")
        #expect(outcome.code == .failedPrecondition)
        #expect(outcome.errorInfo?.reason == "POLICY_REJECTED")
    }
}

/// The membership and message hooks: invitees refused one by one, joins refused, messages
/// masked or discarded.
@Suite("Policy plugins on invites, joins and messages, in process")
struct PolicyMembershipRPCTests {
    @Test("before_invite refuses the invitees the plugin names; the others join; results keep the request order")
    func invite() async throws {
        let h = try await policyHarness([PluginConfiguration(
            path: "libPolicyFixtureBehaviors.so", config: "mode=invite;tag=\(uniquePolicyTag("invite"))", hooks: [.beforeInvite])])
        _ = try await h.create(.work, id: "pol-20", as: .user("alice"))
        let response = try await h.ok(Groupd_V1_MemberService.Method.inviteMembers, .with {
            $0.groupID = "pol-20"
            $0.userIds = ["bad-1", "carol", "bad-2", "dave"]
        }, as: .user("alice"))
        #expect(response.results.map(\.userID) == ["bad-1", "carol", "bad-2", "dave"])
        #expect(response.results.map(\.result) == [.failed, .success, .failed, .success])
        #expect(response.results[0].reason == "POLICY_REJECTED")
        let members = try await h.ok(Groupd_V1_MemberService.Method.getMembersInfo, .with {
            $0.groupID = "pol-20"
            $0.userIds = ["bad-1", "carol"]
        }, as: .admin)
        #expect(members.results.map(\.result) == [.notMember, .success])

        // Every invitee refused: every result FAILED, nothing written.
        let all = try await h.ok(Groupd_V1_MemberService.Method.inviteMembers, .with {
            $0.groupID = "pol-20"
            $0.userIds = ["bad-3"]
        }, as: .user("alice"))
        #expect(all.results.map(\.result) == [.failed])
    }

    @Test("before_apply_to_join: a reject refuses the join and nothing is stored")
    func joinRejected() async throws {
        let h = try await policyHarness([PluginConfiguration(
            path: "libKeywordPolicy.so", config: #"{"words": ["forbidden"], "mode": "reject"}"#, hooks: [.beforeApplyToJoin])])
        _ = try await h.create(.meeting, id: "pol-21", as: .user("alice"))
        let refused = try await h.call(Groupd_V1_MemberService.Method.joinGroup, .with {
            $0.groupID = "pol-21"
            $0.message = "a forbidden request"
        }, as: .user("bob"))
        #expect(refused.code == .failedPrecondition)
        #expect(refused.errorInfo?.metadata["error_keys"] == "apply_message")
        #expect(refused.errorInfo?.metadata["field"] == "message")
        let joined = try await h.call(Groupd_V1_MemberService.Method.joinGroup, .with { $0.groupID = "pol-21" }, as: .user("bob"))
        #expect(joined.code == .ok)
    }

    @Test("before_send_group_message: a reject refuses, a mask is stored masked, a discard answers SENT and stores nothing")
    func messages() async throws {
        let tag = uniquePolicyTag("discard")
        let h = try await policyHarness([
            PluginConfiguration(path: "libKeywordPolicy.so", config: #"{"words": ["forbidden"], "mode": "reject"}"#,
                                hooks: [.beforeSendGroupMessage]),
            PluginConfiguration(path: "libKeywordPolicy.so", config: #"{"words": ["darn"], "mode": "mask"}"#,
                                hooks: [.beforeSendGroupMessage]),
        ])
        _ = try await h.create(.public, id: "pol-22", members: [("bob", .member)], as: .user("alice"))
        let refused = try await h.call(Groupd_V1_MessageService.Method.sendGroupMessage, .with {
            $0.groupID = "pol-22"
            $0.type = "text"
            $0.text = "forbidden words"
        }, as: .user("bob"))
        #expect(refused.code == .failedPrecondition)
        #expect(refused.errorInfo?.metadata["error_keys"] == "message.text")
        let masked = try await h.ok(Groupd_V1_MessageService.Method.sendGroupMessage, .with {
            $0.groupID = "pol-22"
            $0.type = "text"
            $0.text = "oh darn"
        }, as: .user("bob"))
        #expect(masked.message?.text == "oh ***")

        let discarding = try await policyHarness([PluginConfiguration(
            path: "libPolicyFixtureBehaviors.so", config: "mode=discard;tag=\(tag)", hooks: [.beforeSendGroupMessage])])
        _ = try await discarding.create(.public, id: "pol-23", members: [("bob", .member)], as: .user("alice"))
        let before = try await discarding.events("pol-23").count
        let sent = try await discarding.ok(Groupd_V1_MessageService.Method.sendGroupMessage, .with {
            $0.groupID = "pol-23"
            $0.type = "text"
            $0.text = "hello"
        }, as: .user("bob"))
        #expect(sent.result == .sent)
        #expect(try await discarding.events("pol-23").count == before)
    }
}

extension ServiceHarness {
    /// CreateGroup of a Public group named `name`, owned by alice, as the backend.
    func callCreate(name: String, id: String) async -> RPCOutcome<Groupd_V1_CreateGroupResponse> {
        do {
            return try await call(Methods.createGroup, createRequest(.public, id: id, name: name, owner: "alice"), as: .admin)
        } catch {
            return RPCOutcome(.failure(GRPCStatus(.internal, "\(error)")))
        }
    }
}
