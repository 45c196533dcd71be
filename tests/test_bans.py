"""The ban list through a real groupd with stock grpcio: BanMembers, UnbanMembers, ListBannedMembers and
KickMembers with `ban`; every way into a group refused while a ban runs (join, AVChatRoom join, application,
invitation, accepting a pending item); who may ban; bad input and the per-group limit (a clear status naming
the field, nothing changed); MEMBER_BANNED / MEMBER_UNBANNED addressed to the owner, the admins and the user;
a timed ban ending on the manual clock."""

import grpc
import pytest
from google.protobuf import field_mask_pb2

from support import EventStream, admin_md, expect_error, uid, user_md
from groupd.v1 import (application_pb2, application_pb2_grpc, common_pb2, event_pb2, group_pb2, group_pb2_grpc,
                       member_pb2, member_pb2_grpc)

K = common_pb2
SUCCESS, FAILED, INVALID = K.MEMBER_RESULT_CODE_SUCCESS, K.MEMBER_RESULT_CODE_FAILED, K.MEMBER_RESULT_CODE_INVALID


class Api:
    def __init__(self, channel):
        self.channel = channel
        self.groups = group_pb2_grpc.GroupServiceStub(channel)
        self.members = member_pb2_grpc.MemberServiceStub(channel)
        self.apps = application_pb2_grpc.ApplicationServiceStub(channel)

    def create(self, group_type, owner, members=(), admins=()):
        gid = uid("g")
        self.groups.CreateGroup(group_pb2.CreateGroupRequest(
            group_id=gid, type=group_type, owner_user_id=owner, profile=K.GroupProfile(name="bans"),
            members=[group_pb2.InitialMember(user_id=u, role=K.MEMBER_ROLE_ADMIN) for u in admins]
            + [group_pb2.InitialMember(user_id=u, role=K.MEMBER_ROLE_MEMBER) for u in members]),
            metadata=admin_md(), timeout=10)
        return gid

    def ban(self, gid, users, md, seconds=0, reason="", **kwargs):
        return self.members.BanMembers(member_pb2.BanMembersRequest(
            group_id=gid, user_ids=users, duration_seconds=seconds, reason=reason, **kwargs), metadata=md, timeout=10)

    def unban(self, gid, users, md):
        return self.members.UnbanMembers(member_pb2.UnbanMembersRequest(group_id=gid, user_ids=users),
                                         metadata=md, timeout=10)

    def banned(self, gid, md=None, page_size=0, page_token=""):
        return self.members.ListBannedMembers(member_pb2.ListBannedMembersRequest(
            group_id=gid, page_size=page_size, page_token=page_token), metadata=md or admin_md(), timeout=10)

    def banned_ids(self, gid):
        return [ban.user_id for ban in self.banned(gid).bans]

    def is_member(self, gid, user):
        (result,) = self.members.GetMembersInfo(member_pb2.GetMembersInfoRequest(group_id=gid, user_ids=[user]),
                                                metadata=admin_md(), timeout=10).results
        return result.result == SUCCESS

    def join(self, gid, user):
        return self.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=gid), metadata=user_md(user), timeout=10)


@pytest.fixture
def api(channel):
    return Api(channel)


def test_ban_removes_a_member_and_refuses_their_join_until_unbanned(api):
    owner, bob = uid("owner"), uid("bob")
    gid = api.create(K.GROUP_TYPE_MEETING, owner, [bob])
    (result,) = api.ban(gid, [bob], user_md(owner), reason="spam").results
    assert result.result == SUCCESS and result.removed and result.ban.user_id == bob
    assert result.ban.reason == "spam" and result.ban.operator_user_id == owner and not result.ban.HasField("until")
    assert not api.is_member(gid, bob)
    info = expect_error(lambda: api.join(gid, bob), grpc.StatusCode.PERMISSION_DENIED, "USER_BANNED")
    assert info.metadata["user_id"] == bob and info.metadata["until"] == "0"
    assert not api.is_member(gid, bob)
    (listed,) = api.banned(gid, user_md(owner)).bans
    assert listed.user_id == bob and listed.reason == "spam" and listed.HasField("ban_time")

    (lifted,) = api.unban(gid, [bob], user_md(owner)).results
    assert lifted.result == SUCCESS and lifted.ban.reason == "spam"
    assert api.banned_ids(gid) == []
    assert api.join(gid, bob).outcome == member_pb2.JOIN_OUTCOME_JOINED
    (again,) = api.unban(gid, [bob], user_md(owner)).results
    assert again.result == FAILED and again.reason == "NOT_BANNED"


