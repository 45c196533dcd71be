import GRPCProtocol
import GroupAPI
import GroupModel
import GroupService
import GroupTestSupport
import Testing

/// The router as a whole: authentication in front of every group method, UNIMPLEMENTED for the
/// rest of the API, health without a token, undecodable requests, and the shape of every error;
/// each test body runs through `InProcessTransport` and through the HTTP/2 transport and client.
@Suite("Router and error details, in process and live over HTTP/2")
struct RouterRPCTests {
    @Test("the three group methods need a token: UNAUTHENTICATED / TOKEN_MISSING, and nothing is created", arguments: TestTransport.allCases)
    func authenticationFirst(transport: TestTransport) async throws {
        try await withServiceHarness(transport) { h in
            let anonymous = TestIdentity.headers(authorization: nil, operatorID: nil)
            expectFailure(
                try await h.call(Methods.createGroup, createRequest(.public, id: "anon"), as: anonymous),
                .unauthenticated, reason: "TOKEN_MISSING")
            expectFailure(
                try await h.call(Methods.getGroupsInfo, .with { $0.groupIds = ["anon"] }, as: anonymous),
                .unauthenticated, reason: "TOKEN_MISSING")
            expectFailure(try await h.dismiss("anon", as: anonymous), .unauthenticated, reason: "TOKEN_MISSING")
            try await expectNoGroup(h, "anon")
        }
    }

    @Test("a token fault is checked before the request is decoded", arguments: TestTransport.allCases)
    func authenticationBeforeDecoding(transport: TestTransport) async throws {
        try await withServiceHarness(transport) { h in
            let result = await h.callRaw(path: Methods.createGroup.path, bytes: [0xFF, 0xFF, 0xFF], metadata: Metadata())
            guard case .failure(let status) = result else { Issue.record("garbage was accepted"); return }
            #expect(status.code == .unauthenticated)
            expectDetails(status, reason: "TOKEN_MISSING")
        }
    }

    @Test("a token that expires between calls is refused with TOKEN_EXPIRED", arguments: TestTransport.allCases)
    func expiredBetweenCalls(transport: TestTransport) async throws {
        let clock = ManualWallClock(Timestamp(secondsSince1970: 1_800_000_000))
        try await withServiceHarness(transport, clock: clock) { h in
            let (authorization, _) = try await h.headers(for: .user("alice"))
            let identity = TestIdentity.headers(authorization: authorization, operatorID: nil)
            _ = try await h.call(Methods.createGroup, createRequest(.public, id: "p"), as: identity).get()
            clock.advance(seconds: 3600)
            expectFailure(
                try await h.call(Methods.getGroupsInfo, .with { $0.groupIds = ["p"] }, as: identity),
                .unauthenticated, reason: "TOKEN_EXPIRED")
        }
    }

    @Test("a wrongly signed token and an unknown app are UNAUTHENTICATED", arguments: TestTransport.allCases)
    func badTokens(transport: TestTransport) async throws {
        try await withServiceHarness(transport) { h in
            let forged = try await TokenMinter.mint(
                app: TestApps.appA, secret: "an-attacker-secret-of-32-bytes-or-more!", kid: "k1", user: "alice")
            expectFailure(
                try await h.call(Methods.createGroup, createRequest(.public), as: .headers(authorization: "Bearer " + forged, operatorID: nil)),
                .unauthenticated, reason: "TOKEN_BAD_SIGNATURE")
            let unknown = try await TokenMinter.mint(app: "app-z", secret: TestApps.secretA, kid: "k1", user: "alice")
            expectFailure(
                try await h.call(Methods.createGroup, createRequest(.public), as: .headers(authorization: "Bearer " + unknown, operatorID: nil)),
                .unauthenticated, reason: "UNKNOWN_APP")
        }
    }

    @Test("an undecodable request is INTERNAL, as grpc-go and grpc-java answer", arguments: TestTransport.allCases)
    func garbageBody(transport: TestTransport) async throws {
        try await withServiceHarness(transport) { h in
            let (authorization, _) = try await h.headers(for: .admin)
            let result = await h.callRaw(
                path: Methods.getGroupsInfo.path, bytes: [0x0A, 0x05, 0x61],
                metadata: Metadata([(name: "authorization", value: authorization!)]))
            guard case .failure(let status) = result else { Issue.record("garbage was accepted"); return }
            #expect(status.code == .internal)
            #expect(status.message.contains("GetGroupsInfoRequest"))
        }
    }

