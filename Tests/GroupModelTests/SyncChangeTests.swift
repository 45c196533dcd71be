import GroupModel
import Testing

/// What a change tells versioned sync: whether it moves the member version, and whether the
/// group's record as a joined-group list shows it changed.
@Suite("GroupChange: member version and listed-group changes")
struct SyncChangeTests {
    @Test("member rows inserted, updated or removed move the member version; nothing else does")
    func changesMembers() throws {
        let group = try fixture(.public).group
        let member = Member(userID: "zoe", role: .member, joinedAt: group.createdAt)
        #expect(!GroupChange(group: group).changesMembers)
        #expect(!GroupChange(group: group, retainedMutes: ["zoe": group.createdAt], dismissesGroup: true).changesMembers)
        #expect(GroupChange(group: group, insertedMembers: [member]).changesMembers)
        #expect(GroupChange(group: group, updatedMembers: [member]).changesMembers)
        #expect(GroupChange(group: group, removedMembers: ["zoe"]).changesMembers)
    }

    @Test("the record changes with anything but the counters, and with a dismissal")
    func changesListedGroup() throws {
        let before = try fixture(.public).group
        var counters = before
        counters.memberCount += 1
        counters.latestSequence += 1
        counters.memberVersion += 1
        #expect(!GroupChange(group: counters).changesListedGroup(from: before))
        #expect(GroupChange(group: before, dismissesGroup: true).changesListedGroup(from: before))
        var renamed = before
        renamed.name = "renamed"
        #expect(GroupChange(group: renamed).changesListedGroup(from: before))
        var settings = before
        settings.settings.joinOption = .forbidden
        #expect(GroupChange(group: settings).changesListedGroup(from: before))
        var custom = before
        custom.custom["k"] = [1]
        #expect(GroupChange(group: custom).changesListedGroup(from: before))
    }
}
