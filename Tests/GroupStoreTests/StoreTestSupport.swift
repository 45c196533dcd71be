import Foundation
import GroupModel
@testable import GroupStore
@testable import GroupStorePostgres
@testable import GroupStoreSQL
@testable import GroupStoreSQLite

extension Store {
    /// The SQLite backend under this store (tests of SQLite-only behaviour: migrations, pragmas).
    var sqlite: SQLiteBackend {
        get throws {
            guard let backend = backend as? SQLiteBackend else { throw SQLiteOnly() }
            return backend
        }
    }
}

/// A SQLite-only test ran against another backend.
struct SQLiteOnly: Error {}

/// Groups, members and messages the conformance tests write, through the store's own API and
/// the model's plans, in app `app`.
enum Fixture {
    static let app = "app"
    static let t0 = Timestamp(millisecondsSince1970: 1_700_000_000_000)

    /// Creates a Public group `id` owned by `alice` with `members` as ordinary members.
    @discardableResult
    static func create(_ store: Store, _ id: String, members: [String] = []) async throws -> Group {
        let request = GroupCreationRequest(
            type: .public, groupID: id, name: "team \(id)", members: members.map { InitialMember(userID: $0) })
        let plan = try GroupRules.planCreation(request, appID: app, creatorID: "alice", limits: .defaults, now: t0)
        return try await store.createGroup(plan).value
    }

    /// Renames a group as its owner (a change of the group row and a `GROUP_INFO_CHANGED` event).
    @discardableResult
    static func rename(_ store: Store, _ id: String, to name: String, by user: String = "alice") async throws -> Group {
        try await store.mutateGroup(app: app, groupID: id, operatorID: user, targets: [], at: t0) { snapshot in
            guard snapshot.operatorMembership?.role == .owner else {
                throw GroupError(code: .permissionDenied, reason: .permissionDenied, message: "owners rename")
            }
            var group = snapshot.group
            group.name = name
            return (GroupChange(group: group, events: [.init(kind: .groupInfoChanged, operatorID: user)]), ())
        }.group
    }

    /// What JoinGroup's snapshot asks beside the group and the joiner's membership.
    static let joinParts: SnapshotRequest.Parts = [.joinedGroupCounts, .retainedMutes, .bans]

    /// `user` joins as an ordinary member (loading what JoinGroup loads).
    static func join(_ store: Store, _ id: String, _ user: String) async throws {
        _ = try await store.mutateGroup(app: app, groupID: id, operatorID: user, targets: [], at: t0, parts: joinParts) { snapshot in
            if snapshot.operatorMembership != nil {
                throw GroupError(code: .failedPrecondition, reason: .alreadyMember, message: "already a member")
            }
            var group = snapshot.group
            group.memberCount += 1
            let member = Member(userID: user, role: .member, joinedAt: t0, joinSequence: group.latestSequence)
            return (GroupChange(group: group, insertedMembers: [member],
                                events: [.init(kind: .memberJoined, operatorID: user, targets: [user])]), ())
        }
    }

    /// `user` quits (loading what a join loads).
    static func quit(_ store: Store, _ id: String, _ user: String) async throws {
        _ = try await store.mutateGroup(app: app, groupID: id, operatorID: user, targets: [], at: t0, parts: joinParts) { snapshot in
            guard snapshot.operatorMembership != nil else {
                throw GroupError(code: .failedPrecondition, reason: .notAMember, message: "not a member")
            }
            var group = snapshot.group
            group.memberCount -= 1
            return (GroupChange(group: group, removedMembers: [user],
                                events: [.init(kind: .memberQuit, operatorID: user, targets: [user])]), ())
        }
    }

    /// A message from `sender`, stored if they are a member.
    @discardableResult
    static func send(_ store: Store, _ id: String, from sender: String, clientID: String? = nil) async throws -> AppendedMessage {
        let message = GroupMessage(
            appID: app, groupID: id, sequence: 0, messageID: UUID().uuidString, senderID: sender,
            content: MessageContent(type: "text", text: "hi", payload: [], clientMessageID: clientID), time: t0)
        return try await store.appendMessage(message, at: t0) { _, member, _ in
            guard let member else { throw GroupError(code: .permissionDenied, reason: .notAMember, message: "not a member") }
            return member.nameCard
        }
    }

    /// Queues `steps` in their order while commits are held, then commits them together.
    static func inOneBatch(_ store: Store, _ steps: [@Sendable () async throws -> Void]) async throws {
        store.holdCommits()
        var tasks: [Task<Void, any Error>] = []
        for (queued, step) in steps.enumerated() {
            tasks.append(Task { try await step() })
            await store.waitUntilQueued(queued + 1)
        }
        store.releaseCommits()
        for task in tasks { try await task.value }
    }

    /// Every event of a group, in order.
    static func events(_ store: Store, _ id: String) async throws -> [GroupEvent] {
        try await store.events(app: app, groupID: id, after: 0, limit: 10_000)
    }

    /// The `GroupError` thrown by `body`, or `nil`.
    static func groupError(_ body: () async throws -> Void) async -> GroupError? {
        do {
            try await body()
            return nil
        } catch let error as GroupError {
            return error
        } catch {
            return nil
        }
    }
}
