import GroupModel
import Testing

@Suite("Event details in changes")
struct EventDetailTests {
    private let now = Timestamp(millisecondsSince1970: 1_700_000_000_000)

    @Test("a stored settings change of the old kind is reported as GROUP_SETTINGS_CHANGED; a profile change is not")
    func legacySettingsKind() {
        func event(_ changes: [String: String]) -> GroupEvent {
            GroupEvent(appID: "a", groupID: "g", sequence: 1, kind: .groupInfoChanged, time: now, operatorID: "o",
                       changes: changes)
        }
        #expect(event(["join_option": "any", "max_members": "9"]).reportedKind == .groupSettingsChanged)
        #expect(event(["name": "n"]).reportedKind == .groupInfoChanged)
        #expect(event(["name": "n", "join_option": "any"]).reportedKind == .groupInfoChanged)
        #expect(event([:]).reportedKind == .groupInfoChanged)
    }

    @Test("every setting's text sets it back; a wrong text changes nothing")
    func settingsText() {
        let source = GroupType.public.preset.defaultSettings
        var other = GroupType.work.preset.defaultSettings
        for key in GroupSettingKey.allCases {
            let valid = other.set(key, text: source.value(of: key))
            let bogus = other.set(key, text: "bogus")
            #expect(valid && !bogus, "\(key)")
        }
        #expect(other == source)
    }

    @Test("join sources round-trip their names")
    func joinSourceNames() {
        for source in JoinSource.allCases { #expect(JoinSource(name: source.name) == source) }
        #expect(JoinSource(name: "nope") == nil)
    }

    @Test("a group mute records who set it; ended, it is in effect no more")
    func groupMuteOperator() throws {
        let group = Group(
            appID: "a", id: "g", type: .public, name: "n", settings: GroupType.public.preset.defaultSettings,
            ownerID: "alice", maxMembers: nil, memberCount: 1, createdAt: now, updatedAt: now)
        let muted = try GroupRules.planGroupMute(.all, for: 60, of: group, by: .backend, now: now)
        #expect(muted.group.mute.operatorID == nil)
        let state = GroupMuteState(mode: .all, until: now.adding(seconds: 60), operatorID: "alice")
        #expect(state.effective(at: now.adding(seconds: 59)) == state)
        #expect(state.effective(at: now.adding(seconds: 60)) == .unmuted)
        #expect(GroupMuteState(mode: .all, until: nil, operatorID: "x").effective(at: now.adding(seconds: 1_000_000)).mode == .all)
    }
}