def test_a_banned_non_member_is_not_invited_nor_applies(api):
    owner, carol, dave = uid("owner"), uid("carol"), uid("dave")
    gid = api.create(K.GROUP_TYPE_PUBLIC, owner)
    (result,) = api.ban(gid, [carol], admin_md()).results
    assert result.result == SUCCESS and not result.removed and result.ban.operator_user_id == ""
    invited = api.members.InviteMembers(member_pb2.InviteMembersRequest(group_id=gid, user_ids=[carol, dave]),
                                        metadata=admin_md(), timeout=10).results
    assert [(r.user_id, r.result, r.reason) for r in invited] == [
        (carol, FAILED, "USER_BANNED"), (dave, SUCCESS, "")]
    assert not api.is_member(gid, carol)
    expect_error(lambda: api.members.JoinGroup(member_pb2.JoinGroupRequest(group_id=gid, message="let me in"),
                                               metadata=user_md(carol), timeout=10),
                 grpc.StatusCode.PERMISSION_DENIED, "USER_BANNED")
    pending = api.apps.ListApplications(application_pb2.ListApplicationsRequest(group_id=gid), metadata=user_md(owner),
                                        timeout=10)
    assert [item for item in pending.applications if item.applicant_user_id == carol] == []


def test_a_pending_application_is_not_accepted_while_banned(api):
    owner, erin = uid("owner"), uid("erin")
    gid = api.create(K.GROUP_TYPE_PUBLIC, owner)
    applied = api.join(gid, erin)
    assert applied.outcome == member_pb2.JOIN_OUTCOME_PENDING_APPROVAL
    api.ban(gid, [erin], user_md(owner))
    expect_error(lambda: api.apps.AcceptApplication(application_pb2.AcceptApplicationRequest(
        application_id=applied.application.application_id), metadata=user_md(owner), timeout=10),
        grpc.StatusCode.PERMISSION_DENIED, "USER_BANNED")
    assert not api.is_member(gid, erin)
    api.unban(gid, [erin], user_md(owner))
    api.apps.AcceptApplication(application_pb2.AcceptApplicationRequest(
        application_id=applied.application.application_id), metadata=user_md(owner), timeout=10)
    assert api.is_member(gid, erin)


def test_a_pending_invitation_is_not_accepted_by_a_banned_invitee(api):
    owner, frank = uid("owner"), uid("frank")
    gid = api.create(K.GROUP_TYPE_WORK, owner)
    api.groups.UpdateGroupSettings(group_pb2.UpdateGroupSettingsRequest(
        group_id=gid, update_mask=field_mask_pb2.FieldMask(paths=["invitee_consent"]),
        settings=K.GroupSettings(invitee_consent=K.REQUIREMENT_REQUIRED)), metadata=admin_md(), timeout=10)
    (invited,) = api.members.InviteMembers(member_pb2.InviteMembersRequest(group_id=gid, user_ids=[frank]),
                                           metadata=user_md(owner), timeout=10).results
    assert invited.result == K.MEMBER_RESULT_CODE_PENDING
    api.ban(gid, [frank], user_md(owner))
    expect_error(lambda: api.apps.AcceptApplication(application_pb2.AcceptApplicationRequest(
        application_id=invited.application_id), metadata=user_md(frank), timeout=10),
        grpc.StatusCode.PERMISSION_DENIED, "USER_BANNED")
    assert not api.is_member(gid, frank)


def test_an_avchatroom_ban_removes_the_viewer_and_refuses_the_join(api):
    owner, viewer = uid("owner"), uid("viewer")
    gid = api.create(K.GROUP_TYPE_AV_CHAT_ROOM, owner)
    assert api.join(gid, viewer).outcome == member_pb2.JOIN_OUTCOME_JOINED
    (result,) = api.ban(gid, [viewer], user_md(owner)).results
    assert result.result == SUCCESS and result.removed
    expect_error(lambda: api.join(gid, viewer), grpc.StatusCode.PERMISSION_DENIED, "USER_BANNED")
    # Kicking stays unsupported in an AVChatRoom, with or without ban.
    expect_error(lambda: api.members.KickMembers(member_pb2.KickMembersRequest(group_id=gid, user_ids=[viewer], ban=True),
                                                 metadata=user_md(owner), timeout=10),
                 grpc.StatusCode.FAILED_PRECONDITION, "KICK_NOT_SUPPORTED")