    @Test("every method of the API is registered and has a handler: none answers UNIMPLEMENTED", arguments: TestTransport.allCases)
    func everyMethodImplemented(transport: TestTransport) async throws {
        try await withServiceHarness(transport) { h in
            #expect(Set(h.router.paths) == Set(GroupAPI.allMethods.map(\.path)))
            let (authorization, _) = try await h.headers(for: .admin)
            let metadata = Metadata([(name: "authorization", value: authorization!)])
            // Streaming methods never end on an empty request; their own suites cover them.
            let streaming = Set(GroupAPI.allMethods.filter(\.isServerStreaming).map(\.path))
            #expect(streaming == Set([Groupd_V1_EventService.Method.subscribe.path, Grpc_Health_V1_Health.Method.watch.path]
                + ReflectionService.paths))
            for method in GroupAPI.allMethods where !streaming.contains(method.path) {
                if case .failure(let status) = await h.callRaw(path: method.path, bytes: [], metadata: metadata) {
                    #expect(status.code != .unimplemented, "\(method.path)")
                }
            }
        }
    }

    @Test("Health/Check needs no token", arguments: TestTransport.allCases)
    func healthWithoutToken(transport: TestTransport) async throws {
        try await withServiceHarness(transport) { h in
            let result = await h.callRaw(path: Grpc_Health_V1_Health.Method.check.path, bytes: [], metadata: Metadata())
            let bytes = try result.get()
            #expect(try Grpc_Health_V1_HealthCheckResponse(serializedBytes: bytes).status == .serving)
        }
    }

    @Test("every error's details decode as google.rpc.Status with the ErrorInfo of its reason", arguments: TestTransport.allCases)
    func everyErrorHasDetails(transport: TestTransport) async throws {
        try await withServiceHarness(transport) { h in
            try await h.create(.work, id: "w", members: [("mia", .member)], as: .user("olivia"))
            try await h.create(.public, id: "p", members: [("mia", .member)], as: .user("olivia"))
            let (userToken, _) = try await h.headers(for: .user("olivia"))
            let statuses: [(GRPCStatus?, String)] = [
                (try await h.call(Methods.createGroup, createRequest(.work, name: bytes(31)), as: .user("a")).status,
                 "INVALID_ARGUMENT"),
                (try await h.call(Methods.createGroup, createRequest(.work, id: "w"), as: .user("a")).status, "GROUP_ID_TAKEN"),
                (try await h.call(
                    Methods.createGroup, createRequest(.avChatRoom, settings: .with { $0.joinOption = .approval }),
                    as: .user("a")).status, "SETTING_FIXED_BY_TYPE"),
                (try await h.dismiss("w", as: .user("olivia")).status, "ADMIN_TOKEN_REQUIRED"),
                (try await h.dismiss("w", as: .user("eve")).status, "GROUP_NOT_FOUND"),
                (try await h.dismiss("p", as: .user("mia")).status, "PERMISSION_DENIED"),
                (try await h.dismiss("p", as: .user("eve")).status, "NOT_A_MEMBER"),
                (try await h.dismiss("p", as: .headers(authorization: userToken, operatorID: "mia")).status,
                 "OPERATOR_OVERRIDE_FORBIDDEN"),
                (try await h.dismiss("p", as: .headers(authorization: "Bearer x.y.z", operatorID: nil)).status,
                 "TOKEN_MALFORMED"),
                (try await h.call(Methods.getGroupsInfo, .with { $0.groupIds = [] }, as: .admin).status, "INVALID_ARGUMENT"),
            ]
            for (status, reason) in statuses {
                guard let status else {
                    Issue.record("expected \(reason), the call succeeded")
                    continue
                }
                let decoded = try #require(try status.decodedDetails(), "\(status) has no details")
                #expect(decoded.code == Int32(status.code.rawValue))
                let infos = decoded.details.compactMap { try? $0.unpack(Google_Rpc_ErrorInfo.self) }
                #expect(infos.count == 1, "\(status)")
                #expect(infos.first?.reason == reason, "\(status)")
                #expect(infos.first?.domain == "groupd")
                #expect(status.errorInfo?.reason == reason)
            }
        }
    }
}
