import GroupAPI
import GroupModel
import GroupService
import GroupStore
import GroupTestSupport
import Testing

@Suite("Subscribe: details of events stored by earlier builds")
struct SubscribeLegacyDetailTests {
    @Test("a settings change stored as GROUP_INFO_CHANGED streams as GROUP_SETTINGS_CHANGED; old joins infer their source")
    func legacyEvents() async throws {
        let harness = try await ServiceHarness()
        try await harness.create(.public, id: "g", members: [("bob", .member)], owner: "alice", as: .admin)
        // What earlier builds stored: settings under the profile kind, joins without a source.
        _ = try await harness.store.mutateGroup(
            app: TestApps.appA, groupID: "g", operatorID: "alice", targets: [],
            at: Timestamp(millisecondsSince1970: 1_700_000_000_000)
        ) { snapshot in
            (GroupChange(group: snapshot.group, events: [
                .init(kind: .groupInfoChanged, operatorID: "alice", changes: ["join_option": "forbidden", "max_members": "40"]),
                .init(kind: .groupInfoChanged, operatorID: "alice", changes: ["name": "n"]),
                .init(kind: .memberJoined, operatorID: "alice", targets: ["carol"],
                      changes: ["via": "application", "application_id": "a1"]),
                .init(kind: .memberInvited, operatorID: "alice", targets: ["dave"]),
                .init(kind: .memberJoined, operatorID: "erin", targets: ["erin"]),
            ]), ())
        }
        let stream = try await TestStream(
            harness, subscribeRequest(fromOldest: true, kinds: [.groupSettingsChanged, .memberJoined, .memberInvited]),
            as: .admin())
        await stream.waitCaughtUp()
        let events = stream.events
        await stream.cancel()
        #expect(events.map(\.kind) == [.groupSettingsChanged, .memberJoined, .memberInvited, .memberJoined])
        let settings = try #require(events.first?.settingsChange)
        #expect(settings.changedFields == ["join_option", "max_member_count"])
        #expect(settings.settings?.joinOption == .forbidden)
        #expect(settings.maxMemberCount == 40)
        #expect(events[1].memberChange.members.map(\.joinSource) == [.application])
        #expect(events[1].memberChange.members.map(\.inviterUserID) == ["alice"])
        #expect(events[2].memberChange.members.map(\.joinSource) == [.invitation])
        #expect(events[2].memberChange.members.map(\.inviterUserID) == ["alice"])
        #expect(events[3].memberChange.members.map(\.joinSource) == [.unspecified])

        let info = try await TestStream(harness, subscribeRequest(fromOldest: true, kinds: [.groupInfoChanged]), as: .admin())
        await info.waitCaughtUp()
        #expect(info.events.map(\.profileChange.changedFields) == [["name"]])
        await info.cancel()
    }
}