def test_kick_with_ban_removes_and_bans(api):
    owner, bob, carol = uid("owner"), uid("bob"), uid("carol")
    gid = api.create(K.GROUP_TYPE_PUBLIC, owner, [bob])
    results = api.members.KickMembers(member_pb2.KickMembersRequest(
        group_id=gid, user_ids=[bob, carol], reason="bye", ban=True, ban_duration_seconds=3600),
        metadata=user_md(owner), timeout=10).results
    assert [(r.user_id, r.result) for r in results] == [(bob, SUCCESS), (carol, K.MEMBER_RESULT_CODE_NOT_MEMBER)]
    assert results[0].member.user_id == bob
    (ban,) = api.banned(gid).bans
    assert ban.user_id == bob and ban.reason == "bye" and ban.HasField("until")
    assert not api.is_member(gid, bob)
    expect_error(lambda: api.members.KickMembers(member_pb2.KickMembersRequest(
        group_id=gid, user_ids=[bob], ban_duration_seconds=60), metadata=user_md(owner), timeout=10),
        grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")


def test_who_may_ban(api):
    owner, admin, admin2, bob, outsider = uid("owner"), uid("admin"), uid("admin2"), uid("bob"), uid("out")
    gid = api.create(K.GROUP_TYPE_PUBLIC, owner, [bob], admins=[admin, admin2])
    expect_error(lambda: api.ban(gid, [admin], user_md(bob)), grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
    expect_error(lambda: api.ban(gid, [bob], user_md(outsider)), grpc.StatusCode.PERMISSION_DENIED, "NOT_A_MEMBER")
    results = api.ban(gid, [owner, admin2, bob, admin], user_md(admin)).results
    assert [(r.user_id, r.result, r.reason) for r in results] == [
        (owner, FAILED, "TARGET_IS_OWNER"), (admin2, FAILED, "PERMISSION_DENIED"), (bob, SUCCESS, ""),
        (admin, INVALID, "INVALID_ARGUMENT")]
    assert api.is_member(gid, owner) and api.is_member(gid, admin2) and not api.is_member(gid, bob)
    assert api.banned_ids(gid) == [bob]
    # The owner bans an admin (who is removed); members neither unban nor list.
    (result,) = api.ban(gid, [admin2], user_md(owner)).results
    assert result.result == SUCCESS and result.removed
    (lifted,) = api.unban(gid, [admin2], user_md(admin)).results
    assert lifted.result == SUCCESS
    expect_error(lambda: api.unban(gid, [bob], user_md(outsider)), grpc.StatusCode.PERMISSION_DENIED, "NOT_A_MEMBER")
    member = uid("m")
    api.members.InviteMembers(member_pb2.InviteMembersRequest(group_id=gid, user_ids=[member]), metadata=admin_md(),
                              timeout=10)
    expect_error(lambda: api.unban(gid, [bob], user_md(member)), grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
    expect_error(lambda: api.banned(gid, user_md(member)), grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
    assert api.banned_ids(gid) == [bob]


def test_bad_ban_requests_change_nothing(api):
    owner, bob = uid("owner"), uid("bob")
    gid = api.create(K.GROUP_TYPE_PUBLIC, owner, [bob])
    info = expect_error(lambda: api.ban(gid, [], user_md(owner)), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "user_ids"
    info = expect_error(lambda: api.ban(gid, [bob], user_md(owner), reason="x" * 101),
                        grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "reason"
    info = expect_error(lambda: api.ban(gid, [uid("u") for _ in range(101)], user_md(owner)),
                        grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "user_ids" and info.metadata["limit"] == "100"
    info = expect_error(lambda: api.unban(gid, [], user_md(owner)), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "user_ids"
    info = expect_error(lambda: api.banned(gid, page_size=-1), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert info.metadata["field"] == "page_size"
    results = api.ban(gid, ["", bob, bob], user_md(owner)).results
    assert [r.result for r in results] == [INVALID, SUCCESS, INVALID]
    expect_error(lambda: api.ban(uid("nope"), [bob], admin_md()), grpc.StatusCode.NOT_FOUND, "GROUP_NOT_FOUND")
    expect_error(lambda: api.banned(uid("nope")), grpc.StatusCode.NOT_FOUND, "GROUP_NOT_FOUND")
    assert api.banned_ids(gid) == [bob]


def test_banned_members_are_listed_in_pages(api):
    owner = uid("owner")
    gid = api.create(K.GROUP_TYPE_PUBLIC, owner)
    users = sorted(uid(f"u{i}") for i in range(3))
    api.ban(gid, users, user_md(owner))
    first = api.banned(gid, page_size=2)
    assert [b.user_id for b in first.bans] == users[:2] and first.next_page_token
    second = api.banned(gid, page_size=2, page_token=first.next_page_token)
    assert [b.user_id for b in second.bans] == users[2:] and second.next_page_token == ""


def test_ban_events_go_to_the_owner_the_admins_and_the_user(api):
    owner, admin, bob = uid("owner"), uid("admin"), uid("bob")
    gid = api.create(K.GROUP_TYPE_PUBLIC, owner, [bob], admins=[admin])
    stream = EventStream(api.channel, event_pb2.SubscribeRequest(
        group_ids=[gid], kinds=[K.EVENT_KIND_MEMBER_BANNED, K.EVENT_KIND_MEMBER_UNBANNED, K.EVENT_KIND_MEMBER_KICKED]),
        admin_md())
    stream.until_caught_up()
    (result,) = api.ban(gid, [bob], user_md(admin), seconds=600, reason="flood").results
    assert result.ban.until.ToMilliseconds() == result.ban.ban_time.ToMilliseconds() + 600_000
    kicked, *banned = [item.event for item in stream.events(4)]
    assert kicked.kind == K.EVENT_KIND_MEMBER_KICKED and list(kicked.target_user_ids) == [bob]
    assert sorted(tuple(e.recipient_user_ids) for e in banned) == sorted([(owner,), (admin,), (bob,)])
    for event in banned:
        assert event.kind == K.EVENT_KIND_MEMBER_BANNED and list(event.target_user_ids) == [bob]
        assert event.operator_user_id == admin and event.WhichOneof("detail") == "ban"
        assert event.ban.reason == "flood" and event.ban.duration_seconds == 600
        assert event.ban.until == result.ban.until
    api.unban(gid, [bob], user_md(owner))
    unbanned = [item.event for item in stream.events(3)]
    assert sorted(tuple(e.recipient_user_ids) for e in unbanned) == sorted([(owner,), (admin,), (bob,)])
    assert all(e.kind == K.EVENT_KIND_MEMBER_UNBANNED and e.WhichOneof("detail") == "ban" for e in unbanned)
    stream.cancel()
    # The banned user's own stream carries theirs (addressed to them after they left).
    own = EventStream(api.channel, event_pb2.SubscribeRequest(
        kinds=[K.EVENT_KIND_MEMBER_BANNED, K.EVENT_KIND_MEMBER_UNBANNED], from_oldest=True), user_md(bob))
    got = [item.event for item in own.until_caught_up() if item.WhichOneof("item") == "event" and item.event.group_id == gid]
    own.cancel()
    assert [e.kind for e in got] == [K.EVENT_KIND_MEMBER_BANNED, K.EVENT_KIND_MEMBER_UNBANNED]
    (live,) = [e for e in banned if list(e.recipient_user_ids) == [bob]]
    assert got[0] == live  # the detail survives the store round trip


def test_the_ban_list_limit(fresh_groupd):
    server = fresh_groupd(limits={"max_bans_per_group": 2}).start()
    with grpc.insecure_channel(server.address) as channel:
        api = Api(channel)
        owner, a, b, c = uid("owner"), uid("a"), uid("b"), uid("c")
        gid = api.create(K.GROUP_TYPE_PUBLIC, owner, [c])
        api.ban(gid, [a, b], user_md(owner))
        info = expect_error(lambda: api.ban(gid, [c], user_md(owner)), grpc.StatusCode.FAILED_PRECONDITION,
                            "BAN_LIST_FULL")
        assert info.metadata["limit"] == "2"
        assert api.is_member(gid, c) and sorted(api.banned_ids(gid)) == sorted([a, b])
        # Banning again who is banned adds nobody: allowed at the limit.
        (again,) = api.ban(gid, [a], user_md(owner), reason="still").results
        assert again.result == SUCCESS
        api.unban(gid, [b], user_md(owner))
        assert api.ban(gid, [c], user_md(owner)).results[0].result == SUCCESS


def test_a_timed_ban_ends_on_the_clock(fresh_groupd):
    server = fresh_groupd(manual_clock=True).start()
    with grpc.insecure_channel(server.address) as channel:
        api = Api(channel)
        owner, bob = uid("owner"), uid("bob")
        gid = api.create(K.GROUP_TYPE_MEETING, owner, [bob])
        (result,) = api.ban(gid, [bob], user_md(owner), seconds=60).results
        assert result.ban.until.ToMilliseconds() == server.clock_ms() + 60_000
        info = expect_error(lambda: api.join(gid, bob), grpc.StatusCode.PERMISSION_DENIED, "USER_BANNED")
        assert info.metadata["until"] == str(server.clock_ms() + 60_000)
        server.advance_clock(seconds=59)
        expect_error(lambda: api.join(gid, bob), grpc.StatusCode.PERMISSION_DENIED, "USER_BANNED")
        server.advance_clock(seconds=1)
        assert api.banned_ids(gid) == []
        assert api.join(gid, bob).outcome == member_pb2.JOIN_OUTCOME_JOINED
        (lifted,) = api.unban(gid, [bob], user_md(owner)).results
        assert lifted.result == FAILED and lifted.reason == "NOT_BANNED"
